"""`graphviz-app render` as the command line runs it: --depth/--roll, the notes on stderr, what a script may return.

The commands run in-process through `main(argv)`; tests/cli/test_cli_subprocess.py runs the real process.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

import pytest

from graphviz_app.cli import commands as cli
from graphviz_app.model import Graph, NodeKind

SCRIPT = """\
import torch
from torch import nn

def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))

def with_named_parameters():
    model = mlp()
    return model(torch.ones(2, 3)).sum(), model.named_parameters()

def with_module_as_parameters():
    model = mlp()
    return model(torch.ones(2, 3)).sum(), model

def two_outputs():
    x = torch.ones(3, requires_grad=True)
    return (x * 2).sum(), (x + 1).sum()

def model_and_inputs():
    return mlp(), torch.ones(2, 3)

def model_alone():
    return mlp()

def number():
    return 3
"""
EXPR = ["((x+2)**2+3).mean()", "--var", "x=torch.arange(3., requires_grad=True)"]

COMMANDS: dict[str, list[str]] = {
    "max_nodes": ["render", *EXPR, "-o", "cut.json", "--max-nodes", "2"],
    "no_modules": ["render", *EXPR, "-o", "flat.dot", "--depth", "1", "--roll"],
    "named_parameters": ["render", "m.py:with_named_parameters", "-o", "named.json"],
    "module_as_parameters": ["render", "m.py:with_module_as_parameters", "-o", "module.json"],
    "two_outputs": ["render", "m.py:two_outputs", "-o", "two.json"],
    "model_and_inputs": ["render", "m.py:model_and_inputs", "-o", "model.json", "--depth", "0", "--roll"],
    "model_alone": ["render", "m.py:model_alone", "-o", "alone.svg"],
    "number": ["render", "m.py:number", "-o", "number.svg"],
    "negative_depth": ["render", *EXPR, "-o", "neg.svg", "--depth", "-1"],
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli_modview")
    (root / "m.py").write_text(SCRIPT)
    return root


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """`graphviz-app ARGS` run by `main(argv)` in this process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(args)
        except SystemExit as e:  # argparse's own usage errors
            code = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def runs(work: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    # In-process: each command as a process would load torch again (seconds apiece);
    # tests/cli/test_cli_subprocess.py runs the real process.
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        return {name: _run(args) for name, args in COMMANDS.items()}


def _graph(work: Path, name: str) -> Graph:
    return Graph.from_json((work / name).read_text())


def test_truncation_by_max_nodes_is_reported_on_stderr(runs: dict, work: Path) -> None:
    run = runs["max_nodes"]
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip() == (
        "graphviz-app render: note: stopped at max_nodes=2: ops further from the output are not shown"
    )
    assert _graph(work, "cut.json").truncated


def test_depth_on_a_graph_without_modules_says_how_to_record_them(runs: dict, work: Path) -> None:
    run = runs["no_modules"]
    assert run.returncode == 0, run.stderr
    assert "note: this graph has no module information" in run.stderr
    assert "with record(model):" in run.stderr
    assert "let SCRIPT.py:FUNCTION return the model and its inputs (return model, x)" in run.stderr
    assert "subgraph" not in (work / "flat.dot").read_text()


@pytest.mark.parametrize("name", ["named_parameters", "module_as_parameters"])
def test_returning_the_parameters_names_the_leaves(runs: dict, work: Path, name: str) -> None:
    run = runs[name]
    assert run.returncode == 0, run.stderr
    graph = _graph(work, f"{name.split('_')[0]}.json")
    leaves = sorted(n.name for n in graph.of_kind(NodeKind.LEAF))
    assert leaves == ["0.bias", "0.weight", "2.bias", "2.weight", "4.bias", "4.weight"]


def test_a_tuple_of_outputs_is_still_two_outputs(runs: dict, work: Path) -> None:
    run = runs["two_outputs"]
    assert run.returncode == 0, run.stderr
    assert [n.name for n in _graph(work, "two.json").of_kind(NodeKind.OUTPUT)] == ["output[0]", "output[1]"]


def test_a_model_and_inputs_are_traced_with_their_modules(runs: dict, work: Path) -> None:
    run = runs["model_and_inputs"]
    assert run.returncode == 0, run.stderr
    graph = _graph(work, "model.json")  # JSON holds what was drawn: depth 0, rolled
    assert [m.type for m in graph.modules][:2] == ["Sequential", "Linear"]
    boxes = [n.name for n in graph.of_kind(NodeKind.MODULE)]
    assert boxes == ["4: Linear", "3: ReLU", "2: Linear", "1: ReLU", "0: Linear"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("model_alone",
         "m.py:model_alone returned a model without inputs: return the model and its inputs, e.g. return model, x"),
        ("number",
         "m.py:number returned int, not tensors: return the output tensor(s) (return loss), "
         "the output and its parameters"),
        ("negative_depth", "argument --depth: expected a whole number from 0 to 2,147,483,647, found -1"),
    ],
)
def test_unusable_returns_and_options_exit_2_with_one_line(runs: dict, name: str, message: str) -> None:
    run = runs[name]
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr
    assert message in lines[0]
