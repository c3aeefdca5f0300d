"""A measured step in the viewer: measured live bytes charted beside the predicted, both in a node's details."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import re
from pathlib import Path

import pytest
import torch
from manual import manual_text
from torch import nn
from viewer_support import HOSTILE, module_graph, open_viewer, with_order

from graphviz_app import memory_timeline, save
from graphviz_app.analysis.memory import MeasuredMemory
from graphviz_app.errors import UnsupportedFormatError
from graphviz_app.memory import Measurement, measure
from graphviz_app.model import Graph, human_bytes
from graphviz_app.viewer.payload import payload

# What the hand-made measurement adds to the prediction at every backward step: a temporary the graph cannot see.
EXTRA = 3000


@pytest.fixture(scope="module")
def measurement() -> Measurement:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Sequential(nn.Linear(64, 64), nn.Tanh()), nn.Linear(64, 4))
    return measure(model, torch.randn(16, 8))


def _more_than_predicted(graph: Graph) -> MeasuredMemory:
    """A measurement of `graph`'s step that saw EXTRA bytes more than predicted at every backward node."""
    timeline = memory_timeline(graph)
    steps = tuple(s if s.node is None else dataclasses.replace(s, peak=s.peak + EXTRA) for s in timeline.steps)
    return MeasuredMemory(steps, timeline.peak_bytes + EXTRA, timeline.forward_bytes, "storages", "cpu")


# -- the payload (no browser) ------------------------------------------------


def test_the_payload_holds_the_predicted_and_the_measured_series_over_the_same_steps(measurement: Measurement) -> None:
    data = payload(measurement.graph, measured=measurement.measured)
    predicted, measured = data["series"]
    assert (predicted["key"], measured["key"], measured["of"]) == ("live_bytes", "measured_bytes", "live_bytes")
    assert measured["values"] == [s.peak for s in measurement.measured.steps]
    assert predicted["values"] == [s.peak for s in memory_timeline(measurement.graph).steps]
    assert measured["peak_bytes"] == measurement.measured.peak_bytes
    assert measured["values"][measured["peak"]] == measurement.measured.peak_bytes
    assert measurement.measured.steps[measured["peak"]].node == measurement.measured.peak_node
    assert predicted["values"][predicted["peak"]] == measurement.predicted.peak_bytes


def test_without_a_measurement_the_payload_holds_the_prediction_alone(measurement: Measurement) -> None:
    assert [s["key"] for s in payload(measurement.graph)["series"]] == ["live_bytes"]


@pytest.mark.parametrize(("where", "expected"), [
    ("during the forward", None),  # the measured peak fell before backward began
    ("at step", "n"),
])
def test_the_measured_peak_is_placed_where_it_was_measured(measurement: Measurement, where: str,
                                                           expected: str | None) -> None:
    m = measurement.measured
    if expected is None:
        m = dataclasses.replace(m, peak_bytes=m.peak_bytes + 1)  # more than any backward step held
    series = payload(measurement.graph, measured=m)["series"][1]
    assert where in series["peak_label"] and human_bytes(m.peak_bytes) in series["peak_label"]
    assert series["peak"] == (0 if expected is None else [s.node for s in m.steps].index(m.peak_node))


def test_a_measurement_of_another_graph_is_refused(measurement: Measurement) -> None:
    other = dataclasses.replace(measurement.measured, steps=tuple(
        dataclasses.replace(s, node=None if s.node is None else "x" + s.node) for s in measurement.measured.steps))
    with pytest.raises(ValueError, match="measured another graph.*measured=m.measured"):
        payload(measurement.graph, measured=other)


def test_a_measurement_goes_into_html_only(measurement: Measurement, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match="HTML viewer only.*'json'"):
        save(measurement.graph, tmp_path / "g.json", measured=measurement.measured)


def test_the_readme_example_writes_the_measurement_into_the_html_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    text = manual_text()
    section = text.split("<!-- section: memory (owner: memory) -->")[1].split("<!-- end: memory -->")[0]
    blocks = [part.split("```")[0] for part in section.split("```python\n")[1:]]
    example = next(b for b in blocks if "measured=" in b)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "README.md memory", "exec"), namespace)  # noqa: S102  (the model it measures)
    exec(compile(example, "README.md memory measured", "exec"), namespace)  # noqa: S102
    page = (tmp_path / "step.html").read_text(encoding="utf-8")
    found = re.search(r'id="gv-payload">([^<]*)<', page)
    assert found is not None
    series = json.loads(gzip.decompress(base64.b64decode(found[1])))["series"]
    assert [s["key"] for s in series] == ["live_bytes", "measured_bytes"]
    assert series[1]["peak_bytes"] == max(v for v in series[1]["values"] if v is not None)


