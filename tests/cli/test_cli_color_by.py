"""`graphviz-app render --color-by device|gradient|order`: what fills the nodes, from the command line."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from graphviz_app.cli import commands as cli
from graphviz_app.drawing.order_style import order_fill
from graphviz_app.model import Graph, NodeKind

SCRIPT = textwrap.dedent('''
    import torch


    def penalty():
        torch.manual_seed(0)
        x = torch.randn(4, requires_grad=True)
        y = (x.tanh() ** 2).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (gg,) = torch.autograd.grad((g ** 2).sum(), x, create_graph=True)
        return gg.sum()


    def plain():
        x = torch.randn(4, requires_grad=True)
        return (x.tanh() ** 2).sum()
''')


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "penalty.py"
    path.write_text(SCRIPT)
    return path


def _render(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["render", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_color_by_order_fills_each_order_of_a_gradient_of_a_gradient(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dot = tmp_path / "p.dot"
    code, out, err = _render([f"{script}:penalty", "-o", str(dot), "--color-by", "order"], capsys)
    assert code == 0, err
    text = dot.read_text()
    for order in (1, 2):
        assert f"order {order} of " in text and order_fill(order)[0] in text
    assert "order 1: made by the forward's backward" in text and "order 2: made by the backward of order 1" in text


def test_color_by_order_keeps_the_orders_in_the_saved_graph(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "p.json"
    assert _render([f"{script}:penalty", "-o", str(saved), "--color-by", "order"], capsys)[0] == 0
    graph = Graph.from_json(saved.read_text())
    assert {n.order or 0 for n in graph.nodes if n.kind is NodeKind.OP} == {0, 1, 2}
    again = tmp_path / "again.dot"  # a saved graph with orders draws by order again
    code, _, err = _render([str(saved), "-o", str(again), "--color-by", "order"], capsys)
    assert code == 0, err
    assert "order 2 of " in again.read_text()


def test_without_color_by_order_the_script_runs_unrecorded(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "p.json"
    assert _render([f"{script}:penalty", "-o", str(saved)], capsys)[0] == 0
    graph = Graph.from_json(saved.read_text())
    assert any(n.name == "TanhBackwardBackward0" for n in graph.nodes)  # a gradient of a gradient, unnumbered
    assert all(n.order is None for n in graph.nodes)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("plain", r"--color-by order needs orders of derivative, and .*penalty.py:plain computes no gradient "
                  r"with create_graph=True: .*torch.autograd.grad\(y, x, create_graph=True\)"),
    ],
)
def test_color_by_order_on_a_graph_without_orders_says_what_to_do(
    target: str, message: str, script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _render([f"{script}:{target}", "-o", str(tmp_path / "q.svg"), "--color-by", "order"], capsys)
    assert code == cli.EXIT_BAD_INPUT
    assert re.search(message, err)
    assert not (tmp_path / "q.svg").exists()


@pytest.mark.parametrize(
    "argv", [["--gradients"], ["--color-by", "gradient"], ["--gradients", "--color-by", "gradient"]]
)
def test_gradient_colouring_by_either_option(
    argv: list[str], script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dot = tmp_path / "g.dot"
    code, out, err = _render([f"{script}:plain", "-o", str(dot), *argv], capsys)
    assert code == 0, err
    assert "largest gradient norm" in out  # the replay ran and its summary was printed
    assert "gradient norm" in dot.read_text()  # the legend of the gradient colouring


def test_gradients_with_order_colouring_replays_and_fills_by_order(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dot = tmp_path / "d.dot"
    code, out, err = _render([f"{script}:penalty", "-o", str(dot), "--gradients", "--color-by", "order"], capsys)
    assert code == 0, err
    assert "largest gradient norm" in out
    assert "order 2 of " in dot.read_text() and "gradient norm" not in dot.read_text()


def test_an_unknown_colouring_is_refused(script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["render", f"{script}:plain", "-o", str(tmp_path / "x.svg"), "--color-by", "dtype"])
    assert e.value.code == 2
    assert "invalid choice: 'dtype' (choose from 'device', 'gradient', 'order', 'check')" in capsys.readouterr().err
