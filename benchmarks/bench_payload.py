"""The viewer's payload packed against plain JSON, in one run: `save()` CPU time and the first view in Chromium.

Run: `python benchmarks/bench_payload.py [--chain 1000000] [--runs 5]`. Figures go into benchmarks/README.md
(section payload) by hand.

An n-op chain (`y * 1.5`, `sin`, `+ 1` in turn, as bench_compare.py's) traced with its tensors. Python, CPU
time (`time.thread_time()`): the trace; `save(graph, "x.html")` as it is now (long columns packed,
`viewer.packing`); its two steps, `payload()` and `encode()`, and `encode()` with packing off (a `pack_from`
no column reaches: the plain JSON the file held before packing). Chromium: the two files' first view (the viewer's
`data-first-view-ms`: from navigation to the opening view drawn), loaded in turn, median of `--runs` each;
after each load, Close all and one click on the first closed box (`data-last-refresh-ms`: laid out and drawn).
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

from bench_compare import CHROMIUM_ARGS, chain  # noqa: E402
from timing import cpu_seconds  # noqa: E402

from graphviz_app import save, trace  # noqa: E402
from graphviz_app.tracing.big_stack import call_with_large_stack  # noqa: E402
from graphviz_app.viewer.html import page_html  # noqa: E402
from graphviz_app.viewer.payload import encode, payload  # noqa: E402

_NEVER = 10 ** 15  # a pack_from no column reaches: plain JSON, as before packing


def _cpu(fn):  # noqa: ANN001, ANN202
    """CPU seconds of this thread (the work runs on the big-stack thread) and what `fn` returned."""
    return cpu_seconds(fn, clock=time.thread_time)


def first_views(files: dict[str, Path], runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per file: its first views, and opening its first closed box (after Close all) once per load."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {name: [] for name in files}
    boxes: dict[str, list[float]] = {name: [] for name in files}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        for _ in range(runs):
            for name, path in files.items():  # in turn, so both see the same load
                page.goto(path.as_uri())
                page.wait_for_selector("[data-testid=graph-viewer][data-state=ready]", timeout=600_000)
                times[name].append(float(page.get_attribute("[data-testid=graph-viewer]", "data-first-view-ms")))
                page.get_by_role("button", name="Close all").click()
                page.locator(".gv-closed").first.click()
                boxes[name].append(float(page.get_attribute("[data-testid=graph-viewer]", "data-last-refresh-ms")))
        browser.close()
    return times, boxes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chain", type=int, default=1_000_000, help="ops of the traced chain")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    def work() -> None:
        y, params = chain(args.chain)
        gc.collect()
        trace_cpu, graph = _cpu(functools.partial(trace, y, params))
        del y, params
        gc.collect()
        with tempfile.TemporaryDirectory() as tmp:
            packed_path, plain_path = Path(tmp) / "packed.html", Path(tmp) / "plain.html"
            save_cpu, _ = _cpu(lambda: save(graph, packed_path))
            gc.collect()
            gc.disable()  # as payload() builds it
            payload_cpu, data = _cpu(lambda: payload(graph))
            packed_cpu, packed = _cpu(lambda: encode(data))
            plain_cpu, plain = _cpu(lambda: encode(data, pack_from=_NEVER))
            gc.enable()
            plain_path.write_text(page_html(data).replace(packed, plain), encoding="utf-8")
            gc.collect()
            views, boxes = first_views({"plain": plain_path, "packed": packed_path}, args.runs)
            sizes = {"plain": plain_path.stat().st_size, "packed": packed_path.stat().st_size}
        load = subprocess.run(["cat", "/proc/loadavg"], capture_output=True, text=True).stdout.split()[:3]
        print(f"{args.chain:,}-op chain traced with its tensors: {len(graph.nodes):,} nodes, {len(graph.edges):,} "
              f"edges; load {' '.join(load)}")
        print(f"- CPU s: trace {trace_cpu:.2f}; save() as now (packed) {save_cpu:.2f} ({save_cpu / trace_cpu:.2f}x "
              f"the trace); its steps: payload() {payload_cpu:.2f} + encode {packed_cpu:.2f}; before packing: "
              f"payload() + encode {payload_cpu + plain_cpu:.2f} ({(payload_cpu + plain_cpu) / trace_cpu:.2f}x), "
              f"encode {plain_cpu:.2f}")
        print(f"- file MB: plain {sizes['plain'] / 1e6:.1f}, packed {sizes['packed'] / 1e6:.1f}")
        for name, ms in views.items():
            print(f"- first view ms, {name}: median {statistics.median(ms):.0f} of {ms}; opening the first closed box "
                  f"ms: median {statistics.median(boxes[name]):.0f} of {boxes[name]}")
        ratio = statistics.median(views["packed"]) / statistics.median(views["plain"])
        print(f"- packed / plain first view: {ratio:.2f}")

    call_with_large_stack(work)


if __name__ == "__main__":
    main()
