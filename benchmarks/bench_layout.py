"""Graphviz's `dot` against graphviz-pure on the DOT our renderer writes: layout times, and pictures.

Run: .venv/bin/python benchmarks/bench_layout.py [--pure PATH] [--sizes 100 1000 10000]
                                                 [--timeout 180] [--pictures DIR]

graphviz-pure (PyPI, a Rust port of Graphviz 16.1 with no system libraries)
ships one `graphviz-pure` executable with dot's flags and no Python code. It
is not a project dependency yet; install it apart, e.g.
`pip install --target /tmp/gvpure graphviz-pure==0.2.2`, and pass
`--pure /tmp/gvpure/bin/graphviz-pure` (found on PATH or there by default).

For each size, a network-shaped graph (`--shape residual`: bench_trace.py's
deep residual stack of Linear + tanh blocks; `--shape transformer`: stacked
small nn.TransformerEncoderLayers), traced with saved tensors and attributes
and drawn with the legend, is rendered to DOT once; then each program lays it out to SVG
(`-Tsvg`, source on stdin, as graphviz.Digraph.pipe does), each run capped at
`--timeout` seconds and reported as a timeout past it. `--pictures DIR`
writes PNGs of small graphs (seed example, MLP, transformer layer, three
devices) by both programs to look at side by side. Nothing here is a
pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from graphviz_app import render, trace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

from bench_trace import network  # noqa: E402

DEFAULT_PURE = Path("/tmp/gvpure/bin/graphviz-pure")


def find_pure(given: str | None) -> str | None:
    if given:
        return given
    on_path = shutil.which("graphviz-pure")
    if on_path:
        return on_path
    return str(DEFAULT_PURE) if DEFAULT_PURE.exists() else None


def version(exe: str) -> str:
    done = subprocess.run([exe, "-V"], capture_output=True, text=True, check=False)
    return (done.stderr or done.stdout).strip()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def layout(exe: str, source: bytes, timeout: float, fmt: str = "svg") -> tuple[float | None, float, str]:
    """Wall seconds to lay out and write `fmt` (None on timeout or failure), CPU seconds, a note.

    CPU seconds (the child's user + system time) are the steadier figure on a
    machine shared with other work; wall seconds are what a user waits.
    """
    t0, c0 = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=source, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, 0.0, f"timed out after {timeout:.0f} s"
    elapsed, cpu = time.perf_counter() - t0, _children_cpu() - c0
    err = done.stderr.decode(errors="replace").strip().splitlines()
    if done.returncode != 0:
        return None, cpu, f"exit {done.returncode}: {err[0] if err else ''}"
    return elapsed, cpu, err[0] if err else ""


def transformer_stack(target_nodes: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """nn.TransformerEncoder of small layers: about 80 drawn nodes per layer, wider ranks."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    stack = torch.nn.TransformerEncoder(layer, max(1, round(target_nodes / 80)), enable_nested_tensor=False)
    return stack(torch.randn(2, 3, 8)).sum(), dict(stack.named_parameters())


def dot_source(target_nodes: int, shape: str) -> tuple[bytes, int, int]:
    if shape == "transformer":
        y, params = transformer_stack(target_nodes)
    else:
        y, params = network(max(6, target_nodes * 2 // 3))  # ~1.5 drawn nodes per autograd node
    graph = trace(y, params)
    return render(graph).source.encode(), len(graph.nodes) + 1, len(graph.edges)


def pictures(out: Path, programs: dict[str, str]) -> None:
    from core_corpus import build
    from core_handmade import three_devices

    out.mkdir(parents=True, exist_ok=True)
    graphs = {}
    for name in ("seed_example", "mlp", "transformer_layer"):
        case = build(name)
        graphs[name] = trace(case.outputs, case.params)
    graphs["three_devices"] = three_devices()
    for name, graph in graphs.items():
        source = render(graph).source.encode()
        for tool, exe in programs.items():
            done = subprocess.run([exe, "-Tpng", "-o", str(out / f"{name}.{tool}.png")],
                                  input=source, capture_output=True, check=False)
            note = done.stderr.decode(errors="replace").strip()
            print(f"{out / f'{name}.{tool}.png'}: exit {done.returncode}{' ' + note if note else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pure", help="the graphviz-pure executable")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 1_000, 10_000])
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per program below 5,000 nodes")
    parser.add_argument("--pictures", type=Path, help="write comparison PNGs here")
    parser.add_argument("--shape", choices=["residual", "transformer"], default="residual",
                        help="residual: deep Linear+tanh stack; transformer: stacked encoder layers")
    args = parser.parse_args()

    programs = {"dot": shutil.which("dot") or ""}
    pure = find_pure(args.pure)
    if pure:
        programs["graphviz-pure"] = pure
    else:
        print("graphviz-pure not found: pip install --target /tmp/gvpure graphviz-pure==0.2.2")
    programs = {k: v for k, v in programs.items() if v}
    print(f"# {time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, CUDA {torch.cuda.is_available()}")
    for tool, exe in programs.items():
        print(f"# {tool}: {exe}: {version(exe)}")

    if args.pictures:
        pictures(args.pictures, programs)

    print(f"\n{args.shape} graphs; wall seconds (CPU seconds of the layout process), "
          "best of --repeat below 5,000 nodes")
    print("\n| nodes | edges | " + " | ".join(f"{t} s" for t in programs) + " | dot / pure (wall, CPU) |")
    print("|---|---|" + "---|" * len(programs) + "---|")
    for size in args.sizes:
        source, nodes, edges = dot_source(size, args.shape)
        cells, best = [], {}
        for tool, exe in programs.items():
            runs = args.repeat if nodes < 5_000 else 1
            results = [layout(exe, source, args.timeout) for _ in range(runs)]
            done = [(wall, cpu) for wall, cpu, _ in results if wall is not None]
            note = next((n for _, _, n in results if n), "")
            if done:
                best[tool] = min(done)
                cells.append(f"{best[tool][0]:.2f} ({best[tool][1]:.2f})" + (f" [{note}]" if note else ""))
            else:
                cells.append(note)
        ratio = ""
        if "dot" in best and "graphviz-pure" in best:
            (dw, dc), (pw, pc) = best["dot"], best["graphviz-pure"]
            ratio = f"{dw / pw:.1f}x, {dc / pc:.1f}x"
        elif "graphviz-pure" in best and "dot" in programs:
            ratio = f"> {args.timeout / best['graphviz-pure'][0]:.0f}x (dot timed out)"
        print(f"| {nodes:,} | {edges:,} | " + " | ".join(cells) + f" | {ratio} |", flush=True)

if __name__ == "__main__":
    main()
