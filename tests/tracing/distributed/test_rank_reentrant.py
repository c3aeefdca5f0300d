"""A rank whose blocks run under `checkpoint(..., use_reentrant=True)`, with a parameter used inside and outside
them: `measure` inside the rank against PyTorch's trackers (MemTracker for DDP, FSDPMemTracker for FSDP2).

The nested backward of a reentrant checkpoint runs the outer graph's AccumulateGrad node of such a parameter (torch
keeps one per tensor); its marker must start no interval there, and the replay needs what the checkpoint's node
made (its recomputed block, its nested `.grad`), as the single-process measure has them (replay3).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import dist_jobs
import pytest
from torch.distributed.device_mesh import init_device_mesh

from graphviz_app.tracing.distributed.fake_cluster import fake_cluster
from graphviz_app.tracing.distributed.rank_graph import traced_rank_step
from graphviz_app.tracing.distributed.rank_step import rank_step, train_step

JOBS = str(Path(dist_jobs.__file__))


@pytest.mark.parametrize("batch", [1, 8])
def test_a_reentrant_ddp_rank_is_measured_and_replayed_as_memtracker_sees_it(batch: int) -> None:
    with fake_cluster(2):
        figures = dist_jobs.measure_beside_tracker(dist_jobs.build_reentrant(None, batch), "ddp_reentrant", True)
    # Before: measured = MemTracker, but the replay missed every recomputed block (57,344 B at batch 1 and
    # 100,352 at 8, against 82,436 and 146,180 measured)
    assert abs(figures["measured"] - figures["tracker"]) <= 0.001 * figures["tracker"], figures
    assert figures["replayed"] == figures["measured"], figures


@pytest.mark.parametrize("name", ["ddp", "fsdp"])
def test_the_nested_backward_starts_no_step_of_its_own(name: str) -> None:
    with fake_cluster(2):
        mesh = None if name == "ddp" else init_device_mesh("cpu", (2,))
        step = rank_step(dist_jobs.build_reentrant(mesh))
        for _ in range(3):
            train_step(step)
        trace = traced_rank_step(step, optimizer=False)
    labels = Counter(s.node for s in trace.measured.steps)
    assert max(labels.values()) == 1, labels  # before: DDP's `scale` leaf was marked 4 times, 3 inside the blocks
    checkpoints = [n for n in trace.graph.nodes if n.name == "CheckpointFunctionBackward"]
    prefix = "module." if name == "ddp" else ""  # DDP's wrapped module
    assert [n.module for n in checkpoints] == [f"{prefix}blocks.{i}" for i in (2, 1, 0)]
    block = 4 * (16 * 64 + 64 + 64 * 16 + 16)  # a block's unsharded .grad, made by its nested backward
    first = dict(checkpoints[0].attrs)
    if name == "ddp":  # the first nested backward also makes `scale`'s .grad (16 floats), on the graph's leaf
        scale = next(n.id for n in trace.graph.nodes if n.name.endswith("scale"))
        assert first["nested backward .grad"] == str(block + 64), first
        assert first["nested backward .grad of graph leaves"] == f"{scale}=64", first
    else:  # FSDP2: the block's gradients reach its unsharded parameters, no leaf of the graph
        assert first["nested backward .grad"] == str(block), first
    assert all(dict(n.attrs)["nested backward .grad"] == str(block) for n in checkpoints[1:]), checkpoints
    assert max(s.peak for s in trace.measured.steps) == trace.measured.peak_bytes


@pytest.mark.parametrize("batch", [1, 8])
def test_a_reentrant_fsdp_rank_is_measured_as_fsdpmemtracker_sees_it(batch: int) -> None:
    with fake_cluster(2):
        mesh = init_device_mesh("cpu", (2,))
        figures = dist_jobs.measure_beside_tracker(dist_jobs.build_reentrant(mesh, batch), "fsdp_reentrant", True)
    assert abs(figures["measured"] - figures["tracker"]) <= 0.01 * figures["tracker"], figures


@pytest.mark.parametrize(("batch", "replayed"), [(1, 57_316), (8, 124_644)])
def test_the_replay_of_a_reentrant_fsdp_rank_is_what_it_measured(batch: int, replayed: int) -> None:
    with fake_cluster(2):
        figures = dist_jobs.measure_beside_tracker(dist_jobs.build_reentrant(init_device_mesh("cpu", (2,)), batch),
                                                   "fsdp_reentrant", True)
    # Before: the nested backward's .grad (the unit's unsharded gradients, 8,512 B) outlived the unit's
    # post-backward, which reduce-scatters and frees them: 69,572 B at batch 1 and 133,316 at 8
    assert figures["replayed"] == figures["measured"] == replayed, figures
    assert abs(figures["replayed"] - figures["tracker"]) <= 0.01 * figures["tracker"], figures


@pytest.mark.parametrize(("batch", "replayed"), [(1, 56_804), (8, 120_548)])
def test_the_replay_of_fsdp_units_run_by_reentrant_checkpoints_is_what_it_measured(batch: int, replayed: int) -> None:
    with fake_cluster(2):
        mesh = init_device_mesh("cpu", (2,))
        figures = dist_jobs.measure_beside_tracker(dist_jobs.build_checkpointed_units(mesh, batch),
                                                   "fsdp_checkpointed_units", True)
    # Before: no post-backward of a unit whose whole backward runs inside its checkpoint's node, so every
    # unit's parameters stayed gathered: 74,340 B at batch 1 (+31%), 137,572 at 8 (+14%)
    assert figures["replayed"] == figures["measured"] == replayed, figures
    assert abs(figures["measured"] - figures["tracker"]) <= 0.001 * figures["tracker"], figures


@pytest.mark.slow  # two fresh processes that import torch
@pytest.mark.parametrize("name", ["ddp_reentrant", "fsdp_reentrant", "fsdp_checkpointed_units"])
def test_a_reentrant_rank_on_real_gloo_ranks_is_measured_as_torch_tracker_sees_it(name: str) -> None:
    ranks = dist_jobs_ranks(name)
    for rank, figures in enumerate(ranks):
        assert abs(figures["measured"] - figures["tracker"]) <= 0.01 * figures["tracker"], (rank, figures)
        assert figures["replayed"] == figures["measured"], (rank, figures)


def dist_jobs_ranks(name: str) -> list[dict[str, int]]:
    from graphviz_app.tracing.distributed.ranks import call_ranks

    return call_ranks(f"{JOBS}:{name}", per_rank="dist_jobs:least_beside_tracker", nprocs=2, timeout_s=400)
