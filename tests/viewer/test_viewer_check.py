"""A graph carrying a model check, saved as HTML, in Chromium: the module table says each module's verdict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from mc_models import TiedLM, WrongFactor
from viewer_support import open_viewer

from graphviz_app import check_model, save, trace_model
from graphviz_app.analysis.model_check_nodes import with_check
from graphviz_app.model import Graph

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_saved_checked_graph_names_the_culprit_in_the_table_and_sorts_it_first(page, tmp_path: Path) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    model, tokens = TiedLM(softmax=WrongFactor), torch.randint(0, 13, (2, 6))
    graph = with_check(trace_model(model, tokens), check_model(model, tokens))
    saved = save(graph, tmp_path / "g.json")
    path = save(Graph.from_json(Path(saved).read_text(encoding="utf-8")), tmp_path / "g.html")  # the verdicts travel
    open_viewer(page, Path(path))
    page.get_by_test_id("viewer-table-button").click()
    table = page.get_by_test_id("viewer-table")
    headers = table.locator("thead th").all_inner_texts()
    assert "check" in headers
    at = headers.index("check")
    cells = [row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all()]
    rows = {r[0].strip(): r[at] for r in cells}
    assert re.fullmatch(r"culprit WrongFactor\.backward: 1\.02 x \(x input\), mc_models\.py:\d+", rows["block.attn"])
    assert rows["block"] == "fails inside (block.attn (WrongFactor.backward))"
    assert rows["head"] == "passed" and rows["emb"] == "passed"
    table.locator("th[data-column=check]").click()  # worst first, among siblings
    first = table.locator("tbody tr").first.locator("td").all_inner_texts()
    assert first[0].strip() == "block" and first[at].startswith("fails inside")
    assert table.locator("tbody tr[data-check='4']").count() == 1  # one culprit row, marked for a stylesheet
    assert page.errors == []


def test_the_culprits_details_give_its_verdict_in_words_and_its_source_line(page, tmp_path: Path) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    model, tokens = TiedLM(softmax=WrongFactor), torch.randint(0, 13, (2, 6))
    graph = with_check(trace_model(model, tokens), check_model(model, tokens))
    open_viewer(page, Path(save(graph, tmp_path / "g.html")))
    page.get_by_test_id("viewer-table-button").click()
    page.get_by_test_id("viewer-table").locator("tbody tr[data-check='4']").click()  # the culprit's row
    details = page.get_by_test_id("viewer-details").inner_text()
    assert re.search(r"check\s+culprit WrongFactor\.backward: 1\.02 x \(x input\), mc_models\.py:\d+", details)
    assert page.errors == []
