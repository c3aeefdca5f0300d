"""Web page: time from pressing Run to the graph in the browser, and 10 pages at once.

Starts the server as `make run` does (`python -m graphviz_app.cli serve`) on a
free port, drives Debian's Chromium with Python playwright, prints medians
and percentiles. Not a test: the figures go in benchmarks/README.md.

Run: .venv/bin/python benchmarks/bench_web.py [--runs 7] [--pages 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

SEED = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+{k}).mean()"
# 182 blocks of matmul, layer norm, tanh and a residual add: 2,005 nodes with saved tensors.
BIG = """torch.manual_seed({k})
h = torch.randn(4, 16, requires_grad=True)
for i in range(182):
    W = (torch.randn(16, 16) * 0.25).requires_grad_()
    h = h + torch.tanh(F.layer_norm(h @ W, (16,)))
h.sum()"""
# 1,000 iterations of 10 ops: 10,000 ops; 15,003 nodes traced at max_nodes=20000, of which
# the page lays out the 1,500 nearest the output (graphviz_app/web/view.py).
FLAT_10K = """h = torch.ones(3, requires_grad=True) * {k}
for i in range(1000):
    h = ((((h * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4
h.sum()"""
# A 100-layer nn.TransformerEncoder: 8,003 nodes traced, drawn as the module view that fits.
ENCODER_100 = """torch.manual_seed({k})
layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
enc = nn.TransformerEncoder(layer, 100)
x = torch.randn(2, 5, 16, requires_grad=True)
enc(x).sum()"""
RUN_TO_GRAPH = {"seed program": SEED, "2,000-node graph": BIG, "10,000-op flat program (partial view)": FLAT_10K,
                "100-layer encoder (module view)": ENCODER_100}
PROGRAM_KEYS = dict(zip(("seed", "big", "flat", "encoder"), RUN_TO_GRAPH, strict=True))
LOAD = [  # (program, what shows it worked): one of five is hostile
    (SEED, None),
    ("torch.manual_seed({k})\nx = torch.randn(4, 3)\nW1 = torch.randn(3, 8, requires_grad=True)\n"
     "W2 = torch.randn(8, 1, requires_grad=True)\n((torch.relu(x @ W1) @ W2) ** 2).mean()", None),
    ("torch.manual_seed({k})\nlogits = torch.randn(3, 5, requires_grad=True)\n"
     "F.nll_loss(F.log_softmax(logits, dim=1), torch.tensor([1, 0, 4]))", None),
    ("().__class__.__bases__  # {k}", "attribute names starting with _ are not allowed"),
    ("w = torch.ones(3, requires_grad=True)\ntotal = 0\nfor s in range(4):\n"
     "    total = total + ((w * s - {k}) ** 2).mean()\ntotal", None),
]
# The viewer lives in a shadow root; its data-svg-key changes when a new SVG is drawn.
SVG_KEY_JS = """() => { for (const el of document.querySelectorAll('*')) {
  const v = el.shadowRoot && el.shadowRoot.querySelector('.gv-viewer');
  if (v && v.dataset.svgKey && v.querySelector('svg')) return v.dataset.svgKey; } return null; }"""
NEW_SVG_JS = "(old) => { const key = (" + SVG_KEY_JS + ")(); return key !== null && key !== old; }"


def start_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphviz_app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )
    for _ in range(300):
        if healthy(port):
            return proc
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        time.sleep(0.3)
    raise SystemExit("the server did not start in 90 s")


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run_program(page, program: str, expect_error: str | None, timeout_ms: float = 60_000) -> float:
    """Type `program`, press Run, wait for its graph (or error); seconds from the click."""
    old = await page.evaluate(SVG_KEY_JS)
    editor = page.get_by_test_id("program-editor")
    await editor.fill(program)
    start = time.perf_counter()
    await page.get_by_role("button", name="Run", exact=True).click()
    if expect_error:
        alert = page.locator("[data-testid='stAlertContentError']", has_text="Could not draw the graph")
        await alert.filter(has_text=expect_error).wait_for(timeout=timeout_ms)
    else:
        await page.wait_for_function(NEW_SVG_JS, arg=old, polling=10, timeout=timeout_ms)
    return time.perf_counter() - start


async def open_page(browser, url: str):  # noqa: ANN001, ANN201
    page = await (await browser.new_context(viewport={"width": 1400, "height": 1000})).new_page()
    await page.goto(url)
    await page.wait_for_function("(old) => (" + SVG_KEY_JS + ")() !== null", arg=None, timeout=120_000)
    return page


async def job_seconds(page, old: str) -> tuple[float, str]:  # noqa: ANN001
    """The worker's own time for the shown graph, from the summary line (`... · 84 ms`)."""
    caption = page.locator("[data-testid='stCaptionContainer']", has_text="nodes,").first
    for _ in range(250):
        text = await caption.inner_text()
        if text != old and " ms" in text:
            return float(text.rsplit("· ", 1)[1].removesuffix(" ms")) / 1e3, text
        await asyncio.sleep(0.02)
    raise TimeoutError("the summary line did not change")


async def run_to_graph(browser, base: str, runs: int, names: tuple[str, ...]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {n: [] for n in names} | {f"{n} (job)": [] for n in names}
    page = await open_page(browser, base + "?max_nodes=20000")
    caption = ""
    for k in range(runs + 1):  # the first of each is a warm-up and not counted
        for name in names:
            template = RUN_TO_GRAPH[name]
            seconds = await run_program(page, template.format(k=k + 100), None)
            job, caption = await job_seconds(page, caption)
            if k:
                times[name].append(seconds)
                times[f"{name} (job)"].append(job)
    await page.context.close()
    return times


async def load(browser, base: str, pages: int) -> tuple[list[float], list[str]]:
    async def one(i: int) -> tuple[list[float], list[str]]:
        latencies, errors = [], []
        try:
            page = await open_page(browser, base)
        except Exception as e:  # noqa: BLE001 - a lost page is a finding, not a crash
            return [], [f"page {i}: did not open: {e}"]
        for j, (template, error) in enumerate(LOAD):
            try:
                latencies.append(await run_program(page, template.format(k=1000 + 10 * i + j), error))
            except Exception as e:  # noqa: BLE001
                errors.append(f"page {i}, program {j}: {type(e).__name__}: {str(e).splitlines()[0]}")
        await page.context.close()
        return latencies, errors

    results = await asyncio.gather(*(one(i) for i in range(pages)))
    return [t for r in results for t in r[0]], [e for r in results for e in r[1]]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(runs: int, pages: int, names: tuple[str, ...]) -> dict[str, object]:
    from playwright.async_api import async_playwright

    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}/"
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            times = await run_to_graph(browser, base, runs, names)
            start = time.perf_counter()
            latencies, errors = await load(browser, base, pages) if pages else ([0.0], [])
            wall = time.perf_counter() - start
            await browser.close()
        up = server.poll() is None and healthy(port)
    finally:
        server.send_signal(signal.SIGINT)
        code = server.wait(timeout=60)
    return {
        "run_to_graph_s": {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
                           for k, v in times.items()},
        "load": {"pages": pages, "programs": len(latencies) + len(errors), "p50_s": pct(latencies, 0.5),
                 "p95_s": pct(latencies, 0.95), "max_s": max(latencies), "wall_s": wall,
                 "errors": errors, "server_up_after": up, "server_exit_code": code},
        "cpus": os.cpu_count(),
    }


def report(result: dict[str, object]) -> None:
    print(f"machine: {result['cpus']} CPUs")
    print("time from pressing Run to the graph visible (warm server, no cache hit);")
    print("(job) is the part spent in the worker: evaluate, trace, lay out, backward")
    for name, t in result["run_to_graph_s"].items():  # type: ignore[union-attr]
        print(f"  {name:24s} median {t['median']:.2f} s  (min {t['min']:.2f}, max {t['max']:.2f}, n={t['n']})")
    ld = result["load"]
    print(f"load: {ld['pages']} pages at once, {ld['programs']} programs (1 in 5 hostile), {ld['wall_s']:.1f} s in all")
    print(f"  latency p50 {ld['p50_s']:.2f} s  p95 {ld['p95_s']:.2f} s  max {ld['max_s']:.2f} s")
    print(f"  errors: {len(ld['errors'])}{''.join(chr(10) + '    ' + e for e in ld['errors'])}")
    print(f"  server up after the load: {ld['server_up_after']}; exit code after Ctrl-C: {ld['server_exit_code']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per program (default 7)")
    parser.add_argument("--pages", type=int, default=10, help="pages at once in the load test (default 10; 0 skips it)")
    parser.add_argument("--programs", nargs="+", choices=tuple(PROGRAM_KEYS), default=list(PROGRAM_KEYS),
                        help="which run-to-graph programs to time (default all)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    outcome = asyncio.run(main(args.runs, args.pages, tuple(PROGRAM_KEYS[k] for k in args.programs)))
    report(outcome)
    if args.json:
        args.json.write_text(json.dumps(outcome, indent=1))
    sys.exit(0 if not outcome["load"]["errors"] and outcome["load"]["server_up_after"] else 1)  # type: ignore[index]
