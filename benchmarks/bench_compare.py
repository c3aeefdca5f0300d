"""A compare file (two graphs in synced panes) in Chromium, and `save(graph, "x.html")` of a traced chain
against the trace's own time.

Run: `python benchmarks/bench_compare.py [--layers 100] [--chain 1000000] [--runs 3] [--skip-compare]`.
Figures go into benchmarks/README.md (section compare) by hand.

1. Compare: a 100-layer nn.TransformerEncoder traced in float32 and under bfloat16 autocast (10,000+
   nodes a side). Python: `compare_html(a, b)` against `viewer_html(a)` + `viewer_html(b)` (the two
   files it replaces), CPU time. Chromium: the compare file's first view (both panes drawn, in step)
   against the single viewer's first view of graph a, median of `--runs` loads; then opening a box in
   pane a (laid out and drawn in both panes).
2. Save: an n-op chain (`y * 1.5`, `sin`, `+ 1` in turn: ops that save tensors, scalars and attributes)
   traced with its tensors; CPU time (`time.thread_time()`) of `trace()` against `save(graph, "x.html")`,
   and where save's time goes (the steps of `viewer.payload.payload`, timed one by one with the GC paused as
   payload() pauses it). Built, traced and
   saved on the big-stack thread (freeing a long chain recurses). Then the file's first view in Chromium and
   one click on its first closed box.
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from graphviz_app import record, save, trace  # noqa: E402
from graphviz_app.model import Graph, to_compact  # noqa: E402
from graphviz_app.tracing.big_stack import call_with_large_stack  # noqa: E402
from graphviz_app.viewer import viewer_html  # noqa: E402
from graphviz_app.viewer.compare import compare_html  # noqa: E402
from graphviz_app.viewer.memory import memory_view  # noqa: E402
from graphviz_app.viewer.payload import encode, overlays, payload  # noqa: E402
from graphviz_app.viewer.tree import build_tree, initial_open  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def encoder_pair(layers: int) -> tuple[Graph, Graph]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    x = torch.randn(2, 10, 64)
    with record(model):
        fp32 = trace(model(x).sum(), model)
    with record(model), torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = trace(model(x).float().sum(), model)
    return fp32, bf16


def _cpu(f):  # noqa: ANN001, ANN202
    c0 = time.thread_time()
    out = f()
    return time.thread_time() - c0, out


def first_view(page, path: Path, ready: str, attr: str, runs: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(runs):
        page.goto(path.as_uri())
        page.wait_for_selector(ready, timeout=600_000)
        times.append(float(page.get_attribute(attr, "data-first-view-ms")))
    return statistics.median(times)


def compare(layers: int, runs: int) -> None:
    from playwright.sync_api import sync_playwright

    a, b = encoder_pair(layers)
    gc.collect()
    both_cpu, (one_a, _) = _cpu(lambda: (viewer_html(a), viewer_html(b)))
    cmp_cpu, text = _cpu(lambda: compare_html(a, b, labels=("float32", "bfloat16")))
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        single, pair = Path(tmp) / "a.html", Path(tmp) / "cmp.html"
        single.write_text(one_a, encoding="utf-8")
        pair.write_text(text, encoding="utf-8")
        alone = first_view(page, single, "[data-testid=graph-viewer][data-state=ready]",
                           "[data-testid=graph-viewer]", runs)
        panes = first_view(page, pair, "[data-testid=compare][data-state=ready]", "[data-testid=compare]", runs)
        pane_a = page.locator("[data-side=a]")
        opened = []
        for _ in range(runs):
            pane_a.get_by_role("button", name="Close all").click()
            pane_a.locator(".gv-closed").first.click()
            ms = page.eval_on_selector_all("[data-testid=graph-viewer]",
                                           "els => els.map(e => +e.dataset.lastRefreshMs)")
            opened.append(sum(ms))
        browser.close()
    load = subprocess.run(["cat", "/proc/loadavg"], capture_output=True, text=True).stdout.split()[:3]
    print(f"compare: nn.TransformerEncoder {layers} layers, float32 {len(a.nodes):,} nodes against bfloat16 "
          f"autocast {len(b.nodes):,} nodes; load {' '.join(load)}")
    print(f"- Python CPU s: compare_html {cmp_cpu:.2f} against viewer_html(a) + viewer_html(b) {both_cpu:.2f} "
          f"({cmp_cpu / both_cpu:.2f}x); compare file {len(text) / 1e6:.2f} MB")
    print(f"- first view ms (median of {runs}): compare file {panes:.0f} against one viewer of graph a {alone:.0f} "
          f"({panes / alone:.2f}x)")
    print(f"- open a box in pane a, laid out and drawn in both panes: {statistics.median(opened):.0f} ms (median)")


def _open_in_chromium(path: Path, runs: int) -> tuple[float, float]:
    """The single viewer's first view (median of `runs` loads) and one click on its first closed box, in ms."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        first = first_view(page, path, "[data-testid=graph-viewer][data-state=ready]", "[data-testid=graph-viewer]",
                           runs)
        page.locator(".gv-closed").first.click()
        box = float(page.get_attribute("[data-testid=graph-viewer]", "data-last-refresh-ms"))
        browser.close()
    return first, box


