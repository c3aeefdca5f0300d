"""The page's logic under Streamlit's AppTest: examples, errors, the check panel, links."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from web_support import new_app, page_text, shown, shown_svg, type_program

from graphviz_app.web.gallery import EXAMPLES, example
from graphviz_app.web.urlstate import SEED_PROGRAM, CheckInput, Options, PageState, share_query

SEED_GRAD = "[1.3333, 2.0000, 2.6667]"


# The gallery examples that take about 5 s or more to run and draw on a busy machine.
SLOW_EXAMPLES = {"cnn": pytest.mark.slow, "transformer": pytest.mark.slow}


def grads(at) -> dict[str, str]:  # noqa: ANN001
    """The gradients table: tensor name -> values."""
    tables = [t.value for t in at.table if "tensor" in t.value.columns]
    rows = {r["tensor"]: r["values"] for t in tables for _, r in t.iterrows()}
    return {k: v for k, v in rows.items() if k.endswith(".grad")}


@pytest.fixture(scope="module")
def seed_page():  # noqa: ANN201
    return new_app()


def test_the_page_opens_on_the_seed_example_with_its_graph_and_gradient(seed_page) -> None:  # noqa: ANN001
    at = seed_page
    assert not at.exception
    assert not at.error
    assert "MeanBackward0" in shown_svg(at)
    assert grads(at) == {"x.grad": SEED_GRAD}
    summary = "7 nodes, 6 edges, activations held 12 B, parameters referenced 12 B, devices: cpu"
    assert any(c.startswith(summary) for c in shown(at, "caption"))
    assert [b.label for b in at.download_button] == ["SVG", "PNG", "DOT", "JSON"]


def test_the_address_bar_holds_the_program_and_options(seed_page) -> None:  # noqa: ANN001
    query = seed_page.query_params
    assert query["program"] == [SEED_PROGRAM] or query["program"] == SEED_PROGRAM
    assert {k: (v[0] if isinstance(v, list) else v) for k, v in query.items() if k != "program"} == {
        "device": "cpu", "dtype": "float32", "saved": "1", "attrs": "1", "rankdir": "TB", "max_nodes": "1000",
        "gradients": "1", "depth": "0", "roll": "0",
    }


def test_the_sidebar_offers_cpu_and_says_why_there_is_no_cuda(seed_page) -> None:  # noqa: ANN001
    import torch

    device = seed_page.sidebar.selectbox(key="opt_device")
    if torch.cuda.is_available():
        assert device.options == ["cpu", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
    else:
        assert device.options == ["cpu"]
        assert any("No CUDA device here" in c for c in shown(seed_page, "caption", where="sidebar"))


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.key, marks=SLOW_EXAMPLES.get(e.key, ())) for e in EXAMPLES])
def test_every_gallery_example_renders_with_one_click(ex) -> None:  # noqa: ANN001
    at = new_app()
    at.button(key=f"example-{ex.key}").click().run()
    assert not at.exception
    assert not at.error, shown(at, "error")
    svg = shown_svg(at)
    assert svg is not None and "<svg" in svg
    assert f"{ex.wrt}.grad" in grads(at)
    assert at.session_state["submitted"] == ex.program
    assert ex.blurb in page_text(at)


def test_a_syntax_error_shows_while_typing_then_after_run_and_the_page_recovers() -> None:
    at = new_app()
    type_program(at, "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean(")
    at.run()
    assert not at.exception
    assert any("Will not run" in e and "line 2" in e for e in shown(at, "error"))
    at.button(key="run").click().run()
    assert not at.exception
    errors = shown(at, "error")
    assert len(errors) == 1, errors  # said once, under the editor, not again in the graph pane
    assert "Will not run" in errors[0] and "syntax error" in errors[0]
    assert any("fix the problem shown under the editor" in c for c in shown(at, "caption"))
    assert shown_svg(at) is None
    type_program(at, "y = torch.ones(2, requires_grad=True)\n(y * 5).sum()")
    at.button(key="run").click().run()
    assert not at.error
    assert grads(at) == {"y.grad": "[5.0000, 5.0000]"}


@pytest.mark.parametrize(
    ("program", "words"),
    [
        ("().__class__.__bases__", "attribute names starting with _ are not allowed"),
        ("torch.randn(int(3e10))", "limit is 10,000,000 elements"),
        ("x = torch.ones(3)\n(x * 2).sum()", "requires_grad=True"),
    ],
)
def test_an_error_input_shows_an_error_element_and_no_exception(program: str, words: str) -> None:
    at = new_app()
    type_program(at, program)
    at.button(key="run").click().run()
    assert not at.exception
    assert any(words in e for e in shown(at, "error")), shown(at, "error")


def check(at, expected: str):  # noqa: ANN001, ANN201
    at.text_input(key="w_check_expected").input(expected).run()
    assert not at.exception
    return at


def test_the_check_panel_passes_the_right_hand_gradient(seed_page) -> None:  # noqa: ANN001
    at = check(seed_page, "2*(x+2)/3")
    assert at.selectbox(key="w_check_wrt").value == "x"
    assert any("d(output)/dx = 2*(x+2)/3 is right" in s for s in shown(at, "success"))
    assert not at.error


def test_the_check_panel_fails_the_wrong_one_and_names_the_factor(seed_page) -> None:  # noqa: ANN001
    at = check(seed_page, "2*(x+2)")
    assert any("d(output)/dx = 2*(x+2) is wrong: it is 3 × autograd's" in e for e in shown(at, "error"))
    table = next(t.value for t in at.table if "failed" in t.value.columns)
    assert table["element"].tolist() == ["x[0]", "x[1]", "x[2]"]
    assert table["failed"].tolist() == [True, True, True]
    assert table["yours"].tolist() == [4.0, 6.0, 8.0]
    assert "wrt" in at.query_params and "grad" in at.query_params  # the link carries the check


def test_a_matrix_jacobian_shows_a_heatmap_of_the_error() -> None:
    at = new_app()
    at.button(key="example-softmax").click().run()
    at = check(at, example("softmax").hint.replace("/ 3", "/ 2"))
    assert any("is wrong" in e for e in shown(at, "error"))
    heatmaps = [c for c in at.get("vega_lite_chart") if '"rect"' in c.proto.spec]  # the memory panel draws a line
    assert len(heatmaps) == 1


def test_a_link_reproduces_the_graph_options_and_check() -> None:
    state = PageState(
        program="w = torch.ones(2, 2, requires_grad=True)\n(w @ w).sum()\n",
        options=Options(rankdir="LR", show_saved=False, dtype="float64"),
        check=CheckInput("w", "2 * torch.ones(2, 2) * 2"),
    )
    at = new_app(dict(parse_qsl(share_query(state))))
    assert not at.exception and not at.error
    top_to_bottom = new_app({"program": state.program, "saved": "0", "dtype": "float64"})
    assert shown_svg(at) != shown_svg(top_to_bottom)  # the layout direction reached the drawing
    assert at.sidebar.selectbox(key="opt_rankdir").value == "LR"
    assert at.sidebar.checkbox(key="opt_saved").value is False
    assert at.sidebar.selectbox(key="opt_dtype").value == "float64"
    assert "MmBackward0" in shown_svg(at)
    assert grads(at) == {"w.grad": "[[4.0000, 4.0000], [4.0000, 4.0000]]"}
    assert any("is right" in s for s in shown(at, "success"))


def test_a_bad_link_parameter_is_reported_and_the_rest_still_works() -> None:
    at = new_app({"program": "z = torch.ones(3, requires_grad=True)\nz.sum()", "dtype": "float8", "device": "cuda:7"})
    assert not at.exception
    warnings = shown(at, "warning")
    assert any("ignored ?dtype=float8" in w for w in warnings)
    assert any("ignored ?device=cuda:7" in w for w in warnings)
    assert grads(at) == {"z.grad": "[1.0000, 1.0000, 1.0000]"}


def test_a_program_seen_before_comes_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphviz_app.web import service

    calls: list[str] = []
    real = service.analyze

    def counting(runner, program, options):  # noqa: ANN001, ANN202
        calls.append(program)
        return real(runner, program, options)

    monkeypatch.setattr(service, "analyze", counting)
    program = "q = torch.ones(3, requires_grad=True)\n(q * 7).sum()  # cache probe"
    first = new_app({"program": program})
    second = new_app({"program": program})  # another person opening the same link
    assert grads(first) == grads(second) == {"q.grad": "[7.0000, 7.0000, 7.0000]"}
    assert calls == [program]
    new_app({"program": program, "rankdir": "LR"})  # other options: a new drawing
    assert calls == [program, program]
