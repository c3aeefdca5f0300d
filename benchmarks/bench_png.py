"""PNG download: which step is slow, the layout or the rasterising? And when is a PNG shrunk?

Times `dot -Tdot` (the layout alone: positions written as text), `dot -Tsvg`
(the page's picture; the peer) and `dot -Tpng` (layout plus cairo
rasterising) on the same graphs in one run, and reports the PNG/SVG ratio.
Graphs are drawn from the same programs the web page runs (BIG from
bench_web: blocks of matmul, layer norm, tanh and a residual add).

Run: .venv/bin/python benchmarks/bench_png.py [--blocks 40 80 136] [--timeout 120]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time

import torch

from graphviz_app.drawing.renderer import render
from graphviz_app.expr import evaluate
from graphviz_app.tracing.tracer import trace

PROGRAM = """torch.manual_seed(0)
h = torch.randn(4, 16, requires_grad=True)
for i in range({blocks}):
    W = (torch.randn(16, 16) * 0.25).requires_grad_()
    h = h + torch.tanh(F.layer_norm(h @ W, (16,)))
h.sum()"""
_SCALE = re.compile(r"Scaling by ([0-9.]+) to fit")


def timed(fmt: str, source: bytes, timeout: float) -> tuple[float | None, int, str]:
    """Wall seconds (None past `timeout`), output bytes, and Graphviz's scaling note."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(["dot", f"-T{fmt}"], input=source, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, 0, ""
    scale = _SCALE.search(done.stderr.decode(errors="replace"))
    return time.perf_counter() - t0, len(done.stdout), scale.group(1) if scale else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[40, 80, 136])
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    print("nodes  layout(-Tdot) s  svg s  png s  rasterise s  png/svg  png MB  png scaled by")
    for blocks in args.blocks:
        ev = evaluate(PROGRAM.format(blocks=blocks), dtype=torch.float32, isolated=False)
        graph = trace(ev.output, ev.variables, show_saved=True, show_attrs=True, max_nodes=5000)
        source = render(graph).source.encode()
        lay, _, _ = timed("dot", source, args.timeout)
        svg, _, _ = timed("svg", source, args.timeout)
        png, size, scale = timed("png", source, args.timeout)
        fmt = lambda v: "timeout" if v is None else f"{v:.2f}"  # noqa: E731
        raster = None if png is None or lay is None else png - lay
        ratio = "-" if png is None or not svg else f"{png / svg:.1f}x"
        print(f"{len(graph.nodes):5d}  {fmt(lay):>15}  {fmt(svg):>5}  {fmt(png):>5}  {fmt(raster):>11}"
              f"  {ratio:>7}  {size / 1e6:6.1f}  {scale or '-'}")


if __name__ == "__main__":
    main()
