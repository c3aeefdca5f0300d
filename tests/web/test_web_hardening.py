"""The page under AppTest: no cached failures, honest time-outs, marked NaN, long programs, big pictures."""

from __future__ import annotations

import pytest
from web_support import new_app, shown, type_program

from graphviz_app.web.results import Failure
from graphviz_app.web.urlstate import MAX_URL_PROGRAM_CHARS


def test_after_a_busy_pool_the_next_visitor_runs_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphviz_app.web import service

    calls: list[str] = []
    real = service.analyze

    def busy_once(runner, program, options):  # noqa: ANN001, ANN202
        calls.append(program)
        if len(calls) == 1:
            return Failure("all 4 workers are busy: try again in a moment", kind="busy")
        return real(runner, program, options)

    monkeypatch.setattr(service, "analyze", busy_once)
    program = "b = torch.ones(2, requires_grad=True)\n(b * 3).sum()  # busy probe"
    first = new_app({"program": program})
    assert any("workers are busy" in e for e in shown(first, "error"))
    assert any("press Run to try again" in c for c in shown(first, "caption"))
    second = new_app({"program": program})  # the next visitor of the same link
    assert not second.error, shown(second, "error")
    assert calls == [program, program]
    third = new_app({"program": program})  # the success is what is cached
    assert not third.error and calls == [program, program]


def test_a_time_out_with_the_machine_to_itself_offers_no_try_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphviz_app.web import service

    def overtime(runner, program, options):  # noqa: ANN001, ANN202
        return Failure("the job ran longer than its time limit of 15 s and was stopped. It had the machine "
                       "to itself, so it would stop at the same point again: a retry will not help",
                       kind="overtime")

    monkeypatch.setattr(service, "analyze", overtime)
    at = new_app({"program": "o = torch.ones(2, requires_grad=True)\no.sum()  # overtime probe"})
    assert any("a retry will not help" in e for e in shown(at, "error"))
    captions = shown(at, "caption")
    assert not any("try again" in c for c in captions), captions
    assert any("Make the program smaller" in c for c in captions)


def test_a_variable_assigned_in_a_loop_is_not_offered_in_the_check_panel() -> None:
    program = ("w = torch.ones(2, requires_grad=True)\nfor i in range(2):\n"
               "    v = torch.ones(2, requires_grad=True)\n(w * v).sum()")
    at = new_app({"program": program})
    assert not at.exception and not at.error, shown(at, "error")
    assert at.selectbox(key="w_check_wrt").options == ["w"]


def test_nan_and_inf_values_are_marked_in_the_tables() -> None:
    at = new_app({"program": "n = torch.tensor([0., 1., -1.], requires_grad=True)\n(n / 0.).sum() + n.log().sum()"})
    assert not at.exception
    rows = {r["tensor"]: r["values"] for t in at.table if "tensor" in t.value.columns for _, r in t.value.iterrows()}
    assert rows["output"].startswith("⚠ NaN: ") and "nan" in rows["output"]
    assert rows["n.grad"].startswith("⚠ ") and "Inf" in rows["n.grad"].split(":")[0]


def test_a_bad_link_parameter_is_reported_until_the_page_changes_not_for_the_whole_session() -> None:
    at = new_app({"program": "z = torch.ones(3, requires_grad=True)\nz.sum()", "dtype": "float8"})
    assert any("ignored ?dtype=float8" in w for w in shown(at, "warning"))
    at.run()  # a rerun that changes nothing (the editor reports its text when it mounts)
    assert any("ignored ?dtype=float8" in w for w in shown(at, "warning"))
    at.sidebar.checkbox(key="opt_attrs").uncheck().run()
    assert not any("ignored ?dtype" in w for w in shown(at, "warning"))
    at.sidebar.checkbox(key="opt_attrs").check().run()  # back to the link's options: still gone
    assert not any("ignored ?dtype" in w for w in shown(at, "warning"))


def test_a_program_too_long_for_a_link_says_so_and_stays_on_the_page() -> None:
    program = "t = torch.ones(2, requires_grad=True)\n" + "#" * MAX_URL_PROGRAM_CHARS + "\nt.sum()"
    at = new_app()
    type_program(at, program)
    at.button(key="run").click().run()
    assert not at.exception and not at.error, shown(at, "error")
    assert any("too long for a link" in c and "stays on this page" in c for c in shown(at, "caption"))
    assert at.session_state["submitted"] == program
    query = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert "program" not in query and query["program_chars"] == str(len(program))
    opened = new_app(query)  # whoever opens that link learns why they see the seed
    assert any("too long for a link" in w and "seed example is shown" in w for w in shown(opened, "warning"))


def test_a_picture_that_cannot_be_drawn_says_why_instead_of_its_button(monkeypatch: pytest.MonkeyPatch) -> None:
    """The browser hears only that a download failed: the page says why once an earlier click found it."""
    from graphviz_app.web.cache import ResultCache

    refusal = Failure("No PNG for this graph: 1,503 nodes make a 32,767 × 24,000 pixel picture", kind="render")
    real = ResultCache.get
    monkeypatch.setattr(ResultCache, "get", lambda self, key: refusal if key[0] == "png" else real(self, key))
    at = new_app({"program": "p = torch.ones(2, requires_grad=True)\np.sum()  # png probe"})
    assert [b.label for b in at.download_button] == ["SVG", "DOT", "JSON"]
    assert any(c.startswith("No PNG for this graph: 1,503 nodes make a 32,767 × 24,000") for c in shown(at, "caption"))


def test_a_big_graph_warns_that_its_svg_and_png_may_not_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from graphviz_app.web import service

    real = service.analyze
    monkeypatch.setattr(service, "analyze", lambda *args: replace(real(*args), node_count=8003))
    at = new_app({"program": "p = torch.ones(2, requires_grad=True)\np.sum()  # big probe"})
    assert [b.label for b in at.download_button] == ["SVG", "PNG", "DOT", "JSON"]
    assert any("8,003 nodes may take longer than the" in c and "graphviz-app render autograd.json" in c
               for c in shown(at, "caption"))


def test_a_link_naming_no_such_variable_to_check_says_so() -> None:
    at = new_app({"program": "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()", "wrt": "zzz"})
    assert not at.exception
    assert any("ignored ?wrt=zzz" in w and "checking x instead" in w for w in shown(at, "warning"))
    assert at.selectbox(key="w_check_wrt").value == "x"
    at.run()  # the editor's first report reruns the page: the warning stays while the page is the link's
    assert any("ignored ?wrt=zzz" in w for w in shown(at, "warning"))
