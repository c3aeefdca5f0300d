"""Programs with nn modules on the page: module depth, roll repeats, the module table, links."""

from __future__ import annotations

import pytest
from web_support import box_labels, decode_viewer, new_app, opened_modules, shown, shown_payload

from graphviz_app.jobs.page import analysis_job
from graphviz_app.web.gallery import example
from graphviz_app.web.results import Analysis
from graphviz_app.web.urlstate import Options, PageState, from_query, to_query

ROLLED = "enc.layers.0–5: TransformerEncoderLayer ×6"


def module_table(at) -> dict[str, dict[str, str]]:  # noqa: ANN001
    """The module summary table as module -> row, or {} when the page shows none."""
    tables = [t.value for t in at.table if "param bytes" in t.value.columns]
    return {r["module"]: dict(r) for t in tables for _, r in t.iterrows()}


# The link ----------------------------------------------------------------------
def test_roll_is_on_by_default_and_a_link_turns_it_off() -> None:
    assert Options().roll is True
    state, problems = from_query({"roll": "0"})
    assert state.options.roll is False and problems == []


def test_module_depth_and_roll_travel_in_the_link() -> None:
    state = PageState(options=Options(module_depth=3, roll=False))
    query = to_query(state)
    assert (query["depth"], query["roll"]) == ("3", "0")
    back, problems = from_query(query)
    assert back.options == state.options and problems == []


@pytest.mark.parametrize(("raw", "problem"), [("-1", "from 0 to 20"), ("deep", "from 0 to 20"), ("99", "from 0 to 20")])
def test_a_bad_depth_in_a_link_is_reported_and_the_viewer_picks_the_level(raw: str, problem: str) -> None:
    state, problems = from_query({"depth": raw})
    assert state.options.module_depth == 0
    assert problems == [f"ignored ?depth={raw}: expected a whole number {problem} written with the digits 0-9"]


# The worker's result -----------------------------------------------------------
@pytest.mark.slow  # a six-layer encoder run twice, traced
def test_roll_folds_the_six_encoder_layers_into_one_box_and_depth_picks_the_opening() -> None:
    program = example("transformer").program
    rolled = analysis_job(program, Options(module_depth=3))
    flat = analysis_job(program, Options(roll=False))
    assert isinstance(flat, Analysis) and isinstance(rolled, Analysis)
    rolled_data, flat_data = decode_viewer(rolled.viewer), decode_viewer(flat.viewer)
    assert ROLLED in rolled_data["tree"]["label"]
    assert not any("×6" in label for label in flat_data["tree"]["label"])
    # Depth 3: enc and enc.layers open, each layer a closed box (rolled into the one ×6 box).
    assert opened_modules(rolled_data) == {"", "enc", "enc.layers"}
    roll_box = rolled_data["tree"]["label"].index(ROLLED)
    assert roll_box not in rolled_data["open"]
    # The whole graph goes to the viewer however it opens: no layout budget, nothing left out.
    assert len(rolled_data["graph"]["nodes"]["kind"]) == rolled.node_count == flat.node_count
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
    result = analysis_job("x = torch.arange(3., requires_grad=True)\n(x * 2).sum()", Options(module_depth=1))
    assert isinstance(result, Analysis) and result.modules == ()
    data = decode_viewer(result.viewer)
    assert data["tree"]["kind"] == ["root"] and data["open"] == [0]
    assert "MulBackward0" in data["graph"]["strings"]


# The page (AppTest) --------------------------------------------------------------
def test_the_sidebar_depth_and_roll_reach_the_viewer_and_the_table_stays() -> None:
    at = new_app({"program": example("transformer").program})
    assert not at.exception and not at.error
    table = module_table(at)
    assert table["enc.layers.0"]["type"] == "TransformerEncoderLayer"
    assert table["enc"]["params"] == "51,264"
    assert ROLLED in box_labels(at)  # rolled by default
    at.sidebar.checkbox(key="opt_roll").uncheck()
    at.sidebar.number_input(key="opt_depth").set_value(3)
    at.run()
    assert not at.exception and not at.error
    assert not any("×6" in label for label in box_labels(at))
    assert opened_modules(shown_payload(at)) == {"", "enc", "enc.layers"}
    assert module_table(at) == table
    query = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert (query["depth"], query["roll"]) == ("3", "0")


def test_a_link_with_depth_opens_on_the_boxes_of_that_level() -> None:
    at = new_app({"program": example("transformer").program, "depth": "1"})
    assert not at.exception and not at.error
    assert at.sidebar.number_input(key="opt_depth").value == 1
    assert at.sidebar.checkbox(key="opt_roll").value is True
    assert opened_modules(shown_payload(at)) == {""}  # enc: TransformerEncoder, one closed box
    assert "enc: TransformerEncoder" in box_labels(at)


def test_the_gradients_panel_lists_module_parameters_by_name() -> None:
    program = ("torch.manual_seed(0)\nnet = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())\nhead = nn.Linear(4, 2)\n"
               "x = torch.randn(1, 3, 6, 6)\nhead(net(x).mean((2, 3))).sum()")
    at = new_app({"program": program})
    assert not at.exception and not at.error
    tables = [t.value for t in at.table if "tensor" in t.value.columns]
    names = [r["tensor"] for t in tables for _, r in t.iterrows()]
    assert {"net.0.weight.grad", "net.0.bias.grad", "head.weight.grad", "head.bias.grad"} <= set(names)
    assert not any("No named leaf tensor" in c for c in shown(at, "caption"))


def test_the_seed_page_shows_no_module_table() -> None:
    at = new_app()
    assert module_table(at) == {}
    assert not any("Modules" in m for m in shown(at, "markdown"))
