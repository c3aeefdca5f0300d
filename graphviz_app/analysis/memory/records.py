"""The records a memory timeline is made of: steps, what each module holds at the peak, the timeline itself."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...model import human_bytes

__all__ = ["MemoryStep", "ModuleBytes", "MemoryTimeline", "MeasuredMemory", "HolderKind", "HOLDER_KINDS"]


class HolderKind(str, Enum):
    """What keeps a storage alive during a step: the one list every layer uses (replay, records, JSON, viewer).

    The values are the JSON keys (and `ModuleBytes` fields); `label` is the text a person reads.
    `GRADIENTS` are gradients in flight (in an op's input buffer or being made by it) and
    `GRADS` the `.grad` of leaves made during the step: two different things.
    """

    SAVED = "saved"
    GRADIENTS = "gradients"
    GRADS = "grads"
    OUTPUTS = "outputs"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {HolderKind.SAVED: "saved tensors", HolderKind.GRADIENTS: "gradients in flight",
           HolderKind.GRADS: ".grad", HolderKind.OUTPUTS: "outputs"}

# The holder kinds' values, in the order the records list them.
HOLDER_KINDS = tuple(k.value for k in HolderKind)


@dataclass(frozen=True, slots=True)
class MemoryStep:
    """One moment of a step: the end of the forward (`node` None) or one backward node running.

    `before` is the live bytes when the node starts, `peak` the most while it
    runs (its gradients made, its saved tensors not yet released), `after` the
    live bytes once its saved tensors are released and its gradients handed on.
    """

    node: str | None
    before: int
    peak: int
    after: int


@dataclass(frozen=True, slots=True)
class ModuleBytes:
    """What one module holds at the peak, by kind of holder.

    `saved`: tensors its ops keep for backward; `gradients`: gradients waiting
    in its ops' input buffers or being made by them; `grads`: the `.grad` of its
    parameters made during the step; `outputs`: outputs of its ops the user holds.
    `module` is None for nodes outside any module (or a graph traced without modules).
    """

    module: str | None
    saved: int = 0
    gradients: int = 0
    grads: int = 0
    outputs: int = 0

    @property
    def total(self) -> int:
        return self.saved + self.gradients + self.grads + self.outputs


@dataclass(frozen=True, slots=True)
class MemoryTimeline:
    """The bytes a step holds, predicted from its graph (`memory_timeline`).

    `steps[0]` is the end of the forward (every saved tensor alive); then one
    step per backward node in the order the engine runs them. `peak_bytes` is
    the most bytes alive at any moment, parameters, buffers and inputs not
    counted; `peak_step` indexes `steps`. `held` gives, per node, the bytes of
    saved tensors it keeps at the end of the forward (a storage counted once,
    under the node whose backward releases it); `held_at_peak` the bytes each
    node holds at the peak (saved tensors, gradients in its input buffer, a
    leaf's `.grad`); `at_peak` the same grouped by module. `notes` say what
    the prediction could not see in this graph. `forward_peak_bytes`, when the step was run (measured, or
    forecast on meta), is the forward's own peak as counted then: the step's peak is the larger of it and
    the backward replay's (`peak_in_forward` says which); None for a graph alone, whose forward is not replayed.
    """

    steps: tuple[MemoryStep, ...]
    peak_bytes: int
    peak_step: int
    held: tuple[tuple[str, int], ...] = ()
    held_at_peak: tuple[tuple[str, int], ...] = ()
    at_peak: tuple[ModuleBytes, ...] = ()
    retain_graph: bool = False
    notes: tuple[str, ...] = ()
    forward_peak_bytes: int | None = None

    @property
    def peak_in_forward(self) -> bool:
        """Whether the step's peak is the forward's own (`forward_peak_bytes`, counted as the step ran, on its
        device or on meta), above everything the backward replay holds."""
        return self.forward_peak_bytes is not None and self.forward_peak_bytes == self.peak_bytes and (
            not self.steps or max(s.peak for s in self.steps) < self.peak_bytes)

    @property
    def peak_node(self) -> str | None:
        """The backward node running at the peak (None: the peak is the end of the forward, or in it)."""
        if self.peak_in_forward:
            return None
        return self.steps[self.peak_step].node if self.steps else None

    @property
    def forward_bytes(self) -> int:
        """Live bytes at the end of the forward: saved tensors, outputs, the loss's gradient."""
        return self.steps[0].after if self.steps else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the viewer's memory overlay reads it).

        >>> MemoryTimeline((MemoryStep(None, 8, 8, 8),), 8, 0).to_dict()["steps"]
        [[None, 8, 8, 8]]
        """
        return {
            "peak_bytes": self.peak_bytes,
            "peak_step": self.peak_step,
            "peak_node": self.peak_node,
            "forward_bytes": self.forward_bytes,
            "forward_peak_bytes": self.forward_peak_bytes,
            "peak_in_forward": self.peak_in_forward,
            "retain_graph": self.retain_graph,
            "steps": [[s.node, s.before, s.peak, s.after] for s in self.steps],
            "held": dict(self.held),
            "held_at_peak": dict(self.held_at_peak),
            "at_peak": [
                {"module": m.module, **{k.value: getattr(m, k.value) for k in HolderKind}}
                for m in self.at_peak
            ],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        last = len(self.steps) - 1
        if self.peak_in_forward:  # at_peak is then the backward's own peak: say so, not "at the peak"
            backward = self.steps[self.peak_step] if self.steps else None
            lines = [f"peak {human_bytes(self.peak_bytes)} during the forward; "
                     f"{human_bytes(self.forward_bytes)} alive at the end of the forward"]
            if backward is not None:
                running = f" while {backward.node} runs" if backward.node else ""
                lines.append(f"held at the backward's own peak, {human_bytes(backward.peak)}{running} "
                             f"(step {self.peak_step} of {last}):")
        else:
            where = f"while {self.peak_node} runs" if self.peak_node else "at the end of the forward"
            lines = [f"peak {human_bytes(self.peak_bytes)} {where} (step {self.peak_step} of {last}); "
                     f"{human_bytes(self.forward_bytes)} alive at the end of the forward"]
        for m in sorted(self.at_peak, key=lambda m: -m.total)[:8]:
            parts = ", ".join(f"{kind.label} {human_bytes(getattr(m, kind.value))}" for kind in HolderKind
                              if getattr(m, kind.value))
            lines.append(f"  {m.module if m.module is not None else '(no module)'}: {parts}")
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


@dataclass(frozen=True, slots=True)
class MeasuredMemory:
    """The bytes a real step held, measured as it ran (see `graphviz_app.tracing.memory`).

    `steps` as in `MemoryTimeline` (the same node ids when measured with the
    same graph), `peak_bytes` the most at any moment of the step, forward
    included; `forward_peak_bytes` the most during the forward alone. `method`
    says how: "storages" (every storage an op allocated, counted while alive)
    or "cuda" (`torch.cuda.memory_allocated`, allocator blocks).
    """

    steps: tuple[MemoryStep, ...]
    peak_bytes: int
    forward_peak_bytes: int
    method: str
    device: str

    @property
    def peak_node(self) -> str | None:
        """The backward node running when the peak was reached (None: during the forward)."""
        best = max(self.steps, key=lambda s: s.peak, default=None)
        if best is None or best.peak < self.peak_bytes:
            return None
        return best.node

    @property
    def forward_bytes(self) -> int:
        return self.steps[0].after if self.steps else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with the same step rows as `MemoryTimeline.to_dict`."""
        return {
            "peak_bytes": self.peak_bytes,
            "peak_node": self.peak_node,
            "forward_peak_bytes": self.forward_peak_bytes,
            "forward_bytes": self.forward_bytes,
            "method": self.method,
            "device": self.device,
            "steps": [[s.node, s.before, s.peak, s.after] for s in self.steps],
        }
