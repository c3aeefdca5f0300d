"""Numbers and devices on the command line: ASCII digits only, in a stated range, refused before any worker starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphviz_app.cli import commands as cli
from graphviz_app.drawing.layout import PURE_ABOVE_WORK
from graphviz_app.runner import JobOutOfMemory, WorkerCrashed

RENDER = ["render", "x.sum()", "--var", "x=torch.ones(2, requires_grad=True)", "-o", "never.svg"]
CHECK = ["check", "x.sum()", "--var", "x=torch.ones(2, requires_grad=True)"]
MEMORY = ["memory", "model.py:build", "--device", "meta"]

# (arguments, what the message must say): each is refused by the parser, exit 2, one line.
REFUSED = [
    (MEMORY + ["--batch", "1e11"], r"argument --batch: expected a whole number from 1 to 2,147,483,647 .*"
                                   r"found '1e11' \(1e11 is 100,000,000,000, outside that range\)"),
    (MEMORY + ["--batch", "1_0"], r"argument --batch: .*digits 0-9, found '1_0'; give sizes separated by commas"),
    (MEMORY + ["--batch", "8,\u0663"], r"argument --batch: .*digits 0-9, found '\u0663'"),  # Arabic-Indic three
    (MEMORY + ["--batch", "\u00b2"], r"argument --batch: .*digits 0-9, found '\u00b2'"),  # superscript two
    (MEMORY + ["--batch", "0,8"], r"argument --batch: expected a whole number from 1 to 2,147,483,647, found 0"),
    (MEMORY + ["--batch", "9" * 30], r"argument --batch: .*found a number of 30 digits"),
    (MEMORY + ["--batch", ","], r"argument --batch: expected sizes separated by commas, e.g. 1,8,32"),
    (MEMORY + ["--seq-len", "-5"], r"argument --seq-len: expected a whole number from 1 to 2,147,483,647, "
                                   r"found -5: the length of the sequences the model reads, e.g. --seq-len 512"),
    (MEMORY + ["--seq-len", "2147483648"], r"argument --seq-len: .*found 2,147,483,648"),
    (MEMORY + ["--seq-len", "1_0"], r"argument --seq-len: .*digits 0-9, found '1_0'"),
    (MEMORY + ["--timeout", "inf"], r"argument --timeout: expected a number written with the digits 0-9"),
    (MEMORY + ["--device", "cuda:\u00b2"], r"argument --device: expected meta, cpu, cuda or cuda:N \(N written "
                                          r"with the digits 0-9\), found 'cuda:\u00b2'"),
    (RENDER + ["--device", "cuda:\u0663"], r"argument --device: expected cpu, cuda, auto or cuda:N"),
    (RENDER + ["--device", "meta"], r"argument --device: expected cpu, cuda, auto or cuda:N"),
    (RENDER + ["--device", "cpu:0"], r"argument --device: expected cpu, cuda, auto or cuda:N"),
    (RENDER + ["--max-nodes", "1_000"], r"argument --max-nodes: .*digits 0-9, found '1_000'"),
    (RENDER + ["--max-nodes", "0"], r"argument --max-nodes: expected a whole number from 1 to"),
    (RENDER + ["--depth", "\u0663"], r"argument --depth: .*digits 0-9"),
    (RENDER + ["--depth", "-1"], r"argument --depth: expected a whole number from 0 to"),
    (RENDER + ["--timeout", "nan"], r"argument --timeout: expected a number written with the digits 0-9"),
    (RENDER + ["--timeout", "0"], r"argument --timeout: expected a number above 0 and at most 604800"),
    (RENDER + ["--timeout", "1_0"], r"argument --timeout: .*found '1_0'"),
    (CHECK + ["--order", "\u0662"], r"argument --order: expected a whole number from 1 to 2 written"),
    (CHECK + ["--order", "3"], r"argument --order: expected a whole number from 1 to 2, found 3"),
    (CHECK + ["--eps", "0"], r"argument --eps: expected a number above 0"),
    (CHECK + ["--atol=-1e-5"], r"argument --atol: expected a number at least 0"),
    (CHECK + ["--rtol", "1\u0660"], r"argument --rtol: expected a number written with the digits 0-9"),
    (["serve", "--port", "1_0"], r"argument --port: expected a whole number from 1 to 65,535 written"),
    (["serve", "--port", "70000"], r"argument --port: expected a whole number from 1 to 65,535, found 70,000"),
]


@pytest.mark.parametrize(("argv", "message"), REFUSED, ids=[" ".join(a[-2:]) for a, _ in REFUSED])
def test_a_number_or_device_that_is_not_plain_digits_in_range_is_refused_by_the_parser(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == cli.EXIT_BAD_INPUT, err
    assert re.search(message, err), err
    assert err.count("\n") == 1 and "Traceback" not in err  # one line, no usage block
    assert not Path("never.svg").exists()


ACCEPTED = [
    (MEMORY + ["--batch", "1,8, 32", "--seq-len", "512", "--timeout", "2.5", "--device", "cuda:1"],
     {"batch": (1, 8, 32), "seq_len": 512, "timeout": 2.5, "device": "cuda:1"}),
    (RENDER + ["--max-nodes", "+40", "--depth", "0", "--timeout", "1e2", "--device", "auto"],
     {"max_nodes": 40, "depth": 0, "timeout": 100.0, "device": "auto"}),
    (CHECK + ["--order", "2", "--eps", ".5", "--atol", "0", "--rtol", "1E-3"],
     {"order": 2, "eps": 0.5, "atol": 0.0, "rtol": 1e-3}),
    (["serve", "--port", "65535"], {"port": 65535}),
]


@pytest.mark.parametrize(("argv", "parsed"), ACCEPTED, ids=[a[0] for a, _ in ACCEPTED])
def test_plain_numbers_and_devices_are_read_as_written(argv: list[str], parsed: dict[str, object]) -> None:
    args = cli.build_parser().parse_args(argv)
    assert {k: getattr(args, k) for k in parsed} == parsed


def test_render_help_states_every_return_form_and_the_engine_rule(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["render", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for form in ("return loss, model", "return model, (x, y)", "return model, (x,), {'labels': y}",
                 "{'model': model, 'args': (x,), 'kwargs': {...}, 'loss': lambda out: out.loss}"):
        assert form in text
    assert "2,000 nodes" not in text  # not what the code does
    assert f"is above {PURE_ABOVE_WORK:,}" in text and "nodes + edges + 2 x the ranks long edges cross" in text


def test_memory_help_states_the_size_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["memory", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "e.g. 1,8,32, each from 1 to 2,147,483,647" in text
    assert "the second dimension of every input of 2+ dims, from 1 to 2,147,483,647" in text


OUT_OF_MEMORY = [
    (["--batch", "100000000"], JobOutOfMemory("the job ran out of the machine's memory: use smaller tensors"), True),
    (["--seq-len", "100000"], WorkerCrashed("the worker process was killed by SIGKILL", exit_code=-9), True),
    (["--batch", "100000000", "--device", "meta"], JobOutOfMemory("the job ran out of the machine's memory"), False),
    ([], JobOutOfMemory("the job ran out of the machine's memory: use smaller tensors"), False),
]


@pytest.mark.parametrize(("extra", "error", "hinted"), OUT_OF_MEMORY, ids=["batch", "seq-len", "meta", "as-given"])
def test_a_step_too_large_for_the_machine_offers_a_forecast_on_meta(
    extra: list[str], error: Exception, hinted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from graphviz_app.cli import memory

    script = tmp_path / "model.py"
    script.write_text("def build():\n    pass\n")

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(memory, "run_script_job", out_of_memory)
    assert cli.main(["memory", f"{script}:build", *extra]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "could not finish" in err and "Traceback" not in err
    hint = "may not fit in this machine's memory: forecast it without allocating anything with --device meta"
    assert (hint in err) is hinted, err


@pytest.mark.parametrize("text", ["1_6", "\u0668", "8,\u00b2", "0", "1e3", ","])
def test_world_sizes_are_plain_digits_too(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["memory", "job.py:build", "--world-size", text])
    err = capsys.readouterr().err
    assert stopped.value.code == cli.EXIT_BAD_INPUT, err
    assert re.search(r"argument --world-size: .*(whole number|sizes separated by commas)", err), err
    assert err.count("\n") == 1 and "Traceback" not in err
