"""trace() against a bare walk that reads the same saved values, before and after (issue 11).

Run: .venv/bin/python benchmarks/bench_trace_speed.py [--repeat 5] [--before a88a08a] [--million] [--first]
     .venv/bin/python benchmarks/bench_trace_speed.py --profile chain|resnet|gpt
     .venv/bin/python benchmarks/bench_trace_speed.py --budget   # per-op cost of each read and record

For each graph (a 100k-op `y = y + 1` chain, a 100k-op chain mixing `* 1.5`,
`sin` and `+ 1`, a ResNet-50-shaped model and a 12-layer GPT-style stack, all
small in width so building them is cheap), in one process and alternating
the order, best of `--repeat`, CPU time of the tracing thread (wall time
on a shared machine mostly measures the other processes):

- bare: an iterative walk over `grad_fn.next_functions` (deque + seen set)
  that reads every `_saved_*` attribute of every node (the attribute names
  looked up once per node type), with the cyclic GC off as in trace(): the
  floor any tracer pays;
- ours: `trace(y, params)` with its defaults, and with show_saved and
  show_attrs off;
- before: the same calls on the tracer of git revision `--before`, unpacked
  with `git archive` into a temporary package, when given.

The figure is ours / bare (the issue's goal: at most 3x). With `--first`
each walk is the first of a graph just built (it makes every autograd
node's Python object); otherwise all walk one graph again and again.
`--million` then traces a 1,000,000-op chain in a fresh subprocess on the
big-stack thread and reports its time, the young collection after it, the
bare walk's time, the peak RSS of that process and the size of the JSON.
`--budget` times each torch read and record trace() makes per op of the 100k
y+1 chain on its own. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import os
import platform
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from graphviz_app.tracing.big_stack import call_with_large_stack

ROOT = Path(__file__).resolve().parent.parent


# --- graphs ------------------------------------------------------------------

def add_chain(n: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(n):
        y = y + 1
    return y, {"x": x}


def mixed_chain(n: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Ops that save tensors (sin), scalars (mul) and attributes (add's alpha)."""
    x = torch.ones(2, requires_grad=True)
    y = x
    for i in range(n):
        y = y * 1.5 if i % 3 == 0 else (y.sin() if i % 3 == 1 else y + 1)
    return y, {"x": x}


class Bottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, stride: int) -> None:
        super().__init__()
        cout = mid * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.short: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


def resnet50(width: int = 4) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """ResNet-50's layout (bottlenecks 3-4-6-3) at 1/16 of its width on a 32x32 image."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                               nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = width
    for stage, count in enumerate((3, 4, 6, 3)):
        mid = width * 2**stage
        for b in range(count):
            layers.append(Bottleneck(cin, mid, 2 if b == 0 and stage > 0 else 1))
            cin = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    model = nn.Sequential(*layers)
    out = nn.functional.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([1, 7]))
    return out, dict(model.named_parameters())


def gpt(layers: int = 12, d: int = 16, heads: int = 2, t: int = 8) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A GPT-2-shaped stack of pre-norm blocks (torch's TransformerEncoderLayer, causal)."""
    torch.manual_seed(0)
    model = nn.ModuleDict({
        "wte": nn.Embedding(50, d),
        "h": nn.TransformerEncoder(nn.TransformerEncoderLayer(
            d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True),
            layers, enable_nested_tensor=False),
        "head": nn.Linear(d, 50),
    })
    tokens = torch.randint(0, 50, (2, t))
    mask = nn.Transformer.generate_square_subsequent_mask(t)
    logits = model["head"](model["h"](model["wte"](tokens), mask=mask, is_causal=True))
    return nn.functional.cross_entropy(logits.view(-1, 50), tokens.view(-1)), dict(model.named_parameters())


GRAPHS: dict[str, Callable[[], tuple[torch.Tensor, dict[str, torch.Tensor]]]] = {
    "chain y+1 100k": lambda: add_chain(100_000),
    "chain mixed 100k": lambda: mixed_chain(100_000),
    "ResNet-50-shaped": resnet50,
    "GPT-2-shaped 12 layers": gpt,
}


