"""Replay backward once over a traced graph with hooks, keeping gradient statistics."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..analysis.gradient_report import GradFlow, Produced, attach, first_origin
from ..errors import GradientError
from ..model import PACKED_BY_HOOK, STATE_ATTR, EdgeKind, GradInfo, Graph, NodeKind
from .torch_internals import saved_values, version_counter

__all__ = ["replay", "match_grad_outputs"]

_MAX_VALUES = 16

# Unary ops whose forward value can be recomputed from the input they saved,
# to tell "log(0) = -inf in the forward" from "the derivative blew up".
_FORWARD: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "LogBackward0": torch.log,
    "Log2Backward0": torch.log2,
    "Log10Backward0": torch.log10,
    "Log1pBackward0": torch.log1p,
    "AcosBackward0": torch.acos,
    "AsinBackward0": torch.asin,
    "AtanhBackward0": torch.atanh,
    "LgammaBackward0": torch.lgamma,
    "DigammaBackward0": torch.digamma,
}


def match_grad_outputs(
    outputs: list[tuple[str, torch.Tensor]], given: list[tuple[str, torch.Tensor]] | None
) -> tuple[list[torch.Tensor], list[str]]:
    """One gradient per output: the one given under the same path, else ones."""
    by_path = dict(given or ())
    unknown = sorted(set(by_path) - {p for p, _ in outputs})
    if unknown:
        raise GradientError(
            f"grad_outputs has {', '.join(unknown)} but the traced outputs are "
            f"{', '.join(p for p, _ in outputs)}: give grad_outputs the same nesting as outputs"
        )
    grads: list[torch.Tensor] = []
    notes: list[str] = []
    for path, t in outputs:
        g = by_path.get(path)
        if g is None:
            g = torch.ones_like(t)
            if t.numel() != 1:
                notes.append(
                    f"{path} is not a scalar ({tuple(t.shape)}): its gradient was taken as "
                    "all ones; pass grad_outputs=... to choose another"
                )
        elif g.shape != t.shape:
            raise GradientError(
                f"grad_outputs for {path} has shape {tuple(g.shape)}, expected the output's "
                f"shape {tuple(t.shape)}"
            )
        grads.append(g.detach().to(device=t.device, dtype=t.dtype))
    return grads, notes


class _Stats:
    """Gradient statistics computed on the gradient's device, fetched once at the end.

    Each row is (finite count, NaN count, norm, max |g|, sum |g|, zero count).
    """

    def __init__(self) -> None:
        self.rows: list[torch.Tensor | list[float]] = []
        self.values: list[torch.Tensor | list[float] | None] = []
        self.numels: list[int] = []
        # A gradient passed on unchanged (one consumer) reaches the consumer's
        # hook and then the producer's: measure it once. The weak reference
        # dies with the tensor, so a reused id() never matches.
        # The engine may add a second contribution into the first in place:
        # the version counter tells.
        self.seen: dict[int, tuple[weakref.ref[torch.Tensor], int, int]] = {}

    def add(self, g: torch.Tensor) -> int:
        known = self.seen.get(id(g))
        if known is not None and known[0]() is g and known[2] == version_counter(g):
            return known[1]
        d = g.detach()
        if d.layout != torch.strided:  # nn.Embedding(sparse=True)'s gradient: no norm kernel for sparse tensors
            d = d.to_dense()
        n = d.numel()
        if n <= _MAX_VALUES and d.device.type == "cpu" and not d.is_complex():
            # A few numbers: Python is cheaper than a dozen tiny kernel launches.
            values = [float(v) for v in d.reshape(-1).tolist()]
            row: torch.Tensor | list[float] = _python_row(values)
            self.values.append(values)
        elif n == 0:
            row = torch.zeros(6, dtype=torch.float64, device=d.device)
        else:
            row = self._fast_row(d, n)
            if not bool(torch.isfinite(row).all()):  # NaN/Inf inside, or float32 overflow
                row = self._full_row(d)
        if len(self.values) == len(self.rows):  # not appended by the Python path
            small = n <= _MAX_VALUES and not d.is_complex()
            self.values.append(d.reshape(-1).to(torch.float64, copy=True) if small else None)
        self.rows.append(row)
        self.numels.append(n)
        index = len(self.rows) - 1
        self.seen[id(g)] = (weakref.ref(g), index, version_counter(g))
        return index

    @staticmethod
    def _fast_row(d: torch.Tensor, n: int) -> torch.Tensor:
        # The cheapest reductions measured on CPU (benchmarks/bench_gradflow.py);
        # a NaN/Inf anywhere makes the row non-finite and takes the full path.
        if d.is_complex():
            d = d.abs()
        if d.dtype in (torch.float16, torch.bfloat16):  # sums of halves lose digits and overflow
            d = d.float()
        a = d.abs()  # one pass, reused by the max, the sum and the count of zeros
        count = torch.full((), float(n), dtype=torch.float64, device=d.device)
        return torch.stack([
            count,
            torch.zeros_like(count),
            torch.linalg.vector_norm(d).to(torch.float64),
            a.amax().to(torch.float64),
            a.sum().to(torch.float64),  # summing in float64 casts the whole tensor first
            count - _nonzero(a, n),
        ])

    @staticmethod
    def _full_row(d: torch.Tensor) -> torch.Tensor:
        a = d.abs()  # complex gradients: magnitudes
        finite = torch.isfinite(a)
        af = torch.where(finite, a, 0).to(torch.float64)
        return torch.stack([
            finite.sum().to(torch.float64),
            torch.isnan(d).sum().to(torch.float64),
            torch.linalg.vector_norm(af),
            af.max(),
            af.sum(),
            (d == 0).sum().to(torch.float64),
        ])

    def fetch(self) -> list[GradInfo]:
        if not self.rows:
            return []
        on_device = [r for r in self.rows if isinstance(r, torch.Tensor)]
        fetched = iter(torch.stack([r.cpu() for r in on_device]).tolist() if on_device else [])
        rows = [r if isinstance(r, list) else next(fetched) for r in self.rows]
        out = []
        for (n_fin, nan, norm, mx, total, zeros), vals, n in zip(rows, self.values, self.numels, strict=True):
            if isinstance(vals, torch.Tensor):
                vals = vals.cpu().tolist()
            out.append(GradInfo(
                numel=n, norm=norm, max_abs=mx, mean_abs=total / n_fin if n_fin else 0.0,
                nan=int(nan), inf=n - int(n_fin) - int(nan),
                zero_fraction=zeros / n if n else 0.0,
                values=tuple(_scalar(v) for v in vals) if vals is not None else None,
            ))
        return out


def _nonzero(a: torch.Tensor, n: int) -> torch.Tensor:
    """Non-zero elements of `a`, a tensor of magnitudes (so its sign is 0 or 1)."""
    # count_nonzero branches per element: 10x slower on ReLU-like gradients, half
    # of them zero. A float sum of ones is exact up to 2**24 elements.
    if n < 1 << 24:
        return a.sign().sum().to(torch.float64)
    return torch.count_nonzero(a).to(torch.float64)


def _python_row(values: list[float]) -> list[float]:
    finite = [abs(v) for v in values if math.isfinite(v)]
    return [
        float(len(finite)),
        float(sum(1 for v in values if math.isnan(v))),
        math.sqrt(math.fsum(v * v for v in finite)),
        max(finite, default=0.0),
        math.fsum(finite),
        float(sum(1 for v in values if v == 0)),
    ]


def _scalar(v: float) -> float | str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def replay(
    graph: Graph,
    fns: dict[str, Any],
    *,
    outputs: list[tuple[str, torch.Tensor]],
    grad_outputs: list[tuple[str, torch.Tensor]] | None = None,
) -> Graph:
    """Run backward once more with hooks on every op and return `graph` with gradients.

    `fns` maps node ids to the walked autograd nodes. The gradients go only
    to `torch.autograd.grad`, never into `.grad`, and the graph is retained.
    """
    _check_replayable(graph, fns)
    grads, notes = match_grad_outputs(outputs, grad_outputs)
    leaves = {nid: fn.variable for nid, fn in fns.items() if hasattr(fn, "variable")}
    rec = _Recorder()
    # autograd.grad fills .grad of tensors that called retain_grad(); the outputs' are put back
    retained = [(t, t.grad) for _, t in outputs if t.retains_grad]
    handles = [fn.register_hook(rec.hook_for(nid)) for nid, fn in fns.items() if nid not in leaves]
    try:
        for g, out in zip(grads, graph.of_kind(NodeKind.OUTPUT), strict=True):
            rec.node_rows[out.id] = rec.edge_rows[(out.id, 0)] = rec.stats.add(g)
        try:
            got = torch.autograd.grad(
                [t for _, t in outputs], list(leaves.values()), grad_outputs=grads,
                retain_graph=True, allow_unused=True,
            )
        except RuntimeError as e:
            raise _translate(e) from e
        for nid, g in zip(leaves, got, strict=True):
            if g is not None:
                rec.node_rows[nid] = rec.stats.add(g)
    finally:
        for h in handles:
            h.remove()
        for t, old in retained:
            t.grad = old
    flow = rec.flow(notes)
    origin = first_origin(flow)
    if origin is not None:
        forward = _forward_nonfinite(fns[origin.node])
        if forward:
            flow.forward_nonfinite[origin.node] = forward
    return attach(graph, flow)


class _Recorder:
    """What the hooks saw: stat rows per node and (dst, slot) edge, and each op's step."""

    def __init__(self) -> None:
        self.stats = _Stats()
        self.node_rows: dict[str, int] = {}
        self.edge_rows: dict[tuple[str, int], int] = {}
        # (op, rows of the gradients it received, (slot, row) of those it produced)
        self.steps: list[tuple[str, tuple[int, ...], tuple[tuple[int, int], ...]]] = []

    def hook_for(self, nid: str) -> Callable[[tuple[Any, ...], tuple[Any, ...]], None]:
        def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
            incoming = tuple(self.stats.add(g) for g in grad_outputs if g is not None)
            if grad_outputs and grad_outputs[0] is not None:  # the output the node describes
                self.node_rows[nid] = incoming[0]
            produced = []
            for slot, g in enumerate(grad_inputs):
                if g is not None:
                    row = self.edge_rows[(nid, slot)] = self.stats.add(g)
                    produced.append((slot, row))
            self.steps.append((nid, incoming, tuple(produced)))

        return hook

    def flow(self, notes: list[str]) -> GradFlow:
        infos = self.stats.fetch()
        flow = GradFlow(
            nodes={nid: infos[r] for nid, r in self.node_rows.items()},
            edges={key: infos[r] for key, r in self.edge_rows.items()},
            notes=notes,
        )
        for nid, incoming, produced in self.steps:
            bad = [slot for slot, r in produced if not infos[r].finite]
            flow.order.append(Produced(nid, all(infos[r].finite for r in incoming), bad[0] if bad else None))
        return flow


