"""The interactive viewer in a real Chromium: open-to-first-view, opening a box, search, export; file sizes.

The first view is the opening view: the deepest level of modules that fits the pane legibly (the
module boxes on screen and the scale are reported beside its time). Run: `python
benchmarks/bench_viewer.py [--quick] [--no-svg]`. Figures go into benchmarks/README.md (section viewer)
by hand. Graphs: a 12-layer GPT-2-shaped model with gradients (nn modules shaped like GPT-2 blocks),
a 100-layer nn.TransformerEncoder, a 100,000-op flat chain and a 1,000,000-op chain (records built
directly: tracing them is measured in the trace section). Beside them, the same graph as Graphviz SVG
(`save(graph, "g.svg")`, which folds modules or draws the nodes nearest the output to meet its 60 s deadline).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from graphviz_app import trace_model  # noqa: E402
from graphviz_app.drawing.renderer import export  # noqa: E402
from graphviz_app.model import Edge, Graph, ModuleInfo, Node, NodeKind, TensorInfo  # noqa: E402
from graphviz_app.viewer import viewer_html  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.ModuleDict({"c_attn": nn.Linear(d, 3 * d), "c_proj": nn.Linear(d, d)})
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.attn["c_attn"](self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn["c_proj"](a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln_2(x))


class GPT2Shaped(nn.Module):
    def __init__(self, layers: int = 12, d: int = 64, vocab: int = 500, ctx: int = 32) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.h = nn.ModuleList(Block(d) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())


def chain(ops: int) -> Graph:
    t = TensorInfo(None, (4,), "float32", "cpu", 4, 16, True)
    nodes = [Node("n0", NodeKind.OUTPUT, "output", tensor=t)]
    nodes += [Node(f"n{k + 1}", NodeKind.OP, "MulBackward0" if k % 2 == 0 else "SinBackward0", tensor=t)
              for k in range(ops)]
    nodes.append(Node(f"n{ops + 1}", NodeKind.LEAF, "x", tensor=t))
    return Graph(tuple(nodes), tuple(Edge(f"n{k + 1}", f"n{k}") for k in range(ops + 1)))


def graphs(quick: bool) -> list[tuple[str, Graph]]:
    torch.manual_seed(0)
    found = [("GPT-2-shaped, 12 layers, gradients", trace_model(GPT2Shaped(), torch.randint(0, 500, (2, 16)),
                                                                gradients=True))]
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 100, enable_nested_tensor=False)
    found.append(("nn.TransformerEncoder, 100 layers", trace_model(encoder, torch.randn(2, 10, 64))))
    found.append(("flat chain, 100,000 ops", chain(100_000)))
    if not quick:
        found.append(("flat chain, 1,000,000 ops", chain(1_000_000)))
    return found


# The module boxes wholly inside the pane, and the smallest label on screen in px.
_OPENING = """() => {
  const pane = document.querySelector('[data-testid=viewer-pane]').getBoundingClientRect();
  const inside = (r) => r.left >= pane.left && r.top >= pane.top && r.right <= pane.right && r.bottom <= pane.bottom;
  const boxes = [...document.querySelectorAll('.gv-viewport [data-module], .gv-viewport [data-roll]')];
  const px = [...document.querySelectorAll('.gv-viewport text')]
    .map((t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  return {modules: boxes.filter((b) => inside(b.getBoundingClientRect())).length, smallest: Math.min(...px)};
}"""


def measure(page, path: Path, runs: int) -> dict[str, float]:  # noqa: ANN001
    first = []
    for _ in range(runs):
        page.goto(path.as_uri())
        page.wait_for_selector("[data-testid=graph-viewer][data-state=ready]", timeout=600_000)
        first.append(float(page.get_attribute("[data-testid=graph-viewer]", "data-first-view-ms")))
    opening = page.evaluate(_OPENING)
    exports = []
    for what in ("view.svg", "drawing.svg", "view.png"):
        with page.expect_download():
            page.get_by_test_id("viewer-export").select_option(what)
        exports.append(float(page.get_attribute("[data-testid=graph-viewer]", "data-last-export-ms")))
    viewer = page.locator("[data-testid=graph-viewer]")
    opens = []
    for _ in range(3):
        page.get_by_role("button", name="Close all").click()
        box = page.locator(".gv-closed").first
        box.click()
        opens.append(float(viewer.get_attribute("data-last-refresh-ms")))
    search = page.get_by_test_id("viewer-search")
    search.fill("Backward0")
    page.wait_for_selector("[data-testid=graph-viewer][data-last-search-ms]")
    finds = []
    gotos = []
    for query in ("MulBackward0", "AddBackward0", "x", "Backward"):
        search.fill(query)
        search.press("Enter")
        finds.append(float(viewer.get_attribute("data-last-search-ms")))
        gotos.append(float(viewer.get_attribute("data-last-goto-ms") or "nan"))
    return {"first": statistics.median(first), "open": statistics.median(opens), "search": statistics.median(finds),
            "goto": statistics.median(gotos), "modules": opening["modules"], "smallest": opening["smallest"],
            "exports": exports}


def wide(ops: int = 140) -> Graph:
    """One module box of `ops` ops joined in a lattice (each feeds the next and the seventh after it)."""
    nodes = [Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "SumBackward0")]
    edges = [Edge("n1", "n0"), Edge(f"n{ops + 1}", "n1")]
    for k in range(ops):
        nodes.append(Node(f"n{k + 2}", NodeKind.OP, f"MulBackward{k % 10}", module="wide"))
        for step in (1, 7):
            if k + step < ops:
                edges.append(Edge(f"n{k + 2}", f"n{k + 2 + step}", slot=step))
    return Graph(tuple(nodes), tuple(edges), modules=(ModuleInfo("", "Net", 0, 0), ModuleInfo("wide", "Wide", 0, 0)))


# The longest the page went without running a 5 ms timer while the box opened and was laid out.
_GAPS = """() => { window.__gap = 0; let last = performance.now();
  window.__timer = setInterval(() => { const now = performance.now(); window.__gap = Math.max(window.__gap, now - last);
                                       last = now; }, 5); }"""


def input_latency(browser, path: Path, worker: bool) -> tuple[float, float]:  # noqa: ANN001
    """(longest main-thread gap ms, ms until laid out) opening the wide box, with or without the layout worker."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    if not worker:
        page.add_init_script("window.Worker = undefined")  # the viewer then lays out on the page
    page.goto(path.as_uri())
    page.wait_for_selector("[data-testid=graph-viewer][data-state=ready]", timeout=600_000)
    page.evaluate(_GAPS)
    start = time.perf_counter()
    page.locator("[data-module='wide'].gv-closed").click()
    page.wait_for_selector("[data-testid=graph-viewer][data-waiting='0'] [data-module='wide'].gv-open")
    done = (time.perf_counter() - start) * 1000
    page.wait_for_timeout(50)
    gap = page.evaluate("() => { clearInterval(window.__timer); return window.__gap; }")
    page.close()
    return gap, done


def svg_size(graph: Graph) -> str:
    """What `save(graph, "g.svg")` writes for the same graph: its size, time, and what the 60 s deadline cut."""
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            svg = export(graph, "svg", timeout=60)
    except Exception as e:  # noqa: BLE001 - a figure, not a failure
        return f"failed: {type(e).__name__}"
    seconds = time.perf_counter() - start
    drawn = svg.count(b'class="node"')
    cut = ("" if not warned else
           f"; {drawn:,} of {len(graph.nodes):,} nodes drawn: {str(warned[0].message).split(';')[0].split(':')[0]}")
    return f"{len(svg) / 1e6:.2f} MB ({seconds:.1f} s{cut})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="leave out the 1,000,000-op chain")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-svg", action="store_true", help="leave out the Graphviz SVG beside each graph")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        for name, graph in graphs(args.quick):
            start = time.perf_counter()
            text = viewer_html(graph)
            build = time.perf_counter() - start
            path = Path(tmp) / "g.html"
            path.write_text(text, encoding="utf-8")
            start_data = text.index('id="gv-payload">')
            data = text.index("</script>", start_data) - start_data
            got = measure(page, path, args.runs)
            rows.append((name, len(graph.nodes), build, len(text), data, got,
                         "not run" if args.no_svg else svg_size(graph)))
            print(rows[-1], flush=True)
        path = Path(tmp) / "wide.html"
        path.write_text(viewer_html(wide()), encoding="utf-8")
        latency = {w: [input_latency(browser, path, w) for _ in range(args.runs)] for w in (True, False)}
        browser.close()
    load = subprocess.run(["cat", "/proc/loadavg"], capture_output=True, text=True).stdout.split()[:3]
    print(f"\nload average during the run: {' '.join(load)} (2 cores)\n")
    print("| graph | nodes | Python build s | HTML file | of which data | first view ms | module boxes, "
          "smallest label | open a box ms | search ms | go to match ms | export view.svg / drawing.svg / view.png ms "
          "| Graphviz SVG |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|")
    for name, n, build, size, data, got, svg in rows:
        ex = " / ".join(f"{v:.0f}" for v in got["exports"])
        print(f"| {name} | {n:,} | {build:.1f} | {size / 1e6:.2f} MB | {data / 1e6:.2f} MB | {got['first']:.0f} "
              f"| {got['modules']}, {got['smallest']:.1f} px | {got['open']:.0f} | {got['search']:.0f} "
              f"| {got['goto']:.0f} | {ex} | {svg} |")
    print("\nOpening a box of 140 ops (a lattice): the longest the page went without running a 5 ms timer, "
          "and the time until it was laid out (medians):")
    for w, runs in latency.items():
        gap, done = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"- {'in the Web Worker' if w else 'on the page (no worker)'}: longest gap {gap:.0f} ms, "
              f"laid out after {done:.0f} ms")


if __name__ == "__main__":
    main()
