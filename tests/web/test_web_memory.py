"""The page's memory panel: the worker's memory job, and the panel a person opens."""

from __future__ import annotations

import pytest
from web_support import new_app, page_text

from graphviz_app.jobs.page import analysis_job
from graphviz_app.jobs.page_memory import memory_job
from graphviz_app.web import memory_view
from graphviz_app.web.gallery import example
from graphviz_app.web.memory_view import MemoryPanel
from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.urlstate import Options


def _panel(key: str) -> MemoryPanel:
    result = analysis_job(example(key).program, Options())
    assert isinstance(result, Analysis), str(result)
    panel = memory_job(result.graph_json)
    assert isinstance(panel, MemoryPanel), str(panel)
    return panel


def test_the_accumulated_loss_keeps_16_kib_per_step_as_its_gallery_entry_says() -> None:
    panel = _panel("memory-accumulate")
    kept = panel.timeline.forward_bytes
    assert 3 * 16 * 1024 <= kept < 3 * 16 * 1024 + 64  # + the loss, its gradient, the scale's product
    assert "48.0 KiB" in example("memory-accumulate").blurb and "48.0 KiB alive when backward starts" in (
        memory_view.caption(panel))


def test_the_float16_branch_saves_half_of_the_float32_one() -> None:
    panel = _panel("memory-half")
    held = dict(panel.timeline.held)
    saved = sorted(held.values())
    # x.half() and its ReLU output; x and its ReLU output; the 4-byte sum the scale multiplies
    assert saved == [4, 4096, 4096, 8192, 8192]
    assert "saves 16 KiB" in example("memory-half").blurb and "branch 8 KiB" in example("memory-half").blurb


def test_the_forward_under_no_grad_saves_nothing() -> None:
    panel = _panel("memory-no-grad")
    # x and the ReLU output of the training forward; the 4-byte sum the scale multiplies
    assert sorted(dict(panel.timeline.held).values()) == [4, 8192, 8192]
    assert "16.0 KiB alive when backward starts" in memory_view.caption(panel)
    # The same program with both forwards recording: a second ReLU output is kept (x is shared).
    program = example("memory-no-grad").program.replace("with torch.no_grad():\n    ", "")
    result = analysis_job(program, Options())
    assert isinstance(result, Analysis), str(result)
    both = memory_job(result.graph_json)
    assert isinstance(both, MemoryPanel), str(both)
    assert sorted(dict(both.timeline.held).values()) == [4, 8192, 8192, 8192]
    assert "saves 16 KiB" in example("memory-no-grad").blurb and "the no_grad one nothing" in (
        example("memory-no-grad").blurb)


@pytest.mark.slow
def test_the_panel_names_the_peak_node_and_charts_every_backward_step() -> None:
    panel = _panel("transformer")
    timeline = panel.timeline
    assert timeline.peak_node is not None and "Backward" in panel.peak_label
    frame = memory_view.live_frame(panel)
    assert len(frame) == len(timeline.steps) and frame["peak KiB"].max() * 1024 == timeline.peak_bytes
    held = memory_view.held_frame(panel)
    assert list(held.columns) == ["module", "saved tensors", "gradients", ".grad", "outputs", "total"]
    assert any(m.startswith("enc.layers") for m in held["module"])


def test_a_graph_that_is_not_json_is_a_failure_not_a_crash() -> None:
    assert isinstance(memory_job("not json"), Failure)


@pytest.mark.slow
def test_the_page_shows_the_memory_panel() -> None:
    at = new_app({"program": example("memory-accumulate").program})
    assert not at.exception and not at.error
    assert any(e.label == "Memory of one step" for e in at.expander)
    assert "Predicted peak of one step" in page_text(at) and "48.0 KiB alive when backward starts" in page_text(at)
