"""Draw torch.compile's regions as boxes, or open them: the compiled backward's ops in place of the node."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..model import REGION_TYPE, CompiledRegion, Edge, EdgeKind, Graph, Node, NodeKind, human_bytes
from ..model.ranks import rank_with_nodes_moved
from .module_tree import leaf_storages, saved_bytes

__all__ = ["show_regions", "region_names", "MAX_REGION_EDGES", "border_edge_count"]

# The edges open regions may add together (their own and those their borders fan out into).
# An edge into a region joins every op computing that input's gradient to every op receiving
# the output's: a saved graph listing 3,000 ops on each side of one edge would draw 9,000,000
# edges (1.5 GB). Past this, the regions adding most stay boxes, and a note says why.
MAX_REGION_EDGES = 1_000_000


def region_names(graph: Graph) -> tuple[str, ...]:
    """The names of the graph's compiled regions, as `expanded` takes them (`"[compiled region 1]"`)."""
    return tuple(r.name for r in graph.regions)


def show_regions(graph: Graph, *, expanded: Iterable[str] = frozenset()) -> Graph:
    """A Graph whose compiled regions are boxes, and those named in `expanded` open.

    A closed region is its node drawn as a box (`NodeKind.MODULE`, `module` its name,
    facts: ops, saved bytes, and why it could not be opened when it could not) that
    holds its saved tensors, as a module box does. An
    open region's node is replaced by the compiled backward's ops, in modules under
    the region's name (so they draw as a cluster), with its saved tensors joined to
    the ops that read them and its border edges moved onto the ops that compute or
    receive each gradient. The result has no `regions` left: showing is done once.

    >>> from graphviz_app.model import CompiledRegion, Edge
    >>> g = Graph((Node("n0", NodeKind.OUTPUT, "out"), Node("n1", NodeKind.OP, "CompiledFunctionBackward")),
    ...           (Edge("n1", "n0"),), regions=(CompiledRegion("n1", "[compiled region 1]",
    ...           (Node("n1/0", NodeKind.OP, "aten.mul.Tensor", module="[compiled region 1]"),),
    ...           outputs=((0, "n1/0"),)),))
    >>> [n.name for n in show_regions(g).nodes]
    ['out', 'compiled region 1: CompiledFunctionBackward']
    >>> [(e.src, e.dst) for e in show_regions(g, expanded={"[compiled region 1]"}).edges]
    [('n1/0', 'n0')]
    """
    if not graph.regions:
        return graph
    wanted = frozenset(expanded)
    present = {n.id for n in graph.nodes}
    opening = {r.node: r for r in graph.regions if r.node in present and r.name in wanted and r.opened}
    too_big = _too_big(graph.edges, opening)
    for node in too_big:
        del opening[node]
    closing = {r.node: r for r in graph.regions if r.node in present and r.node not in opening}
    # A closed region holds its saved tensors, as a module box does.
    inside = {e.src for e in graph.edges if e.kind is EdgeKind.SAVED and e.dst in closing}
    nodes: list[Node] = []
    for n in graph.nodes:
        if n.id in opening:
            nodes.extend(opening[n.id].nodes)
        elif n.id in closing:
            nodes.append(_box(graph, n, closing[n.id], too_big.get(n.id)))
        elif n.id not in inside:
            nodes.append(n)
    edges = _edges(graph.edges, opening) if opening else graph.edges
    if inside:
        edges = tuple(e for e in edges if e.src not in inside)
    modules = graph.modules + tuple(m for r in opening.values() for m in r.modules)
    notes = graph.notes + tuple(
        f"{closing[node].name} is drawn closed: opening it would add {count:,} edges, and open compiled "
        f"regions may add {MAX_REGION_EDGES:,} together (its border lists many ops on the two sides of an edge)"
        for node, count in too_big.items()
    )
    # A collective issued while an opened region ran sits at the op that receives the region's gradient first.
    moved = {node: region.outputs[0][1] if region.outputs else None for node, region in opening.items()}
    return dataclasses.replace(graph, nodes=tuple(nodes), edges=edges, modules=modules, regions=(), notes=notes,
                               rank=rank_with_nodes_moved(graph.rank, moved))


