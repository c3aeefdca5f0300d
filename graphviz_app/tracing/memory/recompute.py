"""Non-reentrant checkpointing in a traced step: the bytes each packed saved tensor's recompute makes, on its node."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ...analysis.memory.plan import RECOMPUTE_BLOCK_ATTR, RECOMPUTED_BYTES_ATTR
from ...model import PACKED_BY_HOOK, STATE_ATTR, EdgeKind, Graph, Node, NodeKind
from ..torch_internals import checkpoint_packs

__all__ = ["mark_recomputed"]


def mark_recomputed(graph: Graph, fns: Mapping[str, Any]) -> Graph:
    """`graph` with each saved tensor that non-reentrant checkpointing packed marked with its block
    (`RECOMPUTE_BLOCK_ATTR`, one number per checkpointed call) and the bytes its recompute makes
    (`RECOMPUTED_BYTES_ATTR`), from the shape and dtype the checkpoint recorded.

    A packed tensor costs nothing new when it is a parameter its op uses (directly or through a view
    such as `t()`: that parameter's shape or its transpose) or
    one of the block's inputs (the recompute saves them again without copying); those are told apart
    by shape and dtype, each input once, first in pack order. Two savers of one new tensor are
    counted twice (the checkpoint records no storage).
    """
    saved = {n.id: n for n in graph.nodes if n.kind is NodeKind.SAVED and (STATE_ATTR, PACKED_BY_HOOK) in n.attrs}
    if not saved:
        return graph
    packs: list[tuple[int, int, str, tuple[int, ...], torch.dtype, Any]] = []
    params = _params_used(graph)
    saver_of: dict[str, str] = {}
    read: dict[str, Any] = {}
    for e in graph.edges:
        if e.kind is not EdgeKind.SAVED or e.src not in saved or e.dst not in fns:
            continue
        found = read.get(e.dst)
        if found is None:
            found = read[e.dst] = checkpoint_packs(fns[e.dst])
        pack = found.get(saved[e.src].name)
        saver_of[e.src] = e.dst
        if pack is not None:
            block, index, shape, dtype, inputs = pack
            packs.append((block, index, e.src, shape, dtype, inputs))
    blocks: dict[int, int] = {}
    inputs_left: dict[int, list[tuple[tuple[int, ...], str]]] = {}
    changed: dict[str, Node] = {}
    for block, _, node_id, shape, dtype, inputs in sorted(packs, key=lambda p: (p[0], p[1])):
        number = blocks.setdefault(block, len(blocks))
        left = inputs_left.setdefault(block, [(tuple(s), _dtype(d)) for s, d in inputs])
        meta = (tuple(shape), _dtype(dtype))
        if meta in left:
            left.remove(meta)
            size = 0
        elif meta in params.get(saver_of[node_id], ()):
            size = 0
        else:
            numel = 1
            for d in shape:
                numel *= d
            size = numel * dtype.itemsize
        node = saved[node_id]
        changed[node_id] = dataclasses.replace(node, attrs=(*node.attrs, (RECOMPUTE_BLOCK_ATTR, str(number)),
                                                            (RECOMPUTED_BYTES_ATTR, str(size))))
    if not changed:
        return graph
    return dataclasses.replace(graph, nodes=tuple(changed.get(n.id, n) for n in graph.nodes))


_VIEWS = frozenset({"TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0", "ExpandBackward0",
                    "UnsafeViewBackward0", "ReshapeAliasBackward0", "SliceBackward0", "SelectBackward0"})


def _params_used(graph: Graph) -> dict[str, set[tuple[tuple[int, ...], str]]]:
    """Op id -> (shape, dtype) of the leaves it takes, directly or through one view op (each 2-D one also
    transposed)."""
    nodes = {n.id: n for n in graph.nodes}
    inputs: dict[str, list[str]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.DATA and nodes[e.dst].kind is NodeKind.OP:
            inputs.setdefault(e.dst, []).append(e.src)
    used: dict[str, set[tuple[tuple[int, ...], str]]] = {}
    for op, srcs in inputs.items():
        leaves = [s for s in srcs if nodes[s].kind is NodeKind.LEAF]
        leaves += [t for s in srcs if nodes[s].name in _VIEWS for t in inputs.get(s, ())
                   if nodes[t].kind is NodeKind.LEAF]
        for leaf in leaves:
            t = nodes[leaf].tensor
            if t is None or t.shape is None:
                continue
            shape = tuple(t.shape)
            found = used.setdefault(op, set())
            found.add((shape, t.dtype))
            if len(shape) == 2:
                found.add(((shape[1], shape[0]), t.dtype))
    return used


def _dtype(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")
