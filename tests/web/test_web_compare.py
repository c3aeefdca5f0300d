"""Two saved graphs uploaded on the page show side by side in synced panes: the worker's job, and what a person
sees in Chromium (both panes draw; a box opened or a node selected in one follows in the other; file names as
text; no request leaves the page's own server)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
from viewer_support import compare_pair
from web_support import decode_viewer, new_app, viewer_element

from graphviz_app.jobs.compare_saved import compare_saved_job
from graphviz_app.web import present, service
from graphviz_app.web.pair import SavedPair, pair_labels
from graphviz_app.web.results import Failure
from graphviz_app.web.upload import MAX_UPLOAD_BYTES
from graphviz_app.web.urlstate import Options

HOSTILE_FILE = "<img src=x onerror=window.__pwned=1>.json"  # (a browser sends " in a file name as %22)
SEED = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
COMPARE_READY = "[data-testid=compare][data-state=ready]"


def _files() -> tuple[bytes, bytes]:
    a, b = compare_pair()
    return a.to_json().encode(), b.to_json().encode()


def test_the_job_aligns_the_two_files_for_the_panes() -> None:
    data_a, data_b = _files()
    pair = compare_saved_job(data_a, "fp32.json", data_b, "bf16.json", Options(rankdir="LR"))
    assert isinstance(pair, SavedPair)
    assert pair.labels == ("fp32", "bf16") and pair.node_counts == (15, 11)
    assert pair.summary.startswith("0 node(s) added, 4 removed")
    shown = decode_viewer(pair.viewer)
    assert shown["format"] == "graphviz-app-compare" and shown["labels"] == ["fp32", "bf16"]
    assert [p["options"]["rankdir"] for p in shown["panes"]] == ["LR", "LR"]  # the sidebar's direction, both panes


@pytest.mark.parametrize(("names", "labels"), [
    (("a.json", "b.json"), ("a", "b")),
    (("g.json", "G.JSON"), ("g", "G")),
    (("run1/g.json", "g.json"), ("g (first)", "g (second)")),
    ((".json", "b"), ("graph", "b")),
])
def test_the_panes_are_named_after_the_files(names: tuple[str, str], labels: tuple[str, str]) -> None:
    assert pair_labels(*names) == labels


def test_a_bad_second_file_is_refused_in_words() -> None:
    data_a, _ = _files()
    found = compare_saved_job(data_a, "a.json", b"{not json", "b.json", Options())
    assert isinstance(found, Failure) and found.kind == "input"
    assert str(found).startswith("b.json is not JSON")
    big = service.compare_saved(service.page_runner(), data_a, "a.json", b" " * (MAX_UPLOAD_BYTES + 1), "big.json",
                                Options())
    assert isinstance(big, Failure) and "big.json is 25.0 MB" in str(big)  # refused before any worker runs


def test_the_page_sends_the_panes_once_a_second_file_is_uploaded_and_run_goes_back() -> None:
    data_a, data_b = _files()
    at = new_app()
    assert [u.key for u in at.get("file_uploader")] == ["upload"]  # no second box before a graph is open
    at.file_uploader(key="upload").set_value(("fp32.json", data_a, "application/json")).run()
    assert [u.key for u in at.get("file_uploader")] == ["upload", "upload_b"]
    assert decode_viewer(viewer_element(at)["payload"])["title"] == "fp32.json"  # the first graph alone
    at.file_uploader(key="upload_b").set_value(("bf16.json", data_b, "application/json")).run()
    assert not at.exception
    element = viewer_element(at)
    assert element["mount"] == "mountCompare"
    shown = decode_viewer(element["payload"])
    assert shown["labels"] == ["fp32", "bf16"] and shown["status"][0].count(2) == 4  # STATUSES[2]: removed
    assert any(present.md("fp32 (15 nodes) ⟷ bf16 (11 nodes): 0 node(s) added, 4 removed") in c.value
               for c in at.caption)
    at.button(key="run").click().run()  # Run: the program's graph again
    assert "mount" not in viewer_element(at)


@pytest.mark.browser
@pytest.mark.slow
def test_two_uploads_show_synced_panes_and_names_stay_text(page, server, tmp_path: Path) -> None:  # noqa: ANN001
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{server.url}/?program={quote(SEED)}")
    page.locator("[data-testid=graph-viewer][data-state=ready]").wait_for(timeout=120_000)
    data_a, data_b = _files()
    from playwright.sync_api import expect

    inputs = page.locator("input[type=file]")
    expect(inputs).to_have_count(1, timeout=60_000)  # the saved graph's box only
    inputs.nth(0).set_input_files(files=[{"name": HOSTILE_FILE, "mimeType": "application/json", "buffer": data_a}])
    page.get_by_test_id("viewer-status").filter(has_text="15 nodes").wait_for(timeout=120_000)
    expect(inputs).to_have_count(2, timeout=60_000)  # a saved graph is open: a second one to compare with
    inputs.nth(1).set_input_files(files=[{"name": "bf16.json", "mimeType": "application/json", "buffer": data_b}])
    page.locator(COMPARE_READY).wait_for(timeout=120_000)
    a, b = page.locator("[data-side=a]"), page.locator("[data-side=b]")
    assert a.locator(".gv-compare-label").inner_text() == HOSTILE_FILE[:-5]  # the file's name, as text
    assert b.locator(".gv-compare-label").inner_text() == "bf16"
    assert page.get_by_test_id("compare-summary").inner_text().endswith("4 removed (only in " + HOSTILE_FILE[:-5]
                                                                        + "), 0 added (only in bf16), 2 changed")
    page.get_by_text("(15 nodes) ⟷ bf16 (11 nodes): 0 node(s) added, 4 removed", exact=False).wait_for()
    a.locator("[data-roll='blocks.0']").click()
    assert "gv-open" in b.locator("[data-roll='blocks.0']").first.get_attribute("class")
    a.locator("[data-module='blocks.0.fc']").click()
    assert "gv-open" in b.locator("[data-module='blocks.0.fc']").first.get_attribute("class")
    search = a.get_by_test_id("viewer-search")  # (a click may land on the other pane: the pane shows part of a)
    search.fill("blocks.0.fc.weight")
    search.press("Enter")
    assert "blocks.0.fc.weight" in a.locator(".gv-node.gv-selected").text_content()
    selected = b.locator(".gv-node.gv-selected")
    assert selected.count() == 1 and "blocks.0.fc.weight" in selected.text_content()
    search.fill("blocks.2.fc.weight")  # only in the first file: removed, nothing to select in bf16
    search.press("Enter")
    assert "gv-cmp-removed" in a.locator(".gv-node.gv-selected").get_attribute("class")
    assert b.locator(".gv-selected").count() == 0
    assert page.evaluate("window.__pwned") is None and dialogs == []
    assert page.locator("[data-testid=compare] img, [data-testid=compare] [onerror]").count() == 0
    host = urlparse(server.url).netloc
    assert all(urlparse(u).netloc == host for u in requests if urlparse(u).scheme in ("http", "https", "ws"))
    with page.expect_download() as download:  # the same panes as one file
        page.get_by_role("button", name="The panes as one HTML file").click()
    saved = tmp_path / "compare.html"
    download.value.save_as(saved)
    page.goto(saved.as_uri())
    page.locator(COMPARE_READY).wait_for(timeout=120_000)
    assert page.locator("[data-side=a] .gv-compare-label").inner_text() == HOSTILE_FILE[:-5]
    assert page.title() == HOSTILE_FILE[:-5] + " ⟷ bf16" and page.evaluate("window.__pwned") is None
