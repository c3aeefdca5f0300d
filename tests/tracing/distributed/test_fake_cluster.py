"""The fake-cluster forecast against PyTorch's own trackers under FakeTensorMode and the same fake process group."""

from __future__ import annotations

from typing import Any

import dist_jobs
import pytest
import torch
import torch.distributed as dist
from dist_jobs import BATCH, BUILDERS, SEQ, D, job, mesh_for, plain_model
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker

from graphviz_app.analysis.distributed import format_what_ifs
from graphviz_app.errors import DistributedError
from graphviz_app.tracing.distributed.fake_cluster import (
    fake_cluster,
    forecast_world,
    forecast_worlds,
    largest_batch_world,
)
from graphviz_app.tracing.distributed.what_if import what_if


def _total(snapshot: dict[Any, Any]) -> int:
    (per_device,) = snapshot.values()
    return int(per_device["Total"])


def torch_tracker_peak(name: str, world_size: int, batch: int | None = None) -> int:
    """The peak of rank 0's steady step by FSDPMemTracker (FSDP jobs) or MemTracker (others), in the same fake
    process group and FakeTensorMode (`fake_cluster` sets them up; torch's trackers count), looped as torch's
    docs loop them."""
    with fake_cluster(world_size):
        model, x, opt = BUILDERS[name](mesh_for(name, world_size))
        if batch is not None:
            x = torch.randn(batch, SEQ, D)
        if name.startswith("fsdp"):
            tracker: MemTracker = FSDPMemTracker(model, opt)
            tracker.track_inputs((x,))
            with tracker:
                for i in range(2):
                    model(x).sum().backward()
                    opt.step()
                    opt.zero_grad()
                    if i == 0:
                        tracker.reset_mod_stats()
        else:
            model(x).sum().backward()  # MemTracker follows one step: the warm-up makes the optimizer state
            opt.step()
            opt.zero_grad()
            tracker = MemTracker()
            tracker.track_external(model, opt, x)
            with tracker:
                model(x).sum().backward()
                opt.step()
                opt.zero_grad()
        return _total(tracker.get_tracker_snapshot("peak"))


@pytest.mark.parametrize("name", ["fsdp", "fsdp_keep", "fsdp_mixed", "fsdp_keep_mixed", "tp", "fsdp_tp"])
def test_world_size_2_within_1_percent_of_torch_tracker(name: str) -> None:
    ours = forecast_world(job(name), world_size=2)
    theirs = torch_tracker_peak(name, 2)
    assert abs(ours.total_bytes - theirs) <= 0.01 * theirs, (name, ours.total_bytes, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [8, 64])
@pytest.mark.parametrize("name", ["fsdp", "fsdp_keep_mixed", "tp", "fsdp_tp"])
def test_world_sizes_8_and_64_within_3_percent_of_torch_tracker(name: str, world_size: int) -> None:
    ours = forecast_world(job(name), world_size=world_size)
    theirs = torch_tracker_peak(name, world_size)
    assert abs(ours.total_bytes - theirs) <= 0.03 * theirs, (name, world_size, ours.total_bytes, theirs)


