"""Non-reentrant checkpointing in a traced step: the bytes each packed saved tensor's recompute makes, on its node."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from ...analysis.memory.plan import CHECKPOINT_KEPT_ATTR, RECOMPUTE_BLOCK_ATTR, RECOMPUTED_BYTES_ATTR
from ...model import PACKED_BY_HOOK, STATE_ATTR, EdgeKind, Graph, Node, NodeKind
from ..torch_internals import checkpoint_inputs, checkpoint_packs, storage_identity

__all__ = ["mark_recomputed", "unseen_bytes"]


def mark_recomputed(graph: Graph, fns: Mapping[str, Any], known_storage: Callable[[torch.Tensor], str | None],
                    given: tuple[torch.Tensor, ...] = ()) -> Graph:
    """`graph` with each saved tensor that non-reentrant checkpointing packed marked with its block
    (`RECOMPUTE_BLOCK_ATTR`, one number per checkpointed call) and the bytes its recompute makes
    (`RECOMPUTED_BYTES_ATTR`), from the shape and dtype the checkpoint recorded.

    A packed tensor costs nothing new when it is a parameter its op uses (directly, or through a view
    such as `t()`: the view's shape) or
    one of the block's inputs (the recompute saves them again without copying); those are told apart
    by shape and dtype, each input once, first in pack order. Two savers of one new tensor are
    counted twice (the checkpoint records no storage).

    The checkpoint also keeps its block's inputs until the block's backward is done: an input whose
    storage nothing in the graph describes (`known_storage` says None) and that existed before the step
    in none of `given` is marked (`CHECKPOINT_KEPT_ATTR`, its bytes) on the block's first packed tensor.
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
    kept = _kept_inputs(packs, saver_of, fns, known_storage, given)
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
        extra = ((CHECKPOINT_KEPT_ATTR, str(kept.pop(block))),) if block in kept else ()
        changed[node_id] = dataclasses.replace(node, attrs=(*node.attrs, (RECOMPUTE_BLOCK_ATTR, str(number)),
                                                            (RECOMPUTED_BYTES_ATTR, str(size)), *extra))
    if not changed:
        return graph
    return dataclasses.replace(graph, nodes=tuple(changed.get(n.id, n) for n in graph.nodes))


def _kept_inputs(packs: list[tuple[int, int, str, tuple[int, ...], torch.dtype, Any]], saver_of: dict[str, str],
                 fns: Mapping[str, Any], known_storage: Callable[[torch.Tensor], str | None],
                 given: tuple[torch.Tensor, ...]) -> dict[int, int]:
    """Block -> bytes of the inputs only its checkpoint keeps (no graph node describes them, not given)."""
    before = {storage_identity(t.untyped_storage()) for t in given}
    seen: set[int] = set()
    kept: dict[int, int] = {}
    for block, _, node_id, *_ in packs:
        if block in kept:
            continue
        found = checkpoint_inputs(fns[saver_of[node_id]])
        kept[block] = unseen_bytes(found[1] if found is not None else (), before, seen, known_storage)
    return kept


def unseen_bytes(tensors: Iterable[torch.Tensor], before: set[int], seen: set[int],
                 known_storage: Callable[[torch.Tensor], str | None]) -> int:
    """The bytes of `tensors`' storages that no graph node describes (`known_storage`), that did not exist
    before the step (`before`, storage identities) and are not counted yet (`seen`, which this adds to)."""
    total = 0
    for t in tensors:
        storage = t.untyped_storage()
        ident = storage_identity(storage)
        if ident in before or ident in seen or known_storage(t) is not None:
            continue
        seen.add(ident)
        total += storage.nbytes()
    return total


_VIEWS = frozenset({"TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0", "ExpandBackward0",
                    "UnsafeViewBackward0", "ReshapeAliasBackward0", "SliceBackward0", "SelectBackward0"})


def _params_used(graph: Graph) -> dict[str, set[tuple[tuple[int, ...], str]]]:
    """Op id -> (shape, dtype) of the parameters it takes: a leaf directly, or a view of one (`t()` of a
    weight) made by a view op whose forward result has that shape."""
    nodes = {n.id: n for n in graph.nodes}
    inputs: dict[str, list[str]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.DATA and nodes[e.dst].kind is NodeKind.OP:
            inputs.setdefault(e.dst, []).append(e.src)
    used: dict[str, set[tuple[tuple[int, ...], str]]] = {}
    for op, srcs in inputs.items():
        found: set[tuple[tuple[int, ...], str]] = set()
        for src in srcs:
            n = nodes[src]
            takes_leaf = n.kind is NodeKind.LEAF or (
                n.name in _VIEWS and any(nodes[t].kind is NodeKind.LEAF for t in inputs.get(src, ())))
            if takes_leaf and n.tensor is not None and n.tensor.shape is not None:
                found.add((tuple(n.tensor.shape), n.tensor.dtype))
        if found:
            used[op] = found
    return used


def _dtype(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")
