"""Two programs compared on the page: a second editor whose program runs in the same workers, the synced panes,
a link that reopens the pair, and each side's own error; in AppTest and in Chromium against a live server."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, quote, urlencode, urlparse

import pytest
from web_support import components, decode_viewer, new_app, report_view, viewer_element

from graphviz_app.jobs.compare_saved import compare_graphs_job
from graphviz_app.jobs.page import analysis_job
from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.urlstate import MAX_URL_PROGRAM_CHARS, MAX_VIEW_CHARS, Options, PageState, from_query, to_query

SQUARE = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
CUBE = "x = torch.arange(3., requires_grad=True)\n((x+2)**3+3).mean()"
SHAPES_WRONG = "x = torch.arange(3., requires_grad=True)\n(x @ torch.ones(4)).sum()"
COMPARE_READY = "[data-testid=compare][data-state=ready]"


def _type_second(at, text: str) -> None:  # noqa: ANN001
    """Type `text` into the second editor, as the editor reports it while a person types."""
    at.session_state[f"editor-b-{at.session_state['compare_rev']}"] = {"value": text}


def test_a_link_holds_the_second_program_and_reads_it_back() -> None:
    state = PageState(program=SQUARE, compare=CUBE)
    query = to_query(state)
    assert query["compare"] == CUBE
    back, problems = from_query(dict(parse_qs(urlencode(query))))
    assert (back, problems) == (state, [])
    assert "compare" not in to_query(PageState(program=SQUARE))  # no second program: no parameter


def test_two_programs_too_long_for_one_link_keep_the_first_and_say_so() -> None:
    second = "y = 1\n" * (MAX_URL_PROGRAM_CHARS // 6)
    query = to_query(PageState(program=SQUARE, compare=second))
    assert query["program"] == SQUARE and "compare" not in query
    assert query["compare_chars"] == str(len(second))
    back, problems = from_query(query)
    assert back.compare == "" and back.program == SQUARE
    assert problems == [f"the second program ({len(second)} characters) was too long for a link beside the first "
                        f"(together at most {MAX_URL_PROGRAM_CHARS:,}), so the link left it out: ask for it as a "
                        "file, or paste it under 'Compare with a second program'"]


def test_a_link_holds_the_panes_view_with_the_pair_and_a_bad_one_is_said() -> None:
    state = PageState(program=SQUARE, compare=CUBE, compare_view="open=0.1&sel=n3")
    query = to_query(state)
    assert query["compare_view"] == "open=0.1&sel=n3" and "view" not in query  # the single graph's view is apart
    back, problems = from_query(dict(parse_qs(urlencode(query))))
    assert (back, problems) == (state, [])
    assert "compare_view" not in to_query(PageState(program=SQUARE, compare_view="open=0.1"))  # no pair: no view
    assert from_query({"program": SQUARE, "compare_view": "open=0.1"})[0].compare_view == ""
    back, problems = from_query({"program": SQUARE, "compare": CUBE, "compare_view": "open=" + "1." * MAX_VIEW_CHARS})
    assert back.compare == CUBE and back.compare_view == ""
    assert problems == [f"ignored ?compare_view= ({2 * MAX_VIEW_CHARS + 5:,} characters): a view holds at most "
                        f"{MAX_VIEW_CHARS:,}"]


def test_the_pairs_link_keeps_the_view_made_in_the_panes_and_a_new_pair_starts_afresh() -> None:
    at = new_app({"program": SQUARE, "compare": CUBE, "compare_view": "sel=n2"})
    assert not at.exception and not at.error
    assert viewer_element(at)["fragment"] == "sel=n2"  # the panes open on the link's view
    report_view(at, "open=0.1&sel=n3")  # the person opened a box and selected a node in the panes
    at.run()
    assert at.query_params["compare_view"] == "open=0.1&sel=n3"
    links = [m.value for m in at.markdown if "Link to this comparison" in m.value]
    assert parse_qs(urlparse(links[0].split("(", 1)[1].rstrip(")")).query)["compare_view"] == ["open=0.1&sel=n3"]
    assert viewer_element(new_app({k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}))[
        "fragment"] == "open=0.1&sel=n3"  # whoever opens the link sees that view
    _type_second(at, SQUARE)  # another pair: its panes open afresh and the link has no view
    at.button(key="run").click().run()
    assert not at.exception and viewer_element(at)["fragment"] == "" and "compare_view" not in at.query_params


def test_the_worker_aligns_two_programs_graphs_and_names_the_changed_exponent() -> None:
    first, second = analysis_job(SQUARE, Options()), analysis_job(CUBE, Options(rankdir="LR"))
    assert isinstance(first, Analysis) and isinstance(second, Analysis)
    pair = compare_graphs_job(first.graph_json, second.graph_json, ("program", "second program"), Options(rankdir="LR"))
    assert not isinstance(pair, Failure)
    shown = decode_viewer(pair.viewer)
    assert shown["labels"] == ["program", "second program"] and pair.node_counts == (7, 7)
    assert [p["options"]["rankdir"] for p in shown["panes"]] == ["LR", "LR"]
    rows = [r for side in shown["changes"] for rs in side.values() for r in rs]
    assert ["exponent", "2", "3"] in rows and "1 op-attribute change(s)" in pair.summary
    bad = compare_graphs_job("{not json", second.graph_json, ("a", "b"), Options())
    assert isinstance(bad, Failure) and bad.kind == "input"


def test_the_page_runs_a_second_program_beside_the_first_in_synced_panes() -> None:
    at = new_app({"program": SQUARE})
    assert len(components(at, "editor")) == 1  # the second editor only once asked for
    at.toggle(key="compare_on").set_value(True).run()
    editors = components(at, "editor")
    assert len(editors) == 2
    second = json.loads(editors[1].proto.json)
    assert second["value"].strip() == SQUARE and second["testid"] == "program-editor-b"  # a copy of the first
    assert "mount" not in viewer_element(at)  # nothing compared before Run
    _type_second(at, CUBE)
    at.button(key="run").click().run()
    assert not at.exception
    element = viewer_element(at)
    assert element["mount"] == "mountCompare"
    shown = decode_viewer(element["payload"])
    assert shown["labels"] == ["program", "second program"]
    assert any(["exponent", "2", "3"] in rows for rows in shown["changes"][0].values())
    links = [m.value for m in at.markdown if "Link to this comparison" in m.value]
    assert len(links) == 1
    query = parse_qs(urlparse(links[0].split("(", 1)[1].rstrip(")")).query)
    assert query["program"] == [SQUARE] and query["compare"] == [CUBE]
    assert at.query_params["compare"] == CUBE  # the address bar holds the pair too
    at.toggle(key="compare_on").set_value(False).run()  # switched off: the first program alone again
    assert "mount" not in viewer_element(at) and "compare" not in at.query_params


def test_a_link_with_a_second_program_reopens_the_pair() -> None:
    at = new_app({"program": SQUARE, "compare": CUBE})
    assert not at.exception
    assert at.toggle(key="compare_on").value is True
    element = viewer_element(at)
    assert element["mount"] == "mountCompare"
    assert decode_viewer(element["payload"])["summary"].endswith("1 op-attribute change(s)")


@pytest.mark.parametrize(("first", "second", "side", "words"), [
    (SQUARE, SHAPES_WRONG, "second", "inconsistent tensor size"),
    (SHAPES_WRONG, CUBE, "first", "inconsistent tensor size"),
    (SQUARE, "x = torch.ones(2)\nos.system('true')", "second", "os is not available"),
])
def test_bad_input_in_either_program_is_said_for_that_side_and_the_page_goes_on(
        first: str, second: str, side: str, words: str) -> None:
    at = new_app({"program": first, "compare": second})
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(f"The {side} program" in e and words in e for e in errors), errors
    # The side that ran still shows its graph, alone, as the page shows one graph (nothing lost).
    element = viewer_element(at)
    assert element is not None and "mount" not in element
    ran = first if side == "second" else second
    alone = analysis_job(ran, Options())
    assert isinstance(alone, Analysis)
    assert decode_viewer(element["payload"])["graph"] == decode_viewer(alone.viewer)["graph"]  # x**2 or x**3
    if side == "first":
        assert any("second program" in c.value and "the first could not run" in c.value for c in at.caption)
    _type_second(at, CUBE)  # fixed (the first fixed too): the pair shows
    at.session_state[f"editor-{at.session_state['editor_rev']}"] = {"value": SQUARE}
    at.button(key="run").click().run()
    assert not at.exception and not at.error
    assert viewer_element(at)["mount"] == "mountCompare"


@pytest.mark.browser
@pytest.mark.slow
def test_in_chromium_a_link_opens_two_programs_in_synced_panes_and_a_bad_second_program_says_so(
        page, server) -> None:  # noqa: ANN001
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{server.url}/?program={quote(SQUARE)}&compare={quote(CUBE)}")
    page.locator(COMPARE_READY).wait_for(timeout=180_000)
    a, b = page.locator("[data-side=a]"), page.locator("[data-side=b]")
    assert [a.locator(".gv-compare-label").inner_text(), b.locator(".gv-compare-label").inner_text()] == [
        "program", "second program"]
    summary = page.get_by_test_id("compare-summary").inner_text()
    assert summary == "program ⟷ second program: 0 removed (only in program), 0 added (only in second program), " \
                      "3 changed"
    a.get_by_test_id("viewer-search").fill("PowBackward0")
    a.get_by_test_id("viewer-search").press("Enter")
    selected = b.locator(".gv-node.gv-selected")
    assert selected.count() == 1 and "PowBackward0" in selected.text_content()
    assert "gv-cmp-changed" in selected.get_attribute("class")
    assert re.search(r"exponent changed\s+2 → 3", b.get_by_test_id("viewer-details").inner_text())
    assert page.get_by_test_id("program-editor-b").input_value().strip() == CUBE
    # The selection made in the panes goes into the pair's link (as one graph's view goes into its own).
    page.wait_for_url("**compare_view=*sel*")
    with_view = page.url
    assert "sel=" in parse_qs(urlparse(with_view).query)["compare_view"][0]
    page.get_by_role("link", name="Link to this comparison").wait_for()
    page.wait_for_function("[...document.querySelectorAll('a')].some(a => a.textContent.includes("
                           "'Link to this comparison') && a.href.includes('compare_view='))")
    # A second program that fails: its own error, for that side; the server keeps serving.
    editor = page.get_by_test_id("program-editor-b")
    editor.click()
    editor.press("Control+a")
    editor.press("Delete")
    editor.press_sequentially(SHAPES_WRONG)
    page.get_by_role("button", name="Run", exact=True).click()
    alert = page.locator("[data-testid='stAlertContentError']", has_text="The second program could not run")
    alert.wait_for(timeout=180_000)
    assert "inconsistent tensor size" in alert.inner_text()
    page.locator(COMPARE_READY).wait_for(state="detached", timeout=60_000)
    # The first program's graph still shows, alone, below the second's error.
    viewer = page.locator("[data-testid=graph-viewer][data-state=ready]")
    viewer.wait_for(timeout=180_000)
    assert viewer.locator("[data-node]").count() >= 1
    assert alert.bounding_box()["y"] + alert.bounding_box()["height"] <= viewer.bounding_box()["y"]
    # The link on the page and the address bar hold the pair; opened again, it shows the panes.
    page.goto(f"{server.url}/?program={quote(SQUARE)}&compare={quote(CUBE)}")
    page.locator(COMPARE_READY).wait_for(timeout=180_000)
    link = page.get_by_role("link", name="Link to this comparison").get_attribute("href")
    assert parse_qs(urlparse(link).query)["compare"] == [CUBE]
    assert parse_qs(urlparse(page.url).query)["compare"] == [CUBE]
    # The link with the panes' view reopens both panes with PowBackward0 selected, as they were.
    page.goto(with_view)
    page.locator(COMPARE_READY).wait_for(timeout=180_000)
    for pane in (a, b):
        chosen = pane.locator(".gv-node.gv-selected")
        chosen.wait_for(timeout=30_000)
        assert chosen.count() == 1 and "PowBackward0" in chosen.text_content()
    host = urlparse(server.url).netloc
    assert all(urlparse(u).netloc == host for u in requests if urlparse(u).scheme in ("http", "https", "ws"))


@pytest.mark.browser
@pytest.mark.slow
def test_in_chromium_a_failing_first_program_is_said_above_the_second_programs_graph(page, server) -> None:  # noqa: ANN001
    page.goto(f"{server.url}/?program={quote(SHAPES_WRONG)}&compare={quote(CUBE)}")
    viewer = page.locator("[data-testid=graph-viewer][data-state=ready]")
    viewer.wait_for(timeout=180_000)
    alert = page.locator("[data-testid='stAlertContentError']", has_text="The first program could not run")
    assert "inconsistent tensor size" in alert.inner_text()
    assert alert.bounding_box()["y"] + alert.bounding_box()["height"] <= viewer.bounding_box()["y"]
    assert page.locator(COMPARE_READY).count() == 0 and viewer.locator("[data-node]").count() >= 1
    assert page.get_by_text("the first could not run").count() == 1  # the graph is said to be the second's
