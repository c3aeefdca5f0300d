"""Replay backward once over a traced graph with hooks, keeping gradient statistics."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ._autograd import FREED, saved_values
from .errors import GradientError
from .gradient_report import GradFlow, Produced, attach
from .model import EdgeKind, GradInfo, Graph, NodeKind

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
        self.rows: list[torch.Tensor] = []
        self.values: list[torch.Tensor | None] = []
        self.numels: list[int] = []
        # A gradient passed on unchanged (one consumer) reaches the consumer's
        # hook and then the producer's: measure it once. The weak reference
        # dies with the tensor, so a reused id() never matches.
        # The engine may add a second contribution into the first in place:
        # the version counter tells.
        self.seen: dict[int, tuple[weakref.ref[torch.Tensor], int, int]] = {}

    def add(self, g: torch.Tensor) -> int:
        known = self.seen.get(id(g))
        if known is not None and known[0]() is g and known[2] == g._version:
            return known[1]
        d = g.detach()
        n = d.numel()
        if n == 0:
            row = torch.zeros(6, dtype=torch.float64, device=d.device)
        else:
            row = self._fast_row(d, n)
            if not bool(torch.isfinite(row).all()):  # NaN/Inf inside, or float32 overflow
                row = self._full_row(d)
        self.rows.append(row)
        small = n <= _MAX_VALUES and not d.is_complex()
        self.values.append(d.reshape(-1).to(torch.float64, copy=True) if small else None)
        self.numels.append(n)
        index = len(self.rows) - 1
        self.seen[id(g)] = (weakref.ref(g), index, g._version)
        return index

    @staticmethod
    def _fast_row(d: torch.Tensor, n: int) -> torch.Tensor:
        # The cheapest reductions measured on CPU (benchmarks/bench_gradflow.py);
        # a NaN/Inf anywhere makes the row non-finite and takes the full path.
        if d.is_complex():
            d = d.abs()
        lo, hi = torch.aminmax(d)
        count = torch.full((), float(n), dtype=torch.float64, device=d.device)
        return torch.stack([
            count,
            torch.zeros_like(count),
            torch.linalg.vector_norm(d).to(torch.float64),
            torch.maximum(hi, -lo).to(torch.float64),
            d.abs().sum().to(torch.float64),  # summing in float64 casts the whole tensor first
            count - torch.count_nonzero(d).to(torch.float64),
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
        rows = torch.stack([r.cpu() for r in self.rows]).tolist()
        out = []
        for (n_fin, nan, norm, mx, total, zeros), vals, n in zip(rows, self.values, self.numels):
            out.append(GradInfo(
                numel=n, norm=norm, max_abs=mx, mean_abs=total / n_fin if n_fin else 0.0,
                nan=int(nan), inf=n - int(n_fin) - int(nan),
                zero_fraction=zeros / n if n else 0.0,
                values=tuple(_scalar(v) for v in vals.cpu().tolist()) if vals is not None else None,
            ))
        return out


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
    stats = _Stats()
    node_rows: dict[str, int] = {}
    edge_rows: dict[tuple[str, int], int] = {}
    order: list[str] = []
    finite_rows: list[tuple[int, ...]] = []
    handles = []
    try:
        for nid, fn in fns.items():
            if nid not in leaves:
                handles.append(fn.register_hook(_hook(nid, stats, node_rows, edge_rows, order, finite_rows)))
        for (path, _), g, out in zip(outputs, grads, graph.of_kind(NodeKind.OUTPUT)):
            node_rows[out.id] = edge_rows[(out.id, 0)] = stats.add(g)
        leaf_ids = list(leaves)
        try:
            got = torch.autograd.grad(
                [t for _, t in outputs], [leaves[i] for i in leaf_ids], grad_outputs=grads,
                retain_graph=True, allow_unused=True,
            )
        except RuntimeError as e:
            raise _translate(e) from e
        for nid, g in zip(leaf_ids, got):
            if g is not None:
                node_rows[nid] = stats.add(g)
    finally:
        for h in handles:
            h.remove()
    infos = stats.fetch()
    flow = GradFlow(
        nodes={nid: infos[r] for nid, r in node_rows.items()},
        edges={key: infos[r] for key, r in edge_rows.items()},
        notes=notes,
    )
    for nid, rows in zip(order, finite_rows):
        incoming = all(infos[r].finite for r in rows)
        bad = [slot for slot, r in _slots(nid, edge_rows) if not infos[r].finite]
        flow.order.append(Produced(nid, incoming, bad[0] if bad else None))
    for step in flow.order:
        if step.incoming_finite and step.bad_slot is not None:
            forward = _forward_nonfinite(fns[step.node])
            if forward:
                flow.forward_nonfinite[step.node] = forward
            break
    return attach(graph, flow)


def _slots(nid: str, edge_rows: dict[tuple[str, int], int]) -> list[tuple[int, int]]:
    return sorted((slot, r) for (dst, slot), r in edge_rows.items() if dst == nid)


def _hook(nid, stats, node_rows, edge_rows, order, finite_rows):  # type: ignore[no-untyped-def]
    def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        incoming = [stats.add(g) for g in grad_outputs if g is not None]
        if incoming:
            node_rows[nid] = incoming[0]
        for slot, g in enumerate(grad_inputs):
            if g is not None:
                edge_rows[(nid, slot)] = stats.add(g)
        order.append(nid)
        finite_rows.append(tuple(incoming))

    return hook


def _check_replayable(graph: Graph, fns: dict[str, Any]) -> None:
    if graph.truncated:
        raise GradientError(
            f"the graph has more ops than max_nodes allows ({len(fns)} walked), and gradients "
            "need the whole graph: raise max_nodes, or trace with gradients=False"
        )
    freed = [n for n in graph.of_kind(NodeKind.SAVED) if n.tensor is not None and n.tensor.freed]
    if not freed:
        freed_ops = [nid for nid, fn in fns.items() if any(v is FREED for _, v in saved_values(fn))]
    else:
        freed_ops = [e.dst for e in graph.edges if e.kind is EdgeKind.SAVED and e.src == freed[0].id]
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
