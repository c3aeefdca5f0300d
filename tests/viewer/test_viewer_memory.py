"""The step's memory in the viewer: bytes held at the peak, the peak node ringed, live bytes over backward charted."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn
from viewer_support import HOSTILE, chain_graph, drawn_nodes, module_graph, open_viewer, with_order

from graphviz_app import memory_timeline, save, trace_model
from graphviz_app.model import Graph, human_bytes
from graphviz_app.viewer.payload import payload


def _model_graph() -> Graph:
    """A model whose peak falls inside a nested module (`2.0`, a Linear inside a Sequential)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Sequential(nn.Linear(64, 64), nn.Tanh()), nn.Linear(64, 4))
    return trace_model(model, torch.randn(16, 8))


@pytest.fixture(scope="module")
def model() -> Graph:
    return _model_graph()


# -- the payload (no browser) ------------------------------------------------


def test_the_payload_series_is_the_timeline_live_bytes_per_step(model: Graph) -> None:
    timeline = memory_timeline(model).to_dict()
    series = payload(model)["series"]
    assert [s["key"] for s in series] == ["live_bytes"]
    live = series[0]
    assert live["values"] == [row[2] for row in timeline["steps"]]  # [node, before, peak, after]
    assert live["peak"] == timeline["peak_step"]
    assert live["values"][live["peak"]] == timeline["peak_bytes"]
    index = {n.id: i for i, n in enumerate(model.nodes)}
    ran = {index[row[0]]: k for k, row in enumerate(timeline["steps"]) if row[0] is not None}
    assert {i: k for i, k in enumerate(live["node_step"]) if k >= 0} == ran


def test_bytes_held_at_the_peak_sum_to_the_peak_in_the_whole_graph_and_mark_the_peak_node(model: Graph) -> None:
    timeline = memory_timeline(model)
    data = payload(model)
    held = next(o for o in data["overlays"] if o["key"] == "held")
    peak = [n.id for n in model.nodes].index(timeline.peak_node)
    assert held["group"][0] == timeline.peak_bytes  # each storage alive at the peak counted once
    assert sum(v for v in held["node"] if v is not None) == timeline.peak_bytes
    assert held["node"][peak] == dict(timeline.held_at_peak)[timeline.peak_node]
    for o in data["overlays"]:  # both memory colourings ring the peak node
        if o["unit"] == "bytes":
            assert o["mark"] == [peak] and human_bytes(timeline.peak_bytes) in o["mark_label"]


@pytest.mark.parametrize(("graph", "note"), [
    (chain_graph(6), "holds no saved tensors"),
    (dataclasses.replace(with_order(module_graph(2)), truncated=True), "cut off by max_nodes"),
    (module_graph(2), "no backward order"),
])
def test_no_chart_when_the_graph_cannot_say_and_a_note_says_why(graph: Graph, note: str) -> None:
    data = payload(graph)
    assert data["series"] == []
    assert all(o["key"] != "held" for o in data["overlays"])
    assert any(note in n for n in data["notes"]), data["notes"]


