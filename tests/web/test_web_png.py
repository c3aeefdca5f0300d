"""Big PNGs: the PNG job says when there is no PNG and why, and the CLI warns of the shrinking."""

from __future__ import annotations

import shutil

import pytest

from graphviz_app.drawing.layout import lay_out
from graphviz_app.web.pngplan import MAX_BITMAP_SIDE, PngPlan, png_plan, png_refusal


def test_the_png_size_is_read_from_the_svg_and_capped_as_graphviz_caps_it() -> None:
    assert png_plan('<svg width="72pt" height="36pt" viewBox="0 0 72 36">') == PngPlan(96, 48, 1.0)
    tall = png_plan('<svg width="750pt" height="49151pt">')
    assert tall is not None and tall.height == MAX_BITMAP_SIDE and tall.scale == pytest.approx(0.5, abs=1e-4)
    assert png_plan("<svg>") is None


def test_a_picture_of_hundreds_of_megapixels_is_refused_with_what_to_do() -> None:
    plan = png_plan('<svg width="20000pt" height="24575pt">')
    refusal = png_refusal(plan, node_count=1503, time_limit=15)
    assert refusal is not None
    assert "No PNG for this graph: 1,503 nodes" in refusal
    assert "Download the SVG instead" in refusal and "lower the node limit" in refusal
    assert png_refusal(png_plan('<svg width="700pt" height="900pt">'), node_count=9, time_limit=15) is None


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot on PATH")
def test_dot_shrinking_a_tall_png_is_a_warning_not_silence() -> None:
    chain = "digraph { " + " -> ".join(f"n{i}" for i in range(420)) + " }"
    with pytest.warns(UserWarning, match=r"the PNG was shrunk to \d+% of full size: dot draws bitmaps of at most"):
        png = lay_out(chain, "png", engine="dot", node_count=420, timeout=120)
    assert png.startswith(b"\x89PNG")


def seed_graph_json() -> str:
    from graphviz_app.jobs.page import analysis_job
    from graphviz_app.web.results import Analysis
    from graphviz_app.web.urlstate import SEED_PROGRAM, Options

    result = analysis_job(SEED_PROGRAM, Options())
    assert isinstance(result, Analysis)
    return result.graph_json


def test_a_png_of_hundreds_of_megapixels_is_refused_by_its_job_before_any_pixel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graphviz_app.jobs import pictures
    from graphviz_app.web.results import Failure

    rastered: list[str] = []
    real = pictures._export
    monkeypatch.setattr(pictures, "png_plan", lambda svg: PngPlan(32767, 24000, 0.6))  # as a 1,500-node graph's
    monkeypatch.setattr(pictures, "_export", lambda g, fmt, *a: rastered.append(fmt) or real(g, fmt, *a))
    found = pictures.png_job(seed_graph_json(), "TB", 10.0, 15.0)
    assert isinstance(found, Failure) and found.kind == "render"
    assert found.message.startswith("No PNG for this graph: 7 nodes make a 32,767 × 24,000 pixel picture")
    assert "than the 15 s a job may run" in found.message and "Download the SVG instead" in found.message
    assert rastered == ["svg"]  # laid out to measure it, never rasterised


def test_a_png_past_its_time_budget_blames_the_pixels_not_the_layout_and_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess

    from graphviz_app.errors import RenderError
    from graphviz_app.jobs import pictures
    from graphviz_app.web.results import Failure

    real = pictures._export

    def slow_pixels(graph, fmt, rankdir, timeout):  # noqa: ANN001, ANN202 - as cairo past its deadline
        if fmt == "png":
            raise RenderError("laying out took too long") from subprocess.TimeoutExpired("dot", timeout)
        return real(graph, fmt, rankdir, timeout)

    monkeypatch.setattr(pictures, "_export", slow_pixels)
    found = pictures.png_job(seed_graph_json(), "TB", time_budget=5.0)
    assert isinstance(found, Failure) and found.kind == "render"
    assert found.message.startswith("drawing the PNG of 7 nodes took over 5 s and was stopped")
    assert "turning it into pixels is what takes long" in found.message
    assert "Download the SVG" in found.message and "lower the node limit" in found.message
