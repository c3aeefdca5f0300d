"""Which layout program draws a graph, and what happens when one is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graphviz_app.drawing.cost import LayoutCost
from graphviz_app.drawing.layout import PURE_ABOVE_WORK, LayoutTimeout, choose_engine, find_engine, lay_out
from graphviz_app.drawing.renderer import export, render
from graphviz_app.errors import DotNotFoundError, RenderError
from graphviz_app.model import Graph, Node, NodeKind

needs_pure = pytest.mark.skipif(
    find_engine("graphviz-pure") is None, reason="graphviz-pure is not installed (pip install graphviz-pure)"
)


def _graph(n: int = 2) -> Graph:
    return Graph(tuple(Node(f"n{i}", NodeKind.OP, f"Op{i}Backward0") for i in range(n)), ())


@pytest.fixture
def dot_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without `dot`, while graphviz-pure stays installed beside Python."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def _cost(work: int) -> LayoutCost:
    return LayoutCost(nodes=work, edges=0, virtual=0, clusters=0)


@pytest.mark.parametrize(
    ("engine", "fmt", "work", "expected"),
    [
        ("auto", "svg", 10, "dot"),
        ("auto", "pdf", PURE_ABOVE_WORK + 1, "dot"),
        ("dot", "svg", PURE_ABOVE_WORK + 1, "dot"),
        ("graphviz-pure", "svg", 10, "graphviz-pure"),
    ],
)
def test_choice_with_both_programs_installed(engine: str, fmt: str, work: int, expected: str) -> None:
    assert choose_engine(engine, fmt, _cost(work)) == expected


@needs_pure
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_costly_layouts_go_to_graphviz_pure(fmt: str) -> None:
    assert choose_engine("auto", fmt, _cost(PURE_ABOVE_WORK + 1)) == "graphviz-pure"
    assert choose_engine("auto", fmt, _cost(PURE_ABOVE_WORK)) == "dot"


@needs_pure
def test_long_edges_not_node_count_send_a_graph_to_graphviz_pure() -> None:
    # 800 nodes either way: a chain is cheap for dot; a GRU-like graph whose weights feed
    # every step draws long edges across hundreds of ranks, which is what dot's time grows with.
    chain = LayoutCost(nodes=800, edges=799, virtual=0, clusters=0)
    unrolled = LayoutCost(nodes=800, edges=1_100, virtual=20_000, clusters=5)
    assert choose_engine("auto", "svg", chain) == "dot"
    assert choose_engine("auto", "svg", unrolled) == "graphviz-pure"


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(RenderError, match="engine must be one of auto, dot, graphviz-pure, got 'neato'"):
        export(_graph(), "svg", engine="neato")


@needs_pure
@pytest.mark.usefixtures("dot_missing")
def test_without_dot_svg_and_png_fall_back_to_graphviz_pure() -> None:
    assert shutil.which("dot") is None
    svg = export(_graph(), "svg").decode()
    assert "<svg" in svg and "Op1Backward0" in svg
    assert export(_graph(), "png").startswith(b"\x89PNG")


@needs_pure
@pytest.mark.usefixtures("dot_missing")
def test_without_dot_pdf_says_what_to_install() -> None:
    with pytest.raises(DotNotFoundError, match="'dot' program was not found on PATH.*apt-get install graphviz"):
        export(_graph(), "pdf")


@needs_pure
def test_graphviz_pure_cannot_write_pdf() -> None:
    with pytest.raises(RenderError, match="graphviz-pure cannot write PDF; choose .svg or .png"):
        export(_graph(), "pdf", engine="graphviz-pure")


@needs_pure
def test_both_programs_draw_the_same_nodes() -> None:
    source = render(_graph(5)).source
    for engine in ("dot", "graphviz-pure"):
        svg = lay_out(source, "svg", engine=engine).decode()
        assert all(f"Op{i}Backward0" in svg for i in range(5)), engine


def test_a_layout_error_is_reported_with_graphviz_words() -> None:
    with pytest.raises(RenderError, match="dot failed to lay out the graph: .*syntax error"):
        lay_out("digraph { a -> }", "svg", engine="dot")


def test_a_slow_layout_stops_at_the_timeout_and_says_the_machine_was_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "dot"
    slow.write_text("#!/bin/sh\nexec /bin/sleep 5\n")  # runs long without using the CPU: starved, as under load
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    # The layout's own share of the 0.5 s: what planning took on a busy machine comes off it (0.496 s once).
    with pytest.raises(LayoutTimeout, match=r"laying out 2 nodes with dot took over 0\.\d+ s; it got 0\.0 s of CPU in "
                       r"that time: the machine was busy, so trying again when it is quieter may succeed") as info:
        export(_graph(), "svg", engine="dot", timeout=0.5)
    assert info.value.busy and info.value.engine == "dot" and info.value.wall_seconds >= 0.5


def test_a_stopped_layout_reports_the_cpu_it_got(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spin = tmp_path / "dot"
    spin.write_text("#!/bin/sh\nwhile :; do :; done\n")  # all CPU: too big for the time, not starved
    spin.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LayoutTimeout) as info:
        lay_out("digraph {}", "svg", engine="dot", node_count=2, timeout=2.0)
    assert info.value.cpu_seconds is not None and info.value.cpu_seconds > 0
    assert isinstance(info.value, RenderError)  # callers catching RenderError still catch it


def test_progress_is_reported_while_a_layout_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = tmp_path / "dot"
    slow.write_text("#!/bin/sh\n/bin/cat > /dev/null\nexec /bin/sleep 1.5\n")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("graphviz_app.drawing.layout.HEARTBEAT_S", 0.2)
    lines: list[str] = []
    lay_out("digraph {}", "svg", engine="dot", node_count=7, timeout=None, progress=lines.append)
    assert lines and all(line.startswith("still laying out 7 nodes with dot: ") for line in lines)


_PANIC = """thread 'main' panicked at src/rank.rs:212:9:
index out of bounds: the len is 3 but the index is 7
stack backtrace:
   0: rust_begin_unwind
   1: core::panicking::panic_fmt
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
"""


def _fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> None:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / name
    exe.write_text("#!/bin/sh\n/bin/cat > /dev/null\n" + body)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


def test_a_crashed_dot_is_explained_with_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_engine(tmp_path, monkeypatch, "dot", "kill -SEGV $$\n")
    with pytest.raises(RenderError, match=r"^dot crashed \(SIGSEGV\) laying out 2 nodes \(Graphviz's dot overflows "
                       r"its stack on long chains of operations\): draw fewer nodes \(--max-nodes / max_nodes\), "
                       r"try engine 'graphviz-pure'"):
        lay_out("digraph {}", "svg", engine="dot", node_count=2)


def test_a_graphviz_pure_panic_gives_its_message_without_the_backtrace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_engine(tmp_path, monkeypatch, "graphviz-pure",
                 f"[ \"$RUST_BACKTRACE\" = 0 ] || echo backtrace-was-on >&2\n/bin/cat >&2 <<'X'\n{_PANIC}X\nexit 101\n")
    with pytest.raises(RenderError) as info:
        lay_out("digraph {}", "svg", engine="graphviz-pure", node_count=5)
    message = str(info.value)
    assert message.startswith("graphviz-pure crashed laying out 5 nodes (index out of bounds: the len is 3 but the "
                              "index is 7): draw fewer nodes")
    assert "rust_begin_unwind" not in message and "backtrace" not in message and "\n" not in message