def border_edge_count(edges: tuple[Edge, ...], opening: dict[str, CompiledRegion]) -> dict[str, int]:
    """Region node -> the edges opening it adds: its own, and what each border edge fans out into.

    An edge between two open regions counts for both. Counted, not built: a product of two
    long lists is a multiplication here.
    """
    counts = {node: len(r.edges) for node, r in opening.items()}
    if not opening:
        return counts
    inputs = {node: _group(r.inputs) for node, r in opening.items()}
    outputs = {node: _group(r.outputs) for node, r in opening.items()}
    for e in edges:
        if e.kind is not EdgeKind.DATA or (e.src not in opening and e.dst not in opening):
            continue
        srcs = len(outputs[e.src].get(e.output_nr, ())) if e.src in opening else 1
        dsts = len(inputs[e.dst].get(e.slot, ())) if e.dst in opening else 1
        for end in {e.src, e.dst} & opening.keys():
            counts[end] += srcs * dsts
    return counts


def _too_big(edges: tuple[Edge, ...], opening: dict[str, CompiledRegion]) -> dict[str, int]:
    """Regions of `opening` to keep closed so that the open ones add at most MAX_REGION_EDGES edges.

    The region adding most is closed first and the rest counted again: closing one shrinks
    the fan-out of an edge it shares with another.
    """
    left = dict(opening)
    closed: dict[str, int] = {}
    while left:
        counts = border_edge_count(edges, left)
        if sum(counts.values()) <= MAX_REGION_EDGES:
            break
        node, count = max(counts.items(), key=lambda item: item[1])
        closed[node] = count
        del left[node]
    return closed


def _box(graph: Graph, node: Node, region: CompiledRegion, refused: int | None = None) -> Node:
    """The closed region: one box standing where its node stands, with the region's facts."""
    title = region.name.rpartition(".")[2].strip("[]")
    held = [n for n in graph.nodes if n.kind is NodeKind.SAVED and n.id in _saved_of(graph, node.id)]
    attrs: list[tuple[str, str]] = [("type", REGION_TYPE)]
    if region.opened:
        attrs.append(("ops", f"{len(region.nodes):,}"))
        if refused is not None:
            attrs.append(("not opened", f"it would add {refused:,} edges; open regions may add "
                                        f"{MAX_REGION_EDGES:,}"))
    else:
        attrs.append(("not opened", region.notes[0] if region.notes else "the backward graph was not found"))
    if held:
        attrs.append(("saved", human_bytes(saved_bytes(held))))
        activations = saved_bytes(held, skip=leaf_storages(graph))
        attrs.append(("activations", human_bytes(activations)))
    return Node(node.id, NodeKind.MODULE, f"{title}: {node.name}", node.tensor, tuple(attrs), region.name,
                node.source, node.grad, node.recency)


def _saved_of(graph: Graph, node_id: str) -> set[str]:
    return {e.src for e in graph.edges if e.kind is EdgeKind.SAVED and e.dst == node_id}


def _edges(edges: tuple[Edge, ...], opening: dict[str, CompiledRegion]) -> tuple[Edge, ...]:
    """Edges with each open region's border moved onto its ops, and its inside added."""
    inputs = {node: _group(r.inputs) for node, r in opening.items()}
    outputs = {node: _group(r.outputs) for node, r in opening.items()}
    kept: list[Edge] = []
    for e in edges:
        if e.src not in opening and e.dst not in opening:
            kept.append(e)
        elif e.kind is EdgeKind.DATA:
            # A producer feeding the region now feeds the op computing its gradient; the
            # region's consumer is fed by the ops that receive the gradient it sends back.
            srcs = outputs[e.src].get(e.output_nr, []) if e.src in opening else [e.src]
            dsts = inputs[e.dst].get(e.slot, []) if e.dst in opening else [e.dst]
            kept.extend(Edge(s, d, e.kind, e.output_nr, e.slot, e.grad) for s in srcs for d in dsts)
        # saved edges of an open region are replaced by its own, to the ops that read them
    for r in opening.values():
        kept.extend(r.edges)
    return tuple(kept)


def _group(pairs: tuple[tuple[int, str], ...]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for index, node in pairs:
        found.setdefault(index, []).append(node)
    return found
