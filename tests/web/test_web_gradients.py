"""The page's gradient view under AppTest: the sidebar switch, the NaN origin, the new examples."""

from __future__ import annotations

import pytest
from web_support import new_app, page_text, shown, shown_payload

from graphviz_app.web.gallery import example
from graphviz_app.web.urlstate import Options, PageState, from_query, to_query


def overlay(at, key: str) -> dict | None:  # noqa: ANN001
    """The viewer's colouring `key` ("gradient", "memory") as the page sends it, or None."""
    data = shown_payload(at)
    return next((o for o in (data or {}).get("overlays", []) if o["key"] == key), None)


def test_show_gradients_is_on_by_default_and_colours_the_graph() -> None:
    at = new_app()
    assert not at.exception
    box = at.sidebar.checkbox(key="opt_gradients")
    assert box.label == "Show gradients" and box.value is True
    gradient = overlay(at, "gradient")
    assert gradient is not None and max(v for v in gradient["node"] if v is not None) == pytest.approx(3.59, abs=0.01)
    assert any("largest gradient norm 3.59" in t for t in shown(at, "info"))
    box.uncheck().run()
    assert overlay(at, "gradient") is None  # no gradient colouring offered
    assert at.query_params["gradients"] in ("0", ["0"])


def test_a_link_can_turn_gradients_off() -> None:
    state, problems = from_query({"gradients": "0"})
    assert problems == [] and state.options.show_gradients is False
    assert to_query(PageState(options=Options(show_gradients=False)))["gradients"] == "0"
    at = new_app({"gradients": "0"})
    assert at.sidebar.checkbox(key="opt_gradients").value is False


def test_nan_example_names_the_op_and_the_program_line() -> None:
    at = new_app()
    at.button(key="example-nan").click().run()
    assert not at.exception
    warnings = shown(at, "warning")
    assert any(
        "NaN first appears in backward at LogBackward0" in w and "log(0) = -inf" in w
        and "line 2 of the program: `y = torch.where(x > 0, torch.log(x), 0)`" in w
        for w in warnings
    ), warnings
    graph = shown_payload(at)["graph"]  # the viewer marks this node "⚠ NaN/Inf origin"
    origin = graph["nonfinite_origin"]
    assert graph["strings"][graph["nodes"]["name"][origin]] == "LogBackward0"
    flagged = overlay(at, "gradient")["flag"]  # drawn red when coloured by gradient
    assert graph["strings"][graph["nodes"]["name"][flagged[0]]] == "x"


def test_vanishing_example_shows_a_tiny_gradient_at_the_input() -> None:
    at = new_app()
    at.button(key="example-vanishing").click().run()
    assert not at.exception and not shown(at, "warning")
    summary = next(t for t in shown(at, "info") if t.startswith("Gradients:"))
    assert "at x (" in summary.split("smallest")[1]
    smallest = float(summary.split("smallest ")[1].split(" ")[0])
    assert smallest < 1e-10
    assert example("vanishing").blurb in page_text(at)


def test_accumulate_example_counts_the_forward_passes_from_the_graph() -> None:
    at = new_app()
    at.button(key="example-accumulate").click().run()
    assert not at.exception
    assert any(
        "repeats the same 4-op block 4 times over the same parameters (w)" in t and "96 B saved" in t
        for t in shown(at, "info")
    ), shown(at, "info")
