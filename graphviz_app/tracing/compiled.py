"""Open torch.compile's `CompiledFunctionBackward` nodes: the ops, saved tensors and lines inside."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..model import REGION_TYPE, CompiledRegion, Edge, EdgeKind, Graph, ModuleInfo, Node, NodeKind
from ..model.annotations import MADE_BY_ATTR
from .compiled_graph import OP, SAVED, BackwardGraph, BackwardSaved, backward_graph
from .fast_records import FAST, new_edge, new_node
from .torch_internals import compiled_backward_graph

__all__ = ["COMPILED_NODE", "add_regions", "region_name"]

COMPILED_NODE = "CompiledFunctionBackward"

# What a region's inside cannot show, said once per region.
_FUSED_NOTE = (
    "these are AOT autograd's backward ops as handed to the compiler backend; a code-generating backend "
    "(inductor) fuses them into kernels, which are not shown"
)


def region_name(module: str | None, number: int) -> str:
    """The module-like name a region's box opens under: inside the region node's module, if any.

    >>> region_name(None, 1), region_name("enc.layers", 2)
    ('[compiled region 1]', 'enc.layers.[compiled region 2]')
    """
    own = f"[compiled region {number}]"
    return f"{module}.{own}" if module else own


def add_regions(graph: Graph, fns: Mapping[str, Any]) -> Graph:
    """The graph with `regions` filled: one `CompiledRegion` per `CompiledFunctionBackward` node.

    The region's saved tensors (the node's `saved_tensors[i]` saved nodes) get the
    forward op that made them (`made by`, its `seq_nr`), its module (`forward module`)
    and its source line, where the backward graph records them.

    Args:
        graph: a traced graph.
        fns: node id -> the live autograd node (`Walker.fn_by_node_id()`).
    """
    compiled = [n for n in graph.nodes if n.kind is NodeKind.OP and n.name == COMPILED_NODE]
    if not compiled:
        return graph
    saved_ids: dict[str, list[str]] = {}
    input_ids: dict[str, dict[int, str]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED:
            saved_ids.setdefault(e.dst, []).append(e.src)
        elif e.kind is EdgeKind.DATA:
            input_ids.setdefault(e.dst, {})[e.slot] = e.src
    by_id = {n.id: n for n in graph.nodes}
    replaced: dict[str, Node] = {}
    regions = []
    for number, node in enumerate(compiled, start=1):
        name = region_name(node.module, number)
        module, reason = compiled_backward_graph(fns.get(node.id))
        if module is None:
            regions.append(CompiledRegion(node.id, name, notes=(f"{name} could not be opened: {reason}",)))
            continue
        saved = {by_id[i].name: by_id[i] for i in saved_ids.get(node.id, ())}
        leaves = {slot: by_id[i].name for slot, i in input_ids.get(node.id, {}).items()
                  if by_id[i].kind is NodeKind.LEAF and by_id[i].name}
        bw = backward_graph(module, node.id, name)
        notes, linked = _link_saved(bw, saved)
        region = CompiledRegion(node.id, name, *_made(bw, node.id, name, linked),
                                notes=(_FUSED_NOTE, *bw.notes_before, *notes, *bw.notes_after))
        regions.append(region)
        for record, node_id in zip(bw.saved, linked, strict=True):
            if node_id is not None:
                replaced[node_id] = _described(by_id[node_id], record, leaves)
    nodes = tuple(replaced.get(n.id, n) for n in graph.nodes) if replaced else graph.nodes
    return dataclasses.replace(graph, nodes=nodes, regions=tuple(regions))


_Made = tuple[tuple[Node, ...], tuple[Edge, ...], tuple[tuple[int, str], ...], tuple[tuple[int, str], ...],
              tuple[ModuleInfo, ...]]


def _made(bw: BackwardGraph, node_id: str, name: str, linked: tuple[str | None, ...]) -> _Made:
    """The region's ops, edges, inputs, outputs and modules for region node `node_id`.

    Kept with the backward graph: tracing the same compiled model again gives the same
    node ids, and the records are immutable, so the next trace shares them.
    """
    key = (node_id, name, linked)
    found: _Made | None = bw.made.get(key)
    if found is None:
        found = _make(bw, node_id, name, linked)
        if len(bw.made) >= 8:  # a few graphs of one compiled function at a time
            bw.made.clear()
        bw.made[key] = found
    return found


def _make(bw: BackwardGraph, node_id: str, name: str, linked: tuple[str | None, ...]) -> _Made:
    nodes = bw.ops_for(node_id, name)
    ids = [n.id for n in nodes]
    edges: list[Edge] = []
    outputs: list[tuple[int, str]] = []
    data, saved_kind = EdgeKind.DATA, EdgeKind.SAVED
    for op, slot, where, which in bw.reads:  # backward flows from an op's input to the op: drawn op -> input
        if where == OP:
            edges.append(new_edge(ids[op], ids[which], data, 0, slot))
        elif where == SAVED:
            if (saved := linked[which]) is not None:
                edges.append(new_edge(saved, ids[op], saved_kind))
        else:
            outputs.append((which, ids[op]))
    inputs = tuple((slot, ids[op]) for slot, op in bw.inputs)
    modules = (ModuleInfo(name, REGION_TYPE), *(ModuleInfo(f"{name}.{path}", cls) for path, cls in bw.modules))
    return nodes, tuple(edges), inputs, tuple(dict.fromkeys(outputs)), modules


def _link_saved(bw: BackwardGraph, saved: Mapping[str, Node]) -> tuple[list[str], tuple[str | None, ...]]:
    """(notes, the graph's node id of each saved tensor the backward graph reads, None where not linked)."""
    unlinked: tuple[str | None, ...] = (None,) * len(bw.saved)
    if not saved:
        return [], unlinked  # traced with show_saved=False: nothing to link
    names = [f"saved_tensors[{i}]" for i in range(len(bw.saved))]
    if len(saved) != len(bw.saved) or any(n not in saved for n in names):
        return [
            f"the backward graph reads {len(bw.saved)} saved tensor(s), the node holds {len(saved)}: "
            "saved tensors are not linked to the ops that read them"
        ], unlinked
    notes: list[str] = []
    linked: list[str | None] = []
    for name, record in zip(names, bw.saved, strict=True):
        node = saved[name]
        if node.tensor is not None and not node.tensor.freed and record.shape != node.tensor.shape:
            notes.append(f"{name} has shape {node.tensor.shape_text}, the backward graph expects "
                         f"{record.shape}: not linked")
            linked.append(None)
        else:
            linked.append(node.id)
    return notes, tuple(linked)


def _described(node: Node, record: BackwardSaved, leaves: Mapping[int, str]) -> Node:
    """A saved tensor's node with what made it: an input of the region, or a forward op and its line."""
    made_by = record.made_by
    if record.input is not None:
        leaf = leaves.get(record.input)
        made_by = ((MADE_BY_ATTR, f"input {record.input} of the region" + (f" ({leaf})" if leaf else "")),)
    attrs, source = node.attrs + made_by, record.source or node.source
    if not FAST:  # pragma: no cover - only when the model's fields change
        return dataclasses.replace(node, attrs=attrs, source=source)
    described: Node = new_node(node.id, node.kind, node.name, node.tensor, attrs, node.module, source, node.grad,
                               node.recency, node.order, node.differentiates)
    return described