def test_no_chart_past_the_replay_limit(model: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("graphviz_app.viewer.memory.REPLAY_LIMIT", 5)
    data = payload(model)
    assert data["series"] == []
    assert any("more than the viewer replays (5)" in n and "memory_timeline(graph)" in n for n in data["notes"])


# -- in Chromium ---------------------------------------------------------------


@pytest.fixture(scope="module")
def model_html(model: Graph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(model, tmp_path_factory.mktemp("memory") / "m.html")


@pytest.mark.browser
def test_the_chart_is_drawn_with_the_peak_labelled_in_the_timelines_bytes(page, model: Graph,  # noqa: ANN001
                                                                          model_html: Path) -> None:
    open_viewer(page, model_html)
    timeline = memory_timeline(model)
    chart = page.get_by_test_id("viewer-chart")
    assert chart.is_visible()
    assert page.get_by_test_id("viewer-chart-peak-label").text_content() == f"peak {human_bytes(timeline.peak_bytes)}"
    assert page.get_by_test_id("viewer-chart-peak").get_attribute("data-step") == str(timeline.peak_step)
    head = page.get_by_test_id("viewer-chart-peak-text").text_content() or ""
    assert human_bytes(timeline.peak_bytes) in head and "AddmmBackward0" in head
    assert page.requests == [model_html.as_uri()] and page.errors == []


@pytest.mark.browser
def test_no_chart_for_a_graph_without_saved_tensors(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(trace_model(nn.Linear(4, 2), torch.randn(3, 4), show_saved=False), tmp_path / "plain.html")
    open_viewer(page, path)
    assert drawn_nodes(page)
    assert page.get_by_test_id("viewer-chart").count() == 0
    assert "no saved tensors" in page.get_by_test_id("viewer-status").inner_text()


@pytest.mark.browser
def test_clicking_the_peak_step_selects_the_peak_node_inside_a_closed_box(page, model: Graph,  # noqa: ANN001
                                                                         model_html: Path) -> None:
    timeline = memory_timeline(model)
    peak = timeline.peak_node
    open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    assert page.locator(f"[data-node='{peak}']").count() == 0  # inside the closed module boxes
    page.get_by_test_id("viewer-chart-peak").click()
    node = page.locator(f"[data-node='{peak}']")
    node.wait_for()
    assert "gv-selected" in (node.get_attribute("class") or "")
    details = page.get_by_test_id("viewer-details").inner_text()
    assert "AddmmBackward0" in details and peak in details and "(the peak)" in details
    assert page.get_by_test_id("viewer-chart").get_attribute("data-selected-step") == str(timeline.peak_step)


@pytest.mark.browser
def test_hovering_a_step_names_its_node_and_selecting_a_node_marks_its_step(page, model: Graph,  # noqa: ANN001
                                                                           model_html: Path) -> None:
    timeline = memory_timeline(model)
    open_viewer(page, model_html)
    page.get_by_test_id("viewer-chart-peak").hover()
    hover = page.get_by_test_id("viewer-chart-hover").inner_text()
    assert f"step {timeline.peak_step}: AddmmBackward0 {timeline.peak_node}" in hover
    assert human_bytes(timeline.peak_bytes) in hover
    last = timeline.steps[-1].node  # the last node backward runs: drawn in the opening view?
    search = page.get_by_test_id("viewer-search")
    search.fill(last)
    search.press("Enter")
    page.locator(f"[data-node='{last}'].gv-selected").wait_for()
    assert page.get_by_test_id("viewer-chart").get_attribute("data-selected-step") == str(len(timeline.steps) - 1)


@pytest.mark.browser
def test_the_memory_colouring_rings_the_peak_node_or_the_closed_box_holding_it(page, model: Graph,  # noqa: ANN001
                                                                              model_html: Path) -> None:
    peak = memory_timeline(model).peak_node
    open_viewer(page, model_html)
    page.get_by_test_id("viewer-color").select_option("held")
    assert "ringed: AddmmBackward0" in page.get_by_test_id("viewer-legend").inner_text()
    page.get_by_role("button", name="Close all").click()
    ringed = page.locator(".gv-marked")
    assert ringed.count() == 1 and ringed.get_attribute("data-module") == "2"  # the closed box around it
    assert ringed.locator(".gv-badge").text_content() == "peak"
    page.get_by_test_id("viewer-chart-peak").click()
    page.locator(f"[data-node='{peak}'].gv-marked .gv-ring").wait_for()
    assert page.locator(".gv-marked").count() == 1


@pytest.mark.browser
def test_names_in_the_chart_are_text(page, tmp_path: Path) -> None:  # noqa: ANN001
    graph = with_order(module_graph(3))
    peak = memory_timeline(graph).peak_node  # an AddmmBackward0: renaming it changes nothing backward does
    graph = dataclasses.replace(graph, nodes=tuple(dataclasses.replace(n, name=HOSTILE[0]) if n.id == peak else n
                                                   for n in graph.nodes))
    assert memory_timeline(graph).peak_node == peak
    open_viewer(page, save(graph, tmp_path / "hostile.html"))
    page.get_by_test_id("viewer-chart-peak").hover()
    assert HOSTILE[0] in page.get_by_test_id("viewer-chart-peak-text").text_content()
    assert HOSTILE[0] in page.get_by_test_id("viewer-chart-hover").text_content()
    page.get_by_test_id("viewer-color").select_option("held")
    assert HOSTILE[0] in page.get_by_test_id("viewer-legend").text_content()
    assert page.dialogs == [] and page.errors == [] and page.evaluate("window.__pwned") is None


@pytest.mark.browser
def test_the_notebook_cell_shows_the_chart(page, model: Graph) -> None:  # noqa: ANN001
    page.set_content(f"<!DOCTYPE html><html><body>{model._repr_html_()}</body></html>")
    frame = page.frame_locator("iframe.graphviz-app-viewer")
    frame.locator("[data-testid=graph-viewer][data-state=ready]").wait_for()
    label = frame.get_by_test_id("viewer-chart-peak-label").text_content()
    assert label == f"peak {human_bytes(memory_timeline(model).peak_bytes)}"