def chain(n: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    x = torch.ones(2, requires_grad=True)
    y = x
    for i in range(n):
        y = y * 1.5 if i % 3 == 0 else (y.sin() if i % 3 == 1 else y + 1)
    return y, {"x": x}


def saving(n: int, runs: int, *, browser: bool = True) -> None:
    def work() -> None:
        y, params = chain(n)
        gc.collect()
        trace_cpu, graph = _cpu(functools.partial(trace, y, params))
        del y, params
        gc.collect()
        with tempfile.TemporaryDirectory() as tmp:
            save_cpu, path = _cpu(lambda: save(graph, Path(tmp) / "x.html"))
            size = path.stat().st_size
            first, box = _open_in_chromium(path, runs) if browser else (float("nan"), float("nan"))
        gc.collect()
        gc.disable()  # as payload() builds them (viewer.payload._gc_paused)
        steps = {}
        steps["to_compact"], columns = _cpu(lambda: to_compact(graph))
        ends = columns["edges"]["src"], columns["edges"]["dst"]
        steps["build_tree"], tree = _cpu(lambda: build_tree(graph, ends=ends))
        steps["overlays"], _ = _cpu(lambda: overlays(graph, tree, ends=ends, edge_kinds=columns["edges"]["kind"]))
        steps["memory_view"], _ = _cpu(lambda: memory_view(graph, tree))
        steps["initial_open"], _ = _cpu(lambda: initial_open(tree))
        data = payload(graph)
        steps["encode (JSON + gzip + base64)"], _ = _cpu(lambda: encode(data))
        gc.enable()
        load = subprocess.run(["cat", "/proc/loadavg"], capture_output=True, text=True).stdout.split()[:3]
        print(f"save: {n:,}-op chain traced with its tensors: {len(graph.nodes):,} nodes, "
              f"{len(graph.edges):,} edges; load {' '.join(load)}")
        print(f"- CPU s: trace {trace_cpu:.2f}, save(graph, 'x.html') {save_cpu:.2f} "
              f"({save_cpu / trace_cpu:.2f}x the trace); file {size / 1e6:.1f} MB")
        print(f"- Chromium: first view {first:.0f} ms (median of {runs}), opening the first closed box {box:.0f} ms")
        total = sum(steps.values())
        for name, s in steps.items():
            print(f"  - {name}: {s:.2f} s ({100 * s / total:.0f}% of the steps timed one by one)")

    call_with_large_stack(work)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=100, help="encoder layers of the compare pair")
    parser.add_argument("--chain", type=int, default=1_000_000, help="ops of the traced chain (0: skip)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--skip-browser", action="store_true", help="save only: no first view in Chromium")
    args = parser.parse_args()
    if not args.skip_compare:
        compare(args.layers, args.runs)
    if args.chain:
        saving(args.chain, args.runs, browser=not args.skip_browser)


if __name__ == "__main__":
    main()
