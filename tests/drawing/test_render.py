"""What a person sees: golden DOT, device colours, highlights, legend, labels, files, escaping."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import graphviz
import pytest
import torch
from core_corpus import CORPUS, build
from core_golden import assert_golden, golden_graphs
from core_handmade import three_devices

from graphviz_app import Graph, render, save, trace
from graphviz_app.drawing.style import CROSS_DEVICE_STYLE, device_color, node_label
from graphviz_app.model import Node, NodeKind, TensorInfo

SVG_NS = "{http://www.w3.org/2000/svg}"


def _svg_texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG_NS}text")]


def _node_line(source: str, node_id: str) -> str:
    return next(line for line in source.splitlines() if line.startswith(f"\t{node_id} ["))


def _seed_graph() -> Graph:
    outputs, params = golden_graphs()["seed_example"]()
    return trace(outputs, params)


@pytest.mark.parametrize("name", list(golden_graphs()))
def test_golden_dot(name: str) -> None:
    outputs, params = golden_graphs()[name]()
    assert_golden(f"{name}.dot", render(trace(outputs, params)).source)


def test_golden_dot_of_a_hand_built_three_device_graph() -> None:
    assert_golden("three_devices.dot", render(three_devices()).source)


def test_devices_get_different_fill_colours() -> None:
    source = render(three_devices()).source
    fills = {dev: f'fillcolor="{device_color(dev)}"' for dev in ("cpu", "cuda:0", "cuda:1")}
    assert len(set(fills.values())) == 3
    assert fills["cpu"] in _node_line(source, "n4")  # x
    assert fills["cuda:0"] in _node_line(source, "n3")  # its copy to cuda:0
    assert fills["cuda:1"] in _node_line(source, "n1")  # the add on cuda:1


@pytest.mark.parametrize(("node_id", "highlighted"), [("n1", False), ("n2", True), ("n3", True), ("n4", False)])
def test_cross_device_ops_are_highlighted(node_id: str, highlighted: bool) -> None:
    line = _node_line(render(three_devices()).source, node_id)
    marked = f'color="{CROSS_DEVICE_STYLE["color"]}"' in line and "penwidth=3" in line
    assert marked is highlighted


def test_legend_lists_the_devices_and_the_highlight() -> None:
    svg = render(three_devices()).pipe(format="svg", encoding="utf-8")
    texts = _svg_texts(svg)
    for entry in ("legend", "on cpu", "on cuda:0", "on cuda:1", "red border", "op whose inputs are on another device"):
        assert entry in texts
    seed_texts = _svg_texts(render(_seed_graph()).pipe(format="svg", encoding="utf-8"))
    assert "on cpu" in seed_texts and "red border" not in seed_texts and "on cuda:0" not in seed_texts


@pytest.mark.parametrize(("legend", "present"), [(True, True), (False, False)])
def test_legend_can_be_left_out(legend: bool, present: bool) -> None:
    assert ("\tlegend [" in render(_seed_graph(), legend=legend).source) is present


@pytest.mark.parametrize("rankdir", ["TB", "BT", "LR", "RL"])
def test_rankdir(rankdir: str) -> None:
    assert f"rankdir={rankdir}" in render(_seed_graph(), rankdir=rankdir).source


def _info(**kw: object) -> TensorInfo:
    base = dict(name=None, shape=(3,), dtype="float32", device="cpu", numel=3, bytes=12, requires_grad=True)
    return TensorInfo(**{**base, **kw})  # type: ignore[arg-type]


LABELS = [
    ("named leaf", Node("n0", NodeKind.LEAF, "w", _info(name="w", values=(0.0, 1.5, 2.0))),
     "w\\n(3,) float32 cpu\\n= [0, 1.5, 2]"),
    ("unnamed leaf", Node("n0", NodeKind.LEAF, "", _info(values=(1, 2, 3), dtype="int64")),
     "(3,) int64 cpu\\n= [1, 2, 3]"),
    ("scalar output", Node("n0", NodeKind.OUTPUT, "output", _info(shape=(), numel=1, bytes=4, values=(12.666,))),
     "output\\n() float32 cpu\\n= 12.67"),
    ("saved shows bytes", Node("n0", NodeKind.SAVED, "self", _info(shape=(1024, 1024), numel=1 << 20, bytes=4 << 20)),
     "self\\n(1024, 1024) float32 cpu\\n4.0 MiB"),
    ("saved on a GPU", Node("n0", NodeKind.SAVED, "result", _info(device="cuda:1", dtype="float16", bytes=6)),
     "result\\n(3,) float16 cuda:1\\n6 B"),
    ("freed saved", Node("n0", NodeKind.SAVED, "other", _info(freed=True)), "other\\n(freed by backward)"),
    ("op with attrs", Node("n0", NodeKind.OP, "SumBackward1", _info(), (("dim", "(0,)"), ("keepdim", "False"))),
     "SumBackward1\\ndim: (0,)\\nkeepdim: False"),
    ("many values", Node("n0", NodeKind.LEAF, "v", _info(shape=(8,), values=tuple(float(i) for i in range(8)))),
     "v\\n(8,) float32 cpu\\n= [0, 1, 2, 3, 4, 5, ...]"),
    ("view base", Node("n0", NodeKind.VIEW_BASE, "view base", _info(values=(1.0, 2.0, 3.0))),
     "view base\\n(3,) float32 cpu"),
]


@pytest.mark.parametrize(("node", "label"), [c[1:] for c in LABELS], ids=[c[0] for c in LABELS])
def test_labels_show_name_shape_dtype_device_and_bytes(node: Node, label: str) -> None:
    assert node_label(node) == label


@pytest.mark.parametrize(
    ("max_chars", "line"), [(50, "bias: " + "x" * 40), (20, "bias: xxxxxxxxxxx..."), (10, "bias: x...")]
)
def test_long_attributes_are_cut(max_chars: int, line: str) -> None:
    node = Node("n0", NodeKind.OP, "Op", None, (("bias", "x" * 40),))
    assert node_label(node, max_attr_chars=max_chars) == "Op\\n" + line
    assert len(line) <= max_chars


def test_seed_svg_shows_every_label_line() -> None:
    texts = _svg_texts(render(_seed_graph()).pipe(format="svg", encoding="utf-8"))
    for line in ("MeanBackward0", "PowBackward0", "exponent: 2", "x", "(3,) float32 cpu", "= [0, 1, 2]",
                 "self", "12 B", "output", "() float32 cpu", "= 12.67"):
        assert line in texts


HOSTILE = [
    "<script>alert(1)</script>", "back\\slash", "trailing\\", 'quo"te', "esc\\n\\N\\G", "a&lt;b", "&#60;img&#62;"
]


def test_hostile_names_are_escaped_in_svg_and_show_as_typed() -> None:
    leaves = [torch.ones(2, requires_grad=True) for _ in HOSTILE]
    y = sum(((i + 1) * t).sum() for i, t in enumerate(leaves))
    svg = render(trace(y, dict(zip(HOSTILE, leaves, strict=True)))).pipe(format="svg", encoding="utf-8")
    root = ET.fromstring(svg)  # still well-formed XML
    assert not any(el.tag.endswith(("script", "img")) for el in root.iter())
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    texts = _svg_texts(svg)
    for name in HOSTILE:
        assert name in texts, f"{name!r} is not shown as typed"


SAVE = [
    ("svg", lambda data: ET.fromstring(data).tag == f"{SVG_NS}svg"),
    ("png", lambda data: data.startswith(b"\x89PNG\r\n\x1a\n")),
    ("pdf", lambda data: data.startswith(b"%PDF-") and b"%%EOF" in data[-1024:]),
    ("dot", lambda data: data.startswith(b"digraph autograd {")),
    ("json", lambda data: Graph.from_json(data.decode()) is not None),
]


@pytest.mark.parametrize(("suffix", "valid"), SAVE, ids=[s[0] for s in SAVE])
def test_save_writes_a_valid_file(tmp_path: Path, suffix: str, valid: object) -> None:
    graph = _seed_graph()
    path = save(graph, tmp_path / f"seed.{suffix.upper() if suffix == 'png' else suffix}")
    data = path.read_bytes()
    assert path.parent == tmp_path and valid(data)  # type: ignore[operator]


def test_saved_dot_is_what_graphviz_reads(tmp_path: Path) -> None:
    graph = _seed_graph()
    path = save(graph, tmp_path / "seed.dot", rankdir="LR")
    assert path.read_text() == render(graph, rankdir="LR").source
    canon = subprocess.run(["dot", "-Tcanon", str(path)], capture_output=True, text=True, check=True)
    assert "rankdir=LR" in canon.stdout and "PowBackward0" in canon.stdout


def test_saved_json_is_the_graph(tmp_path: Path) -> None:
    graph = _seed_graph()
    assert Graph.from_json(save(graph, tmp_path / "seed.json").read_text()) == graph


def test_notebook_display_is_the_viewer_and_svg_text() -> None:
    graph = _seed_graph()
    bundle = graph._repr_mimebundle_()
    assert list(bundle) == ["text/plain", "text/html", "image/svg+xml"]
    assert '<iframe class="graphviz-app-viewer"' in bundle["text/html"]
    svg = bundle["image/svg+xml"]
    assert isinstance(svg, str) and ET.fromstring(svg).tag == f"{SVG_NS}svg"
    assert "MeanBackward0" in _svg_texts(svg)
    assert graph._repr_svg_() == svg


def test_render_lays_nothing_out_and_names_nodes_in_walk_order() -> None:
    graph = _seed_graph()
    digraph = render(graph)
    ids = [line.split(" ", 1)[0].strip() for line in digraph.body if "->" not in line]
    assert ids == [n.id for n in graph.nodes] + ["legend"]
    assert render(graph).source == digraph.source  # deterministic


def _graphviz_statements(graph: Graph, max_attr_chars: int = 50) -> list[str]:
    """Node and edge statements as graphviz's own Digraph.node()/edge() write them."""
    from graphviz_app.drawing.style import EDGE_STYLE, KIND_STYLE

    dot = graphviz.Digraph()
    cross = graph.cross_device_ops()
    for node in graph.nodes:
        attrs = dict(KIND_STYLE[node.kind], fillcolor=device_color(node.device))
        if node.id in cross:
            attrs.update(CROSS_DEVICE_STYLE)
        dot.node(node.id, graphviz.nohtml(node_label(node, max_attr_chars=max_attr_chars)), **attrs)
    for edge in graph.edges:
        dot.edge(edge.src, edge.dst, **EDGE_STYLE[edge.kind])
    return dot.body


def _hostile_graph() -> Graph:
    leaves = [torch.ones(2, requires_grad=True) for _ in HOSTILE]
    return trace(sum(((i + 1) * t).sum() for i, t in enumerate(leaves)), dict(zip(HOSTILE, leaves, strict=True)))


@pytest.mark.parametrize("name", [*CORPUS, "hostile", "three_devices"])
def test_statements_are_what_graphviz_itself_writes(name: str) -> None:
    """render() writes statements without Digraph.node()/edge() for speed; the text must not change."""
    if name == "hostile":
        graph = _hostile_graph()
    elif name == "three_devices":
        graph = three_devices()
    else:
        case = build(name)
        graph = trace(case.outputs, case.params)
    for max_chars in (50, 12):
        body = render(graph, max_attr_chars=max_chars).body
        expected = _graphviz_statements(graph, max_chars)
        assert body[: len(expected)] == expected