def test_parameters_per_rank_are_the_local_shards() -> None:
    full = sum(p.numel() * 4 for p in plain_model().parameters())
    two, eight = forecast_worlds(job("fsdp"), [2, 8])
    # FSDP2 pads each parameter's dim 0 to a multiple of the world size; these dims divide evenly.
    assert (two.params_bytes, eight.params_bytes) == (full // 2, full // 8)
    assert two.strategy == eight.strategy == "FSDP2"
    assert two.optimizer_bytes == 2 * two.params_bytes + 4 * 12  # Adam: 2 states, a 4-byte step per parameter


@pytest.mark.parametrize(("name", "backward_gathers"), [("fsdp", 3), ("fsdp_keep", 0)])
def test_fsdp_collectives_per_unit_follow_reshard_after_forward(name: str, backward_gathers: int) -> None:
    r = forecast_world(job(name), world_size=4)
    ops = [(e.op, e.phase) for e in r.collectives]
    # Three blocks hold every parameter (the root holds none of its own: no collective for it). Each is
    # all-gathered before its forward, again before its backward when resharded after forward, and its
    # gradients reduce-scattered after its backward.
    gathers = [p for op, p in ops if op == "_allgather_base_"]
    scatters = [p for op, p in ops if op == "_reduce_scatter_base_"]
    assert gathers == ["forward"] * 3 + ["backward"] * backward_gathers, ops
    assert scatters == ["backward"] * 3, ops
    block = sum(p.numel() * 4 for p in plain_model(1).parameters())
    assert {e.bytes for e in r.collectives} == {block}  # the unsharded block: all-gather output, reduce-scatter input


def test_a_func_that_raises_names_itself_and_the_world_size() -> None:
    def broken() -> Any:
        raise RuntimeError("no such layer")

    with pytest.raises(DistributedError, match=r"broken failed at world size 4: RuntimeError: no such layer"):
        forecast_world(broken, world_size=4, where="broken")
    assert not dist.is_initialized()


@pytest.mark.parametrize(("shape", "match"), [
    ((3, 2), r"the mesh \(3, 2\) of parameter '0.up.weight' covers 6 of the 8 ranks: the mesh must split the 8"),
    ((5, 2), r"FUNC failed at world size 8: RuntimeError: Mesh should not be bigger.*must split the 8 ranks"),
])
def test_a_mesh_the_world_size_cannot_split_says_so(shape: tuple[int, int], match: str) -> None:
    def func() -> Any:
        return BUILDERS["fsdp_tp"](torch.distributed.device_mesh.init_device_mesh(
            "cpu", shape, mesh_dim_names=("dp", "tp")))

    with pytest.raises(DistributedError, match=match):
        forecast_world(func, world_size=8)
    assert not dist.is_initialized()


def test_a_func_returning_no_model_says_what_to_return() -> None:
    with pytest.raises(DistributedError, match=r"returned int: return \(model, x\)"):
        forecast_world(lambda: 3, world_size=2)


@pytest.mark.parametrize(("world_size", "match"), [(0, "positive whole number"), (2.5, "positive whole number")])
def test_bad_world_sizes_are_refused(world_size: Any, match: str) -> None:
    with pytest.raises(DistributedError, match=match):
        forecast_world(job("fsdp"), world_size=world_size)


def test_tensor_parallel_all_reduces_are_events_with_their_bytes() -> None:
    r = forecast_world(job("tp"), world_size=4)
    activation = BATCH * SEQ * D * 4  # the row-parallel output, summed over the ranks
    assert [(e.op, e.bytes, e.phase) for e in r.collectives] == (
        [("all_reduce", activation, "forward")] * 3
        # the column-parallel input's gradient, summed in backward; the first block's input needs none
        + [("all_reduce", activation, "backward")] * 2)


def test_what_if_keeps_every_setup_in_order_with_a_reason_where_it_has_no_figures() -> None:
    def bad_mesh() -> Any:
        return BUILDERS["fsdp_tp"](torch.distributed.device_mesh.init_device_mesh(
            "cpu", (3, 2), mesh_dim_names=("dp", "tp")))

    rows = what_if({"reshard": job("fsdp"), "keep": job("fsdp_keep"), "bf16": job("fsdp_mixed"),
                    "ddp": job("ddp"), "bad mesh": bad_mesh}, world_size=4)
    assert [r.label for r in rows] == ["reshard", "keep", "bf16", "ddp", "bad mesh"]
    reshard, keep, bf16, ddp, bad = (r.memory for r in rows)
    assert reshard is not None and keep is not None and bf16 is not None and ddp is not None and bad is None
    assert keep.peak_bytes > reshard.peak_bytes  # the unsharded blocks stay from forward to backward
    assert bf16.peak_bytes < reshard.peak_bytes  # half-size gathered parameters and activations
    # DDP holds every parameter, a bucket of the same size and Adam's two states of it, whatever the world size
    assert ddp.strategy == "DDP" and ddp.total_bytes > reshard.total_bytes
    assert "Mesh should not be bigger" in (rows[4].error or "")
    assert format_what_ifs(rows).splitlines()[-2].startswith("ddp")
    assert "bad mesh" in format_what_ifs(rows).splitlines()[-1]


@pytest.mark.slow
def test_the_largest_batch_per_gpu_fits_the_budget_by_fsdp_mem_tracker_and_one_more_does_not() -> None:
    budget = 3_000_000
    batch = largest_batch_world(job("fsdp"), world_size=8, budget_bytes=budget)
    assert batch > 1
    assert torch_tracker_peak("fsdp", 8, batch) <= budget < torch_tracker_peak("fsdp", 8, batch + 1)
    assert forecast_world(job("fsdp"), world_size=8, batch=batch).inputs_bytes == batch * SEQ * D * 4


def test_a_func_that_wraps_nothing_is_told_so_and_holds_the_whole_model() -> None:
    r = forecast_world(dist_jobs.no_process_group_needed, world_size=8)
    assert r.strategy == "replicated" and r.collectives == ()
    assert r.params_bytes == sum(p.numel() * 4 for p in plain_model(1).parameters())
    assert any("the model is not wrapped (no fully_shard, DDP or parallelize_module)" in n for n in r.notes)
