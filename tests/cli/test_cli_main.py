"""The command line's every path, called in-process through main(argv) for speed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from graphviz_app.cli import commands as cli

SEED = ["((x+2)**2+3).mean()", "--var", "x=torch.arange(3., requires_grad=True)"]


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as e:  # refused by the parser
        code = e.code if isinstance(e.code, int) else -1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["render", "a + b", "--var", "a=torch.ones(3)", "--var", "b=torch.ones(4)", "-o", "x.svg"], 2,
         r"in the expression \(col 1\): a \+ b: the shapes do not match: a has shape \(3,\); b has shape \(4,\)"),
        (["render", "x.sum()", "--var", "x=torch.arange(3, requires_grad=True)", "-o", "x.svg"], 2,
         r"in --var 1 \(x=torch.arange\(3, requires_grad=True\)\) \(col 3\): .*write 3. instead of 3"),
        (["render", "y.sum()", "--var", "y=torch.ones(2)", "-o", "x.svg"], 2, r"has no grad_fn|requires_grad"),
        (["render", "--program", "missing.txt", "-o", "x.svg"], 2, r"cannot read --program missing.txt: No such file"),
        (["render", "--program", "bad.txt", "-o", "x.svg"], 2, r"in bad.txt \(line 2, col 5\): syntax error"),
        (["render", "-o", "x.svg"], 2, r"give an expression, or a program with --program FILE"),
        (["render", *SEED, "-o", "no/such/dir/x.svg"], 2, r"cannot write no/such/dir/x.svg|No such file"),
        (["render", *SEED, "-o", "x.svg", "--device", "tpu"], 2,
         r"argument --device: expected cpu, cuda, auto or cuda:N \(N written with the digits 0-9\), found 'tpu'"),
        (["render", "torch.randn(int(3e10))", "-o", "x.svg"], 2, r"30,000,000,000 elements"),
        (["check", *SEED, "--wrt", "z"], 2, r"z is not a variable of the program \(it defines x\)"),
        (["check", "x.sum()", "--var", "x=torch.ones(2)"], 2, r"no variable requires grad"),
        (["check", *SEED, "--expected", "x, x"], 2, r"gives 2 value\(s\) for 1 variable\(s\)"),
        (["check", *SEED, "--expected", "2*(x+2)/3"], 0, None),
        (["check", *SEED, "--expected", "(x+2)/3"], 1, None),
        (["check", *SEED, "--device", "auto"], 0, None),
    ],
)
def test_command_outcomes(argv: list[str], code: int, message: str | None, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.txt").write_text("x = torch.ones(3)\ny = (x +\n")
    got, out, err = _main(argv, capsys)
    assert got == code, err
    if message is None:
        assert err == "" and "gradcheck" in out
    else:
        assert len(err.strip().splitlines()) == 1
        assert re.search(message, err), err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_check_on_cuda_without_a_gpu_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(["check", *SEED, "--device", "cuda"], capsys)
    assert code == 2 and "torch.cuda.is_available() is False" in err


def test_render_dot_with_rankdir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.dot"
    code, stdout, _ = _main(["render", *SEED, "-o", str(out), "--rankdir", "LR"], capsys)
    assert code == 0 and stdout.startswith(f"wrote {out}")
    assert "rankdir=LR" in out.read_text()


def test_check_report_is_printed_for_a_failing_hand_gradient(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(["check", *SEED, "--expected", "(x+2)/3"], capsys)
    assert code == 1 and out.startswith("gradcheck FAILED")


def test_serve_calls_the_web_server_with_host_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    import graphviz_app.web.server as server

    monkeypatch.setattr(server, "serve", lambda *, host, port: calls.append((host, port)) or 0)
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", "9999"]) == 0
    assert calls == [("0.0.0.0", 9999)]


def test_serve_without_streamlit_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "graphviz_app.web.server", None)  # import now raises ImportError
    code, _, err = _main(["serve"], capsys)
    assert code == 3 and "the web page needs streamlit: pip install 'graphviz-app[web]'" in err


def test_unexpected_errors_are_one_line_unless_traceback_is_asked(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def broken(args: object) -> int:
        raise KeyError("surprise")

    monkeypatch.setattr(cli, "run_render", broken)
    code, _, err = _main(["render", *SEED, "-o", "x.svg"], capsys)
    assert code == 3
    assert err.strip() == (
        "graphviz-app render: error: unexpected KeyError: 'surprise' (run with --traceback for details)"
    )
    with pytest.raises(KeyError, match="surprise"):
        cli.main(["--traceback", "render", *SEED, "-o", "x.svg"])


def test_render_lays_out_under_a_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # A layout that never finishes (dot on a 1,000-step chain with a large stack) used to leave the CLI waiting.
    slow = tmp_path / "bin" / "dot"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nexec /bin/sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", str(slow.parent))
    code, _, err = _main(["render", *SEED, "-o", str(tmp_path / "x.svg"), "--engine", "dot", "--timeout", "3"],
                         capsys)
    assert code == 3
    # The layout gets what the program and tracing left of --timeout (at least 1 s).
    assert re.search(r"laying out \d+ nodes with dot took over [0-9.]+ s;.*draw fewer nodes", err)
