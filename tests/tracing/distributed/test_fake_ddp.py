"""DDP on the fake cluster: torch's own DDP and reducer on fake tensors, against buckets counted by hand from
`bucket_cap_mb`, and PyTorch's MemTracker following the same fake step (real gloo ranks: test_real_ranks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dist_jobs
import pytest
import torch
import torch.distributed as dist
from dist_jobs import BATCH, SEQ, D, job, measure_beside_tracker, plain_model
from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel

from graphviz_app.analysis.distributed import format_what_ifs
from graphviz_app.errors import DistributedError
from graphviz_app.tracing.distributed.fake_cluster import (
    fake_cluster,
    forecast_world,
    forecast_worlds,
    largest_batch_world,
)
from graphviz_app.tracing.distributed.rank_graph import trace_rank_step
from graphviz_app.tracing.distributed.rank_step import rank_step
from graphviz_app.tracing.distributed.shards import rank_parameters
from graphviz_app.tracing.distributed.verify import verify_world
from graphviz_app.tracing.distributed.what_if import what_if

# One Block's parameters: up (D -> 4D) and down (4D -> D), weights and biases, float32.
BLOCK = (D * 4 * D + 4 * D + 4 * D * D + D) * 4
ORIGINAL_INIT, ORIGINAL_PRE_FORWARD = DistributedDataParallel.__init__, DistributedDataParallel._pre_forward


def ddp_job(layers: int = 3, **options: Any) -> Callable[[], Any]:
    def func() -> Any:
        model = DistributedDataParallel(plain_model(layers), **options)
        return model, torch.randn(BATCH, SEQ, D), torch.optim.Adam(model.parameters(), lr=1e-3)

    return func


def reduced(r: Any) -> list[int]:
    return [e.bytes for e in r.collectives if e.op == "allreduce_"]


def test_block_bytes_are_counted_by_hand() -> None:
    assert BLOCK == 132_352 == sum(p.numel() * 4 for p in plain_model(1).parameters())


@pytest.mark.parametrize(("layers", "options", "buckets"), [
    # The gradients arrive from the last block to the first (down's bias, down's weight, up's bias, up's weight);
    # the rebuilt buckets take them in that order, each closing once it holds bucket_cap_mb or more.
    (3, {"bucket_cap_mb": 0.1}, [BLOCK] * 3),  # 104,857 bytes: each block fills one
    (3, {"bucket_cap_mb": 0.25}, [2 * BLOCK, BLOCK]),  # 262,144 bytes: closes after the second block
    # The default: a small first bucket of 1 MiB (8 blocks are the first to reach it), then 25 MiB for the rest.
    (10, {}, [8 * BLOCK, 2 * BLOCK]),
    (3, {}, [3 * BLOCK]),
])
def test_each_bucket_is_all_reduced_once_at_the_size_ddp_rebuilt_it_to(
        layers: int, options: dict[str, Any], buckets: list[int]) -> None:
    r = forecast_world(ddp_job(layers, **options), world_size=4)
    assert r.strategy == "DDP"
    assert reduced(r) == buckets  # one all-reduce per bucket, in backward
    assert {e.phase for e in r.collectives if e.op == "allreduce_"} == {"backward"}
    assert r.buckets_bytes == sum(buckets) == r.params_bytes == layers * BLOCK
    assert f"{len(buckets)} gradient bucket(s) of {', '.join(map(str, buckets))} bytes" in r.notes[0]


@pytest.mark.parametrize("name", ["ddp", "ddp_view"])
def test_a_ddp_rank_holds_the_same_bytes_at_any_world_size(name: str) -> None:
    two, eight, sixty_four = forecast_worlds(job(name), [2, 8, 64])
    # Every rank holds the whole model, its buckets and its optimizer state, and runs the whole step on its batch.
    figures = [{k: v for k, v in r.to_dict().items() if k != "world_size"} for r in (two, eight, sixty_four)]
    assert figures[0] == figures[1] == figures[2]
    assert two.optimizer_bytes == 2 * two.params_bytes + 4 * 12  # Adam: 2 states, a 4-byte step per parameter
    assert any("the forecast is of the steady step, after DDP rebuilt its buckets" in n for n in two.notes)


def test_memtracker_follows_the_same_fake_step() -> None:
    copy, view = (forecast_world(job(name), world_size=2, with_torch_tracker=True) for name in ("ddp", "ddp_view"))
    assert copy.tracker == view.tracker == "MemTracker"
    assert copy.total_bytes == copy.tracker_bytes  # .grad a copy beside its bucket: MemTracker sees both
    # .grad a view into its bucket: MemTracker first sees the bucket when the all-reduce hands it back, late in
    # backward; the bucket exists from DDP's construction, so ours is higher, by less than the buckets.
    assert view.tracker_bytes is not None
    assert view.tracker_bytes < view.total_bytes <= view.tracker_bytes + view.buckets_bytes
    assert view.peak_bytes < copy.peak_bytes and view.grads_bytes == copy.grads_bytes == copy.params_bytes


def plain_job() -> Any:
    model = plain_model()
    return model, torch.randn(BATCH, SEQ, D), torch.optim.Adam(model.parameters(), lr=1e-3)


def by_memtracker(batch: int) -> int:
    """A DDP rank of `job("ddp")` at `batch`, by PyTorch's MemTracker: the same model's step unwrapped, plus DDP's
    buckets. (MemTracker on the DDP step itself sees a bucket only once the reducer copies into it: before the
    peak of a large batch, in early backward, it had seen one of the three, on real ranks as on fake ones.)"""
    plain = forecast_world(plain_job, world_size=8, batch=batch, with_torch_tracker=True).tracker_bytes
    assert plain is not None
    return plain + 3 * BLOCK


@pytest.mark.parametrize("batch", [4, 24])
def test_a_ddp_rank_is_the_unwrapped_step_plus_its_buckets(batch: int) -> None:
    assert forecast_world(job("ddp"), world_size=8, batch=batch).total_bytes == by_memtracker(batch)


@pytest.mark.slow
def test_the_largest_batch_per_gpu_fits_the_budget_by_memtracker_and_one_more_does_not() -> None:
    budget = 4_000_000
    batch = largest_batch_world(job("ddp"), world_size=8, budget_bytes=budget)
    assert batch > BATCH
    assert by_memtracker(batch) <= budget < by_memtracker(batch + 1)


def test_find_unused_parameters_keeps_the_first_buckets_and_all_reduces_its_map_of_used_parameters() -> None:
    r = forecast_world(dist_jobs.ddp_unused, world_size=4)
    # No rebuild: the buckets of construction, in parameter order (up's weight and bias and down's weight close
    # the first at 132,096 bytes, down's bias opens the next), reduced last first; then the map of used
    # parameters, one int32 per parameter, all-reduced.
    up_w, up_b, down_w, down_b = (p.numel() * 4 for p in plain_model(1).parameters())
    assert reduced(r) == [down_b, BLOCK, BLOCK, up_w + up_b + down_w, 12 * 4]
    assert r.total_bytes == forecast_world(job("ddp"), world_size=4).total_bytes  # every parameter is used


def test_static_graph_rebuilds_in_its_third_step_and_the_steady_step_is_the_fourth() -> None:
    static, plain = (forecast_world(f, world_size=4) for f in (dist_jobs.ddp_static, job("ddp")))
    assert reduced(static) == [BLOCK] * 3 and [e.op for e in static.collectives] == ["allreduce_"] * 3
    assert static.total_bytes == plain.total_bytes
    counted_in_the_rebuild = forecast_world(dist_jobs.ddp_static, world_size=4, warmup=2)
    assert [e.op for e in counted_in_the_rebuild.collectives][:2] == ["broadcast_", "broadcast_"]


def test_a_comm_hook_of_func_s_own_is_refused_in_words() -> None:
    with pytest.raises(DistributedError, match=r"hooked failed at world size 2: a DDP communication hook registered "
                                               r"in hooked cannot run on the fake cluster"):
        forecast_world(dist_jobs.ddp_hooked, world_size=2, where="hooked")
    assert not dist.is_initialized()


def test_ddp_is_itself_again_after_the_fake_cluster() -> None:
    forecast_world(job("ddp_view"), world_size=2)
    assert DistributedDataParallel.__init__ is ORIGINAL_INIT
    assert DistributedDataParallel._pre_forward is ORIGINAL_PRE_FORWARD
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedDataParallel(plain_model(1))  # outside a process group DDP says what it always says


@pytest.mark.parametrize("name", ["ddp", "ddp_view"])
def test_a_ddp_rank_s_graph_marks_each_bucket_s_all_reduce_at_a_backward_node(name: str) -> None:
    forecast = forecast_world(job(name), world_size=4)
    with fake_cluster(4):
        traced = trace_rank_step(rank_step(job(name)()), rank=0, world_size=4)
    assert traced.memory.total_bytes == forecast.total_bytes
    assert [(e.op, e.bytes) for e in traced.memory.collectives] == [("allreduce_", BLOCK)] * 3
    nodes = {n.id for n in traced.graph.nodes}
    assert all(e.phase == "backward" and e.node in nodes for e in traced.memory.collectives)


def test_measure_inside_a_fake_ddp_rank_agrees_with_memtracker_on_the_same_forward_and_backward() -> None:
    with fake_cluster(2):
        figures = measure_beside_tracker(job("ddp")(), "ddp", True)
    # The same figures as on real gloo ranks (test_rank_measure): the tracker counts 4 bytes more.
    assert figures["measured"] == figures["replayed"] == 1_353_988
    assert figures["tracker"] - figures["measured"] == 4


def test_ddp_over_a_one_dimensional_device_mesh_is_ddp_over_the_world() -> None:
    def over_mesh() -> Any:
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        model = DistributedDataParallel(plain_model(), device_mesh=mesh, bucket_cap_mb=0.1)
        return model, torch.randn(BATCH, SEQ, D), torch.optim.Adam(model.parameters(), lr=1e-3)

    meshed, plain = (forecast_world(f, world_size=4) for f in (over_mesh, job("ddp")))
    assert meshed.to_dict() == plain.to_dict()
    assert reduced(meshed) == [BLOCK] * 3


# One Block's local parameters on a TP rank of 2: up's weight and bias split (ColwiseParallel), down's weight split
# (RowwiseParallel), down's bias whole (replicated).
TP2_BLOCK = (D * 4 * D // 2 + 4 * D // 2 + 4 * D * D // 2 + D) * 4


def ddp_tp_on(shape: tuple[int, int]) -> Callable[[], Any]:
    def func() -> Any:
        mesh = init_device_mesh("cpu", shape, mesh_dim_names=("dp", "tp"))
        model = plain_model()
        for block in model:
            parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        model = DistributedDataParallel(model, device_mesh=mesh["dp"], bucket_cap_mb=0.1)
        return model, torch.randn(BATCH, SEQ, D), torch.optim.Adam(model.parameters(), lr=1e-3)

    return func


@pytest.mark.parametrize(("func", "world_size", "params"), [
    (job("ddp_tp"), 2, 3 * TP2_BLOCK),  # dp 1 x tp 2
    (job("ddp_tp_dp"), 2, 3 * BLOCK),  # dp 2 x tp 1
    (ddp_tp_on((2, 2)), 4, 3 * TP2_BLOCK),
])
def test_ddp_with_tensor_parallelism_counts_the_local_parameters_ddp_made(
        func: Callable[[], Any], world_size: int, params: int) -> None:
    # DDP over the "dp" slice turns each DTensor parameter into a parameter of its local shard, which after the
    # first forward the module no longer lists: the rank still holds them, their gradients and their buckets.
    r = forecast_world(func, world_size=world_size, with_torch_tracker=True)
    assert r.strategy == "DDP+TP" and (r.params_bytes, r.grads_bytes, r.buckets_bytes) == (params, params, params)
    assert r.total_bytes == r.tracker_bytes  # MemTracker on the same fake step, to the byte
    assert not dist.is_initialized() and DistributedDataParallel.__init__ is ORIGINAL_INIT


def test_ddp_with_tensor_parallelism_parameters_are_found_after_the_module_stops_listing_them() -> None:
    with fake_cluster(2):
        model, x, _ = job("ddp_tp")()
        model(x).sum().backward()
        assert list(model.parameters()) == []  # torch's DDP+TP: DTensor attributes from the first forward on
        found = rank_parameters(model)
    assert len(found) == 12 and sum(p.numel() * 4 for p in found) == 3 * TP2_BLOCK
    assert all(p.grad is not None for p in found)


def test_ddp_with_tensor_parallelism_graph_shows_each_local_parameter_and_its_whole() -> None:
    with fake_cluster(2):
        traced = trace_rank_step(rank_step(job("ddp_tp")()), rank=0, world_size=2)
    leaves = [n.tensor for n in traced.graph.nodes if n.kind.name == "LEAF" and n.tensor is not None]
    assert len(leaves) == 12 and sum(t.bytes for t in leaves) == 3 * TP2_BLOCK == traced.memory.params_bytes
    assert traced.graph.rank is not None and traced.graph.rank.strategy == traced.memory.strategy == "DDP+TP"
    shardings = sorted({t.sharding for t in leaves if t.sharding is not None})
    assert len(shardings) == 4  # up's weight and bias, down's weight and bias: the same in every block
    assert all(s.endswith("on mesh (tp=2); its local shard, as DDP holds it") for s in shardings)
    assert "Shard(dim=0) of (256, 64) on mesh (tp=2); its local shard, as DDP holds it" in shardings  # up.weight
    assert "Replicate() of (64,) on mesh (tp=2); its local shard, as DDP holds it" in shardings  # down.bias


def test_ddp_with_tensor_parallelism_graph_names_each_local_parameter_as_torch_listed_it() -> None:
    # torch's own listing before the first forward (after it, the module lists none) is the oracle for the names;
    # the module boxes hold the local bytes that MemTracker counts as the rank's parameters
    with fake_cluster(2):
        model, x, optimizer = job("ddp_tp")()
        listed = {name: p.numel() * p.element_size() for name, p in model.named_parameters()}
        traced = trace_rank_step(rank_step((model, x, optimizer)), rank=0, world_size=2)
        with MemTracker() as tracker:
            # MemTracker files a module's parameters as PARAM: handed DDP's local ones in a list of its own
            tracker.track_external(model, optimizer, torch.nn.ParameterList(rank_parameters(model)))
            model(x).sum().backward()
            optimizer.step()
        tracked = tracker.get_tracker_snapshot("peak")[torch.device("cpu")][_MemRefType.PARAM]
    assert len(listed) == 12 and list(model.parameters()) == []
    leaves = {n.name: n.tensor.bytes for n in traced.graph.nodes
              if n.kind.name == "LEAF" and n.tensor is not None and n.tensor.sharding is not None}
    assert leaves == listed  # every one named, "module.0.up.weight" ..., with its local bytes
    boxes = {m.name: m.param_bytes for m in traced.graph.modules}
    assert boxes["module.0.up"] == listed["module.0.up.weight"] + listed["module.0.up.bias"]
    assert boxes[""] == sum(listed.values()) == tracked == 3 * TP2_BLOCK


def tp_block(tp: int) -> int:
    """A block's local parameter bytes, TP `tp` ways: up's weight and bias and down's weight split, down's bias
    replicated."""
    return (D * 4 * D // tp + 4 * D // tp + 4 * D * D // tp + D) * 4


def test_what_if_rows_of_ddp_with_tensor_parallelism_are_the_tp_step_plus_ddp_s_buckets() -> None:
    # The oracle: MemTracker on the same fake step without DDP (TP alone), plus DDP's buckets, one copy of the
    # local gradients (bytes from the shapes). MemTracker on the DDP+TP step itself reads below beyond 2 ranks:
    # it learns of each bucket only when it is all-reduced, after the peak.
    rows = what_if({"ddp": job("ddp"), "ddp_tp": job("ddp_tp"), "ddp_tp_dp": job("ddp_tp_dp")}, world_size=4)
    assert [(r.label, r.memory.strategy if r.memory else None) for r in rows] == [
        ("ddp", "DDP"), ("ddp_tp", "DDP+TP"), ("ddp_tp_dp", "DDP+TP")]
    ddp, tp4, dp4 = (r.memory for r in rows)
    assert ddp is not None and tp4 is not None and dp4 is not None
    assert dp4.total_bytes == ddp.total_bytes  # dp 4 x tp 1: every rank holds whole tensors, as plain DDP
    tp_alone = forecast_world(job("tp"), world_size=4, with_torch_tracker=True)
    assert tp_alone.tracker_bytes is not None and tp4.buckets_bytes == tp4.params_bytes == 3 * tp_block(4)
    assert tp4.total_bytes == tp_alone.tracker_bytes + 3 * tp_block(4) == 564_280
    assert "DDP+TP" in format_what_ifs(rows).splitlines()[2]


def test_verify_of_ddp_with_tensor_parallelism_beyond_two_ranks_says_the_tracker_sees_buckets_late() -> None:
    check = verify_world(f"{dist_jobs.__file__}:ddp_tp", job("ddp_tp"), world_size=8)
    predicted = forecast_world(job("ddp_tp"), world_size=8)
    assert check.method == "fake cluster of 8, MemTracker (sees each DDP bucket once all-reduced: up to 49.1 KiB " \
                           "below)"
    assert check.tracker_bytes is not None
    assert check.tracker_bytes < predicted.total_bytes <= check.tracker_bytes + predicted.buckets_bytes
    assert predicted.buckets_bytes == 3 * tp_block(8)


def test_ddp_with_tensor_parallelism_on_a_mesh_smaller_than_the_world_is_refused_in_words() -> None:
    with pytest.raises(DistributedError, match=r"the mesh \(2, 2\) of parameter 'module.0.up.weight' covers 4 of the "
                                               r"8 ranks: the mesh must split the 8 ranks exactly"):
        forecast_world(ddp_tp_on((2, 2)), world_size=8)
    assert not dist.is_initialized()
