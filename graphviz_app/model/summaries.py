"""The records a graph's summaries are made of; the analyses fill them (see graphviz_app.analysis)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .units import human_bytes

__all__ = ["Summary", "ModuleRow", "ModuleSummary"]


@dataclass(frozen=True, slots=True)
class Summary:
    """Counts and memory of a graph, for one-line display.

    `activation_bytes` is the memory the graph itself keeps alive: saved
    tensors that are not leaf tensors (not parameters, not inputs with
    requires_grad), counted once per storage, per device. `param_bytes` is
    the memory of the leaf tensors the graph refers to (mostly parameters,
    which exist anyway), per device. `saved_traced` is False when the graph
    was traced with `show_saved=False` (activation memory unknown), None when
    the graph holds no saved tensor node and the caller did not say whether
    saved tensors were traced. `freed_saved` counts saved tensors already released.
    `checks` counts a model check's verdicts per status when the graph carries them
    (`Graph.checks`), and `check_finding` names the culprit (or the `.detach()` that cuts a gradient).
    """

    nodes: int
    edges: int
    nodes_by_kind: tuple[tuple[str, int], ...]
    edges_by_kind: tuple[tuple[str, int], ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    activation_bytes: tuple[tuple[str, int], ...] = ()
    param_bytes: tuple[tuple[str, int], ...] = ()
    saved_traced: bool | None = True
    freed_saved: int = 0
    checks: tuple[tuple[str, int], ...] = ()
    check_finding: str | None = None

    @property
    def activations_total(self) -> int:
        """Bytes held by the graph's saved activations, all devices together."""
        return sum(b for _, b in self.activation_bytes)

    @property
    def params_total(self) -> int:
        """Bytes of the leaf tensors (parameters) the graph refers to, all devices together."""
        return sum(b for _, b in self.param_bytes)

    def __str__(self) -> str:
        devices = ", ".join(self.devices) or "none"
        if self.saved_traced is False:
            held = "not traced (show_saved=False)"
        elif self.saved_traced is None and not self.activation_bytes:
            held = "unknown (no saved tensor traced)"
        else:
            held = _per_device(self.activation_bytes)
        if self.freed_saved:
            held += f" ({self.freed_saved} freed by backward)"
        checked = ""
        if self.checks:
            checked = "; model check: " + ", ".join(f"{n} {status}" for status, n in self.checks if n)
            checked += f"; {self.check_finding}" if self.check_finding else ""
        return (
            f"{self.nodes} nodes, {self.edges} edges, activations held {held}, "
            f"parameters referenced {_per_device(self.param_bytes)}, devices: {devices}{checked}"
        )


def _per_device(by_device: tuple[tuple[str, int], ...]) -> str:
    if len(by_device) <= 1:
        return human_bytes(by_device[0][1] if by_device else 0)
    return " + ".join(f"{human_bytes(b)} on {d}" for d, b in by_device)


@dataclass(frozen=True, slots=True)
class ModuleRow:
    """One module: its ops and activations include those of its submodules, as its params do.

    `activation_bytes` is what the module's saved tensors hold beyond its
    parameters: a weight an op saves for backward is counted under params.
    `peak_bytes` is what the module holds at the step's peak (saved tensors,
    gradients, `.grad`, outputs; see `graphviz_app.analysis.memory`), None when unknown.
    `check` is a model check's verdict for the module in a few words ("passed", "culprit: 1.02 x
    (x input)", "fails inside (blocks.1.attn)"), None when the graph carries no check of it.
    """

    module: str
    type: str
    ops: int
    activation_bytes: int
    params: int
    param_bytes: int
    peak_bytes: int | None = None
    check: str | None = None


@dataclass(frozen=True, slots=True)
class ModuleSummary:
    """The rows in `named_modules()` order; `str()` prints them as a table.

    The table's "at peak" column (when the step's memory could be replayed) is what each
    module holds at the step's peak: its saved tensors still waiting for backward, and the
    gradients and outputs alive then.
    """

    rows: tuple[ModuleRow, ...]
    saved_traced: bool = True  # False: traced with show_saved=False, so saved bytes are unknown

    def __iter__(self) -> Iterator[ModuleRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __str__(self) -> str:
        if not self.rows:
            return "no module information: trace inside `with record(model):`, or use trace_model(model, *inputs)"
        peak = self.saved_traced and any(r.peak_bytes is not None for r in self.rows)
        checked = any(r.check is not None for r in self.rows)
        header = ("module", "type", "ops", "activations", *(("at peak",) if peak else ()), "params", "param bytes",
                  *(("check",) if checked else ()))
        table = [header] + [
            (
                r.module or "(root)",
                r.type or "?",
                f"{r.ops:,}",
                human_bytes(r.activation_bytes) if self.saved_traced else "not traced",
                *((human_bytes(r.peak_bytes or 0),) if peak else ()),
                f"{r.params:,}",
                human_bytes(r.param_bytes),
                *((r.check or "-",) if checked else ()),
            )
            for r in self.rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        lines = []
        for row in table:
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
            numbers = row[2:-1] if checked else row[2:]
            cells += [cell.rjust(width) for cell, width in zip(numbers, widths[2:], strict=False)]
            if checked:
                cells.append(row[-1])
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)
