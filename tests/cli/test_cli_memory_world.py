"""`graphviz-app memory SCRIPT.py:FUNC --world-size 8,64`: per-rank forecasts, --json, errors a person can act on."""

from __future__ import annotations

import json
from pathlib import Path

import dist_jobs
import pytest

from graphviz_app.cli import commands as cli
from graphviz_app.tracing.distributed.fake_cluster import forecast_world, largest_batch_world

JOBS = Path(dist_jobs.__file__)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as e:  # refused by the parser (a size not written plainly)
        code = e.code if isinstance(e.code, int) else -1
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
    (["--world-size", "0"], "argument --world-size: expected a whole number from 1"),
    (["--world-size", "8,x"], "argument --world-size: expected a whole number"),
    (["--world-size", "2,4", "--measure"], "give one world size of at most 8"),
    (["--world-size", "16", "--measure"], "give one world size of at most 8"),
    (["--world-size", "8", "--checkpoint"], "--checkpoint cannot go with it"),
    (["--world-size", "8", "--seq-len", "4"], "--seq-len cannot go with it"),
    (["--world-size", "8", "--batch", "0"], "argument --batch: expected a whole number from 1"),
    (["--world-size", "8", "--budget", "lots"], "--budget: "),
    (["--world-size", "2", "--measure", "--batch", "4"], "leave out --batch and --budget"),
    (["--world-size", "8", "--device", "cpu"], "--world-size forecasts on fake tensors (meta)"),
    (["--world-size", "8", "--optimizer", "adam"], "takes the precision and optimizer from FUNC"),
    (["--world-size", "2", "--verify", "--batch", "4"], "leave out --batch, --budget and --measure"),
    (["--world-size", "2", "--what-if", "fsdp_keep", "--budget", "1GiB"], "leave out --batch and --budget"),
    (["--world-size", "2", "--what-if", "fsdp_keep,no-such"], "argument --what-if: expected function names"),
    (["--what-if", "fsdp_keep"], "--what-if compares setups of a distributed job: add --world-size N"),
])
def test_flags_that_cannot_go_with_world_sizes_are_refused_before_anything_runs(
        extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{JOBS}:fsdp", *extra], capsys)
    assert code == 2 and message in err, err


@pytest.mark.slow
def test_a_func_that_raises_on_the_fake_cluster_is_named_with_the_world_size(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{JOBS}:ddp_hooked", "--world-size", "4"], capsys)
    assert code == 2 and "ddp_hooked failed at world size 4: a DDP communication hook registered in " in err, err


@pytest.mark.slow  # two real gloo ranks, each a fresh process importing torch, started from the CLI's worker
def test_measure_runs_real_ranks_and_each_equals_the_forecast_and_the_tracker(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{JOBS}:fsdp", "--world-size", "2", "--measure", "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    forecast = report["world_sizes"][0]
    assert [m["rank"] for m in report["measured"]] == [0, 1] and report["peak_rank"] == 0
    for measured in report["measured"]:
        assert measured["total_bytes"] == forecast["total_bytes"] == measured["tracker_bytes"]
        assert measured["tracker"] == "FSDPMemTracker"


@pytest.mark.slow
def test_batches_and_budget_give_an_entry_per_world_size_and_batch_and_the_largest_batch_per_gpu(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{JOBS}:fsdp", "--world-size", "8", "--batch", "2,8", "--budget", "3000000",
                         "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert [(e["world_size"], e["batch"]) for e in report["world_sizes"]] == [(8, 2), (8, 8)]
    for entry in report["world_sizes"]:
        library = forecast_world(dist_jobs.job("fsdp"), world_size=8, batch=entry["batch"])
        assert entry["total_bytes"] == library.total_bytes
    assert report["largest_batch"] == [
        {"world_size": 8, "batch": largest_batch_world(dist_jobs.job("fsdp"), world_size=8, budget_bytes=3_000_000)}]


@pytest.mark.slow  # per row: two real gloo ranks (each a fresh process importing torch) started from the worker
def test_verify_checks_each_what_if_row_on_real_ranks_and_prints_predicted_against_verified(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{JOBS}:fsdp", "--world-size", "2", "--what-if", "tp,ddp", "--verify",
                         "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert [r["setup"] for r in report["what_if"]] == ["fsdp", "tp", "ddp"]
    assert report["what_if"][2]["strategy"] == "DDP"  # forecast on the fake cluster like the others
    rows = {r["setup"]: r for r in report["verified"]}
    for name in ("fsdp", "tp", "ddp"):
        row = rows[name]
        assert row["method"].startswith("2 real gloo rank(s)")
        tracker = row["verified_total_bytes"]  # the tracker on the real ranks, one collective buffer of slack
        assert abs(row["predicted_total_bytes"] - tracker) <= 0.03 * tracker, row
    assert rows["ddp"]["predicted_total_bytes"] == rows["ddp"]["measured_total_bytes"]  # our count on the ranks


@pytest.mark.slow  # per row: two real gloo ranks (each a fresh process importing torch) started from the worker
def test_verify_checks_ddp_with_tensor_parallelism_rows_on_real_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{JOBS}:ddp", "--world-size", "2", "--what-if", "ddp_tp,ddp_tp_dp", "--verify",
                         "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert [(r["setup"], r["strategy"]) for r in report["what_if"]] == [
        ("ddp", "DDP"), ("ddp_tp", "DDP+TP"), ("ddp_tp_dp", "DDP+TP")]
    rows = {r["setup"]: r for r in report["verified"]}
    for name in ("ddp", "ddp_tp", "ddp_tp_dp"):
        row = rows[name]
        assert row["method"].startswith("2 real gloo rank(s), MemTracker"), row
        assert row["predicted_total_bytes"] == row["measured_total_bytes"], row  # our count on the real ranks
        tracker = row["verified_total_bytes"]  # MemTracker following each real rank's step
        assert abs(row["predicted_total_bytes"] - tracker) <= 0.03 * tracker, row
    # dp 2 x tp 1 is plain DDP's step; dp 1 x tp 2 holds half of the two split weights
    assert rows["ddp_tp_dp"]["predicted_total_bytes"] == rows["ddp"]["predicted_total_bytes"]
    assert rows["ddp_tp"]["predicted_total_bytes"] < rows["ddp"]["predicted_total_bytes"]


@pytest.mark.slow
def test_verify_beyond_two_ranks_checks_on_the_fake_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{JOBS}:fsdp", "--world-size", "8", "--what-if", "fsdp_keep", "--verify"],
                        capsys)
    assert code == 0
    table = out.split("verified against PyTorch's tracker (rank 0's total):")[1].splitlines()
    assert table[1].split()[:2] == ["setup", "predicted"]
    for line, name in zip(table[2:4], ("fsdp @ 8", "fsdp_keep @ 8"), strict=True):
        assert line.startswith(name) and "+0.00%" in line and "fake cluster of 8, FSDPMemTracker" in line, line


@pytest.mark.slow
def test_output_writes_rank_0_s_step_into_the_viewer_with_its_collectives(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    import base64
    import gzip
    import re

    out_file = tmp_path / "rank0.html"
    code, _, err = _run(["memory", f"{JOBS}:fsdp", "--world-size", "4", "-o", str(out_file)], capsys)
    assert code == 0 and f"wrote {out_file}" in err
    found = re.search(r'id="gv-payload">([^<]*)<', out_file.read_text(encoding="utf-8"))
    assert found is not None
    data = json.loads(gzip.decompress(base64.b64decode(found[1])))
    live = data["series"][0]
    forecast = forecast_world(dist_jobs.job("fsdp"), world_size=4)
    assert [e["op"] for e in live["events"]] == [c.op for c in forecast.collectives]
    assert live["notes"][0].startswith("rank 0 of 4 (FSDP2)") and "sharding" in data["graph"]["tensors"]


def test_output_with_world_sizes_must_be_html(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{JOBS}:fsdp", "--world-size", "4", "-o", "rank0.svg"], capsys)
    assert code == 2 and "-o writes the interactive viewer of rank 0's step: end the name in .html" in err, err
