"""The viewer's self-contained HTML file, opened from disk in Debian's Firefox ESR (over WebDriver BiDi)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from firefox_bidi import Firefox, firefox
from torch import nn
from viewer_support import compare_pair, module_graph, wide_graph

from graphviz_app import save, trace_model

pytestmark = [pytest.mark.browser, pytest.mark.firefox]

READY = "document.querySelector('[data-testid=graph-viewer]')?.dataset.state === 'ready'"
DRAWN = "[...document.querySelectorAll('[data-node]')].map(e => e.dataset.node)"
HOSTILE_NAME = "</script><img src=x onerror=window.__pwned=1>"
READY_TIMEOUT = 120.0  # bounds a hang on a busy machine; it does not measure speed


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh())
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).sum()


@pytest.fixture(scope="module")
def browser() -> Iterator[Firefox]:
    with firefox(timeout=READY_TIMEOUT) as b:
        yield b


@pytest.fixture(scope="module")
def traced_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    graph = trace_model(_Net(), torch.randn(2, 4), gradients=True)
    assert {m.name for m in graph.modules} >= {"body", "body.0", "head"}  # a graph with module boxes
    return save(graph, tmp_path_factory.mktemp("firefox") / "traced.html")


@pytest.fixture(scope="module")
def server(traced_html: Path) -> Iterator[str]:
    """A local http server for the viewer's folder: its base URL."""
    (traced_html.parent / "pixel.png").write_bytes(b"")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(traced_html.parent))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=30)


def _open(browser: Firefox, url: str) -> str:
    context = browser.open(url)
    browser.wait_for(context, READY, timeout=READY_TIMEOUT, what="the viewer's ready state")
    return context


def test_the_file_opened_from_disk_makes_no_network_request_and_draws_the_graph(
        browser: Firefox, traced_html: Path) -> None:
    context = _open(browser, traced_html.as_uri())
    assert browser.evaluate(context, DRAWN), "the pane is blank"
    assert browser.evaluate(context, "document.querySelectorAll('[data-module]').length") > 0  # module boxes
    # Firefox's BiDi log reports http(s) and ws loads, not file:// reads: so nothing at all, or the file itself.
    assert [url for url in browser.requests() if url != traced_html.as_uri()] == []
    assert browser.page_errors() == [] and browser.dialogs() == []


def test_the_request_log_sees_what_a_file_from_disk_asks_for(browser: Firefox, server: str, tmp_path: Path) -> None:
    """The control for the test above: a file from disk that does load something is caught asking."""
    page = tmp_path / "leaky.html"
    page.write_text(f'<!doctype html><img src="{server}/pixel.png">'
                    '<div data-testid="graph-viewer" data-state="ready"></div>', encoding="utf-8")
    context = _open(browser, page.as_uri())
    browser.wait_for(context, "document.querySelector('img').complete", timeout=READY_TIMEOUT, what="the image load")
    assert [url for url in browser.requests() if url != page.as_uri()] == [f"{server}/pixel.png"]


def test_served_over_http_the_only_request_is_the_page_itself(browser: Firefox, server: str,
                                                               traced_html: Path) -> None:
    url = f"{server}/{traced_html.name}"
    context = _open(browser, url)
    assert browser.evaluate(context, DRAWN), "the pane is blank"
    assert browser.requests() == [url]
    # Firefox asks for /favicon.ico on an http page; the file's own policy blocks it before any request.
    assert [e for e in browser.page_errors() if "favicon.ico" not in e] == []


def test_a_hostile_node_name_shows_as_text_and_runs_nothing(browser: Firefox, tmp_path: Path) -> None:
    graph = module_graph(1)
    graph = replace(graph, nodes=tuple(replace(n, name=HOSTILE_NAME) if n.id == "n2" else n for n in graph.nodes))
    path = save(graph, tmp_path / "hostile.html")
    context = _open(browser, path.as_uri() + "#open=0.1.2.3.4.5&sel=n2")  # every box open, the node selected
    assert "n2" in browser.evaluate(context, DRAWN)
    assert browser.evaluate(context, "typeof window.__pwned") == "undefined"
    assert browser.evaluate(context, "document.querySelectorAll('img, iframe, [onerror], [onload]').length") == 0
    assert HOSTILE_NAME in browser.evaluate(context, "document.querySelector('[data-node=n2]').textContent")
    assert HOSTILE_NAME in browser.evaluate(
        context, "document.querySelector('[data-testid=viewer-details]').textContent")
    assert browser.page_errors() == [] and browser.dialogs() == []


