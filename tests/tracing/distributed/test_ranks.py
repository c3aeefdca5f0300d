"""What needs no second process: measuring outside a job, loading SCRIPT.py:FUNC, the table of ranks."""

from __future__ import annotations

from pathlib import Path

import dist_jobs
import pytest
import torch

from graphviz_app.analysis.distributed import RankMemory, format_ranks, rank_table
from graphviz_app.errors import DistributedError
from graphviz_app.tracing.distributed.rank_step import rank_step
from graphviz_app.tracing.distributed.ranks import load_func, measure_rank, run_ranks

JOBS = str(Path(dist_jobs.__file__))


def test_measuring_outside_a_job_says_how_to_start_one() -> None:
    with pytest.raises(DistributedError, match="no process group is initialised: start the script with torchrun"):
        measure_rank((torch.nn.Linear(2, 1), torch.ones(3, 2)))


@pytest.mark.parametrize(("target", "match"), [
    ("job.py", r"expected SCRIPT.py:FUNC, got 'job.py'"),
    ("missing.py:f", r"missing.py: no such script"),
    (f"{JOBS}:nothing_here", r"has no function 'nothing_here'"),
])
def test_bad_targets_are_refused_before_any_rank_starts(target: str, match: str) -> None:
    with pytest.raises(DistributedError, match=match):
        run_ranks(target, nprocs=2)


def test_a_script_is_loaded_and_its_func_found() -> None:
    assert load_func(f"{JOBS}:fsdp").__name__ == "fsdp"


@pytest.mark.parametrize(("result", "match"), [
    (3, r"returned int: return \(model, x\)"),
    ({"args": ()}, r"returned a dict with keys \['args'\]: it needs 'model'"),
    ((torch.ones(2), torch.ones(2)), r"returned a Tensor as the model: return an nn.Module"),
    ((torch.nn.Linear(2, 1), torch.ones(2), 5), r"returned int third"),
])
def test_a_func_result_that_is_no_step_says_what_to_return(result: object, match: str) -> None:
    with pytest.raises(DistributedError, match=match):
        rank_step(result)


def test_the_table_names_the_peak_rank_and_marks_it() -> None:
    ranks = [RankMemory(r, 3, "FSDP2", 1000 + 100 * (r == 1), 10, 10, 20, 0, 5) for r in (2, 0, 1)]
    table = rank_table(ranks)
    assert [r.rank for r in table.ranks] == [0, 1, 2] and table.peak_rank == 1
    lines = str(table).splitlines()
    assert lines[2].endswith("<- peak") and not lines[1].endswith("<- peak")
    assert format_ranks(ranks[:1]).splitlines()[1].split()[:3] == ["3", "2", "FSDP2"]
