"""The command line run as a real process: files written, exit codes, one-line messages."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graphviz_app.model import Graph, NodeKind

SEED_VAR = "x=torch.arange(3., requires_grad=True)"
SEED_EXPR = "((x+2)**2+3).mean()"
MODEL = """\
import torch

def build():
    x = torch.arange(3., requires_grad=True)
    return ((x + 2) ** 2 + 3).mean()
"""
PLAIN = """\
def boom():
    raise ValueError("boom")

def number():
    return 3
"""

# Each process loads torch (seconds on a busy machine): "svg" runs as its own process, the
# others one after another in a second process through main(argv) (see `_run_in_one_process`).
COMMANDS: dict[str, list[str]] = {
    "svg": ["render", SEED_EXPR, "--var", SEED_VAR, "-o", "seed.svg"],
    "png_script": ["render", "model.py:build", "-o", "script.png", "--rankdir", "LR"],
    "json_program": ["render", "--program", "prog.txt", "-o", "small.json", "--no-saved", "--max-nodes", "2"],
    "check_pass": ["check", SEED_EXPR, "--var", SEED_VAR, "--expected", "2*(x+2)/3"],
    "check_fail": ["check", "custom.square_wrong_backward(x).sum()", "--var", SEED_VAR, "--json"],
    "no_dot": ["render", SEED_EXPR, "--var", SEED_VAR, "-o", "nodot.svg", "--engine", "dot"],
    "no_dot_pdf": ["render", SEED_EXPR, "--var", SEED_VAR, "-o", "nodot.pdf"],
    "no_dot_svg": ["render", SEED_EXPR, "--var", SEED_VAR, "-o", "fallback.svg"],
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    (root / "model.py").write_text(MODEL)
    (root / "plain.py").write_text(PLAIN)
    (root / "prog.txt").write_text("x = torch.arange(3., requires_grad=True)\ny = (x + 2) ** 2\n(y + 3).mean()\n")
    return root


ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    """This checkout first on the path: the processes run in another folder, where PYTHONPATH=. means that one."""
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graphviz_app", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


# Runs each case through main(argv), as `python -m graphviz_app` does, with "no_dot" cases on a
# PATH that has python but no Graphviz; prints {name: [exit code, stdout, stderr]} as JSON.
_MANY = """
import contextlib, io, json, os, sys
from graphviz_app.cli.commands import main
cases, no_dot_path = json.loads(sys.argv[1]), sys.argv[2]
full_path, found = os.environ["PATH"], {}
for name, args in cases.items():
    os.environ["PATH"] = no_dot_path if name.startswith("no_dot") else full_path
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    found[name] = [code, out.getvalue(), err.getvalue()]
sys.stdout.write(json.dumps(found))
"""


def _run_in_one_process(cases: dict[str, list[str]], cwd: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    no_dot_path = str(Path(sys.executable).parent)  # python, but no Graphviz
    done = subprocess.run([sys.executable, "-c", _MANY, json.dumps(cases), no_dot_path], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return {name: subprocess.CompletedProcess(cases[name], code, out, err)
            for name, (code, out, err) in json.loads(done.stdout).items()}


@pytest.fixture(scope="module")
def runs(work: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        alone = pool.submit(_run, COMMANDS["svg"], work)
        together = pool.submit(_run_in_one_process, {k: v for k, v in COMMANDS.items() if k != "svg"}, work)
        return {"svg": alone.result(), **together.result()}


def _one_line(run: subprocess.CompletedProcess[str]) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


@pytest.mark.slow  # the module's `runs`: two processes that load torch
def test_render_expression_writes_a_valid_svg(runs: dict, work: Path) -> None:
    run = runs["svg"]
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("wrote seed.svg (7 nodes")
    assert ET.parse(work / "seed.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert "MeanBackward0" in (work / "seed.svg").read_text()


@pytest.mark.slow  # the module's `runs`: two processes that load torch
def test_render_script_function_writes_a_png(runs: dict, work: Path) -> None:
    assert runs["png_script"].returncode == 0, runs["png_script"].stderr
    assert (work / "script.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # the module's `runs`: two processes that load torch
def test_render_program_file_writes_json_honouring_no_saved_and_max_nodes(runs: dict, work: Path) -> None:
    assert runs["json_program"].returncode == 0, runs["json_program"].stderr
    graph = Graph.from_json((work / "small.json").read_text())
    assert graph.truncated and not graph.of_kind(NodeKind.SAVED)


@pytest.mark.slow  # the module's `runs`: two processes that load torch
def test_check_passes_with_the_seeds_hand_gradient(runs: dict) -> None:
    run = runs["check_pass"]
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("gradcheck passed")


@pytest.mark.slow  # the module's `runs`: two processes that load torch
def test_check_exits_1_for_a_wrong_custom_backward(runs: dict) -> None:
    run = runs["check_fail"]
    assert run.returncode == 1, run.stderr
    assert json.loads(run.stdout)["passed"] is False


@pytest.mark.slow  # the module's `runs`: two processes that load torch
@pytest.mark.parametrize("name", ["no_dot", "no_dot_pdf"])
def test_missing_graphviz_exits_3_saying_how_to_install_it(runs: dict, name: str) -> None:
    run = runs[name]
    assert run.returncode == 3
    assert "Graphviz's 'dot' program was not found on PATH" in _one_line(run)


@pytest.mark.slow  # the module's `runs`: two processes that load torch
def test_without_dot_svg_is_laid_out_by_graphviz_pure(runs: dict, work: Path) -> None:
    run = runs["no_dot_svg"]
    assert run.returncode == 0, run.stderr
    assert "MeanBackward0" in (work / "fallback.svg").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["render", "missing.py:build", "-o", "x.svg"], r"no such script: missing.py"),
        (["render", "plain.py:nope", "-o", "x.svg"], r"plain.py has no function 'nope' \(it defines: boom, number\)"),
        (["render", "plain.py:boom", "-o", "x.svg"], r"plain.py:boom raised ValueError: boom \(line 2 of plain.py\)"),
        (["render", "plain.py:number", "-o", "x.svg"], r"plain.py:number returned int, not tensors"),
        (["render", "y + 1", "-o", "x.svg"], r"in the expression \(col 1\): y is not defined"),
        (["render", SEED_EXPR, "--var", "x", "-o", "x.svg"], r"--var 1 must be NAME=EXPRESSION"),
        (["render", SEED_EXPR, "--var", SEED_VAR, "-o", "x.bmp"], r"cannot write format 'bmp'"),
        (["render", SEED_EXPR], r"the following arguments are required: -o/--output"),
        (["render", "__import__('os').system('echo hi')", "-o", "x.svg"], r"names starting with _ are not allowed"),
        (["check", "x.sum()", "--var", "x=torch.ones(2)", "--expected", "q"],
         r"in the expected gradient: line 1, col 1: q is not defined"),
        (["bogus"], r"invalid choice: 'bogus'"),
    ],
)
def test_bad_input_exits_2_with_one_line_before_torch_loads(work: Path, args: list[str], message: str) -> None:
    run = _run(args, work)
    assert run.returncode == 2
    assert re.search(message, _one_line(run))


def test_help_documents_the_language_with_examples(work: Path) -> None:
    run = _run(["--help"], work)
    assert run.returncode == 0
    for text in ("The expression language", "((x+2)**2+3).mean()", "custom.square_wrong_backward",
                 "for i in range(10):", "exit codes: 0 success, 1 the gradient check failed"):
        assert text in run.stdout


def test_module_cli_runs_as_the_makefile_calls_it(work: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "graphviz_app.cli", "serve", "--help"], cwd=work, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "--port" in run.stdout and "--host" in run.stdout


def test_console_script_runs(work: Path) -> None:
    script = shutil.which("graphviz-app") or str(Path(sys.executable).parent / "graphviz-app")
    assert Path(script).exists(), "the console script is not installed: make test installs it (pip install -e .)"
    run = subprocess.run([script, "render", "--help"], cwd=work, env=_env(), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and "--rankdir" in run.stdout and "--no-saved" in run.stdout