def _check_replayable(graph: Graph, fns: dict[str, Any]) -> None:
    if graph.truncated:
        raise GradientError(
            f"the graph has more ops than max_nodes allows ({len(fns)} walked), and gradients "
            "need the whole graph: raise max_nodes, or trace with gradients=False"
        )
    # The walker marked saved tensors backward() freed; without saved nodes
    # (show_saved=False) torch's own error is translated in `_translate`.
    # A saved tensor packed by a hook (non-reentrant checkpointing) is recomputed by backward, not freed.
    freed = {n.id for n in graph.of_kind(NodeKind.SAVED) if n.tensor is not None and n.tensor.freed
             and (STATE_ATTR, PACKED_BY_HOOK) not in n.attrs}
    freed_ops = [e.dst for e in graph.edges if e.kind is EdgeKind.SAVED and e.src in freed]
    if freed_ops:
        op = graph.node(freed_ops[0])
        raise GradientError(
            f"cannot replay backward: {op.name} ({op.id}) no longer holds the tensors it saved, "
            "an earlier backward() freed them; trace before backward(), or use "
            "retain_graph=True in that backward()"
        )


def _translate(e: RuntimeError) -> GradientError:
    text = str(e)
    if "second time" in text or "freed" in text:
        return GradientError(
            "cannot replay backward: an earlier backward() freed the saved tensors; "
            "trace before backward(), or use retain_graph=True"
        )
    return GradientError(f"backward failed while replaying it for gradients: {text.splitlines()[0]}")


def _forward_nonfinite(fn: Any) -> str | None:
    """Which forward value of `fn` was already NaN/Inf, in words, or None."""
    saved = dict(saved_values(fn))
    for name, value in saved.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            if not bool(torch.isfinite(value).all()):
                role = "its output" if name == "result" else f"its saved input {name!r}"
                return f"{role} holds {_first_bad(value)}"
    x, other = saved.get("self"), saved.get("other")
    if not isinstance(x, torch.Tensor):
        return None
    if type(fn).__name__ == "DivBackward0" and isinstance(other, torch.Tensor):
        y = x.detach() / other.detach()
        if not bool(torch.isfinite(y).all()):
            return f"its output x / y holds {_first_bad(y)}"
        return None
    make = _FORWARD.get(type(fn).__name__)
    if make is not None:
        y = make(x.detach())
        bad = ~torch.isfinite(y)
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0])
            return f"{make.__name__}({x.reshape(-1)[i].item():g}) = {y.reshape(-1)[i].item()}"
    return None


def _first_bad(t: torch.Tensor) -> str:
    flat = t.detach().reshape(-1)
    i = int((~torch.isfinite(flat)).nonzero()[0])
    return f"{flat[i].item()} at element {i}"