# --- the floor -----------------------------------------------------------------

_saved_names: dict[type, list[str]] = {}


def bare_walk(y: torch.Tensor) -> int:
    """Visit every node once, reading next_functions and every _saved_* attribute.

    With the cyclic GC off, as trace() walks: a first walk makes a Python
    object per autograd node, which would otherwise set off collections.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _bare_walk(y)
    finally:
        if enabled:
            gc.enable()


def _bare_walk(y: torch.Tensor) -> int:
    seen = {y.grad_fn}
    queue = deque([y.grad_fn])
    sink = []
    while queue:
        fn = queue.popleft()
        names = _saved_names.get(type(fn))
        if names is None:
            names = _saved_names[type(fn)] = [a for a in dir(fn) if a.startswith("_saved_")]
        for a in names:
            try:
                sink.append(getattr(fn, a))
            except RuntimeError:  # freed
                pass
        for child, _ in fn.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                queue.append(child)
    return len(seen)


# --- before / after ------------------------------------------------------------

def load_before(rev: str) -> Any:
    """The `trace` of git revision `rev`, as package graphviz_app_before."""
    target = Path(tempfile.mkdtemp(prefix="trace-before-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "graphviz_app"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    (target / "graphviz_app").rename(target / "graphviz_app_before")
    sys.path.insert(0, str(target))
    # The module, not the package: the package's lazy `trace` names graphviz_app.tracing.tracer.
    module = importlib.import_module("graphviz_app_before.tracer")
    assert module.__file__ is not None and module.__file__.startswith(str(target))
    return module.trace


def _best(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.thread_time()  # CPU time of this thread: steadier than wall time on a shared machine
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def measure(name: str, repeat: int, before: Any, first: bool = False) -> dict[str, Any]:
    """Best CPU time of each walk of graph `name`; with `first`, each on a graph just built.

    Walking a graph from Python the first time makes the Python object of
    every autograd node (kept by the node afterwards), which later walks reuse.
    """
    from graphviz_app import trace

    calls: dict[str, Callable[[torch.Tensor, Any], Any]] = {
        "bare": lambda y, p: bare_walk(y),
        "ours": lambda y, p: trace(y, p),
        "ours_off": lambda y, p: trace(y, p, show_saved=False, show_attrs=False),
    }
    if before is not None:
        calls["before"] = lambda y, p: before(y, p)
        calls["before_off"] = lambda y, p: before(y, p, show_saved=False, show_attrs=False)
    y, params = GRAPHS[name]()
    nodes = bare_walk(y)  # with `first`, the runs walk graphs of their own
    best = {k: float("inf") for k in calls}
    order = list(calls)
    for i in range(repeat):  # alternate the order: the machine is shared
        for k in order if i % 2 == 0 else order[::-1]:
            if first:
                y, params = GRAPHS[name]()
            best[k] = min(best[k], _best(partial(calls[k], y, params), 1))
    return {"nodes": nodes, **best}


def million(n: int) -> None:
    """In a subprocess: build and trace an n-op y+1 chain; print times, peak RSS, JSON size."""
    from graphviz_app import trace

    def rss_mib() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def work() -> tuple[float, ...]:
        y, params = add_chain(n)
        built = rss_mib()
        gc.collect()
        t0, c0 = time.perf_counter(), time.thread_time()
        graph = trace(y, params)
        cpu = time.thread_time() - c0
        wall = time.perf_counter() - t0
        # The GC was off during the walk: the first young collection after it
        # goes over every record made, whoever allocates next. No container
        # was made since (it would have started that collection).
        c0 = time.thread_time()
        gc.collect(0)
        young = time.thread_time() - c0
        traced = rss_mib()
        size = len(graph.to_json())
        with_json = rss_mib()
        c0 = time.thread_time()
        bare_walk(y)  # last: its seen set would count in the peak RSS
        return wall, cpu, young, time.thread_time() - c0, built, traced, with_json, size / 1e6

    print("| {:,} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} |".format(
        n, *call_with_large_stack(work)))


def stripped_walk(y: torch.Tensor) -> list[Any]:
    """The y+1 chain's records made by the least loop that makes them: no options, checks or guard.

    One Node with its output record and attrs per op, one Edge per input, ids
    in walk order: what trace() makes of the chain, as a floor for a Python walker.
    """
    import operator

    from graphviz_app.model import EdgeKind, NodeKind
    from graphviz_app.tracing.fast_records import new_edge, new_node
    from graphviz_app.tracing.torch_internals import output_metadata

    fn_ids: dict[Any, str] = {}
    nodes: list[Any] = [None, None]
    edges: list[Any] = []
    fns: list[Any] = []
    queue = deque([(y.grad_fn, "n1", 1)])
    alpha = operator.attrgetter("_saved_alpha")
    attrs_seen: dict[Any, Any] = {}
    infos: dict[Any, Any] = {}
    op, data = NodeKind.OP, EdgeKind.DATA
    while queue:
        fn, node_id, index = queue.popleft()
        cls = type(fn)
        raw = alpha(fn)
        attrs = attrs_seen.get((cls, raw, type(raw)))
        if attrs is None:
            attrs = attrs_seen[(cls, raw, type(raw))] = (("alpha", str(raw)),)
        meta = output_metadata(fn)
        info = infos.get(meta)
        if info is None:
            info = infos[meta] = object()
        nodes[index] = new_node(node_id, op, cls.__name__, info, attrs, None, None)
        slot = -1
        for child, output_nr in fn.next_functions:
            slot += 1
            if child is None:
                continue
            child_id = fn_ids.get(child)
            if child_id is None:
                child_index = len(nodes)
                child_id = fn_ids[child] = f"n{child_index}"
                fns.append(child)
                nodes.append(None)
                if type(child).__name__ != "AccumulateGrad":
                    queue.append((child, child_id, child_index))
            edges.append(new_edge(child_id, node_id, data, output_nr, slot))
    return nodes


def budget(n: int = 100_000, repeat: int = 5) -> None:
    """Per-op cost of each thing trace() does on an n-op y+1 chain, each timed alone over all its ops.

    The fns are collected first, so each line is the cost of that read or
    record alone (memory effects of a real walk included only in part).
    """
    from collections import deque as _deque

    from graphviz_app import trace
    from graphviz_app.model import EdgeKind, NodeKind
    from graphviz_app.tracing.fast_records import new_edge, new_node

    y, params = add_chain(n)
    fns = []
    fn = y.grad_fn
    while fn is not None and fn.next_functions:
        fns.append(fn)
        fn = fn.next_functions[0][0]
    op, data = NodeKind.OP, EdgeKind.DATA

    def each(body: Callable[[Any], Any]) -> Callable[[], None]:
        def run() -> None:
            for f in fns:
                body(f)
        return run

    def records() -> None:  # kept, as the walk keeps them
        kept = []
        for _ in fns:
            kept.append(new_node("n1", op, "AddBackward0", None, ()))
            kept.append(new_edge("n1", "n2", data, 0, 0))

    def ids() -> None:
        table: dict[int, str] = {}
        queue: _deque[Any] = _deque()
        for i, f in enumerate(fns):
            table[id(f)] = f"n{i}"
            queue.append((f, i))
            queue.popleft()

    def metadata(f: Any) -> Any:
        m = f._input_metadata[0]
        return tuple(m.shape), m.dtype, m.device

    def children(f: Any) -> None:
        for _child, _nr in f.next_functions:
            pass

    rows = [
        ("bare walk (next_functions, seen set, deque, _saved_*)", lambda: bare_walk(y)),
        ("trace(), defaults", lambda: trace(y, params)),
        ("trace(), show_saved/show_attrs off", lambda: trace(y, params, show_saved=False, show_attrs=False)),
        ("stripped loop making the same records (no options, checks or free guard)", lambda: stripped_walk(y)),
        ("  a Python call per op (the floor of each line below)", each(lambda f: None)),
        ("  fn.next_functions, iterated", each(children)),
        ("  fn._saved_alpha", each(lambda f: f._saved_alpha)),
        ("  fn._input_metadata[0]: tuple(shape), dtype, device", each(metadata)),
        ("  fn.metadata (read only after record())", each(lambda f: f.metadata)),
        ("  one Node and one Edge, kept (no call per op)", records),
        ("  node id text, id(fn) -> id dict, deque in/out (no call per op)", ids),
    ]
    gc.disable()  # as during a walk (trace() turns it off itself): the records would set off collections
    print(f"\n{n:,}-op y+1 chain, best of {repeat}, CPU ns per op:\n\n| what | ns/op |\n|---|---|")
    for label, run in rows:
        print(f"| {label} | {_best(run, repeat) / len(fns) * 1e9:.0f} |", flush=True)
    gc.enable()


def profile(name: str) -> None:
    from graphviz_app import trace

    key = {"chain": "chain mixed 100k", "resnet": "ResNet-50-shaped", "gpt": "GPT-2-shaped 12 layers"}[name]
    y, params = GRAPHS[key]()
    trace(y, params)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(1 if "chain" in key else 20):
        trace(y, params)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", default=None, help="git revision to compare with, e.g. d793d01")
    parser.add_argument("--graphs", nargs="*", default=list(GRAPHS))
    parser.add_argument("--million", action="store_true")
    parser.add_argument("--million-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--profile", choices=["chain", "resnet", "gpt"])
    parser.add_argument("--budget", action="store_true", help="per-op cost of each read and record on the y+1 chain")
    parser.add_argument("--first", action="store_true",
                        help="time each walk on a graph just built (the first walk makes each node's Python object)")
    args = parser.parse_args()
    if args.million_child:
        million(args.million_child)
        return
    if args.profile:
        call_with_large_stack(profile, args.profile)
        return
    if args.budget:
        call_with_large_stack(budget, 100_000, args.repeat)
        return

    before = load_before(args.before) if args.before else None
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores (load {os.getloadavg()[0]:.1f}), "
          f"Python {platform.python_version()}, torch {torch.__version__}; best of {args.repeat}"
          + ("; each walk the first of a graph just built" if args.first else ""))
    cols = ["bare", "ours", "ours_off"] + (["before", "before_off"] if before else [])
    print("\n| graph | nodes | " + " | ".join(f"{c} µs/node" for c in cols)
          + " | ours/bare | off/bare" + (" | before/bare | before_off/bare | before/ours" if before else "") + " |")
    print("|---" * (len(cols) + 4 + (3 if before else 0)) + "|")
    for name in args.graphs:
        r = call_with_large_stack(measure, name, args.repeat, before, args.first)
        n = r["nodes"]
        cells = [f"{r[c] / n * 1e6:.2f}" for c in cols]
        ratios = [r["ours"] / r["bare"], r["ours_off"] / r["bare"]]
        if before:
            ratios += [r["before"] / r["bare"], r["before_off"] / r["bare"], r["before"] / r["ours"]]
        print(f"| {name} | {n:,} | " + " | ".join(cells) + " | "
              + " | ".join(f"{x:.1f}x" for x in ratios) + " |", flush=True)
    if args.million:
        print("\n| chain y+1 ops | trace wall s | trace CPU s | young GC after CPU s | bare walk CPU s "
              "| peak RSS built MiB | traced MiB | with to_json() MiB | JSON MB |\n"
              "|---|---|---|---|---|---|---|---|---|",
              flush=True)
        subprocess.run([sys.executable, __file__, "--million-child", "1000000"], check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})


if __name__ == "__main__":
    main()
