"""As backward runs, what each node allocates beyond the gradients it returns; written on the graph's op nodes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ...analysis.memory.op_bytes import NESTED_GRADS_ATTR, TEMPORARIES_ATTR
from ...model import Graph, Node, NodeKind
from .counting import LiveCuda, LiveStorages, tensors_in

__all__ = ["OpBytes", "watch_op_bytes", "mark_op_bytes"]


@dataclasses.dataclass
class OpBytes:
    """Filled while backward runs: node id -> bytes alive inside its backward beyond what it left
    (`temporaries`), and, for a reentrant checkpoint's node, the bytes its nested backward left beyond the
    gradients it returns (`nested`: its block's `.grad`)."""

    temporaries: dict[str, int] = dataclasses.field(default_factory=dict)
    nested: dict[str, int] = dataclasses.field(default_factory=dict)


def watch_op_bytes(counter: LiveStorages | LiveCuda, fns: Mapping[str, Any], graph: Graph,
                   found: OpBytes) -> list[Any]:
    """Register a post-hook on every op's node that reads `counter` when the node returns (its interval was
    started by a pre-hook marking it); the handles, to remove after backward. AccumulateGrad is left alone
    (a post-hook there changes when it may take the gradient without a copy)."""
    ops = {n.id: n.name for n in graph.nodes if n.kind is NodeKind.OP}
    return [fn.register_hook(_reader(counter, node_id, ops[node_id] == "CheckpointFunctionBackward", found))
            for node_id, fn in fns.items() if node_id in ops]


def _reader(counter: LiveStorages | LiveCuda, node_id: str, reentrant: bool, found: OpBytes) -> Any:
    def posthook(grad_inputs: Any, grad_outputs: Any) -> None:
        start, peak = counter.interval()
        live = counter.live
        if peak > live:
            found.temporaries[node_id] = peak - live
        if reentrant:
            left = live - start - _new_bytes(grad_inputs, grad_outputs)
            if left > 0:
                found.nested[node_id] = left

    return posthook


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
    """`graph` with each op's recorded bytes as attrs (`TEMPORARIES_ATTR`, `NESTED_GRADS_ATTR`)."""
    if not found.temporaries and not found.nested:
        return graph

    def marked(n: Node) -> Node:
        extra = []
        if n.id in found.temporaries:
            extra.append((TEMPORARIES_ATTR, str(found.temporaries[n.id])))
        if n.id in found.nested:
            extra.append((NESTED_GRADS_ATTR, str(found.nested[n.id])))
        return dataclasses.replace(n, attrs=(*n.attrs, *extra)) if extra else n

    return dataclasses.replace(graph, nodes=tuple(marked(n) for n in graph.nodes))
