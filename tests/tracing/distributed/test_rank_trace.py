"""`trace_model` inside a process group: the graph carries its rank (`Graph.rank`), with the forward's collectives
and the FSDP units; outside one, or for a plain model, it carries none."""

from __future__ import annotations

import dist_jobs
import pytest
import torch

from graphviz_app import trace_model
from graphviz_app.model import Graph
from graphviz_app.tracing.distributed.fake_cluster import fake_cluster
from graphviz_app.tracing.torch_internals import fsdp_units
from graphviz_app.viewer.payload import payload


def test_an_fsdp2_rank_s_trace_carries_each_unit_s_forward_all_gather_and_the_units() -> None:
    with fake_cluster(4):
        model, x, _ = dist_jobs.job("fsdp")()
        units = fsdp_units(model)
        graph = trace_model(model, x)
    assert graph.rank is not None
    assert (graph.rank.rank, graph.rank.world_size, graph.rank.strategy) == (0, 4, "FSDP2")
    assert [u.name for u in graph.rank.units] == [u[0] for u in units]
    gathered = [u.gather_bytes for u in graph.rank.units if u.params]
    # each unit's all-gather output as FSDP's own state sizes it (fsdp_units), in the order the blocks run
    assert [(c.op, c.bytes, c.phase, c.node) for c in graph.rank.collectives] == [
        ("_allgather_base_", b, "forward", None) for b in gathered]
    assert Graph.from_json(graph.to_json()) == graph
    live = payload(graph)["series"][0]
    assert [e["step"] for e in live["events"]] == [0, 0, 0]
    assert live["notes"][0] == "rank 0 of 4 (FSDP2): collectives: 3 _allgather_base_"


def test_a_tensor_parallel_rank_s_trace_has_one_all_reduce_per_row_parallel_layer() -> None:
    with fake_cluster(2):
        model, x, _ = dist_jobs.job("tp")()
        graph = trace_model(model, x)
    activation = dist_jobs.BATCH * dist_jobs.SEQ * dist_jobs.D * 4  # the row-parallel output, summed over ranks
    assert graph.rank is not None and graph.rank.strategy == "TP" and graph.rank.units == ()
    # DTensor's wrapper for autograd (_wrap_tensor_autograd) sends nothing: not a collective
    assert [(c.op, c.bytes, c.phase) for c in graph.rank.collectives] == [("all_reduce", activation, "forward")] * 3


def test_no_rank_outside_a_process_group_nor_for_a_plain_model_inside_one(monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = dist_jobs.plain_model(1), torch.ones(2, 4, dist_jobs.D)
    assert not torch.distributed.is_initialized()
    assert trace_model(model, x).rank is None
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)  # a torchrun rank of a plain model
    assert trace_model(model, x).rank is None
