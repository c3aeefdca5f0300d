"""A rank's graph: DTensor parameters as the rank's local shards with their layout, FSDP units marked as such."""

from __future__ import annotations

import dataclasses

import dist_jobs
import pytest
import torch

from graphviz_app import trace_model
from graphviz_app.model import Graph, NodeKind
from graphviz_app.model.compact import to_compact
from graphviz_app.tracing.distributed.fake_cluster import fake_cluster, forecast_world
from graphviz_app.tracing.distributed.rank_graph import trace_rank_step
from graphviz_app.tracing.distributed.rank_step import rank_step


def _trace(name: str, world_size: int = 2) -> tuple[Graph, torch.nn.Module]:
    model, x, _ = dist_jobs.BUILDERS[name](dist_jobs.mesh_for(name, world_size))
    return trace_model(model, x), model


def _local_bytes(model: torch.nn.Module) -> dict[str, int]:
    """Each parameter's local shard bytes, by torch's own DTensor.to_local()."""
    return {n: p.to_local().numel() * p.element_size() for n, p in model.named_parameters()}


@pytest.mark.parametrize("name", ["tp", "fsdp", "fsdp_tp"])
def test_parameters_show_the_local_shard_and_how_the_whole_is_laid_out(name: str) -> None:
    with fake_cluster(2):
        graph, model = _trace(name)
        local = _local_bytes(model)
        shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
        leaves = {n.tensor.name: n.tensor for n in graph.of_kind(NodeKind.LEAF) if n.tensor is not None}
    assert set(leaves) == set(local), sorted(set(leaves) ^ set(local))
    for param, info in leaves.items():
        assert info.bytes == info.storage_bytes == local[param], param
        assert info.sharding is not None and f" of {shapes[param]} on mesh (" in info.sharding, (param, info.sharding)
    assert graph.summary().params_total == sum(local.values())  # the summary counts what the rank holds
    if name == "tp":
        assert leaves["0.up.weight"].sharding == "Shard(dim=0) of (256, 64) on mesh (2)"
        assert leaves["0.down.weight"].sharding == "Shard(dim=1) of (64, 256) on mesh (2)"
        assert leaves["0.down.bias"].sharding == "Replicate() of (64,) on mesh (2)"
    if name == "fsdp":
        assert leaves["0.up.weight"].sharding == ("Shard(dim=0) of (256, 64) on mesh (2); all-gathered (FSDP) "
                                                  "while its unit runs")


def test_fsdp_units_are_module_boxes_marked_as_units_with_their_local_bytes() -> None:
    with fake_cluster(4):
        graph, model = _trace("fsdp", 4)
        local = _local_bytes(model)
    types = {m.name: m.type for m in graph.modules}
    assert types[""] == "Sequential (FSDP unit)" and types["0"] == "Block (FSDP unit)"
    assert types["0.up"] == "Linear"  # inside a unit, not a unit itself
    block = next(m for m in graph.modules if m.name == "0")
    assert block.param_bytes == sum(b for n, b in local.items() if n.startswith("0."))


def test_sharding_survives_json_and_the_compact_form() -> None:
    with fake_cluster(2):
        graph, _ = _trace("tp")
    def shardings(g: Graph) -> list[str | None]:
        return [n.tensor.sharding if n.tensor is not None else None for n in g.nodes]

    assert Graph.from_json(graph.to_json()) == graph
    assert shardings(Graph.from_dict(to_compact(graph))) == shardings(graph)  # (the compact form has no `given`)
    assert sum(s is not None for s in shardings(graph)) >= 12  # every parameter, and the DTensors saved for backward


def test_a_plain_trace_has_no_sharding() -> None:
    graph = trace_model(dist_jobs.plain_model(1), torch.ones(2, 4, dist_jobs.D))
    assert all(n.tensor is None or n.tensor.sharding is None for n in graph.nodes)
    assert "sharding" not in graph.to_json()


def test_backward_collectives_are_placed_on_the_graph_node_running_when_issued() -> None:
    with fake_cluster(4):
        step = rank_step(dist_jobs.job("fsdp")())
        traced = trace_rank_step(step, rank=0, world_size=4)
    ids = {n.id for n in traced.graph.nodes}
    events = traced.memory.collectives
    assert all(e.node is None for e in events if e.phase == "forward")
    scatters = [e for e in events if e.op == "_reduce_scatter_base_"]
    assert len(scatters) == 3 and all(e.node in ids for e in scatters), scatters
    # a unit's gradients are reduce-scattered once its backward is done: at its post-backward boundary node
    # or after it, never before the backward started
    assert {traced.graph.node(e.node).module for e in scatters[:2]} == {"2", "1"}
    assert traced.memory == dataclasses.replace(forecast_world(dist_jobs.job("fsdp"), world_size=4),
                                                collectives=traced.memory.collectives)
