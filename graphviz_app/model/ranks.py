"""The rank a graph was traced in (a torchrun job's or a fake cluster's): its collectives and FSDP units, and back.

A graph traced inside a rank (`measure`, `trace_model` of a DDP, FSDP2 or tensor-parallel model) carries a
`RankInfo`, so that `save(graph, "rank0.html")`, and `graph.to_json()` read back later, show that rank's
collectives on the memory chart and replay its step with its FSDP units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any

from ..errors import SchemaError

__all__ = ["PHASES", "CollectiveEvent", "FsdpUnit", "RankInfo", "rank_to_dict", "rank_from_dict",
           "rank_with_nodes_moved"]

PHASES = ("forward", "backward", "optimizer")


@dataclass(frozen=True, slots=True)
class CollectiveEvent:
    """One collective a rank ran during the step.

    `op` is torch's op name (`_allgather_base_`, `_reduce_scatter_base_`,
    `all_reduce`, ...), `bytes` the bytes of the buffers it wrote (an all-gather's
    output, a reduce-scatter's input, an all-reduce's tensor), `phase` one of
    "forward", "backward", "optimizer", and `live_bytes` what the step held when
    it ran. `node` is the id of the graph's backward node running when it was
    issued (a traced step's backward only; None otherwise).
    """

    op: str
    bytes: int
    phase: str
    live_bytes: int
    node: str | None = None


@dataclass(frozen=True, slots=True)
class FsdpUnit:
    """One FSDP2 unit of a rank's step (a module `fully_shard` wrapped; "" the root), in bytes on this rank.

    `params` are its parameters' names and `param_bytes` each one's bytes all-gathered; `unsharded_bytes`
    its parameters all-gathered (in the
    MixedPrecisionPolicy's param dtype), `gather_bytes` the all-gather's output buffer (padded),
    `sharded_grad_bytes` the gradient shards it keeps after backward, `reduce_bytes` the
    reduce-scatter's input buffer (in the reduce dtype). `reshard_after_forward`: its parameters are
    freed after its forward and all-gathered again for its backward (else kept from forward to backward).
    """

    name: str
    params: tuple[str, ...]
    param_bytes: tuple[int, ...]
    unsharded_bytes: int
    gather_bytes: int
    sharded_grad_bytes: int
    reduce_bytes: int
    reshard_after_forward: bool


@dataclass(frozen=True, slots=True)
class RankInfo:
    """The rank a graph was traced in, and what its viewer shows of it (`Graph.rank`).

    `strategy` says how the model is spread over ranks ("DDP", "DDP+TP", "FSDP2", "TP", "FSDP+TP");
    `collectives` are those the traced step ran, a backward one naming the node running when it
    was issued; `units` the step's FSDP2 units, which a replay of the graph (`rank_timeline`)
    needs; `grads_in_buckets`: DDP's gradients are views of its buckets (`gradient_as_bucket_view`).
    """

    rank: int
    world_size: int
    strategy: str
    collectives: tuple[CollectiveEvent, ...] = ()
    units: tuple[FsdpUnit, ...] = ()
    grads_in_buckets: bool = False


def rank_with_nodes_moved(info: RankInfo | None, moved: Mapping[str, str | None]) -> RankInfo | None:
    """`info` with each collective's node moved where a transformation put it: a node folded into a box
    (`collapse`, a closed compiled region) names the box; a node mapped to None is gone, and so is the
    collective's place (it stays listed, at no node).

    >>> info = RankInfo(0, 2, "DDP", (CollectiveEvent("all_reduce", 64, "backward", 128, "n3"),))
    >>> rank_with_nodes_moved(info, {"n3": "module/1"}).collectives[0].node
    'module/1'
    """
    if info is None or not any(c.node is not None and c.node in moved for c in info.collectives):
        return info
    return replace(info, collectives=tuple(
        replace(c, node=moved[c.node]) if c.node is not None and c.node in moved else c for c in info.collectives))


def rank_to_dict(info: RankInfo) -> dict[str, Any]:
    """A JSON-ready dict; `rank_from_dict` reads it back exactly.

    >>> info = RankInfo(1, 2, "FSDP2", (CollectiveEvent("_allgather_base_", 64, "backward", 128, "n3"),))
    >>> rank_to_dict(info)["collectives"]
    [{'op': '_allgather_base_', 'bytes': 64, 'phase': 'backward', 'live_bytes': 128, 'node': 'n3'}]
    >>> rank_from_dict(rank_to_dict(info)) == info
    True
    """
    return {
        "rank": info.rank, "world_size": info.world_size, "strategy": info.strategy,
        "collectives": [_plain(c) for c in info.collectives], "units": [_plain(u) for u in info.units],
        "grads_in_buckets": info.grads_in_buckets,
    }


def rank_from_dict(data: Any) -> RankInfo:
    """Read `rank_to_dict`'s form back (field types are checked by `model.validation`).

    Raises:
        SchemaError: it is not an object, or a field is missing or unknown (the message names it).
    """
    values = _fields_of(RankInfo, data, "rank")
    for key, kind in (("collectives", CollectiveEvent), ("units", FsdpUnit)):
        items = values.get(key, [])
        if not isinstance(items, list):
            raise SchemaError(f"rank.{key} must be a list of objects, found {type(items).__name__}")
        values[key] = tuple(kind(**_tupled(_fields_of(kind, item, f"rank.{key}[{i}]")))
                            for i, item in enumerate(items))
    return RankInfo(**values)


def _plain(record: Any) -> dict[str, Any]:
    return {f.name: list(v) if isinstance(v := getattr(record, f.name), tuple) else v for f in fields(record)}


def _tupled(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _fields_of(kind: type, data: Any, where: str) -> dict[str, Any]:
    """`data`'s fields for a `kind` record: an object with every field that has no default, and no other."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where} must be an object, found {type(data).__name__}; was it written by "
                          "Graph.to_json()?")
    names = [f.name for f in fields(kind)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise SchemaError(f"{where} has unknown field(s) {', '.join(unknown)}; was it written by Graph.to_json()?")
    missing = [f.name for f in fields(kind)
               if f.name not in data and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise SchemaError(f"{where} lacks the field(s) {', '.join(missing)}; was it written by Graph.to_json()?")
    return dict(data)
