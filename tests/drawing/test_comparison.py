"""`compare(a, b)`: the synced panes as a value: checked input, its notebook forms, and the file it saves."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from viewer_support import compare_pair, module_graph

import graphviz_app
from graphviz_app import compare, diff, save
from graphviz_app.drawing import notebook
from graphviz_app.drawing.comparison import Comparison
from graphviz_app.errors import RenderError, UnsupportedFormatError


@pytest.mark.parametrize(("args", "keywords", "error", "match"), [
    (("graph", None), {}, TypeError, r"compare\(\) takes two Graphs \(from trace\(\)\): graph_a is a str"),
    ((None, "graph"), {}, TypeError, r"graph_b is a str"),
    ((None, None), {"labels": ("fp32",)}, ValueError, r"labels must be two non-empty texts.*\('fp32',\)"),
    ((None, None), {"labels": "ab"}, ValueError, r"labels must be two non-empty texts"),
    ((None, None), {"labels": ("fp32", " ")}, ValueError, r"labels must be two non-empty texts"),
    ((None, None), {"rankdir": "XY"}, ValueError, r"rankdir must be one of TB, LR, BT, RL, got 'XY'"),
    ((None, None), {"title": 3}, TypeError, r"title must be a text or None, got int"),
])
def test_bad_input_is_refused_with_what_to_do(args: tuple[Any, Any], keywords: dict[str, Any],
                                              error: type[Exception], match: str) -> None:
    a, b = compare_pair()
    first, second = (a if args[0] is None else args[0]), (b if args[1] is None else args[1])
    with pytest.raises(error, match=match):
        compare(first, second, **keywords)


def test_the_value_is_public_frozen_and_says_what_it_holds() -> None:
    a, b = compare_pair()
    pair = compare(a, b, labels=("fp32", "bf16"))
    assert graphviz_app.compare is compare and isinstance(pair, Comparison)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.labels = ("x", "y")  # type: ignore[misc]
    assert repr(pair) == "Comparison('fp32': 15 nodes, 'bf16': 11 nodes)"
    assert str(pair.diff) == str(diff(a, b))
    assert (len(pair.diff.only_a), len(pair.diff.only_b)) == (4, 0)  # blocks.2: act, fc, weight, saved mat1


def test_save_writes_the_same_file_as_saving_the_pair(tmp_path: Path) -> None:
    a, b = compare_pair()
    pair = compare(a, b, labels=("fp32", "bf16"))
    written = pair.save(tmp_path / "cmp.html")
    same = save((a, b), tmp_path / "pair.html", labels=("fp32", "bf16"))
    assert written.read_text(encoding="utf-8") == same.read_text(encoding="utf-8") == pair.html()
    titled = compare(a, b, labels=("fp32", "bf16"), title="<b>run 7</b>").save(tmp_path / "t.html")
    assert "<title>&lt;b&gt;run 7&lt;/b&gt;</title>" in titled.read_text(encoding="utf-8")
    with pytest.raises(UnsupportedFormatError, match=r"synced panes in an \.html file, not '\.svg'.*save_diff"):
        pair.save(tmp_path / "cmp.svg")
    with pytest.raises(RenderError, match=r"cannot write .*missing"):
        pair.save(tmp_path / "missing" / "cmp.html")


def test_a_notebook_gets_the_panes_the_script_once_and_the_diff_as_a_picture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(notebook._PAGE, "bundle_sent", False)  # a fresh kernel
    a, b = compare_pair()
    pair = compare(a, b, labels=("fp32", "bf16"))
    first = pair._repr_mimebundle_()
    assert set(first) == {"text/plain", "text/html", "image/svg+xml"}
    assert first["text/plain"].splitlines() == [repr(pair), str(pair.diff).splitlines()[0]]
    assert first["text/html"].count('id="graphviz-app-bundle"') == 1 and "mountCompare" in first["text/html"]
    assert "blocks.2" in first["image/svg+xml"]  # the removed block, in the diff's one picture
    later_graph = module_graph(2)._repr_mimebundle_()["text/html"]  # one graph after it: the page has the script
    later_pair = pair._repr_mimebundle_()["text/html"]
    assert 'id="graphviz-app-bundle"' not in later_graph + later_pair
    assert len(later_pair) < 100_000
    assert pair._repr_html_().count('id="graphviz-app-bundle"') == 1  # shown alone: always carries it
    assert re.search(r'<iframe class="graphviz-app-viewer" title="fp32 ⟷ bf16"', later_pair)


def test_without_the_bundle_the_cell_is_the_diff_picture_under_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(*args: object, **kw: object) -> str:
        raise RenderError("the viewer's bundle is not built: run `make setup`")

    monkeypatch.setattr(notebook, "compare_notebook_html", missing)
    a, b = compare_pair()
    cell = compare(a, b)._repr_mimebundle_()
    assert "The interactive viewer cannot be shown: the viewer&#x27;s bundle is not built" in cell["text/html"]
    assert "Showing the static picture instead." in cell["text/html"]
    assert 'src="data:image/svg+xml;base64,' in cell["text/html"]