# -- in Chromium ---------------------------------------------------------------


@pytest.fixture(scope="module")
def measured_html(measurement: Measurement, tmp_path_factory: pytest.TempPathFactory) -> Path:
    graph = measurement.graph
    return save(graph, tmp_path_factory.mktemp("measured") / "step.html", measured=_more_than_predicted(graph))


@pytest.mark.browser
def test_the_chart_draws_both_lines_with_a_legend_and_both_peaks_labelled(page, measurement: Measurement,  # noqa: ANN001
                                                                         measured_html: Path) -> None:
    timeline = memory_timeline(measurement.graph)
    open_viewer(page, measured_html)
    assert page.get_by_test_id("viewer-chart-predicted").is_visible()
    assert page.get_by_test_id("viewer-chart-measured").get_attribute("d").startswith("M")
    legend = page.get_by_test_id("viewer-chart-legend").inner_text()
    assert "predicted" in legend and "measured" in legend
    assert f"measured peak {human_bytes(timeline.peak_bytes + EXTRA)}" in legend
    assert page.get_by_test_id("viewer-chart-peak-label").text_content() == f"peak {human_bytes(timeline.peak_bytes)}"
    label = page.get_by_test_id("viewer-chart-measured-peak-label").text_content()
    assert label == f"measured peak {human_bytes(timeline.peak_bytes + EXTRA)}"
    assert page.get_by_test_id("viewer-chart-measured-peak").get_attribute("data-step") == str(timeline.peak_step)
    assert page.errors == [] and page.requests == [measured_html.as_uri()]


@pytest.mark.browser
def test_clicking_a_step_selects_its_node_and_the_details_show_both_figures(page, measurement: Measurement,  # noqa: ANN001
                                                                           measured_html: Path) -> None:
    timeline = memory_timeline(measurement.graph)
    peak = timeline.peak_node
    open_viewer(page, measured_html)
    page.get_by_test_id("viewer-chart-peak").click()
    node = page.locator(f"[data-node='{peak}']")
    node.wait_for()
    assert "gv-selected" in (node.get_attribute("class") or "")
    details = page.get_by_test_id("viewer-details").inner_text()
    assert f"live bytes over backward, predicted\t{human_bytes(timeline.peak_bytes)}" in details
    assert f"live bytes over backward, measured\t{human_bytes(timeline.peak_bytes + EXTRA)}" in details
    page.get_by_test_id("viewer-chart-peak").hover()
    hover = page.get_by_test_id("viewer-chart-hover").inner_text()
    assert (f"predicted {human_bytes(timeline.peak_bytes)} · measured {human_bytes(timeline.peak_bytes + EXTRA)}"
            in hover)


@pytest.mark.browser
def test_without_a_measurement_the_chart_has_one_series_and_no_legend(page, measurement: Measurement,  # noqa: ANN001
                                                                      tmp_path: Path) -> None:
    open_viewer(page, save(measurement.graph, tmp_path / "plain.html"))
    assert page.get_by_test_id("viewer-chart-predicted").is_visible()
    assert page.get_by_test_id("viewer-chart-measured").count() == 0
    assert page.get_by_test_id("viewer-chart-legend").count() == 0
    page.get_by_test_id("viewer-chart-peak").click()
    details = page.get_by_test_id("viewer-details").inner_text()
    assert "measured" not in details and "live bytes over backward\t" in details


@pytest.mark.browser
def test_names_in_the_measured_legend_and_details_are_text(page, tmp_path: Path) -> None:  # noqa: ANN001
    graph = with_order(module_graph(3))
    peak = memory_timeline(graph).peak_node
    graph = dataclasses.replace(graph, nodes=tuple(dataclasses.replace(n, name=HOSTILE[1]) if n.id == peak else n
                                                   for n in graph.nodes))
    open_viewer(page, save(graph, tmp_path / "hostile.html", measured=_more_than_predicted(graph)))
    assert HOSTILE[1] in page.get_by_test_id("viewer-chart-legend").text_content()
    page.get_by_test_id("viewer-chart-measured-peak").click()
    assert "live bytes over backward, measured" in page.get_by_test_id("viewer-details").inner_text()
    assert page.dialogs == [] and page.errors == [] and page.evaluate("window.__pwned") is None
