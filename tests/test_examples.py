"""Each example runs as a script (`__main__`, in this process) and says what it promises."""

from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


RunExample = Callable[..., str]


@pytest.fixture
def run_example(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunExample:
    """Run `examples/NAME --out OUT ARGS...` as a script (`__main__`), in this process; what it printed.

    In-process: a process of its own would load torch again, seconds apiece on a busy machine.
    """
    def run(name: str, out: Path, *args: str) -> str:
        script = EXAMPLES / name
        monkeypatch.setattr(sys, "argv", [str(script), "--out", str(out), *args])
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as e:  # argparse, or an explicit exit
            assert e.code in (0, None), capsys.readouterr().err
        return capsys.readouterr().out

    return run


def test_seed_example_prints_matching_hand_and_autograd_gradients(tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("seed_mean_square.py", tmp_path)
    assert "autograd     = [1.3333333730697632, 2.0, 2.6666667461395264]" in out
    assert "agree        = True" in out
    graph = json.loads((tmp_path / "seed_mean_square.json").read_text())
    ops = [n["name"] for n in graph["nodes"] if n["kind"] == "op"]
    assert ops == ["MeanBackward0", "AddBackward0", "PowBackward0", "AddBackward0"]
    assert (tmp_path / "seed_mean_square.png").read_bytes().startswith(b"\x89PNG")


def test_mlp_example_names_every_parameter(tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("mlp_named_parameters.py", tmp_path)
    assert "named leaves: ['2.bias', '2.weight', '0.bias', '0.weight']" in out
    svg = (tmp_path / "mlp_named_parameters.svg").read_text()
    assert "0.weight" in svg and "AddmmBackward0" in svg


def test_two_devices_example_runs_on_one_device(tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("two_devices.py", tmp_path)
    assert "devices: cpu -> cpu" in out or "cuda" in out
    assert "ToCopyBackward0" in (tmp_path / "two_devices.svg").read_text()


@pytest.mark.cuda
def test_two_devices_example_highlights_the_copy_on_a_gpu(tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("two_devices.py", tmp_path)
    assert "ops crossing devices (highlighted in red): ['ToCopyBackward0']" in out


def test_loss_accumulation_example_shows_the_graph_growing(tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("loss_accumulation_leak.py", tmp_path, "--steps", "3")
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    leaking = [int(row[1]) for row in rows]
    assert leaking == sorted(leaking) and leaking[0] < leaking[-1]
    assert all("0 nodes (a plain float)" in line for line in out.splitlines() if line.strip()[:1].isdigit())
    assert "from the graph: this graph repeats the same 4-op block 3 times over the same parameters" in out


@pytest.mark.slow
def test_memory_example_answers_the_seeds_questions_in_bytes(tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("memory_of_a_step.py", tmp_path, "--steps", "3")
    kept = [int(line.split()[1]) for line in out.splitlines() if line.strip()[:1].isdigit() and "(a float)" in line]
    assert len(kept) == 3 and kept[1] - kept[0] == kept[2] - kept[1] > 0  # the same bytes kept per step
    assert f"each step keeps {kept[1] - kept[0]} B more" in out
    assert "nothing saved, y.grad_fn is None" in out
    saved = next(line for line in out.splitlines() if "saved for backward: float32" in line).split()
    assert int(saved[4]) == 2 * int(saved[7])  # .half() saves half the bytes
    assert "where a CPU kernel is missing: ctc_loss" in out or "ctc_loss in half ran" in out


def test_memory_forecast_example_fits_a_batch_and_checkpoints(tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("memory_forecast_checkpoint.py", tmp_path, "--layers", "2")
    assert "largest batch within 64.0 MiB with Adam's state:" in out
    assert "(forecast on meta)" in out and out.count("bfloat16 autocast step peaks at") == 3
    assert "measured:" in out and "blocks." in out


def _compare_data(path: Path) -> dict:
    """The data a compare file carries (gzipped JSON in base64, in its payload element)."""
    import base64
    import gzip
    import re

    packed = re.search(r'id="gv-payload">([^<]*)<', path.read_text(encoding="utf-8"))
    assert packed is not None, f"{path} holds no payload"
    return json.loads(gzip.decompress(base64.b64decode(packed.group(1))))


def test_the_autocast_compare_example_shows_casts_added_and_bfloat16_activations(
        tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("compare_autocast_bf16.py", tmp_path)
    data = _compare_data(tmp_path / "compare_autocast_bf16.html")
    assert data["labels"] == ["float32", "bfloat16 autocast"]
    added = [data["panes"][1]["graph"]["strings"][data["panes"][1]["graph"]["nodes"]["name"][i]]
             for i, code in enumerate(data["status"][1]) if code == 1]
    assert added and set(added) == {"ToCopyBackward0"}  # autocast's casts, only in the second graph
    assert data["counts"]["dtype"] > 0 and "dtype" in out


@pytest.mark.slow
def test_the_compiled_compare_example_shows_the_region_against_the_eager_ops(
        tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("compare_eager_compiled.py", tmp_path)
    assert "regions: [compiled region 1]" in out
    data = _compare_data(tmp_path / "compare_eager_compiled.html")
    strings, nodes = data["panes"][1]["graph"]["strings"], data["panes"][1]["graph"]["nodes"]
    added = {strings[nodes["name"][i]] for i, code in enumerate(data["status"][1]) if code == 1}
    assert "CompiledFunctionBackward" in added
    strings, nodes = data["panes"][0]["graph"]["strings"], data["panes"][0]["graph"]["nodes"]
    removed = {strings[nodes["name"][i]] for i, code in enumerate(data["status"][0]) if code == 2}
    assert {"AddmmBackward0", "TanhBackward0"} <= removed  # the eager ops the region replaces


@pytest.mark.slow
def test_the_checkpoint_compare_example_shows_the_planned_blocks_saved_bytes_gone(
        tmp_path: Path, run_example: RunExample) -> None:
    out = run_example("compare_checkpoint_plan.py", tmp_path, "--blocks", "3")
    planned = out.split("plan: checkpoint ")[1].split(";")[0].split(", ")
    data = _compare_data(tmp_path / "compare_checkpoint_plan.html")
    assert data["counts"]["nodes"] == 0 and data["counts"]["saved_bytes"] > 0  # same ops, fewer bytes held
    delta = next(o for o in data["panes"][1]["overlays"] if o["key"] == "delta:memory")
    tree = data["panes"][1]["tree"]
    for module in planned:
        box = next(g for g, (k, m) in enumerate(zip(tree["kind"], tree["module"], strict=True))
                   if k == "module" and m == module)
        assert delta["group"][box] < 0, module  # the planned block keeps less
