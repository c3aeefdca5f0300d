"""Two graphs in synced panes, one self-contained HTML file: aligned by `diff()`, coloured by change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis.diff import EdgeOnly, GraphDiff
from ..analysis.diff_view import STATUSES, pair_view
from ..model import Graph
from .html import notebook_cell, standalone_page
from .payload import RANKDIRS, encode, payload

__all__ = ["COMPARE_FORMAT", "COMPARE_VERSION", "DELTA_KEYS", "compare_payload", "compare_html", "compare_page",
           "compare_notebook_html"]

COMPARE_FORMAT = "graphviz-app-compare"
COMPARE_VERSION = 1
# The built-in colourings a compare file also shows as a change (b − a): key -> (words, how boxes sum it).
DELTA_KEYS = {"memory": ("saved bytes", "sum"), "held": ("bytes at the peak", "sum"),
              "gradient": ("gradient norm", "largest")}


def compare_payload(graph_a: Graph, graph_b: Graph, *, labels: Sequence[str] = ("a", "b"), title: str | None = None,
                    rankdir: str = "TB", found: GraphDiff | None = None) -> dict[str, Any]:
    """What a compare file's viewer is sent: one viewer payload per graph and `diff()`'s alignment.

    ``{"format": "graphviz-app-compare", "version": 1, "title", "labels": [a, b], "panes": [payload a,
    payload b], "match": [[b index or -1 per node of a], [a index or -1 per node of b]], "status":
    [[code per node of a], [code per node of b]] (codes index `STATUSES`: same, added, removed,
    changed), "changes": [{node index: [[what, before, after], ...]}, {...}], "edges": [[edge index only in
    a, ...], [... only in b]], "counts": diff counts,
    "summary": str}``. Each pane's overlays gain the change b − a of the built-in colourings both graphs
    have (`DELTA_KEYS`, keys "delta:memory", ...) and "delta:dtype" (1 where the dtype changed).

    Raises:
        ValueError: `labels` is not two non-empty texts, or `rankdir` is not one of RANKDIRS.
        TypeError: a graph is not a `Graph`.
    """
    for name, g in (("graph_a", graph_a), ("graph_b", graph_b)):
        if not isinstance(g, Graph):
            raise TypeError(f"{name} must be a Graph (from trace()), got {type(g).__name__}")
    labels = _labels(labels)
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    pair = pair_view(graph_a, graph_b, found)
    panes = [payload(graph_a, title=labels[0], rankdir=rankdir), payload(graph_b, title=labels[1], rankdir=rankdir)]
    matches = (pair.match_a, pair.match_b)
    for side in (0, 1):
        own, other = panes[side], panes[1 - side]
        own["overlays"] += _deltas(own, other, matches[side], side == 1, labels)
        changes = pair.changes_b if side else pair.changes_a
        own["overlays"].append(_dtype(own, matches[side], changes, labels))
    summary = str(pair.diff).splitlines()[0]
    return {
        "format": COMPARE_FORMAT,
        "version": COMPARE_VERSION,
        "title": title if title is not None else f"{labels[0]} ⟷ {labels[1]}",
        "labels": list(labels),
        "panes": panes,
        "match": [list(pair.match_a), list(pair.match_b)],
        "status": [[STATUSES.index(s) for s in pair.status_a], [STATUSES.index(s) for s in pair.status_b]],
        "changes": [{str(i): [list(r) for r in rows] for i, rows in changes.items()}
                    for changes in (pair.changes_a, pair.changes_b)],
        "edges": [_edges_only(graph_a, pair.diff.edges_only_a), _edges_only(graph_b, pair.diff.edges_only_b)],
        "counts": pair.diff.counts(),
        "summary": summary,
    }


def _edges_only(graph: Graph, only: Sequence[EdgeOnly]) -> list[int]:
    """The indices of `graph`'s edges that the other graph lacks."""
    ends = {(e.src, e.dst, e.kind) for e in only}
    return [k for k, e in enumerate(graph.edges) if (e.src, e.dst, e.kind) in ends]


def _labels(labels: Sequence[str]) -> tuple[str, str]:
    if isinstance(labels, str) or len(labels) != 2 or not all(isinstance(x, str) and x.strip() for x in labels):
        raise ValueError(f"labels must be two non-empty texts, one per graph (like ('fp32', 'bf16')), got {labels!r}")
    return labels[0], labels[1]


def _chains(tree: dict[str, list[Any]]) -> list[list[int]]:
    """Per box: itself and every box around it."""
    parent = tree["parent"]
    chain: list[list[int]] = []
    for g, p in enumerate(parent):
        if 0 <= p < g:
            chain.append([g] + chain[p])
            continue
        up = [g]
        while parent[up[-1]] >= 0:
            up.append(parent[up[-1]])
        chain.append(up)
    return chain


