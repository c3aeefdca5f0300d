"""Graphs for the viewer's tests, and helpers to open the viewer's HTML in Chromium."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from graphviz_app.model import Edge, EdgeKind, GradInfo, Graph, ModuleInfo, Node, NodeKind, TensorInfo
from graphviz_app.model.checks import Status, UnitKind, Verdict

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
# Names a user's code could hold: each must show as text and run nothing.
HOSTILE = [
    "</script><script>window.__pwned = 1; alert('script')</script>",
    "<img src=x onerror=\"window.__pwned = 2; alert('img')\">",
    "\"'><svg onload=alert('svg')>",
    "${alert('template')}",
]


def _tensor(shape: tuple[int, ...], name: str | None = None) -> TensorInfo:
    numel = 1
    for d in shape:
        numel *= d
    return TensorInfo(name=name, shape=shape, dtype="float32", device="cpu", numel=numel, bytes=4 * numel,
                      requires_grad=True, storage=None)


def checked_graph() -> Graph:
    """`module_graph(3)` carrying check verdicts: blocks.1.fc is the culprit (1.02 x), blocks.2 was skipped."""
    def verdict(path: str, type_name: str, status: str, **extra: Any) -> Verdict:
        return Verdict(path, UnitKind.MODULE, type_name, f"{type_name}.forward", "model.py:11", status, **extra)

    checks = (
        verdict("blocks.1.fc", "Linear", Status.FAILED, culprit=True, ratio=1.02, input="input input"),
        verdict("blocks.0.fc", "Linear", Status.PASSED), verdict("blocks.0", "Block", Status.PASSED),
        verdict("blocks.1", "Block", Status.FAILED, explained_by="blocks.1.fc"),
        verdict("blocks.2", "Block", Status.NOT_CHECKED, reason="skipped by a pattern"),
        verdict("head", "Head", Status.PASSED), verdict("", "Net", Status.FAILED, explained_by="blocks.1.fc"),
    )
    return dataclasses.replace(module_graph(3), checks=checks)


def module_graph(layers: int = 3, *, hostile: bool = False) -> Graph:
    """A hand-built model graph: `layers` blocks (fc + act each), then a head; with gradients and sources."""
    nodes: list[Node] = [Node("n0", NodeKind.OUTPUT, "output", tensor=_tensor((), "output"))]
    edges: list[Edge] = []
    grad = GradInfo(numel=8, norm=0.5, max_abs=0.2, mean_abs=0.1)
    modules = [ModuleInfo("", "Net", 100, 400)]
    prev = "n0"
    names = HOSTILE if hostile else []
    head = Node("n1", NodeKind.OP, "SumBackward0", tensor=_tensor(()), module="head", source="model.py:30 in forward",
                grad=grad)
    nodes.append(head)
    edges.append(Edge("n1", prev))
    modules.append(ModuleInfo("head", "Head", 0, 0))
    prev = "n1"
    modules.append(ModuleInfo("blocks", "ModuleList", 96, 384))
    for k in range(layers):  # named_modules() order
        block = f"blocks.{k}"
        modules += [ModuleInfo(block, "Block", 32, 128), ModuleInfo(f"{block}.fc", "Linear", 32, 128),
                    ModuleInfo(f"{block}.act", "ReLU", 0, 0)]
    for k in reversed(range(layers)):
        block = f"blocks.{k}"
        i = len(nodes)
        act_name = names[k % len(names)] if names else "ReluBackward0"
        act = Node(f"n{i}", NodeKind.OP, act_name, tensor=_tensor((2, 4)), module=f"{block}.act",
                   source=(names[-1] if names else "model.py:12 in forward"), grad=grad)
        fc = Node(f"n{i + 1}", NodeKind.OP, "AddmmBackward0", tensor=_tensor((2, 4)), module=f"{block}.fc",
                  source="model.py:11 in forward", grad=grad)
        weight = Node(f"n{i + 2}", NodeKind.LEAF, f"{block}.fc.weight", tensor=_tensor((4, 4), f"{block}.fc.weight"),
                      module=f"{block}.fc", grad=grad)
        saved = Node(f"n{i + 3}", NodeKind.SAVED, "mat1", tensor=_tensor((2, 4), "mat1"))
        nodes += [act, fc, weight, saved]
        edges += [Edge(act.id, prev), Edge(fc.id, act.id), Edge(weight.id, fc.id, slot=1),
                  Edge(saved.id, fc.id, EdgeKind.SAVED)]
        prev = fc.id
    leaf = Node(f"n{len(nodes)}", NodeKind.LEAF, "x", tensor=_tensor((2, 4), "x"), grad=grad)
    nodes.append(leaf)
    edges.append(Edge(leaf.id, prev))
    return Graph(tuple(nodes), tuple(edges), modules=tuple(modules),
                 notes=tuple(HOSTILE[:1]) if hostile else ())


def with_order(graph: Graph) -> Graph:
    """A hand-built graph given a backward order: ops nearer the output are newer (higher recency)."""
    ops = [n for n in graph.nodes if n.kind is NodeKind.OP]
    recency = {n.id: len(ops) - k for k, n in enumerate(ops)}
    return dataclasses.replace(graph, nodes=tuple(dataclasses.replace(n, recency=recency.get(n.id))
                                                  for n in graph.nodes))


def chain_graph(ops: int) -> Graph:
    """A flat chain `x = sin(x) * w`, `ops` backward ops, no modules (as a long loop makes)."""
    nodes: list[Node] = [Node("n0", NodeKind.OUTPUT, "output", tensor=_tensor((4,), "output"))]
    edges: list[Edge] = []
    prev = "n0"
    for k in range(ops):
        name = "MulBackward0" if k % 2 == 0 else "SinBackward0"
        node = Node(f"n{len(nodes)}", NodeKind.OP, name, tensor=_tensor((4,)))
        nodes.append(node)
        edges.append(Edge(node.id, prev))
        prev = node.id
    x = Node(f"n{len(nodes)}", NodeKind.LEAF, "x", tensor=_tensor((4,), "x"))
    nodes.append(x)
    edges.append(Edge(x.id, prev))
    return Graph(tuple(nodes), tuple(edges))


def wide_graph(ops: int = 120) -> Graph:
    """`ops` independent ops in module `wide` (one box of more items than the viewer lays out on the page),
    summed outside it into the output."""
    nodes = [Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "SumBackward0")]
    edges = [Edge("n1", "n0")]
    for k in range(ops):
        nodes.append(Node(f"n{k + 2}", NodeKind.OP, f"MulBackward{k}", module="wide"))
        edges.append(Edge(f"n{k + 2}", "n1", slot=k))
    return Graph(tuple(nodes), tuple(edges), modules=(ModuleInfo("", "Net", 0, 0), ModuleInfo("wide", "Wide", 0, 0)))


def open_viewer(page: Any, path: Path, fragment: str = "") -> Any:
    """Open the HTML file in `page` and wait until the viewer has drawn its first view (or failed)."""
    page.goto(path.as_uri() + fragment)
    page.wait_for_selector("[data-testid=graph-viewer][data-state=ready], [data-state=error]")
    return page.locator("[data-testid=graph-viewer]")


def drawn_nodes(page: Any) -> list[str]:
    """The ids of the nodes drawn now."""
    return page.eval_on_selector_all("[data-node]", "els => els.map(e => e.getAttribute('data-node'))")


def compare_pair(*, hostile: bool = False) -> tuple[Graph, Graph]:
    """Two graphs to compare: a has three blocks; b has two (blocks.2 removed) and keeps its saved
    activations in bfloat16 (half the bytes). With `hostile`, the act ops of both are named as HOSTILE."""
    a, b = module_graph(3, hostile=hostile), module_graph(2, hostile=hostile)

    def half(n: Node) -> Node:
        if n.kind is not NodeKind.SAVED or n.tensor is None:
            return n
        return dataclasses.replace(n, tensor=dataclasses.replace(n.tensor, dtype="bfloat16", bytes=n.tensor.bytes // 2))

    return a, dataclasses.replace(b, nodes=tuple(half(n) for n in b.nodes))
