"""What the memory view costs the viewer: payload size and build time with and without it, side by side.

Run: `python benchmarks/bench_memory_viewer.py [--repeat 3] [--browser]`. Figures go into
benchmarks/README.md (section memory) by hand. Graphs: those of bench_viewer.py (GPT-2-shaped with
gradients, a 100-layer nn.TransformerEncoder, a 100,000-op chain without saved tensors) and a
100,000-op chain whose every op saves its input (records built directly), so the chart has 100,001
steps. "without" builds the same payload with the memory replay switched off (the viewer before
it); CPU time (`time.process_time`) of this one process, best of the repeats, the two ways taking
turns. The chain of saved tensors is past `viewer.memory.REPLAY_LIMIT` (no chart) unless
`--no-limit`. With `--browser`, also the time to the first view in Chromium, both ways.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_viewer import CHROMIUM_ARGS, graphs  # noqa: E402
from timing import best_cpu, cpu_seconds  # noqa: E402

from graphviz_app import memory_timeline  # noqa: E402
from graphviz_app.model import Edge, EdgeKind, Graph, Node, NodeKind, TensorInfo  # noqa: E402
from graphviz_app.viewer import html as viewer_page  # noqa: E402
from graphviz_app.viewer import memory as viewer_memory  # noqa: E402
from graphviz_app.viewer.memory import MemoryView  # noqa: E402

viewer_payload = importlib.import_module("graphviz_app.viewer.payload")  # the module (the package exports the function)


def saved_chain(ops: int) -> Graph:
    """`x = sin(x)` `ops` times: every op saves its input, a storage of its own."""
    def t(k: int) -> TensorInfo:
        return TensorInfo(None, (4,), "float32", "cpu", 4, 16, True, storage=f"s{k}", storage_bytes=16)

    nodes = [Node("n0", NodeKind.OUTPUT, "output", tensor=t(0))]
    edges = []
    prev = "n0"
    for k in range(ops):
        op = Node(f"n{len(nodes)}", NodeKind.OP, "SinBackward0", tensor=t(k), recency=ops - k)
        saved = Node(f"n{len(nodes) + 1}", NodeKind.SAVED, "self", tensor=t(k + 1))
        edges += [Edge(op.id, prev), Edge(saved.id, op.id, EdgeKind.SAVED)]
        nodes += [op, saved]
        prev = op.id
    x = Node(f"n{len(nodes)}", NodeKind.LEAF, "x", tensor=t(ops + 1))
    return Graph(tuple(nodes + [x]), tuple(edges + [Edge(x.id, prev)]))


@contextmanager
def memory_off() -> Iterator[None]:
    real = viewer_payload.memory_view
    viewer_payload.memory_view = lambda graph, tree: MemoryView()
    try:
        yield
    finally:
        viewer_payload.memory_view = real


def side_by_side(f: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best CPU time of `f` without the memory view and with it, the two taking turns (a busy machine drifts)."""
    without, with_ = [], []
    for _ in range(repeat):
        with memory_off():
            without.append(cpu_seconds(f)[0])
        with_.append(cpu_seconds(f)[0])
    return min(without), min(with_)


def first_view(page, path: Path, runs: int) -> float:  # noqa: ANN001
    found = []
    for _ in range(runs):
        page.goto(path.as_uri())
        page.wait_for_selector("[data-testid=graph-viewer][data-state=ready]", timeout=600_000)
        found.append(float(page.get_attribute("[data-testid=graph-viewer]", "data-first-view-ms")))
    return statistics.median(found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time the first view in Chromium")
    parser.add_argument("--no-limit", action="store_true", help="replay graphs past memory.REPLAY_LIMIT too")
    args = parser.parse_args()
    if args.no_limit:
        viewer_memory.REPLAY_LIMIT = 1 << 62
    cases = graphs(quick=True) + [("flat chain, 100,000 ops, each saving its input", saved_chain(100_000))]
    pages: dict[str, dict[str, str]] = {}
    for name, graph in cases:
        def build(graph: Graph = graph) -> str:
            return str(viewer_payload.encode(viewer_payload.payload(graph)))

        before, after = side_by_side(build, args.repeat)
        with memory_off():
            size_before = len(build())
            pages.setdefault(name, {})["without"] = viewer_page.page_html(viewer_payload.payload(graph))
        size_after = len(build())
        pages[name]["with"] = viewer_page.page_html(viewer_payload.payload(graph))
        charted = bool(viewer_payload.payload(graph)["series"])
        replay = best_cpu(lambda graph=graph: memory_timeline(graph), args.repeat)[0] if charted else 0.0
        print(f"| {name} | {len(graph.nodes):,} | {size_before / 1e6:.3f} MB | {size_after / 1e6:.3f} MB | "
              f"{len(pages[name]['with']) / 1e6:.2f} MB | {before:.2f} s | {after:.2f} s | {replay:.2f} s |",
              flush=True)
    if not args.browser:
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        for name, both in pages.items():
            times = {}
            for way, text in both.items():
                path = Path(tmp) / f"{way}.html"
                path.write_text(text, encoding="utf-8")
                times[way] = first_view(page, path, args.repeat)
            print(f"| {name} | first view {times['without']:.0f} ms without, {times['with']:.0f} ms with |", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
