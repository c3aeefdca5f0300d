"""Two graphs in synced panes: the compare file's data, `save((a, b), ...)` and `graphviz-app diff -o x.html`."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import re
from pathlib import Path

import pytest
from viewer_support import compare_pair, module_graph, with_order

from graphviz_app import diff, save
from graphviz_app.analysis.diff_view import STATUSES, pair_view
from graphviz_app.cli.commands import main
from graphviz_app.errors import UnsupportedFormatError
from graphviz_app.viewer.compare import COMPARE_FORMAT, compare_html, compare_payload


def _data(page: str) -> dict:
    packed = re.search(r'id="gv-payload">([^<]*)<', page)
    assert packed is not None
    return json.loads(gzip.decompress(base64.b64decode(packed.group(1))))


def test_the_alignment_is_diffs_both_ways_by_index_with_each_nodes_status() -> None:
    a, b = compare_pair()
    found = diff(a, b)
    pair = pair_view(a, b, found)
    index_a = {n.id: i for i, n in enumerate(a.nodes)}
    index_b = {n.id: i for i, n in enumerate(b.nodes)}
    assert {(a.nodes[i].id, b.nodes[j].id) for i, j in enumerate(pair.match_a) if j >= 0} == set(found.matched)
    assert all(pair.match_b[j] == i for i, j in enumerate(pair.match_a) if j >= 0)
    removed = {a.nodes[i].id for i, s in enumerate(pair.status_a) if s == "removed"}
    assert removed == {n.id for n in found.only_a} and len(removed) == 4  # blocks.2: act, fc, weight, mat1
    assert all(a.nodes[index_a[i]].module in ("blocks.2.act", "blocks.2.fc", None) for i in removed)
    changed_b = {b.nodes[j].id for j, s in enumerate(pair.status_b) if s == "changed"}
    assert changed_b == {c.b for c in found.changes} and all(b.nodes[index_b[i]].name == "mat1" for i in changed_b)
    assert "added" not in pair.status_b


def test_the_payload_holds_both_graphs_the_alignment_and_the_change_of_saved_bytes_and_dtype() -> None:
    a, b = compare_pair()
    data = compare_payload(a, b, labels=("fp32", "bf16"))
    assert data["format"] == COMPARE_FORMAT and data["labels"] == ["fp32", "bf16"]
    assert [p["title"] for p in data["panes"]] == ["fp32", "bf16"]
    assert len(data["match"][0]) == len(a.nodes) and len(data["status"][1]) == len(b.nodes)
    assert data["summary"].startswith("0 node(s) added, 4 removed")
    for side, graph in ((0, a), (1, b)):
        overlays = {o["key"]: o for o in data["panes"][side]["overlays"]}
        assert {"delta:memory", "delta:dtype"} <= set(overlays)
        saved = [i for i, n in enumerate(graph.nodes) if n.name == "mat1" and data["match"][side][i] >= 0]
        assert saved and all(overlays["delta:memory"]["node"][i] == -16.0 for i in saved)  # 32 B -> 16 B, b − a
        assert all(overlays["delta:dtype"]["node"][i] == 1.0 for i in saved)
        assert overlays["delta:memory"]["symmetric"] is True and overlays["delta:memory"]["label"].endswith(
            "(bf16 − fp32)")
        box = next(g for g, (k, m) in enumerate(zip(data["panes"][side]["tree"]["kind"],
                                                     data["panes"][side]["tree"]["module"], strict=True))
                   if k == "module" and m == "blocks.0.fc")
        assert overlays["delta:memory"]["group"][box] == -16.0  # its one saved tensor's change, counted once
        unmatched = [i for i, j in enumerate(data["match"][side]) if j < 0]
        assert all(overlays["delta:memory"]["node"][i] is None for i in unmatched)
    assert {STATUSES[c] for c in data["status"][0]} == {"same", "removed", "changed"}
    found = diff(a, b)
    for side, graph, only in ((0, a, found.edges_only_a), (1, b, found.edges_only_b)):
        named = {(graph.edges[k].src, graph.edges[k].dst) for k in data["edges"][side]}
        assert named == {(e.src, e.dst) for e in only} and named


@pytest.mark.parametrize(("labels", "words"), [
    (("only one",), r"labels must be two non-empty texts"),
    ("ab", r"labels must be two non-empty texts"),
    (("fp32", " "), r"labels must be two non-empty texts"),
])
def test_bad_labels_say_what_is_expected(labels: object, words: str) -> None:
    a, b = compare_pair()
    with pytest.raises(ValueError, match=words):
        compare_payload(a, b, labels=labels)  # type: ignore[arg-type]


def test_save_writes_a_pair_as_one_self_contained_html_file_and_refuses_other_formats(tmp_path: Path) -> None:
    a, b = compare_pair()
    path = save((a, b), tmp_path / "cmp.html", labels=("fp32", "bf16"))
    page = path.read_text(encoding="utf-8")
    assert "GraphvizAppViewer.mountCompare" in page and "connect-src 'none'" in page
    assert not re.search(r"""(src|href)=["']?https?:""", page)  # nothing is fetched
    assert _data(page)["labels"] == ["fp32", "bf16"]
    with pytest.raises(UnsupportedFormatError, match=r"a pair of graphs is written as synced panes in an \.html file"):
        save((a, b), tmp_path / "cmp.svg")
    with pytest.raises(TypeError, match=r"labels=\.\.\.\) names the panes of a pair"):
        save(a, tmp_path / "one.html", labels=("a", "b"))
    with pytest.raises(TypeError, match="a pair of graphs takes labels= and rankdir= only, not depth, overlays"):
        save((a, b), tmp_path / "cmp.html", depth=2, overlays={"x": {}})
    with pytest.raises(TypeError, match="graph_b must be a Graph"):
        compare_html(a, "b.json")  # type: ignore[arg-type]


