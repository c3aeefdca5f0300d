"""Programs with nn modules on the page: module depth, roll repeats, the module table, links."""

from __future__ import annotations

import pytest
from web_support import new_app, shown, shown_svg

from graphviz_app.web.gallery import example
from graphviz_app.web.results import Analysis
from graphviz_app.web.urlstate import Options, PageState, from_query, to_query
from graphviz_app.web.worker.jobs import analysis_job


def module_table(at) -> dict[str, dict[str, str]]:  # noqa: ANN001
    """The module summary table as module -> row, or {} when the page shows none."""
    tables = [t.value for t in at.table if "param bytes" in t.value.columns]
    return {r["module"]: dict(r) for t in tables for _, r in t.iterrows()}


# The link ----------------------------------------------------------------------
def test_module_depth_and_roll_travel_in_the_link() -> None:
    state = PageState(options=Options(module_depth=3, roll=True))
    query = to_query(state)
    assert (query["depth"], query["roll"]) == ("3", "1")
    back, problems = from_query(query)
    assert back.options == state.options and problems == []


@pytest.mark.parametrize(("raw", "problem"), [("-1", "from 0 to 20"), ("deep", "from 0 to 20"), ("99", "from 0 to 20")])
def test_a_bad_depth_in_a_link_is_reported_and_every_module_stays_open(raw: str, problem: str) -> None:
    state, problems = from_query({"depth": raw})
    assert state.options.module_depth == 0
    assert problems == [f"ignored ?depth={raw}: expected a whole number {problem}"]


# The worker's result -----------------------------------------------------------
@pytest.mark.slow  # a six-layer encoder run, traced and drawn
def test_depth_and_roll_fold_the_six_encoder_layers_into_one_box() -> None:
    program = example("transformer").program
    flat = analysis_job(program, Options())
    rolled = analysis_job(program, Options(module_depth=3, roll=True))
    assert isinstance(flat, Analysis) and isinstance(rolled, Analysis)
    assert rolled.drawn.depth == 3 and rolled.drawn.drawn_nodes < rolled.node_count / 10
    assert "enc.layers.0–5: TransformerEncoderLayer ×6" in rolled.svg
    assert "×6" not in flat.svg
    assert flat.modules == rolled.modules  # the table describes the model, however it is drawn


def test_the_module_rows_count_ops_saved_bytes_and_params_per_module() -> None:
    result = analysis_job(example("cnn").program, Options())
    assert isinstance(result, Analysis)
    rows = {r[0]: r for r in result.modules}
    assert list(rows)[:3] == ["(program)", "net", "net.0"]
    assert rows["net.0"][1] == "Conv2d" and rows["net.0"][4] == f"{3 * 8 * 9 + 8:,}"
    assert rows["net.1"][1] == "BatchNorm2d" and rows["head"][1] == "Linear"
    assert int(rows["net"][2].replace(",", "")) >= 6  # conv, batch norm, relu twice


def test_a_program_without_modules_has_no_module_rows() -> None:
    result = analysis_job("x = torch.arange(3., requires_grad=True)\n(x * 2).sum()", Options(module_depth=1, roll=True))
    assert isinstance(result, Analysis) and result.modules == ()
    assert "MulBackward0" in result.svg


# The page (AppTest) --------------------------------------------------------------
def test_the_sidebar_depth_and_roll_redraw_the_graph_and_the_table_stays() -> None:
    at = new_app({"program": example("transformer").program})
    assert not at.exception and not at.error
    table = module_table(at)
    assert table["enc.layers.0"]["type"] == "TransformerEncoderLayer"
    assert table["enc"]["params"] == "51,264"
    assert "×6" not in shown_svg(at)
    at.sidebar.number_input(key="opt_depth").set_value(3)
    at.sidebar.checkbox(key="opt_roll").check()
    at.run()
    assert not at.exception and not at.error
    assert "enc.layers.0–5: TransformerEncoderLayer ×6" in shown_svg(at)
    assert module_table(at) == table
    query = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert (query["depth"], query["roll"]) == ("3", "1")


def test_a_link_with_depth_and_roll_opens_with_them_set() -> None:
    at = new_app({"program": example("transformer").program, "depth": "1", "roll": "1"})
    assert not at.exception and not at.error
    assert at.sidebar.number_input(key="opt_depth").value == 1
    assert at.sidebar.checkbox(key="opt_roll").value is True
    assert "enc: TransformerEncoder" in shown_svg(at)


def test_the_seed_page_shows_no_module_table() -> None:
    at = new_app()
    assert module_table(at) == {}
    assert not any("Modules" in m for m in shown(at, "markdown"))


def test_a_box_opened_on_click_keeps_the_sidebar_depth_and_roll() -> None:
    from graphviz_app.web.worker.drawing import draw_job

    result = analysis_job(example("transformer").program, Options(module_depth=1))
    assert isinstance(result, Analysis) and result.drawn.depth == 1
    opened = draw_job(result.graph_json, "TB", ("enc",), 60.0, 1, False)
    assert opened.depth == 1 and opened.expanded == ("enc",)
    assert "enc.layers: ModuleList" in opened.svg
