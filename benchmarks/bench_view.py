"""The web page's layout budget: seconds to lay out the N nodes nearest the output, `dot` beside graphviz-pure.

Run: .venv/bin/python benchmarks/bench_view.py [--sizes 500 1000 1500 2000 3000] [--timeout 60]

A residual stack (bench_trace.py's network, saved tensors and attributes
drawn, as the page draws them) of about 10,000 autograd ops is traced once;
for each size N, the first N nodes in walk order (nearest the output first, the part the
renderer's deadline cut draws) are kept and each program lays that part out to SVG, as the page does. The page's
budget (graphviz_app/web/view.py DRAW_BUDGET) is the largest N that stays
well inside the page's 15 s job. `--encoder N` also draws the hand-built
N-layer TransformerEncoder graph of tests/support/mv_graphs.py the way the page does
(`graphviz_app.web.worker.drawing.draw`: module view at the deepest readable level),
beside its 1,500 nodes nearest the output. Not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_trace import network  # noqa: E402

from graphviz_app import trace  # noqa: E402
from graphviz_app.drawing.layout import find_engine  # noqa: E402
from graphviz_app.drawing.renderer import export  # noqa: E402
from graphviz_app.errors import RenderError  # noqa: E402
from graphviz_app.model import Graph  # noqa: E402
from graphviz_app.web.worker.drawing import draw  # noqa: E402


def first_nodes(graph: Graph, size: int) -> Graph:
    """The first `size` nodes in walk order (nearest the output first) and the edges among them."""
    kept = graph.nodes[:size]
    ids = {n.id for n in kept}
    return dataclasses.replace(graph, nodes=kept, edges=tuple(e for e in graph.edges if e.src in ids and e.dst in ids))


def timed(graph, engine: str, timeout: float, repeat: int) -> float | None:  # noqa: ANN001
    """Median wall seconds of `repeat` layouts, or None past `timeout`."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            export(graph, "svg", engine=engine, timeout=timeout)
        except RenderError:
            return None
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 1500, 2000, 3000])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--encoder", type=int, default=0, metavar="LAYERS",
                        help="also draw an encoder of this many layers")
    args = parser.parse_args()
    if args.encoder:
        encoder(args.encoder, args.repeat)
    engines = [e for e in ("dot", "graphviz-pure") if find_engine(e) is not None]
    y, params = network(10_000)
    graph = trace(y, params, show_saved=True, show_attrs=True, max_nodes=20_000)
    print(f"residual stack: {len(graph.nodes):,} traced nodes; median of {args.repeat} layouts to SVG (wall s)")
    print(f"{'nodes drawn':>12} " + " ".join(f"{e:>14}" for e in engines) + "   dot / pure")
    for size in args.sizes:
        part = first_nodes(graph, size)
        found = [timed(part, e, args.timeout, args.repeat) for e in engines]
        cells = " ".join(f"{f'> {args.timeout:g}s' if t is None else f'{t:.2f}':>14}" for t in found)
        ratio = (f"{found[0] / found[1]:.2f}x" if len(found) == 2 and None not in found else "-")
        print(f"{len(part.nodes):>12,} {cells}   {ratio}", flush=True)
    return 0


def encoder(layers: int, repeat: int) -> None:
    """The page's module view of a hand-built encoder graph, beside its nearest-1,500-nodes part."""
    sys.path.insert(0, str(HERE.parent / "tests" / "support"))
    from mv_graphs import encoder_graph

    graph = encoder_graph(layers)
    times, drawn = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        drawn = draw(graph, timeout=60)
        times.append(time.perf_counter() - start)
    part = first_nodes(graph, 1500)
    flat = timed(part, "auto", 60, repeat)
    print(f"{layers}-layer encoder (hand-built): {len(graph.nodes):,} nodes")
    print(f"  page view ({drawn.mode}, level {drawn.depth}, {drawn.drawn_nodes:,} nodes): "
          f"plan + collapse + layout + details median {statistics.median(times):.2f} s")
    print(f"  1,500 nodes nearest the output, layout only: {flat:.2f} s" if flat is not None else "  nearest: timeout")


if __name__ == "__main__":
    sys.exit(main())
