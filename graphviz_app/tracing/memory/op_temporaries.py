"""Each op's backward temporaries for a graph with no run behind it: its backward run once on meta, cached per op."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ...model import Graph, Node, NodeKind
from ...model.annotations import TEMPORARIES_FOUND_ATTR
from ..torch_internals import FREED, MODIFIED, PACKED, gradient_metadata, is_custom_function, saved_values
from .counting import LiveStorages
from .grouped_mm import meta_grouped_mm
from .temporaries import OpBytes, mark_op_bytes

__all__ = ["MetaOpBytes", "meta_op_temporaries", "mark_meta_op_temporaries"]

Metadata = tuple[tuple[tuple[int, ...], torch.dtype], ...]

# Process-wide: (node type, incoming gradients, consumers, saved values) -> bytes (-1: it cannot run on meta).
# The layers of one model share entries, and so do the traces of one model at one batch size.
_CACHE: dict[Any, int] = {}
_CACHE_MAX = 20_000


class MetaOpBytes(LiveStorages):
    """A `LiveStorages` under which every real tensor an op is given is replaced by a meta twin of the same
    size, strides and dtype: a node's backward, called with meta gradients, computes nothing and allocates
    nothing, while what it allocates is counted as on the device."""

    def __init__(self) -> None:
        super().__init__()
        self._twins: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(real) -> (real, its meta twin)

    def twin(self, value: Any) -> Any:  # noqa: ANN401 - any nesting of an op's arguments
        if isinstance(value, torch.Tensor):
            if value.device.type == "meta":
                return value
            held = self._twins.get(id(value))
            if held is None:  # the real tensor is kept with its twin, so its id is not reused meanwhile
                meta = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
                held = self._twins[id(value)] = (value, meta)
            return held[1]
        if isinstance(value, (list, tuple)):
            return type(value)(self.twin(v) for v in value)
        if isinstance(value, dict):
            return {k: self.twin(v) for k, v in value.items()}
        return value

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = self.twin(kwargs or {})
        if "device" in kwargs:  # ToCopyBackward0 copies back to the forward's device: the same bytes, on meta
            kwargs["device"] = torch.device("meta")
        return super().__torch_dispatch__(func, types, self.twin(args), kwargs)


def meta_op_temporaries(graph: Graph, fns: Mapping[str, Any],
                        cache: dict[Any, int] | None = None) -> tuple[OpBytes, int]:
    """Run the backward of each distinct op of `graph` once on meta (`fns`: node id -> its live autograd node)
    and record the bytes it makes and frees inside beyond the gradients it returns, as `measure()` records them;
    with the number of ops left unmeasured (Python-defined nodes other than a reentrant checkpoint, which the
    timeline notes itself; ops with no meta kernel; saved tensors freed or packed by a hook)."""
    cache = _CACHE if cache is None else cache
    if len(cache) > _CACHE_MAX:
        cache.clear()
    found = OpBytes()
    unmeasured = 0
    for node in graph.nodes:
        fn = fns.get(node.id)
        if node.kind is not NodeKind.OP or fn is None or node.name == "CheckpointFunctionBackward":
            continue
        if is_custom_function(fn):  # its backward is user code, which may read values or hold state
            unmeasured += 1
            continue
        grads = gradient_metadata(fn)
        key = None if grads is None else _key(fn, grads)
        if key is None or grads is None:
            unmeasured += 1
            continue
        if key not in cache:
            cache[key] = _run_once(fn, [torch.zeros(shape, dtype=dtype, device="meta") for shape, dtype in grads])
        if cache[key] > 0:
            found.temporaries[node.id] = cache[key]
        elif cache[key] < 0:
            unmeasured += 1
    return found, unmeasured


def _key(fn: Any, grads: Metadata) -> tuple[Any, ...] | None:  # noqa: ANN401 - an autograd node
    """What decides `fn`'s allocations: its type, its incoming gradients, the shape and dtype each consumer takes
    its gradient in (the engine fits it), and its saved values (tensors by shape, strides and dtype). None when
    one is unknown (a saved tensor freed or packed by a hook, a consumer's metadata unreadable)."""
    consumers: list[tuple[tuple[int, ...], torch.dtype] | None] = []
    for nxt, nr in fn.next_functions:
        if nxt is None:
            consumers.append(None)
            continue
        meta = gradient_metadata(nxt)
        if meta is None:
            return None
        consumers.append(meta[nr])
    saved = []
    for name, value in saved_values(fn):
        if value is FREED or value is MODIFIED or value is PACKED:
            return None
        saved.append((name, _describe(value)))
    return type(fn), grads, tuple(consumers), tuple(saved)


def _describe(value: Any) -> Any:  # noqa: ANN401 - a hashable description of a saved value
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.stride(), value.dtype, value.device.type)
    if isinstance(value, (list, tuple)):
        return tuple(_describe(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def _run_once(fn: Any, grads: list[torch.Tensor]) -> int:  # noqa: ANN401 - an autograd node
    """The bytes `fn`'s backward makes and frees inside, as the engine runs it: grad mode off (some formulas
    take another path under it, SiluBackward0's among them), and each gradient it returns made to fit its
    consumer as the engine's `validate_outputs` does (summed over broadcast dimensions, cast to the consumer's
    dtype): the gradient before that is a temporary of this op. -1 when it cannot run on meta."""
    counter = MetaOpBytes()
    try:
        # the counter inside: it hands meta twins on, which a grouped matmul (an MoE's experts) takes in any dtype
        with torch.no_grad(), meta_grouped_mm(), counter:
            counter.mark(None)
            kept = _fitted(fn, _as_list(fn(*grads)))  # nothing else holds what the node returned
            _, peak = counter.interval()
            live = counter.live
            del kept
    except Exception:  # noqa: BLE001 - an op with no meta kernel or one that reads a value: left unmeasured
        return -1
    return peak - live


def _as_list(out: Any) -> list[Any]:  # noqa: ANN401 - a node returns a tensor or a tuple of them
    return [out] if isinstance(out, torch.Tensor) else list(out)


def _fitted(fn: Any, grads: list[Any]) -> list[Any]:  # noqa: ANN401 - an autograd node
    """`grads` as the engine hands them on (torch's `validate_outputs`: summed to the consumer's shape, then
    cast to its dtype); the unfitted ones are dropped."""
    for i, (nxt, nr) in enumerate(fn.next_functions):
        grad = grads[i] if i < len(grads) else None
        if nxt is None or not isinstance(grad, torch.Tensor):
            continue
        metadata = gradient_metadata(nxt)
        if metadata is None:
            continue
        shape, dtype = metadata[nr]
        if tuple(grad.shape) != shape:
            grad = grad.sum_to_size(shape)
        if grad.dtype != dtype:
            grad = grad.to(dtype)
        grads[i] = grad
    return grads


def mark_meta_op_temporaries(graph: Graph, fns: Mapping[str, Any]) -> Graph:
    """`graph` with each op's backward temporaries, found on meta, written as `measure()` writes them
    (`TEMPORARIES_ATTR`), every output node marked as looked at (`TEMPORARIES_FOUND_ATTR`: an op without
    temporaries made none), and a note in `Graph.notes` counting the ops whose temporaries are not known."""
    found, unmeasured = meta_op_temporaries(graph, fns)
    marked = _found_on_meta(mark_op_bytes(graph, found))
    if not unmeasured:
        return marked
    note = (f"{unmeasured} op(s) were not run on meta to find their backward temporaries (Python-defined autograd "
            "Functions, ops with no meta kernel, saved tensors freed or packed by a hook): the memory timeline "
            "does not count them; measure() and forecast() record them as the step runs")
    return dataclasses.replace(marked, notes=(*marked.notes, note))


def _found_on_meta(graph: Graph) -> Graph:
    """`graph` with `TEMPORARIES_FOUND_ATTR` on each output node (once, however often it is marked)."""
    def marked(n: Node) -> Node:
        if n.kind is not NodeKind.OUTPUT or any(k == TEMPORARIES_FOUND_ATTR for k, _ in n.attrs):
            return n
        return dataclasses.replace(n, attrs=(*n.attrs, (TEMPORARIES_FOUND_ATTR, "each op's backward run on meta")))

    return dataclasses.replace(graph, nodes=tuple(marked(n) for n in graph.nodes))
