"""Pictures within a deadline: the cost model, folded and partial views with notes, a depth that folds nothing."""

from __future__ import annotations

import shutil
import time
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_app import save, trace, trace_model
from graphviz_app.analysis.collapse import collapse
from graphviz_app.drawing.cost import measure
from graphviz_app.drawing.renderer import export, export_drawing
from graphviz_app.model import Edge, Graph, Node, NodeKind

DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(DOT is None, reason="Graphviz's dot is not installed (apt-get install graphviz)")


def blocks(count: int = 6) -> Graph:
    """A model of `count` blocks, each Linear -> Tanh -> Linear: modules at depth 1 and 2."""
    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)) for _ in range(count)))
    return trace_model(model, torch.randn(2, 4))


def unrolled(steps: int) -> Graph:
    """A hand-built recurrence: one weight leaf feeds every step of a chain."""
    nodes = [Node("w", NodeKind.LEAF, "weight")] + [Node(f"s{i}", NodeKind.OP, "MulBackward0") for i in range(steps)]
    edges = [Edge(f"s{i + 1}", f"s{i}") for i in range(steps - 1)] + [Edge("w", f"s{i}") for i in range(steps)]
    return Graph(tuple(nodes), tuple(edges))


def slow_above(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: int) -> None:
    """A `dot` that lays out as dot does up to `nodes` node statements and hangs (asleep) above."""
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    exe = bin_dir / "dot"
    exe.write_text(
        "#!/bin/sh\n"
        f'tmp=$(mktemp -p "{tmp_path}")\ncat > "$tmp"\n'
        f"if [ \"$(grep -c '\\[label=' \"$tmp\")\" -gt {nodes} ]; then exec /bin/sleep 60; fi\n"
        f'exec "{DOT}" "$@" < "$tmp"\n'
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def costly(monkeypatch: pytest.MonkeyPatch, seconds_per_work: float) -> None:
    """Make the cost model predict `seconds_per_work` CPU seconds per unit of layout work."""
    monkeypatch.setattr("graphviz_app.drawing.cost.ENGINE_FIT",
                        {"dot": (seconds_per_work, 1.0), "graphviz-pure": (seconds_per_work, 1.0)})
    monkeypatch.setattr("graphviz_app.drawing.fallback.load_factor", lambda: 1.0)


def test_long_edges_cost_more_than_nodes_alone() -> None:
    chain = Graph(tuple(Node(f"s{i}", NodeKind.OP, "MulBackward0") for i in range(200)),
                  tuple(Edge(f"s{i + 1}", f"s{i}") for i in range(199)))
    rnn = unrolled(200)
    assert measure(chain).virtual == 0
    # The weight sits beside the first step and reaches each later one across the ranks between.
    assert measure(rnn).virtual == sum(range(200))
    assert measure(rnn).seconds("dot") > 100 * measure(chain).seconds("dot")


def test_module_frames_are_counted() -> None:
    graph = blocks(3)
    assert measure(graph, clusters=True).clusters == 1 + 3 + 3 * 3  # the root, each block, its Linears and Tanh
    assert measure(graph, clusters=False).clusters == 0


@needs_dot
def test_a_view_predicted_too_slow_is_folded_largest_module_first_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = blocks(6)
    full = len(graph.nodes)
    costly(monkeypatch, 3.0 / full)  # the full view: about 7 s; the deadline allows 5 s for it
    lines: list[str] = []
    drawn = export_drawing(graph, "svg", engine="dot", timeout=10.0, progress=lines.append)
    assert drawn.folded and not drawn.partial and not drawn.complete
    assert len(drawn.graph.nodes) < full
    assert any(n.kind is NodeKind.MODULE for n in drawn.graph.nodes)
    assert drawn.notes[0].startswith(f"folded {len(drawn.folded)} module(s) into boxes to fit the 10 s deadline: ")
    assert drawn.notes[0] in drawn.graph.notes
    svg = drawn.data.decode()
    assert "<svg" in svg and "folded " in svg and "module(s) into boxes" in svg  # the note is in the picture
    assert any(line.startswith("laying out ") for line in lines) and lines[-1].startswith("laid out in ")


@needs_dot
def test_a_graph_without_modules_is_cut_to_the_nodes_nearest_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = Graph(tuple(Node(f"s{i}", NodeKind.OP, "MulBackward0") for i in range(300)),
                  tuple(Edge(f"s{i + 1}", f"s{i}") for i in range(299)))  # a chain: quick for the real dot
    costly(monkeypatch, 0.05)  # the full view: 30 s; the first 100 nodes (200 work) fit the 10 s share of 20 s
    cut = r"drew only the \d+ nodes nearest the output, of 300, to fit the 20 s deadline"
    with pytest.warns(UserWarning, match=cut):
        svg = export(graph, "svg", engine="dot", timeout=20.0).decode()
    assert "<title>s0</title>" in svg and "<title>s299</title>" not in svg  # s0 is the output's end


@needs_dot
@pytest.mark.slow  # waits out the hanging layout's share of the deadline
def test_a_layout_that_runs_past_its_share_is_stopped_and_a_folded_view_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = blocks(6)
    slow_above(tmp_path, monkeypatch, nodes=30)  # the full view hangs; a folded one is quick
    start = time.monotonic()
    # 20 s: the hanging view is stopped at 15, and the folded one has about 2 s (a shell and dot starting on a
    # busy machine; with 8 s it had half a second and failed at load 4 on 2 cores).
    drawn = export_drawing(graph, "svg", engine="dot", timeout=20.0)
    took = time.monotonic() - start
    # The deadline is the feature: stopped, not waiting out the 60 s hang (a margin for a busy machine's
    # process starts, far below what waiting would take).
    assert took < 20.0 + 15.0
    assert len(drawn.timeouts) >= 1 and drawn.folded
    assert drawn.busy  # the hanging layout slept: it got no CPU, as a layout starved by load would
    assert "<svg" in drawn.data.decode()


@needs_dot
def test_no_timeout_draws_the_full_view_however_costly_it_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = blocks(2)
    costly(monkeypatch, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        drawn = export_drawing(graph, "svg", engine="dot", timeout=None)
    assert drawn.complete and drawn.notes == () and len(drawn.graph.nodes) == len(graph.nodes)


def test_a_depth_that_folds_nothing_says_so_and_names_the_depth_that_would() -> None:
    graph = blocks(2)
    assert "folds nothing" not in " ".join(collapse(graph, depth=1).notes)
    notes = collapse(graph, depth=2, roll=True).notes
    assert ("depth=2 folds nothing: the deepest module with ops is at depth 2 ('1.2'); "
            "depth=1 draws the modules at depth 2 as boxes") in notes


def test_a_graph_of_the_root_module_only_says_no_depth_folds_it() -> None:
    x = torch.randn(2, 3)
    graph = trace_model(nn.Linear(3, 2), x)
    assert any(n.startswith("depth=1 folds nothing: every op belongs to the root module")
               for n in collapse(graph, depth=1).notes)


@needs_dot
def test_save_warns_at_the_caller_when_depth_folds_nothing(tmp_path: Path) -> None:
    graph = blocks(2)
    with pytest.warns(UserWarning, match=r"depth=5 folds nothing") as caught:
        save(graph, tmp_path / "g.svg", depth=5)
    assert caught[0].filename == __file__


def test_json_and_dot_need_no_layout_and_no_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    costly(monkeypatch, 1.0)
    graph = trace(torch.ones(2, requires_grad=True).exp().sum())
    assert export(graph, "json", timeout=0.001).startswith(b"{")
    assert export(graph, "dot", timeout=0.001).startswith(b"digraph")
