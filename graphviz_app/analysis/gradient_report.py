"""Put replayed gradient statistics on a Graph and name where NaN/Inf first appears."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model import Edge, EdgeKind, GradInfo, Graph, Node, NodeKind

__all__ = [
    "GradFlow", "Produced", "GradientSummary", "attach", "combine_grads", "first_origin", "gradient_summary",
    "origin_text",
]


@dataclass(frozen=True, slots=True)
class Produced:
    """One backward op as it ran: which input slot first got a non-finite gradient."""

    node: str
    incoming_finite: bool
    bad_slot: int | None  # first input slot whose gradient is NaN/Inf, None if all finite


@dataclass(slots=True)
class GradFlow:
    """What one replay of backward measured, keyed by the graph's node ids.

    `edges` is keyed by (dst, slot) of data edges; `order` lists the ops in
    the order backward ran them; `forward_nonfinite` says, per op, which of
    its forward values was already NaN/Inf (e.g. "output log(0) = -inf").
    """

    nodes: dict[str, GradInfo] = field(default_factory=dict)
    edges: dict[tuple[str, int], GradInfo] = field(default_factory=dict)
    order: list[Produced] = field(default_factory=list)
    forward_nonfinite: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GradientSummary:
    """The one-line overview under a gradient picture."""

    largest: tuple[str, float] | None  # ("name (id)", norm)
    smallest: tuple[str, float] | None
    vanishing: int  # nodes whose gradient is all exact zeros
    nonfinite: int  # nodes whose gradient holds NaN or Inf
    origin: str | None

    def __str__(self) -> str:
        if self.largest is None or self.smallest is None:
            return "no gradients recorded"
        parts = [
            f"largest gradient norm {self.largest[1]:.3g} at {self.largest[0]}",
            f"smallest {self.smallest[1]:.3g} at {self.smallest[0]}",
            f"{self.vanishing} node(s) with all-zero gradients",
        ]
        if self.nonfinite:
            parts.append(f"{self.nonfinite} node(s) with NaN/Inf gradients")
        return "; ".join(parts)


def first_origin(flow: GradFlow) -> Produced | None:
    """The first op in backward order that got finite gradients and produced a NaN/Inf."""
    for step in flow.order:
        if step.incoming_finite and step.bad_slot is not None:
            return step
    return None


def attach(graph: Graph, flow: GradFlow) -> Graph:
    """A copy of `graph` with `Node.grad`, `Edge.grad`, the NaN origin and its note set."""
    nodes = tuple(
        dataclasses.replace(n, grad=flow.nodes[n.id]) if n.id in flow.nodes else n
        for n in graph.nodes
    )
    edges = tuple(_edge_with_grad(e, flow) for e in graph.edges)
    step = first_origin(flow)
    notes = list(graph.notes) + flow.notes
    origin = step.node if step is not None else None
    out = dataclasses.replace(graph, nodes=nodes, edges=edges, nonfinite_origin=origin)
    if step is not None:
        notes.append(origin_text(out, slot=step.bad_slot, forward=flow.forward_nonfinite.get(step.node)))
    elif any(g is not None and not g.finite for g in flow.nodes.values()):
        notes.append("the gradient given to the output is already NaN/Inf: check grad_outputs")
    return dataclasses.replace(out, notes=tuple(notes))


def _edge_with_grad(edge: Edge, flow: GradFlow) -> Edge:
    if edge.kind is not EdgeKind.DATA:
        return edge
    grad = flow.edges.get((edge.dst, edge.slot))
    return dataclasses.replace(edge, grad=grad) if grad is not None else edge


def origin_text(graph: Graph, *, slot: int | None = None, forward: str | None = None) -> str:
    """The sentence naming where the gradient first became NaN/Inf."""
    node = graph.node(graph.nonfinite_origin) if graph.nonfinite_origin else None
    if node is None:
        return "all gradients are finite"
    grads = [e.grad for e in graph.edges if e.dst == node.id and e.kind is EdgeKind.DATA]
    what = _bad_kind(grads)
    text = f"{what} first appears in backward at {node.name} ({node.id})"
    if slot is not None:
        text += f", input slot {slot}"
    if node.tensor is not None:
        text += f"; its forward value has shape {node.tensor.shape_text}"
    if node.module is not None:
        text += f", in module {node.module or '(root)'}"
    if node.source:
        text += f", made at {node.source}"
    if forward:
        text += (
            f". The forward value was already non-finite ({forward}): "
            "fix the forward, e.g. keep the input away from that point before the op"
        )
    else:
        text += ". The incoming gradient was finite: this op's derivative is NaN/Inf here"
    return text


def _bad_kind(grads: list[GradInfo | None]) -> str:
    nan = any(g is not None and g.nan for g in grads)
    inf = any(g is not None and g.inf for g in grads)
    return "NaN and Inf" if nan and inf else ("Inf" if inf else "NaN")


def gradient_summary(graph: Graph) -> GradientSummary:
    """Largest and smallest gradient norm, vanishing and non-finite counts."""
    graded = [
        n for n in graph.nodes
        if n.grad is not None and n.kind in (NodeKind.OP, NodeKind.LEAF)
    ]
    finite = [n for n in graded if math.isfinite(n.grad.norm)]  # type: ignore[union-attr]
    largest = max(finite, key=lambda n: n.grad.norm, default=None)  # type: ignore[union-attr]
    smallest = min(finite, key=lambda n: n.grad.norm, default=None)  # type: ignore[union-attr]
    return GradientSummary(
        largest=(_where(largest), largest.grad.norm) if largest and largest.grad else None,
        smallest=(_where(smallest), smallest.grad.norm) if smallest and smallest.grad else None,
        vanishing=sum(1 for n in graded if n.grad and n.grad.numel and n.grad.zero_fraction == 1.0),
        nonfinite=sum(1 for n in graded if n.grad and not n.grad.finite),
        origin=graph.nonfinite_origin,
    )


def _where(node: Node) -> str:
    return f"{node.name or node.kind.value} ({node.id})"


def combine_grads(grads: Sequence[GradInfo]) -> GradInfo | None:
    """The statistics of several gradients taken together as one vector (None for none).

    What an edge that stands for several edges carries (a folded module's
    border): the norm of all of them together, the largest element, the mean
    of the finite elements, NaN and Inf counts summed. Values are kept only
    for a single gradient.

    >>> a, b = GradInfo(2, 3.0, 3.0, 1.5), GradInfo(2, 4.0, 4.0, 2.0, nan=1)
    >>> c = combine_grads([a, b])
    >>> (c.numel, c.norm, c.max_abs, c.nan, c.finite)
    (4, 5.0, 4.0, 1, False)
    """
    if len(grads) <= 1:
        return grads[0] if grads else None
    numel = sum(g.numel for g in grads)
    finite = [g.numel - g.nan - g.inf for g in grads]
    counted = sum(finite)
    return GradInfo(
        numel=numel,
        norm=math.sqrt(sum(g.norm * g.norm for g in grads)),
        max_abs=max(g.max_abs for g in grads),
        mean_abs=sum(g.mean_abs * f for g, f in zip(grads, finite, strict=True)) / counted if counted else 0.0,
        nan=sum(g.nan for g in grads),
        inf=sum(g.inf for g in grads),
        zero_fraction=sum(g.zero_fraction * g.numel for g in grads) / numel if numel else 0.0,
    )
