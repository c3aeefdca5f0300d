"""render(color_by="gradient"): golden seed DOT, NaN nodes in red, the CLI's --gradients."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch
from grad_corpus import NONFINITE, build

from graphviz_app import render, trace
from graphviz_app.cli.commands import main
from graphviz_app.drawing.gradient_style import NONFINITE_COLOR
from graphviz_app.errors import RenderError

GOLDEN = Path(__file__).parent / "golden"


def test_seed_golden_dot_shows_the_hand_derived_gradient() -> None:
    graph = trace(*build("seed"), gradients=True)
    text = render(graph, color_by="gradient").source
    golden = GOLDEN / "seed_gradients.dot"
    if os.environ.get("GRAPHVIZ_APP_UPDATE_GOLDEN") == "1" and golden.read_text(encoding="utf-8") != text:
        golden.write_text(text, encoding="utf-8")
        pytest.fail(f"rewrote {golden}: review the diff, then rerun without GRAPHVIZ_APP_UPDATE_GOLDEN=1")
    assert text == golden.read_text(encoding="utf-8")
    assert "x\\n(3,) float32 cpu\\n= [0, 1, 2]\\ngrad = [1.333, 2, 2.667]" in text
    assert "largest gradient norm 3.59 at AddBackward0" in text


def test_nan_origin_is_red_and_marked() -> None:
    with warnings.catch_warnings():
        case = NONFINITE["where(x > 0, log(x), 0) at 0"][0]()
    graph = trace(case.outputs, case.params, gradients=True)
    text = render(graph, color_by="gradient").source
    origin_line = next(line for line in text.splitlines() if line.strip().startswith(f"{graph.nonfinite_origin} "))
    assert "NaN/Inf origin" in origin_line and "penwidth=4" in origin_line
    leaf_line = next(line for line in text.splitlines() if "grad: 1 NaN of 2" in line)
    assert NONFINITE_COLOR in leaf_line
    assert "1 node(s) with NaN/Inf gradients" in text


def test_edges_get_wider_with_larger_gradients() -> None:
    x = torch.tensor([1.0], requires_grad=True)
    y = ((x * 1000) * 0.001).sum()  # gradient 0.001 on the inner edge, 1 further out
    text = render(trace(y, {"x": x}, gradients=True), color_by="gradient", legend=False).source
    widths = [
        float(line.split("penwidth=")[1].split()[0])
        for line in text.splitlines() if "->" in line and "penwidth" in line
    ]
    assert max(widths) > min(widths)


def test_gradient_colouring_needs_a_graph_with_gradients() -> None:
    with pytest.raises(RenderError, match=r"trace\(\.\.\., gradients=True\)"):
        render(trace(*build("seed")), color_by="gradient")
    with pytest.raises(RenderError, match="color_by must be one of device, gradient, order, check, got 'grad'"):
        render(trace(*build("seed")), color_by="grad")


def test_cli_gradients_prints_the_origin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.dot"
    code = main(["render", "torch.where(x > 0, torch.log(x), 0).sum()",
                 "--var", "x=torch.tensor([0., 1.], requires_grad=True)", "--gradients", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "largest gradient norm" in captured.out  # the summary line
    # The origin is one of the graph's notes, which the CLI prints on stderr.
    assert "note: NaN first appears in backward at LogBackward0" in captured.err
    assert "log(0) = -inf" in captured.err
    assert "NaN/Inf origin" in out.read_text()


def test_cli_gradients_with_a_cut_graph_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["render", "((x+2)**2+3).mean()", "--var", "x=torch.arange(3., requires_grad=True)",
                 "--gradients", "--max-nodes", "2", "-o", str(tmp_path / "g.svg")])
    err = capsys.readouterr().err
    assert code == 2
    assert "gradients need the whole graph: raise max_nodes" in err and "Traceback" not in err
