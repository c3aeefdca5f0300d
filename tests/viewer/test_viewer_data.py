"""What the viewer is sent: the whole graph, compact, and the boxes it opens on (no browser needed)."""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
from dataclasses import replace
from typing import Any

import pytest
from viewer_support import HOSTILE, chain_graph, module_graph

from graphviz_app.drawing.renderer import export
from graphviz_app.model import GradInfo, Graph, to_compact
from graphviz_app.viewer.packing import unpack
from graphviz_app.viewer.payload import encode, payload
from graphviz_app.viewer.tree import READABLE, build_tree, initial_open

MB = 1_000_000


def _decode(text: str) -> dict[str, Any]:
    """The payload in `text`, its packed columns read back (`packing.unpack`)."""
    found: dict[str, Any] = unpack(json.loads(gzip.decompress(base64.b64decode(text))))
    return found


def _shown(tree: dict[str, list[Any]], opened: list[int]) -> list[str]:
    """Labels of the closed boxes drawn in the opening view."""
    return [tree["label"][g] for g, p in enumerate(tree["parent"]) if p in opened and g not in opened]


def _varied(graph: Graph) -> Graph:
    """`graph` with a different gradient and source line on every node: data that compresses badly."""
    nodes = []
    for k, n in enumerate(graph.nodes):
        grad = None if n.grad is None else GradInfo(numel=8, norm=1 / (k + 3), max_abs=k * 1e-3 + 1 / 7,
                                                    mean_abs=(k % 97) / 89 + 1e-9)
        nodes.append(replace(n, grad=grad, source=f"model_{k % 50}.py:{k} in forward" if n.source else None))
    return replace(graph, nodes=tuple(nodes))


@pytest.mark.slow
def test_a_100000_op_chain_opens_as_one_folded_run_never_as_100000_nodes() -> None:
    graph = chain_graph(100_000)
    tree = build_tree(graph)
    opened = initial_open(tree)
    assert opened == [0]
    assert _shown(tree.to_dict(), opened) == ["SinBackward0 → MulBackward0 ×50,000"]
    drawn = [i for i, g in enumerate(tree.node_group) if g in opened]
    assert len(drawn) <= 4  # the output end (output, leaf): everything else is inside the fold


@pytest.mark.slow
def test_a_100000_node_graph_travels_in_at_most_15_mb_with_everything_the_model_knows() -> None:
    graph = _varied(module_graph(25_000))  # 100,003 nodes: tensors, saved tensors, modules, sources, gradients
    assert len(graph.nodes) > 100_000
    data = encode(payload(graph))
    assert len(data) <= 15 * MB, f"{len(data) / MB:.1f} MB"
    back = _decode(data)
    assert Graph.from_dict(back["graph"]) == graph  # nothing lost: the details panel reads it from here
    assert len(back["tree"]["node_group"]) == len(graph.nodes)
    assert {o["key"] for o in back["overlays"]} >= {"gradient", "memory"}


def test_a_rolled_run_of_modules_is_one_box_with_each_block_an_instance() -> None:
    graph = module_graph(3)
    tree = build_tree(graph)
    rolls = [g for g, kind in enumerate(tree.kind) if kind == "roll"]
    assert len(rolls) == 1 and tree.count[rolls[0]] == 3
    assert "×3" in tree.label[rolls[0]] and tree.module[rolls[0]] == "blocks.0"
    members = sorted((tree.instance[g], tree.module[g]) for g, p in enumerate(tree.parent) if p == rolls[0])
    assert members == [(0, "blocks.0"), (1, "blocks.1"), (2, "blocks.2")]
    assert build_tree(graph, roll=False).kind.count("roll") == 0


def test_the_opening_view_is_the_deepest_module_level_that_stays_readable() -> None:
    tree = build_tree(module_graph(200))
    opened = initial_open(tree)
    assert [tree.module[g] for g in opened if tree.kind[g] == "module"] == [
        "head", "blocks", "blocks.0", "blocks.0.fc", "blocks.0.act"]  # the roll shows its first block, open
    boxes = [g for g, p in enumerate(tree.parent)
             if p in opened and g not in opened and not (tree.kind[p] == "roll" and tree.instance[g] > 0)]
    nodes = [i for i, g in enumerate(tree.node_group) if g in opened]
    assert len(boxes) + len(nodes) <= READABLE


def _saved(schema: int) -> tuple[Graph, dict[str, Any]]:
    """A graph, and the dict a file of that schema holds for it (1: written before modules and gradients)."""
    if schema == 3:
        graph = module_graph(2)
        return graph, to_compact(graph)
    graph = module_graph(2) if schema == 2 else chain_graph(6)
    saved = graph.to_dict()
    saved["schema"] = schema
    return graph, saved


def _packed(page: str) -> str:
    found = re.search(r'id="gv-payload">([^<]*)</script>', page)
    assert found is not None, "no payload in the page"
    return found.group(1)


@pytest.mark.parametrize("schema", [1, 2, 3])
def test_a_saved_graph_of_every_schema_goes_into_the_file_whole(schema: int) -> None:
    graph, saved = _saved(schema)
    page = export(Graph.from_dict(saved), "html").decode()
    assert Graph.from_dict(_decode(_packed(page))["graph"]) == graph


def test_hostile_names_travel_as_base64_text_and_come_back_unchanged() -> None:
    graph = module_graph(4, hostile=True)
    page = export(graph, "html").decode()
    packed = _packed(page)
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", packed)
    back = Graph.from_dict(_decode(packed)["graph"])
    assert back == graph
    assert set(HOSTILE) <= {n.name for n in back.nodes} | {n.source for n in back.nodes}
    assert page.count("<script") == 3  # the payload, the bundle and the mount call: nothing from the graph


def _nonfinite_graph() -> Graph:
    """The head's gradient statistics NaN and infinite (a file saved by hand, or a float64 overflow)."""
    graph = module_graph(1)
    grad = GradInfo(numel=8, norm=math.nan, max_abs=math.inf, mean_abs=-math.inf, nan=8, zero_fraction=math.nan)
    return replace(graph, nodes=tuple(replace(n, grad=grad) if n.id == "n1" else n for n in graph.nodes))


def test_nonfinite_gradient_statistics_travel_as_text_in_strict_json() -> None:
    graph = _nonfinite_graph()
    text = json.dumps(to_compact(graph), allow_nan=False)  # what a browser's JSON.parse reads
    grads = json.loads(text)["grads"]
    assert ["nan", "inf", "-inf", "nan"] in [[grads[k][i] for k in ("norm", "max_abs", "mean_abs", "zero_fraction")]
                                            for i in range(len(grads["norm"]))]
    back = Graph.from_dict(json.loads(text)).nodes[1].grad
    assert back is not None and math.isnan(back.norm) and math.isnan(back.zero_fraction)
    assert (back.max_abs, back.mean_abs) == (math.inf, -math.inf)
    assert _decode(_packed(export(graph, "html").decode()))["overlays"][0]["node"][1] is None  # uncoloured


@pytest.mark.parametrize(("value", "words"), [('"lots"', "'lots'"), ("true", "True"), ("null", "None")])
def test_a_gradient_statistic_that_is_no_number_is_refused(value: str, words: str) -> None:
    from graphviz_app.errors import SchemaError

    text = json.dumps(to_compact(module_graph(1))).replace('"norm": [0.5', f'"norm": [{value}', 1)
    with pytest.raises(SchemaError, match=f"a gradient statistic must be a number, found {re.escape(words)}"):
        Graph.from_dict(json.loads(text))
