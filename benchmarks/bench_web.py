"""Web page: time from pressing Run to the graph drawn in the browser's viewer, and 10 pages at once.

Starts the server as `make run` does (`python -m graphviz_app.cli serve`) on a
free port, drives Debian's Chromium with Python playwright, prints medians
and percentiles. Not a test: the figures go in benchmarks/README.md.

Run: .venv/bin/python benchmarks/bench_web.py [--runs 7] [--pages 10] [--baseline DIR]

`--baseline DIR` also starts the page of another checkout (for example the commit before a
change, exported with `git archive REV | tar -x -C DIR`) and times both side by side, one
program on each in turn, so both see the same load.
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
from typing import cast

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
# 1,000 iterations of 10 ops: 10,000 ops; 15,003 nodes traced at max_nodes=20000, all sent to the
# viewer, which opens on the output end with the loop folded.
FLAT_10K = """h = torch.ones(3, requires_grad=True) * {k}
for i in range(1000):
    h = ((((h * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4
h.sum()"""
# A 100-layer nn.TransformerEncoder: 8,003 nodes traced, opened as the module view that fits.
ENCODER_100 = """torch.manual_seed({k})
layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
enc = nn.TransformerEncoder(layer, 100)
x = torch.randn(2, 5, 16, requires_grad=True)
enc(x).sum()"""
RUN_TO_GRAPH = {"seed program": SEED, "2,000-node graph": BIG, "10,000-op flat program": FLAT_10K,
                "100-layer encoder": ENCODER_100}
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
# The viewer lives in a shadow root; its host's data-payload-key changes with each new graph, and the
# viewer says data-state="ready" once it has drawn its first view. (A page from before the interactive
# viewer, run as a baseline, showed a server-drawn SVG under a data-svg-key.)
SVG_KEY_JS = """() => { for (const el of document.querySelectorAll('*')) {
  const root = el.shadowRoot;
  if (!root) continue;
  const p = root.querySelector('.gv-page');
  if (p && p.dataset.payloadKey && p.querySelector('[data-testid=graph-viewer][data-state=ready]'))
    return p.dataset.payloadKey;
  const v = root.querySelector('.gv-viewer');
  if (v && v.dataset.svgKey && v.querySelector('svg')) return v.dataset.svgKey; } return null; }"""
NEW_SVG_JS = "(old) => { const key = (" + SVG_KEY_JS + ")(); return key !== null && key !== old; }"
# The page saying it could not draw a graph (a time-out on a busy machine).
NO_GRAPH_JS = ("() => [...document.querySelectorAll('[data-testid=stAlertContentError]')]"
               ".some(e => e.innerText.includes('Could not draw the graph'))")
# A new graph, or (when no such message showed before Run) that message.
GRAPH_OR_ERROR_JS = ("(arg) => (" + NEW_SVG_JS + ")(arg.old) || (!arg.before && (" + NO_GRAPH_JS + ")())")


PAINTED_JS = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


class NoGraph(Exception):
    """The page answered a program with an error instead of its graph."""


def start_server(port: int, root: Path = ROOT, time_limit: float | None = None) -> subprocess.Popen[bytes]:
    """The page of the checkout at `root`, as `make run` starts it (with a job time limit, when given)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    if time_limit is not None:
        env["GRAPHVIZ_APP_TIME_LIMIT"] = str(time_limit)
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphviz_app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
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


async def run_program(page, program: str, expect_error: str | None, timeout_ms: float = 120_000) -> float:
    """Type `program`, press Run, wait for its graph (or error); seconds from the click."""
    old = await page.evaluate(SVG_KEY_JS)
    before = await page.evaluate(NO_GRAPH_JS)
    editor = page.get_by_test_id("program-editor")
    await editor.fill(program)
    start = time.perf_counter()
    await page.get_by_role("button", name="Run", exact=True).click()
    if expect_error:
        alert = page.locator("[data-testid='stAlertContentError']", has_text="Could not draw the graph")
        await alert.filter(has_text=expect_error).wait_for(timeout=timeout_ms)
    else:
        await page.wait_for_function(GRAPH_OR_ERROR_JS, arg={"old": old, "before": before}, polling=10,
                                     timeout=timeout_ms)
        if not await page.evaluate(NEW_SVG_JS, old):
            text = await page.locator("[data-testid='stAlertContentError']").first.inner_text()
            raise NoGraph(text.splitlines()[0][:200])
        # Until it is on screen: the browser lays out and paints a big SVG after it is in the page.
        await page.evaluate(PAINTED_JS)
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


async def run_to_graph(browser, bases: dict[str, str], runs: int,
                       names: tuple[str, ...]) -> dict[str, dict[str, list[float]]]:
    """Per page (`bases`: label -> URL), per program: seconds from Run to the graph, and the worker's part.

    The pages take turns, one program each, so a busy moment slows both alike.
    """
    times: dict[str, dict[str, list[float]]] = {
        label: {n: [] for n in names} | {f"{n} (job)": [] for n in names} for label in bases}
    pages = {label: await open_page(browser, base + "?max_nodes=20000") for label, base in bases.items()}
    captions = dict.fromkeys(bases, "")
    for k in range(runs + 1):  # the first of each is a warm-up and not counted
        for name in names:
            for label, page in pages.items():
                try:
                    seconds = await run_program(page, RUN_TO_GRAPH[name].format(k=k + 100), None)
                except NoGraph as e:
                    print(f"  {label}, {name}: no graph: {e}", file=sys.stderr)
                    continue
                job, captions[label] = await job_seconds(page, captions[label])
                if k:
                    times[label][name].append(seconds)
                    times[label][f"{name} (job)"].append(job)
    for page in pages.values():
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


async def main(runs: int, pages: int, names: tuple[str, ...], baseline: Path | None = None,
               time_limit: float | None = None) -> dict[str, object]:
    from playwright.async_api import async_playwright

    port = free_port()
    server = start_server(port, time_limit=time_limit)
    base = f"http://127.0.0.1:{port}/"
    bases = {"this page": base}
    other = None
    if baseline is not None:
        other_port = free_port()
        other = start_server(other_port, baseline.resolve(), time_limit)
        bases["baseline"] = f"http://127.0.0.1:{other_port}/"
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            times = await run_to_graph(browser, bases, runs, names)
            start = time.perf_counter()
            latencies, errors = await load(browser, base, pages) if pages else ([0.0], [])
            wall = time.perf_counter() - start
            await browser.close()
        up = server.poll() is None and healthy(port)
    finally:
        server.send_signal(signal.SIGINT)
        code = server.wait(timeout=60)
        if other is not None:
            other.send_signal(signal.SIGINT)
            other.wait(timeout=60)
    return {
        "run_to_graph_s": {label: {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
                                   for k, v in per.items() if v} for label, per in times.items()},
        "load": {"pages": pages, "programs": len(latencies) + len(errors), "p50_s": pct(latencies, 0.5),
                 "p95_s": pct(latencies, 0.95), "max_s": max(latencies), "wall_s": wall,
                 "errors": errors, "server_up_after": up, "server_exit_code": code},
        "cpus": os.cpu_count(),
    }


def report(result: dict[str, object]) -> None:
    print(f"machine: {result['cpus']} CPUs")
    print("time from pressing Run to the graph drawn (warm server, no cache hit);")
    print("(job) is the part spent in the worker: evaluate, trace, backward, the viewer's data (the baseline: layout)")
    by_page = cast(dict[str, dict[str, dict[str, float]]], result["run_to_graph_s"])
    for label, per in by_page.items():
        print(f" {label}")
        for name, t in per.items():
            ratio = ""
            if label == "this page" and name in by_page.get("baseline", {}):
                ratio = f"  baseline/this {by_page['baseline'][name]['median'] / t['median']:.2f}x"
            print(f"  {name:32s} median {t['median']:.2f} s  (min {t['min']:.2f}, max {t['max']:.2f}, "
                  f"n={t['n']:.0f}){ratio}")
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
    parser.add_argument("--baseline", type=Path, help="a checkout of another page to time side by side")
    parser.add_argument("--time-limit", type=float, help="the pages' job time limit, s (default: the page's own)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    programs = tuple(PROGRAM_KEYS[k] for k in args.programs)
    outcome = asyncio.run(main(args.runs, args.pages, programs, args.baseline, args.time_limit))
    report(outcome)
    if args.json:
        args.json.write_text(json.dumps(outcome, indent=1))
    sys.exit(0 if not outcome["load"]["errors"] and outcome["load"]["server_up_after"] else 1)  # type: ignore[index]
