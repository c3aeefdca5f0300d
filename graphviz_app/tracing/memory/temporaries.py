"""As backward runs, what each node allocates beyond the gradients it returns; written on the graph's op nodes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ...analysis.memory.op_bytes import (
    GRADIENT_COPIED_ATTR,
    NESTED_GRADS_ATTR,
    NESTED_LEAF_GRADS_ATTR,
    TEMPORARIES_ATTR,
)
from ...analysis.memory.rules import VIEWS
from ...model import Graph, Node, NodeKind
from .counting import LiveCuda, LiveStorages, tensors_in

__all__ = ["OpBytes", "watch_op_bytes", "mark_op_bytes"]


@dataclasses.dataclass
class OpBytes:
    """Filled while backward runs: node id -> bytes alive inside its backward beyond what it left
    (`temporaries`), and, for a reentrant checkpoint's node, the bytes its nested backward left beyond the
    gradients it returns (`nested`: its block's `.grad`), of them the `.grad` it made for leaves of the graph
    (`nested_leaves`: leaf id -> bytes, a parameter used inside the block and outside it); for an op whose
    backward makes views of its gradient (`rules.VIEWS`), the bytes it copied it into instead (`copied`: a
    reshape's backward given a transposed gradient).

    `inside` counts the reentrant checkpoints running now: their nested backward runs the AccumulateGrad node of
    such a parameter, which is the outer graph's own (torch keeps one per tensor), so its pre-hook fires there
    too; it must start no interval of its own inside the checkpoint's."""

    temporaries: dict[str, int] = dataclasses.field(default_factory=dict)
    nested: dict[str, int] = dataclasses.field(default_factory=dict)
    nested_leaves: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    copied: dict[str, int] = dataclasses.field(default_factory=dict)
    inside: int = 0


def watch_op_bytes(counter: LiveStorages | LiveCuda, fns: Mapping[str, Any], graph: Graph,
                   found: OpBytes) -> list[Any]:
    """Register on every node a pre-hook that starts an interval of `counter` (`counter.mark(node id)`), and on
    every op a post-hook that reads it when the node returns; the handles, to remove after backward.
    AccumulateGrad gets no post-hook (one changes when it may take the gradient without a copy)."""
    kinds = {n.id: n for n in graph.nodes if n.kind in (NodeKind.OP, NodeKind.LEAF)}
    leaves = {node_id: fn.variable for node_id, fn in fns.items()
              if node_id in kinds and kinds[node_id].kind is NodeKind.LEAF and hasattr(fn, "variable")}
    handles = []
    for node_id, fn in fns.items():
        node = kinds.get(node_id)
        reentrant = node is not None and node.kind is NodeKind.OP and node.name == "CheckpointFunctionBackward"
        before: dict[str, None] = {}  # a reentrant node's leaves without .grad when it starts
        handles.append(fn.register_prehook(_marker(counter, node_id, found, leaves if reentrant else None, before)))
        if node is not None and node.kind is NodeKind.OP:
            handles.append(fn.register_hook(_reader(counter, node_id, found, leaves if reentrant else None, before,
                                                    node.name in VIEWS)))
    return handles


def _marker(counter: LiveStorages | LiveCuda, node_id: str, found: OpBytes, leaves: dict[str, Any] | None,
            before: dict[str, None]) -> Any:
    def prehook(grad_outputs: Any) -> None:
        if found.inside:  # a leaf's AccumulateGrad run by a reentrant checkpoint's nested backward
            return
        counter.mark(node_id)
        if leaves is not None:
            found.inside += 1
            before.clear()
            before.update((leaf, None) for leaf, t in leaves.items() if t.grad is None)

    return prehook


def _reader(counter: LiveStorages | LiveCuda, node_id: str, found: OpBytes, leaves: dict[str, Any] | None,
            before: dict[str, None], view: bool) -> Any:
    def posthook(grad_inputs: Any, grad_outputs: Any) -> None:
        if leaves is None and found.inside:
            return
        start, peak = counter.interval()
        live = counter.live
        if peak > live:
            found.temporaries[node_id] = peak - live
        if view:  # a view's backward: a storage of its own is a copy
            copied = _new_bytes(grad_inputs, grad_outputs)
            if copied:
                found.copied[node_id] = copied
        if leaves is not None:
            found.inside -= 1
            left = live - start - _new_bytes(grad_inputs, grad_outputs)
            if left > 0:
                found.nested[node_id] = left
            made = _grad_bytes({leaf: leaves[leaf].grad for leaf in before if leaves[leaf].grad is not None})
            if made:
                found.nested_leaves[node_id] = made

    return posthook


def _grad_bytes(grads: dict[str, torch.Tensor]) -> dict[str, int]:
    """Leaf id -> bytes of its `.grad`'s storage, each storage counted once."""
    seen: set[int] = set()
    found: dict[str, int] = {}
    for leaf, grad in grads.items():
        st = _storage(grad)
        if st is None or id(st) in seen:
            continue
        seen.add(id(st))
        found[leaf] = st.nbytes()
    return found


def _new_bytes(made: Any, given: Any) -> int:
    """Bytes of the distinct storages of `made` that none of `given` lives in (torch keeps one Python object
    per live storage, so its id names it)."""
    old = {id(st) for st in map(_storage, tensors_in(given)) if st is not None}
    new = {id(st): st.nbytes() for st in map(_storage, tensors_in(made)) if st is not None and id(st) not in old}
    return sum(new.values())


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less tensors
        return None


def mark_op_bytes(graph: Graph, found: OpBytes) -> Graph:
    """`graph` with each op's recorded bytes as attrs (`TEMPORARIES_ATTR`, `NESTED_GRADS_ATTR`,
    `NESTED_LEAF_GRADS_ATTR`, `GRADIENT_COPIED_ATTR`)."""
    if not found.temporaries and not found.nested and not found.copied:
        return graph

    def marked(n: Node) -> Node:
        extra = []
        if n.id in found.temporaries:
            extra.append((TEMPORARIES_ATTR, str(found.temporaries[n.id])))
        if n.id in found.nested:
            extra.append((NESTED_GRADS_ATTR, str(found.nested[n.id])))
        if n.id in found.nested_leaves:
            extra.append((NESTED_LEAF_GRADS_ATTR, " ".join(f"{leaf}={size}"
                                                           for leaf, size in found.nested_leaves[n.id].items())))
        if n.id in found.copied:
            extra.append((GRADIENT_COPIED_ATTR, str(found.copied[n.id])))
        return dataclasses.replace(n, attrs=(*n.attrs, *extra)) if extra else n

    return dataclasses.replace(graph, nodes=tuple(marked(n) for n in graph.nodes))