def _deltas(own: dict[str, Any], other: dict[str, Any], match: Sequence[int], own_is_b: bool,
            labels: tuple[str, str]) -> list[dict[str, Any]]:
    """One overlay per built-in colouring both panes have: each node's change (b − a) in both panes."""
    found = []
    mine = {o["key"]: o for o in own["overlays"]}
    theirs = {o["key"]: o for o in other["overlays"]}
    chain = _chains(own["tree"])
    node_group = own["tree"]["node_group"]
    columns = own["graph"]
    is_op = [columns["strings"][k] == "op" for k in columns["nodes"]["kind"]]
    for key, (words, how) in DELTA_KEYS.items():
        if key not in mine or key not in theirs:
            continue
        own_values, other_values = mine[key]["node"], theirs[key]["node"]
        bytes_like = mine[key].get("unit") == "bytes"
        node: list[float | None] = [None] * len(match)
        group: list[float | None] = [None] * len(chain)
        for i, j in enumerate(match):
            if j < 0:
                continue
            a, b = (other_values[j], own_values[i]) if own_is_b else (own_values[i], other_values[j])
            if (a is None and b is None) or (not bytes_like and (a is None or b is None)):
                continue
            value = (b or 0.0) - (a or 0.0)  # a value missing on one side of bytes: none held there
            node[i] = value
            if key == "memory" and is_op[i]:
                continue  # an op's saved bytes are its saved tensors': a box counts them once, by the tensors
            for g in chain[node_group[i]]:
                old = group[g]
                if how == "sum":
                    group[g] = value + (old or 0.0)
                elif old is None or abs(value) > abs(old):
                    group[g] = value
        found.append({"key": f"delta:{key}", "label": f"Δ {words} ({labels[1]} − {labels[0]})",
                      "scale": "linear", "symmetric": True, "unit": mine[key].get("unit", ""),
                      "node": node, "group": group, "flag": []})
    return found


def _dtype(own: dict[str, Any], match: Sequence[int], changes: dict[int, list[tuple[str, str, str]]],
           labels: tuple[str, str]) -> dict[str, Any]:
    """1 where a node's dtype differs between the graphs, 0 where it is the same, none where unmatched."""
    chain = _chains(own["tree"])
    node_group = own["tree"]["node_group"]
    node: list[float | None] = [None if j < 0 else 0.0 for j in match]
    for i, rows in changes.items():
        if any(what == "dtype" for what, _, _ in rows):
            node[i] = 1.0
    group: list[float | None] = [None] * len(chain)
    for i, value in enumerate(node):
        if value is not None:
            for g in chain[node_group[i]]:
                group[g] = max(value, group[g] or 0.0)
    return {"key": "delta:dtype", "label": f"dtype changed ({labels[0]} → {labels[1]}: 1)",
            "scale": "linear", "unit": "", "node": node, "group": group, "flag": []}


# Two graphs in synced panes: the first pane's view (which the second follows) travels in the address's fragment,
# as one graph's does, so a link reopens both panes as they were.
_MOUNT_PAIR = """GraphvizAppViewer.mountCompare(document.getElementById("gv-root"),
  document.getElementById("gv-payload").textContent,
  {fragment: location.hash, focus: window.top === window, onView: function (hash) {
    try { history.replaceState(null, "", hash); } catch (e) { /* a sandboxed frame keeps no history */ }
  }});"""


def compare_html(graph_a: Graph, graph_b: Graph, *, labels: Sequence[str] = ("a", "b"), title: str | None = None,
                 rankdir: str = "TB", found: GraphDiff | None = None) -> str:
    """Two graphs side by side in synced panes, as the text of one self-contained HTML file (no request).

    Nodes are aligned by `diff()`. Pan, zoom, opening a box and selecting act on both panes; nodes only in
    one graph, and those whose shape, dtype, saved bytes or gradients changed, are coloured; the change of
    saved bytes, bytes at the peak, gradient norm and dtype is a colouring of its own (`compare_payload`).

    Raises:
        RenderError: the viewer's bundle is not built.
        ValueError, TypeError: as for `compare_payload`.
    """
    data = compare_payload(graph_a, graph_b, labels=labels, title=title, rankdir=rankdir, found=found)
    return compare_page(encode(data), title=data["title"])


def compare_page(encoded: str, *, title: str) -> str:
    """The compare file's text for compare data already encoded (`payload.encode(compare_payload(...))`).

    Raises:
        RenderError: the viewer's bundle is not built.
    """
    return standalone_page(encoded, title=title, mount=_MOUNT_PAIR)


def compare_notebook_html(graph_a: Graph, graph_b: Graph, *, labels: Sequence[str] = ("a", "b"),
                          title: str | None = None, rankdir: str = "TB", found: GraphDiff | None = None,
                          height: int = 720, with_bundle: bool = True, fit: bool = True, fallback: str = "") -> str:
    """The synced panes for a notebook cell: a sandboxed frame like `html.notebook_html`'s, holding the compare
    payload; the viewer's script travels with the cell only when `with_bundle` (once per kernel). `height`: the
    frame's until drawn, in px (taller than one graph's 640: the panes share it with two toolbars and the summary
    line); with `fit`, the drawn frame then takes the height the taller pane's drawing needs, and a person can
    drag its corner (`html.notebook_cell`). `fallback`: HTML shown where the front end strips the frame.

    Raises:
        RenderError: the viewer's bundle is not built.
        ValueError, TypeError: as for `compare_payload`.
    """
    data = compare_payload(graph_a, graph_b, labels=labels, title=title, rankdir=rankdir, found=found)
    return notebook_cell(data, mount="mountCompare", title=data["title"], height=height, with_bundle=with_bundle,
                         fit=fit, fallback=fallback)
