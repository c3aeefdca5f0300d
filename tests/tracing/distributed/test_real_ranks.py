"""Real 2-rank gloo runs: every rank measured, checked against PyTorch's tracker on the same step and against the
fake-cluster forecast; a rank that raises or a job that hangs stops every rank.

Why the comparisons are close: PyTorch's tracker follows the very step our counter follows, in the same process
at the same time. Our figure was equal across ranks and repeated runs, to the byte; the tracker's simultaneous
peak can come out one collective buffer higher in some runs (see the first test).
"""

from __future__ import annotations

from pathlib import Path

import dist_jobs
import pytest

from graphviz_app.errors import DistributedError
from graphviz_app.tracing.distributed.fake_cluster import forecast_world
from graphviz_app.tracing.distributed.ranks import run_ranks

JOBS = str(Path(dist_jobs.__file__))

pytestmark = pytest.mark.slow  # two fresh processes that import torch: 15-30 s a run on a busy machine


@pytest.mark.parametrize("name", ["fsdp", "fsdp_keep", "fsdp_mixed", "fsdp_keep_mixed", "tp", "fsdp_tp"])
def test_every_rank_agrees_with_torch_tracker_and_the_fake_cluster_forecast(name: str) -> None:
    table = run_ranks(f"{JOBS}:{name}", nprocs=2, with_torch_tracker=True, timeout_s=400)
    forecast = forecast_world(dist_jobs.job(name), world_size=2)
    assert [r.rank for r in table.ranks] == [0, 1]
    for r in table.ranks:
        assert r.tracker_bytes is not None
        # The tracker's peak is what was live at one moment, and on gloo a collective's buffers are let go when
        # gloo's worker thread is done with them: in some runs (1 in 4 with a low gc threshold here, once in CI)
        # the tracker's peak fell where one more buffer was still held (+59,136 and +67,008 bytes on fsdp_mixed,
        # under its largest buffer, 132,352). Our figure was the same in every run.
        held_late = max((e.bytes for e in r.collectives), default=0)
        assert -0.03 * r.tracker_bytes <= r.tracker_bytes - r.total_bytes <= 0.03 * r.tracker_bytes + held_late, \
            (name, r.rank, r, r.tracker_bytes)
        assert abs(forecast.total_bytes - r.total_bytes) <= 0.03 * r.total_bytes, (name, r.rank, forecast, r)
        assert r.params_bytes == forecast.params_bytes  # the rank holds the local shards the forecast counts
    assert table.peak_rank == max(table.ranks, key=lambda r: (r.total_bytes, -r.rank)).rank


@pytest.mark.parametrize("name", ["ddp", "ddp_view", "ddp_unused", "ddp_static"])
def test_ddp_counts_its_buckets_whichever_the_bucket_view(name: str) -> None:
    table = run_ranks(f"{JOBS}:{name}", nprocs=2, with_torch_tracker=True, timeout_s=400)
    # The fake cluster runs DDP's own reducer on fake tensors: the same buckets, the same step, and MemTracker
    # following it there reads what it reads on the real ranks (equal to the byte in every run here).
    forecast = forecast_world(getattr(dist_jobs, name), world_size=2, with_torch_tracker=True)
    full = sum(p.numel() * 4 for p in dist_jobs.plain_model().parameters())
    for r in table.ranks:
        assert r.strategy == "DDP" and r.params_bytes == full and r.buckets_bytes == full
        assert r.tracker_bytes is not None and forecast.tracker_bytes is not None
        assert abs(forecast.total_bytes - r.total_bytes) <= 0.01 * r.total_bytes, (forecast, r)
        assert abs(forecast.tracker_bytes - r.tracker_bytes) <= 0.01 * r.tracker_bytes, (forecast, r)
        assert [e.bytes for e in forecast.collectives] == [e.bytes for e in r.collectives]  # one per bucket
        if name == "ddp":  # .grad a copy beside its bucket: MemTracker sees both
            assert r.total_bytes == r.tracker_bytes
        elif name != "ddp_view":
            # MemTracker also sees the reducer's maps of used parameters (one int32 per parameter, two of them
            # with find_unused_parameters, one with static_graph), made at construction: not in our total.
            assert 0 < r.tracker_bytes - r.total_bytes <= 2 * 4 * 12
        else:
            # .grad a view into its bucket: MemTracker first sees the bucket when the all-reduce returns it,
            # late in backward; the bucket exists from DDP's construction, so ours is higher by at most it.
            assert r.tracker_bytes < r.total_bytes <= r.tracker_bytes + r.buckets_bytes
            assert any("gradient_as_bucket_view=True" in n for n in r.notes)
    view = run_ranks(f"{JOBS}:ddp_view", nprocs=2, timeout_s=400) if name == "ddp" else None
    if view is not None:  # the bucket view saves the gradients' copy: one parameter-sized tensor less at the peak
        assert view.ranks[0].peak_bytes < table.ranks[0].peak_bytes


@pytest.mark.parametrize("name", ["ddp_tp", "ddp_tp_dp"])  # meshes dp 1 x tp 2 and dp 2 x tp 1
def test_ddp_with_tensor_parallelism_counts_the_local_parameters_as_memtracker_does(name: str) -> None:
    # DDP over the "dp" slice turns the DTensor parameters into parameters of their local shards, which the
    # module stops listing after its first forward; before they were counted, the total was 396,800 bytes below
    # MemTracker (dp 2 x tp 1). MemTracker is told of them too (it would first see a bias when the optimizer
    # steps it, 256 bytes below at its peak); then both figures were equal to the byte on both meshes.
    table = run_ranks(f"{JOBS}:{name}", nprocs=2, with_torch_tracker=True, timeout_s=400)
    forecast = forecast_world(getattr(dist_jobs, name), world_size=2)
    for r in table.ranks:
        assert r.tracker_bytes is not None and r.strategy == "DDP+TP"
        held_late = max((e.bytes for e in r.collectives), default=0)  # as in the first test: gloo's late frees
        assert 0 <= r.tracker_bytes - r.total_bytes <= held_late, (name, r.rank, r, r.tracker_bytes)
        assert r.params_bytes == r.grads_bytes == r.buckets_bytes == forecast.params_bytes > 0
        assert r.total_bytes == forecast.total_bytes, (name, r.rank, forecast, r)


def test_a_rank_that_raises_stops_every_rank_and_says_which() -> None:
    with pytest.raises(DistributedError, match=r"rank 1 of .*raises_on_rank_1 raised: .*ValueError: rank 1 cannot "
                                               r"build its model[\s\S]*every rank was stopped"):
        run_ranks(f"{JOBS}:raises_on_rank_1", nprocs=2, timeout_s=400)


def test_ranks_that_do_not_finish_in_time_are_stopped() -> None:
    with pytest.raises(DistributedError, match=r"did not finish in 0.5 s: every rank was stopped"):
        run_ranks(f"{JOBS}:fsdp", nprocs=2, timeout_s=0.5)
