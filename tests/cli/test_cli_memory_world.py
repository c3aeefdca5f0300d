"""`graphviz-app memory SCRIPT.py:FUNC --world-size 8,64`: per-rank forecasts, --json, errors a person can act on."""

from __future__ import annotations

import json
from pathlib import Path

import dist_jobs
import pytest

from graphviz_app.cli import commands as cli
from graphviz_app.tracing.distributed.fake_cluster import forecast_world

JOBS = Path(dist_jobs.__file__)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # the script worker starts and imports torch
def test_json_has_one_entry_per_world_size_equal_to_the_library_forecast(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{JOBS}:fsdp", "--world-size", "2,8", "--device", "meta", "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    entries = report["world_sizes"]
    assert [e["world_size"] for e in entries] == [2, 8]
    for entry in entries:
        library = forecast_world(dist_jobs.job("fsdp"), world_size=entry["world_size"])
        assert entry["predicted_peak_bytes"] == library.peak_bytes
        assert entry["total_bytes"] == library.total_bytes
        assert entry["params_bytes"] + entry["optimizer_bytes"] + entry["inputs_bytes"] + entry["buffers_bytes"] \
            + entry["buckets_bytes"] + entry["predicted_peak_bytes"] == entry["total_bytes"]
    assert "NCCL" in report["not_modelled"]


@pytest.mark.slow
def test_the_table_has_a_row_per_world_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{JOBS}:fsdp_tp", "--world-size", "4,8"], capsys)
    assert code == 0
    rows = [line.split()[:3] for line in out.splitlines() if line[:1].isdigit()]
    assert rows == [["4", "0", "FSDP+TP"], ["8", "0", "FSDP+TP"]]
    assert "not modelled: NCCL" in out


@pytest.mark.parametrize(("extra", "message"), [
    (["--world-size", "0"], "--world-size expects numbers of ranks separated by commas"),
    (["--world-size", "8,x"], "--world-size expects numbers of ranks"),
    (["--world-size", "8", "--measure"], "--measure cannot go with it"),
    (["--world-size", "8", "--batch", "4"], "--batch cannot go with it"),
    (["--world-size", "8", "--device", "cpu"], "--world-size forecasts on fake tensors (meta)"),
    (["--world-size", "8", "--optimizer", "adam"], "takes the precision and optimizer from FUNC"),
])
def test_flags_that_cannot_go_with_world_sizes_are_refused_before_anything_runs(
        extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{JOBS}:fsdp", *extra], capsys)
    assert code == 2 and message in err, err


@pytest.mark.slow
def test_a_func_that_raises_on_the_fake_cluster_is_named_with_the_world_size(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{JOBS}:ddp", "--world-size", "4"], capsys)
    assert code == 2 and "failed at world size 4: DDP cannot run on fake tensors" in err, err
