"""The viewer's "check" colouring: a model check's verdict per node and per box, with its words per box."""

from __future__ import annotations

from typing import Any

from ..analysis.model_check_nodes import CHECK_CODES, Verdicts, check_code, module_verdicts, node_verdicts, verdicts_of
from ..model import Graph
from ..model.checks import Status, Verdict
from .tree import Tree, build_tree

__all__ = ["CHECK_KEY", "check_overlay"]

CHECK_KEY = "check"
# Words for a box whose code comes from inside it (a roll of repeated modules, a fold).
_WORDS = {CHECK_CODES["passed"]: "passed", CHECK_CODES["unchecked"]: "not checked",
          CHECK_CODES["detached"]: "detached (no gradient path)", CHECK_CODES["explained"]: "fails inside",
          CHECK_CODES["culprit"]: "culprit inside"}


def check_overlay(graph: Graph, tree: Tree | None = None, source: Verdicts | None = None) -> list[dict[str, Any]]:
    """The "check" colouring of `graph` (by `source`'s verdicts, else the graph's own `checks`); [] when none.

    `node` and `group` hold the codes of `CHECK_CODES` (linear: worse is larger); `text` holds per
    box, and `node_text` per node, the verdict in words with the source line of a failure (the
    details and the module table show them); the culprit's nodes are flagged
    and ringed, `mark_label` naming the culprit and its source line.
    """
    verdicts = verdicts_of(graph if source is None else source)
    if not verdicts:
        return []
    tree = build_tree(graph) if tree is None else tree
    by_node = node_verdicts(graph, verdicts)
    values: list[float | None] = [None if n.id not in by_node else check_code(by_node[n.id]) for n in graph.nodes]
    by_module = module_verdicts(verdicts)
    boxes = len(tree.parent)
    group: list[float | None] = [None] * boxes
    text: list[str | None] = [None] * boxes
    own = [False] * boxes
    for g, path in enumerate(tree.module):
        if path is not None and path in by_module and tree.kind[g] == "module":
            own[g] = True
            group[g] = check_code(by_module[path])
            text[g] = _words(by_module[path])
    below: list[float | None] = [None] * boxes  # the worst code anywhere inside a box
    for i, value in enumerate(values):
        _worse(below, tree.node_group[i], value)
    for g in sorted(range(boxes), key=lambda g: -_depth(tree, g)):
        if tree.parent[g] >= 0:
            _worse(below, tree.parent[g], below[g])
            _worse(below, tree.parent[g], group[g])
    for g, code in enumerate(below):  # a box without a verdict of its own (a roll, a fold, an uncalled container)
        if not own[g] and code is not None:
            group[g] = code
            text[g] = _WORDS[int(code)]
    node_text = [None if n.id not in by_node else _words(by_node[n.id]) for n in graph.nodes]
    flags = [i for i, v in enumerate(values) if v == CHECK_CODES["culprit"]]
    culprits = [v for v in verdicts if v.culprit and v.status == Status.FAILED]
    label = "; ".join(f"{v.label}: {v.name}" + (f", {v.source}" if v.source else "") for v in culprits[:3])
    found: dict[str, Any] = {
        "key": CHECK_KEY, "label": "check: 0 passed, 1 not checked, 2 detached, 3 fails inside, 4 culprit",
        "scale": "linear", "unit": "", "node": values, "group": group, "text": text, "node_text": node_text,
        "flag": flags}
    if flags:
        found.update(mark=flags, mark_label=f"culprit {label}", mark_badge="✗")
    return [found]


def _words(verdict: Verdict) -> str:
    """The verdict in a few words, with the culprit's source line: "culprit: 1.02 x (x), model.py:41"."""
    words = verdict.short()
    culprit = verdict.status == Status.FAILED and verdict.explained_by is None
    if culprit and verdict.source and verdict.source not in words:
        return f"{words}, {verdict.source}"
    return words


def _worse(codes: list[float | None], g: int, value: float | None) -> None:
    held = codes[g]
    if value is not None and (held is None or held < value):
        codes[g] = value


def _depth(tree: Tree, g: int) -> int:
    depth = 0
    while tree.parent[g] >= 0:
        g = tree.parent[g]
        depth += 1
    return depth
