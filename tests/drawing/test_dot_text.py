"""The one DOT escaping function: each hostile string reads back, through Graphviz, as the text typed."""

from __future__ import annotations

import ast
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import graphviz_app
from graphviz_app.drawing.dot_text import dot_id, dot_lines, dot_string, escape_text, graphviz_attr, html_text

SVG_NS = "{http://www.w3.org/2000/svg}"

# (text, what Graphviz draws): the drawn text is the typed text, save where it cannot be (controls, surrogates).
CASES = [
    ("plain", "plain"),
    ("trailing\\", "trailing\\"),
    ("three\\\\\\", "three\\\\\\"),
    ('quote"', 'quote"'),
    ('esc\\"aped', 'esc\\"aped'),
    ("<b>html</b>", "<b>html</b>"),
    ("<<TABLE></TABLE>>", "<<TABLE></TABLE>>"),
    ("\\N \\G \\l \\n", "\\N \\G \\l \\n"),
    ("&lt; &amp; &#60;", "&lt; &amp; &#60;"),
    ("nul\x00byte", "nul\u2400byte"),
    ("esc\x1b", "esc\u241b"),
    ("del\x7f", "del\u2421"),
    ("lone\ud800", "lone\ufffd"),
    ("tab\there", "tab here"),
    ("node", "node"),
    ("a:b:c", "a:b:c"),
]


def _drawn_texts(dot: str) -> list[str]:
    run = subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True, timeout=120, check=True)
    return [t.text or "" for t in ET.fromstring(run.stdout).iter(f"{SVG_NS}text")]


def test_every_case_draws_as_typed_as_one_node_each() -> None:
    body = "".join(f"\t{dot_id(f'id {i} {text}')} [label={dot_string(text)}]\n" for i, (text, _) in enumerate(CASES))
    texts = _drawn_texts("digraph {\n" + body + "}\n")
    assert texts == [drawn for _, drawn in CASES]  # one node per case, none merged, none injected


def test_line_breaks_become_lines_and_never_escape_the_string() -> None:
    texts = _drawn_texts("digraph {\n\tn [label=" + dot_lines(["one\ntwo", "three\\"]) + "]\n}\n")
    assert texts == ["one", "two", "three\\"]


def test_left_justified_lines_end_with_a_left_break() -> None:
    assert dot_lines(["a", "b\\"], justify="left") == '"a\\lb\\\\\\l"'


@pytest.mark.parametrize(("text", "expected"), [("n0", "n0"), ("cluster_x", "cluster_x"), ("a b", '"a b"'),
                                                ("graph", '"graph"'), ("1x", '"1x"'), ("x\\", '"x\\\\"')])
def test_ids_are_bare_only_when_plain(text: str, expected: str) -> None:
    assert dot_id(text) == expected


@pytest.mark.parametrize("text", [text for text, _ in CASES])
def test_the_graphviz_package_writes_an_escaped_attribute_unchanged(text: str) -> None:
    import graphviz

    dot = graphviz.Digraph()
    dot.graph_attr["label"] = graphviz_attr(text)
    label_line = next(line for line in dot.source.splitlines() if "label=" in line)
    escaped = escape_text(text)
    assert f"label={escaped}" in label_line or f'label="{escaped}"' in label_line


def test_html_cells_get_entities_and_no_control_characters() -> None:
    assert html_text('<b a="1">&\x00\ud800') == "&lt;b a=&quot;1&quot;&gt;&amp;\u2400\ufffd"


def test_no_module_writes_dot_with_graphviz_quote() -> None:
    """graphviz.quote() leaves a final backslash unescaped: every DOT writer goes through dot_text."""
    root = Path(graphviz_app.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "graphviz.quoting":
                names = {a.name for a in node.names} & {"quote", "quote_edge", "escape"}
                if names:
                    offenders.append(f"{path.relative_to(root)}: {sorted(names)}")
            if isinstance(node, ast.Attribute) and node.attr in ("quote", "quote_edge", "escape") and \
                    isinstance(node.value, ast.Name) and node.value.id == "graphviz":
                offenders.append(f"{path.relative_to(root)}:{node.lineno}: graphviz.{node.attr}")
    assert offenders == []
