"""`graphviz-app memory SCRIPT.py:FUNC`: the table, --json, the checkpoint plan, and errors a person can act on."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from graphviz_app.cli import commands as cli

SCRIPT = '''
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm(x))))

def build():
    torch.manual_seed(0)
    return nn.Sequential(*[Block(32) for _ in range(3)], nn.Linear(32, 4)), torch.randn(8, 16, 32)

def with_kwargs():
    lin = nn.Linear(8, 8)
    return lin, (), {"input": torch.randn(4, 8)}

def not_a_model():
    return torch.ones(3)

def with_a_tuple():
    lin = nn.Linear(8, 8)
    return lin, (torch.randn(4, 8),)

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, scale=1.0):
        return {"logits": self.lin(x) * scale}

def with_a_tensor_and_kwargs():
    return Scaled(), torch.randn(4, 8), {"scale": 2.0}

class GRUTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(200, 32)
        self.gru = nn.GRU(32, 64, batch_first=True, bidirectional=True)
        self.out = nn.Linear(128, 9)

    def forward(self, ids):
        h, _ = self.gru(self.embed(ids))
        return nn.functional.cross_entropy(self.out(h).flatten(0, 1), (ids % 9).flatten())

def forward_peak():
    torch.manual_seed(0)
    return GRUTagger(), torch.randint(0, 200, (8, 48))

class ChecksValues(nn.Linear):
    # transformers reads position_ids' values unless the tensors are fake (its packed-sequence check)
    def forward(self, x):
        from torch._subclasses.fake_tensor import FakeTensor
        if not isinstance(x, FakeTensor) and bool((x[:, -1] == 12345).all()):
            return super().forward(x).sum()
        return super().forward(x).square().sum()

class ReadsValues(nn.Linear):
    def forward(self, x):
        return super().forward(x).sum() if x.sum().item() > 1e9 else super().forward(x).square().sum()

def checks_values():
    return ChecksValues(8, 8), torch.randn(4, 8)

def reads_values():
    return ReadsValues(8, 8), torch.randn(4, 8)

class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(2048, 32)
        self.block = Block(32)
        self.head = nn.Linear(32, 2048, bias=False)

    def forward(self, ids):
        return self.head(self.block(self.embed(ids)))

def lm():
    torch.manual_seed(0)
    ids = torch.randint(0, 2048, (4, 64))
    return {"model": LM(), "args": (ids,),
            "loss": lambda out: nn.functional.cross_entropy(out.flatten(0, 1), ids.flatten())}

def as_a_mapping():
    return {"model": Scaled(), "args": (torch.randn(4, 8),), "loss": lambda out: out["logits"].pow(2).mean()}
'''


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as e:  # refused by the parser (a size or device not written plainly)
        code = e.code if isinstance(e.code, int) else -1
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table_names_the_peak_node_its_module_and_source_line(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "1,8", "--measure"], capsys)
    assert code == 0
    assert out.splitlines()[1].split()[:3] == ["batch", "predicted", "peak"]
    peak_line = next(line for line in out.splitlines() if line.startswith("peak at batch 8"))
    assert "Backward" in peak_line and f"{script}:" in peak_line and " in forward" in peak_line
    assert "not modelled: allocator rounding" in out


def test_measure_puts_predicted_beside_measured_for_every_backward_node(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "4", "--measure", "--json"], capsys)
    entry = json.loads(out)["batches"][0]
    rows = entry["by_node"]
    assert code == 0 and rows[0]["node"] is None and len(rows) == entry["steps"] + 1  # the forward's end, then each
    assert {r["name"] for r in rows[1:]} >= {"AddmmBackward0", "NativeLayerNormBackward0", "GeluBackward0"}
    assert all(r["predicted_bytes"] == r["measured_bytes"] for r in rows)  # this model: to the byte
    assert max(r["measured_bytes"] for r in rows) == entry["measured_peak_bytes"]
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "4", "--measure"], capsys)
    # counted as the timeline counts its steps ("step 2 of N"): the end of the forward is not one of them
    assert (f"measured against predicted, node by node (the end of the forward and {entry['steps']} backward "
            "step(s)): all agree") in out


def test_output_writes_the_measured_step_into_the_viewer_file(script: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "step.html"
    code, out, err = _run(["memory", f"{script}:build", "--batch", "4", "--measure", "--json", "-o", str(path)], capsys)
    entry = json.loads(out)["batches"][0]
    series = _viewer_payload(path)["series"]
    assert code == 0 and f"wrote {path}" in err
    assert [s["key"] for s in series] == ["live_bytes", "measured_bytes"]
    assert series[1]["values"] == [r["measured_bytes"] for r in entry["by_node"]]
    assert series[1]["peak_bytes"] == entry["measured_peak_bytes"]
    code, _, _ = _run(["memory", f"{script}:build", "--batch", "4", "-o", str(path)], capsys)
    assert code == 0 and [s["key"] for s in _viewer_payload(path)["series"]] == ["live_bytes"]


def _viewer_payload(path: Path) -> dict[str, Any]:
    found = re.search(r'id="gv-payload">([^<]*)<', path.read_text(encoding="utf-8"))
    assert found is not None
    return json.loads(gzip.decompress(base64.b64decode(found[1])))


def test_a_peak_in_the_forward_does_not_call_the_backward_peaks_holders_the_peaks(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The GRU's per-step outputs make the step's peak in the forward; the modules listed are what the backward
    # replay holds at its own, lower, peak, and the line says so with that figure.
    code, out, _ = _run(["memory", f"{script}:forward_peak", "--json"], capsys)
    entry = json.loads(out)["batches"][0]
    assert code == 0 and entry["peak_in_forward"]
    assert entry["replay_backward_peak_bytes"] < entry["predicted_peak_bytes"]
    assert sum(m["bytes"] for m in entry["at_peak"]) <= entry["replay_backward_peak_bytes"]
    code, out, _ = _run(["memory", f"{script}:forward_peak"], capsys)
    lines = out.splitlines()
    assert code == 0 and "peak: during the forward" in lines
    held = next(line for line in lines if line.startswith("held at"))
    assert held.startswith("held at the backward's own peak (") and ("gru" in held or "out" in held)


def test_a_budget_on_a_real_device_survives_a_step_that_cannot_run_on_meta(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The largest batch is searched on meta even for a CPU step; a value read there (a Llama under
    # gradient_checkpointing_enable(), no attention_mask) made the whole command fail "on meta" (exit 2).
    code, out, _ = _run(["memory", f"{script}:checks_values", "--budget", "1MiB", "--measure", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["largest_batch"] > 4
    note = report["largest_batch_note"]
    assert note.startswith("searched on fake CPU tensors (CPU's kernels), as the step failed on meta: ")
    code, out, _ = _run(["memory", f"{script}:reads_values", "--budget", "1MiB", "--measure"], capsys)
    assert code == 0 and "measured peak" in out
    line = next(x for x in out.splitlines() if x.startswith("largest batch"))
    assert line.startswith("largest batch that fits in 1.0 MiB with no optimizer state: unknown (not found: ")
    assert "reads a tensor's value" in line


def test_json_has_one_entry_per_batch_and_the_measured_peak(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "2,4,8", "--measure", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and [b["batch"] for b in report["batches"]] == [2, 4, 8]
    for entry in report["batches"]:
        assert abs(entry["predicted_peak_bytes"] - entry["measured_peak_bytes"]) <= 0.1 * entry["measured_peak_bytes"]
    peaks = [b["predicted_peak_bytes"] for b in report["batches"]]
    assert peaks == sorted(peaks)


def test_json_of_a_meta_forecast_under_autocast(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--device", "meta", "--dtype", "bfloat16", "--budget", "1GiB",
                         "--optimizer", "adam", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["device"] == "meta" and report["precision"] == "autocast"
    assert report["predicted_peak_bytes"] > 0 and "measured_peak_bytes" not in report
    entry = report["batches"][0]
    assert entry["optimizer_bytes"] == 2 * entry["params_bytes"] and entry["fits"] is True
    assert report["largest_batch"] > 8


def test_checkpoint_verify_prints_predicted_against_measured(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "32", "--checkpoint", "--verify", "--json"], capsys)
    plan = json.loads(out)["checkpoint"]
    assert code == 0 and plan["modules"]
    assert plan["measured_peak_after"] < plan["measured_peak_before"]
    assert plan["predicted_peak_after"] < plan["predicted_peak_before"]


@pytest.mark.parametrize("func", ["with_kwargs", "with_a_tuple", "with_a_tensor_and_kwargs", "as_a_mapping"])
def test_every_form_render_takes_with_inputs_resized_by_batch(
    func: str, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:{func}", "--batch", "6", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["batches"][0]["inputs_bytes"] == 6 * 8 * 4  # the input's rows set to 6
    assert report["predicted_peak_bytes"] == report["batches"][0]["predicted_peak_bytes"] > 0


def test_the_readme_command_forecasts_three_batches_on_meta_and_answers_at_the_top(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "1,8,32", "--dtype", "bfloat16", "--device", "meta",
                         "--budget", "16GiB", "--optimizer", "adam", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and [b["batch"] for b in report["batches"]] == [1, 8, 32]
    assert report["predicted_peak_bytes"] == report["batches"][-1]["predicted_peak_bytes"]
    assert "measured_peak_bytes" not in report and report["budget_bytes"] == 16 * 2**30
    for entry in report["batches"]:
        assert entry["optimizer_bytes"] == 2 * entry["params_bytes"] and entry["fits"] is True
        assert entry["total_bytes"] == (entry["predicted_peak_bytes"] + entry["params_bytes"] + entry["buffers_bytes"]
                                        + entry["inputs_bytes"] + entry["optimizer_bytes"])
    assert report["largest_batch"] > 32


def test_several_batches_measured_put_the_last_ones_peaks_at_the_top(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "1,4", "--measure", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["batches"][-1]["batch"] == 4
    assert report["predicted_peak_bytes"] == report["batches"][-1]["predicted_peak_bytes"]
    assert report["measured_peak_bytes"] == report["batches"][-1]["measured_peak_bytes"]


def test_checkpoint_verify_prints_measured_beside_predicted_in_the_table(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "16", "--checkpoint", "--verify"], capsys)
    assert code == 0
    plan = next(line for line in out.splitlines() if line.startswith("checkpoint "))
    assert re.match(r"checkpoint \d module\(s\): predicted peak .+ -> .+ \(the peak.s budget .+\), recomputing \d+% ",
                    plan)
    measured = next(line for line in out.splitlines() if line.startswith("measured: "))
    assert re.fullmatch(r"measured: \S+ \S+ -> \S+ \S+ \(predicted \S+ \S+ -> \S+ \S+\)", measured), measured


def test_checkpoint_without_verify_plans_without_measuring(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "16", "--checkpoint", "--json"], capsys)
    report = json.loads(out)
    plan = report["checkpoint"]
    assert code == 0 and plan["modules"] and "measured_peak_bytes" not in report
    assert plan["budget_bytes"] == report["predicted_peak_bytes"] // 2  # no --budget: half the peak
    assert plan["predicted_peak_after"] < plan["predicted_peak_before"] == report["predicted_peak_bytes"]
    assert plan["measured_peak_before"] is None and plan["measured_peak_after"] is None


def test_cast_halves_what_is_saved_and_retain_graph_keeps_it(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def entry(*extra: str) -> dict[str, int]:
        code, out, _ = _run(["memory", f"{script}:build", "--device", "meta", "--json", *extra], capsys)
        assert code == 0
        return json.loads(out)["batches"][0]

    full, half = entry(), entry("--dtype", "float16", "--cast")
    assert half["forward_bytes"] * 2 == pytest.approx(full["forward_bytes"], rel=0.01)
    assert half["params_bytes"] * 2 == full["params_bytes"]  # .half() casts the parameters too
    retained = entry("--retain-graph")
    assert retained["forward_bytes"] == full["forward_bytes"]
    assert retained["predicted_peak_bytes"] > full["predicted_peak_bytes"]  # nothing saved is released


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--batch", "8,x"], r"argument --batch: expected a whole number from 1 to 2,147,483,647 written with the "
                             r"digits 0-9, found 'x'; give sizes separated by commas, e.g. 1,8,32"),
        (["--budget", "lots"], r"--budget: expected a size such as 16GiB"),
        (["--verify"], r"--verify checks a checkpoint plan: add --checkpoint"),
        (["--measure", "--device", "meta"], r"--measure and --verify run the step for real"),
        (["-o", "step.svg"], r"-o writes the interactive viewer: end the name in \.html, found 'step\.svg'"),
        (["--device", "tpu"], r"argument --device: expected meta, cpu, cuda or cuda:N \(N written with the digits "
                              r"0-9\), found 'tpu'"),
        (["--device", "mps"], r"argument --device: expected meta, cpu, cuda or cuda:N .*found 'mps'"),
    ],
)
def test_bad_options_say_what_to_do(extra: list[str], message: str, script: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{script}:build", *extra], capsys)
    assert code == 2
    assert re.search(message, err), err


def test_a_cuda_device_this_machine_lacks_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # The device is checked where the step runs, in the command's worker: its check, as torch answers there.
    import torch

    from graphviz_app.errors import TraceError
    from graphviz_app.jobs.memory import check_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(TraceError, match=r"--device cuda: this machine has no CUDA GPU.*--device meta"):
        check_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(TraceError, match=r"--device cuda:2: this machine has 2 CUDA GPU\(s\), cuda:0 to cuda:1"):
        check_device("cuda:2")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a CUDA GPU")
def test_the_command_names_a_cuda_device_this_machine_lacks(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{script}:build", "--device", "cuda"], capsys)
    assert code == 2 and "--device cuda: this machine has no CUDA GPU" in err and "--device meta" in err


def test_a_function_not_returning_a_model(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["memory", f"{script}:not_a_model"], capsys)
    assert code == 2 and "return the model and its inputs, (model, x)" in err


def test_seq_len_sets_the_second_dimension(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    peaks = []
    for length in ("8", "32"):
        code, out, _ = _run(["memory", f"{script}:build", "--seq-len", length, "--device", "meta", "--json"], capsys)
        assert code == 0
        peaks.append(json.loads(out)["predicted_peak_bytes"])
    assert 3.5 * peaks[0] < peaks[1] < 4.5 * peaks[0]  # the blocks are per position: about linear in length


def test_a_budget_checkpointing_cannot_reach_prints_each_lever_predicted_and_measured(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:build", "--batch", "16", "--budget", "1KiB", "--checkpoint", "--verify"],
                        capsys)
    assert code == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("levers beyond checkpointing"))
    levers = [line for line in lines[start + 1:] if line.startswith("- ")]
    names = [line.split(":")[0] for line in levers]
    assert names[:2] == [
        "- free each .grad as soon as it is accumulated (optimizer in backward, register_post_accumulate_grad_hook)",
        "- autocast bfloat16"]
    assert re.fullmatch(r"- (2|4|8|16) micro-batches of (8|4|2|1) with gradient accumulation", names[2]), names[2]
    assert names[3] == "- a loss computed in 8 chunks over the tokens"  # no cross-entropy here: does not apply
    assert "not predicted (the loss is not a cross-entropy" in levers[3]
    measured = [line.strip() for line in lines[start:] if line.strip().startswith("verified: measured")]
    assert len(measured) == len(names) - 1  # every lever predicted is applied and measured
    assert all(re.fullmatch(r"verified: measured \S+ \S+ -> \S+ \S+ \(predicted \S+ \S+\)", m) for m in measured)


def test_verify_applies_the_chunked_loss_to_a_loss_over_a_linear_head(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["memory", f"{script}:lm", "--budget", "1KiB", "--checkpoint", "--verify", "--json"], capsys)
    assert code == 0
    levers = {lv["lever"]: lv for lv in json.loads(out)["checkpoint"]["levers"]}
    chunked = levers["chunked_loss"]
    assert chunked["head"] == "head" and chunked["predicted_peak_bytes"] == chunked["measured_peak_bytes"]
    assert chunked["measured_peak_bytes"] < chunked["measured_peak_before_bytes"] - 256 * 2048 * 4  # the logits
    assert "head's logits not made, F.cross_entropy over them computed in 8 chunks" in chunked["applied"]
    code, out, _ = _run(["memory", f"{script}:lm", "--budget", "1KiB", "--checkpoint", "--verify"], capsys)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("- a loss computed in 8 chunks over the tokens"))
    assert "F.cross_entropy over head's logits (256x2048) computed chunk by chunk" in lines[at]
    assert lines[at + 1].strip().startswith("applied by --verify: ")
    assert re.fullmatch(r"verified: measured \S+ \S+ -> \S+ \S+ \(predicted \S+ \S+\)", lines[at + 2].strip())
    assert lines[at + 3].strip().startswith("to do it in training: have the model return its last hidden states")