def test_the_cli_diff_writes_the_synced_panes_for_html_named_by_the_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = compare_pair()
    save(a, tmp_path / "fp32.json")
    save(b, tmp_path / "bf16.json")
    out = tmp_path / "cmp.html"
    assert main(["diff", str(tmp_path / "fp32.json"), str(tmp_path / "bf16.json"), "-o", str(out)]) == 1
    assert "4 removed" in capsys.readouterr().out
    data = _data(out.read_text(encoding="utf-8"))
    assert data["format"] == COMPARE_FORMAT and data["labels"] == ["fp32", "bf16"]
    assert main(["diff", str(tmp_path / "fp32.json"), str(tmp_path / "fp32.json"), "-o", str(out),
                 "--labels", "before", "after"]) == 0
    assert _data(out.read_text(encoding="utf-8"))["labels"] == ["before", "after"]


def test_a_graph_against_itself_has_every_node_matched_and_nothing_coloured() -> None:
    g = module_graph(2)
    data = compare_payload(g, g)
    assert data["match"][0] == list(range(len(g.nodes))) and set(data["status"][1]) == {0}
    assert data["summary"] == "the graphs are the same"


def test_bytes_at_the_peak_and_gradient_norm_changes_are_colourings_when_both_graphs_have_them() -> None:
    a, b = compare_pair()
    a, b = with_order(a), with_order(b)
    head = next(i for i, n in enumerate(b.nodes) if n.module == "head")
    grad = dataclasses.replace(b.nodes[head].grad, norm=0.75)  # 0.5 in graph a
    b = dataclasses.replace(b, nodes=tuple(dataclasses.replace(n, grad=grad) if i == head else n
                                           for i, n in enumerate(b.nodes)))
    data = compare_payload(a, b, labels=("fp32", "bf16"))
    for side in (0, 1):
        overlays = {o["key"]: o for o in data["panes"][side]["overlays"]}
        assert {"delta:memory", "delta:held", "delta:gradient", "delta:dtype"} <= set(overlays)
        i = head if side else data["match"][1][head]
        assert overlays["delta:gradient"]["node"][i] == pytest.approx(0.25)  # b − a on both sides
        assert overlays["delta:gradient"]["group"][0] == pytest.approx(0.25)  # the largest change inside
        assert overlays["delta:held"]["label"] == "Δ bytes at the peak (bf16 − fp32)"