def test_the_opening_view_and_a_box_laid_out_in_the_worker(browser: Firefox, tmp_path: Path) -> None:
    path = save(wide_graph(), tmp_path / "wide.html")
    context = _open(browser, path.as_uri())
    assert browser.evaluate(context, "document.querySelector('[data-testid=graph-viewer]').dataset.openingLevel") == "1"
    browser.evaluate(context, """(() => {
      const box = document.querySelector("[data-module='wide'].gv-closed .gv-shape");
      for (const type of ['pointerdown', 'pointerup']) {
        box.dispatchEvent(new PointerEvent(type, {bubbles: true, button: 0, pointerId: 1}));
      }
      return true;
    })()""")
    done = "(v => v.dataset.waiting === '0' && v.dataset.workerLayouts === '1')" \
           "(document.querySelector('[data-testid=graph-viewer]'))"
    browser.wait_for(context, done, timeout=READY_TIMEOUT, what="the wide box laid out in the worker")
    assert browser.evaluate(context, "document.querySelectorAll('[data-node]').length") == 122
    assert browser.page_errors() == [] and browser.dialogs() == []


COMPARE_READY = "document.querySelector('[data-testid=compare]')?.dataset.state === 'ready'"


def _press(browser: Firefox, context: str, selector: str) -> None:
    """A click on the first element `selector` finds (its shape when it has one), as the viewer reads clicks."""
    browser.evaluate(context, f"""(() => {{
      const found = document.querySelector({selector!r});
      const target = found.querySelector('.gv-shape') || found;
      for (const type of ['pointerdown', 'pointerup']) {{
        target.dispatchEvent(new PointerEvent(type, {{bubbles: true, button: 0, pointerId: 1}}));
      }}
      return true;
    }})()""")


def test_the_compare_file_draws_both_panes_in_step_and_its_labels_stay_text(browser: Firefox, tmp_path: Path) -> None:
    a, b = compare_pair()
    path = save((a, b), tmp_path / "cmp.html", labels=(HOSTILE_NAME, "bf16"))
    context = browser.open(path.as_uri())
    browser.wait_for(context, COMPARE_READY, timeout=READY_TIMEOUT, what="the compare panes' ready state")
    side = "document.querySelector('[data-side={}]')"
    for s in "ab":
        assert browser.evaluate(context, f"{side.format(s)}.querySelectorAll('[data-node], [data-module]').length") > 0
    assert browser.evaluate(context, f"{side.format('a')}.querySelector('.gv-compare-label').textContent") \
        == HOSTILE_NAME
    _press(browser, context, "[data-side=a] [data-roll='blocks.0']")
    opened = "document.querySelector(\"[data-side=b] [data-roll='blocks.0']\")?.classList.contains('gv-open')"
    browser.wait_for(context, opened, timeout=READY_TIMEOUT, what="the counterpart box opened in pane b")
    _press(browser, context, "[data-side=a] [data-module='blocks.0.fc']")
    inner = "document.querySelector(\"[data-side=b] [data-module='blocks.0.fc']\")?.classList.contains('gv-open')"
    browser.wait_for(context, inner, timeout=READY_TIMEOUT, what="blocks.0.fc opened in pane b")
    mat1 = browser.evaluate(context, """[...document.querySelectorAll("[data-side=a] .gv-node")]
        .find(e => e.textContent.includes('mat1')).dataset.node""")
    _press(browser, context, f"[data-side=a] [data-node={mat1}]")
    chosen = "document.querySelector('[data-side=b] .gv-node.gv-selected')?.textContent"
    browser.wait_for(context, f"({chosen} || '').includes('mat1')", timeout=READY_TIMEOUT,
                     what="the counterpart selected in pane b")
    assert "bfloat16" in browser.evaluate(context, chosen)
    assert browser.evaluate(context, "typeof window.__pwned") == "undefined"
    assert browser.evaluate(context, "document.querySelectorAll('img, iframe, [onerror], [onload]').length") == 0
    assert [url for url in browser.requests() if url != path.as_uri()] == []
    assert browser.page_errors() == [] and browser.dialogs() == []
