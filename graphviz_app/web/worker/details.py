"""Everything the model knows about each drawn node, as plain JSON for the viewer's details panel and search."""

from __future__ import annotations

import json
from typing import Any

from ...drawing.style import KIND_TITLE
from ...model import EdgeKind, GradInfo, Graph, ModuleInfo, Node, NodeKind, TensorInfo, human_bytes

__all__ = ["node_details", "details_json"]


def node_details(graph: Graph) -> dict[str, dict[str, Any]]:
    """Per node id: its title, kind, and (row label, text) pairs, plus the text search matches.

    Rows: tensor (shape, dtype, device, bytes, values), attributes, saved
    tensors, module and its type, source line, gradient statistics. A
    MODULE node also says which module it stands for (`module`), so the
    viewer can ask to open it.
    """
    modules = {m.name: m for m in graph.modules}
    by_id = {n.id: n for n in graph.nodes}
    saved: dict[str, list[Node]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED and e.src in by_id:
            saved.setdefault(e.dst, []).append(by_id[e.src])
    out: dict[str, dict[str, Any]] = {}
    for node in graph.nodes:
        rows = _rows(node, saved.get(node.id, ()), modules)
        search = " ".join([node.name, node.module or "", *(text for _, text in rows[:3])])
        out[node.id] = {
            "title": node.name or KIND_TITLE[node.kind],
            "kind": KIND_TITLE[node.kind],
            "rows": rows,
            "search": search.lower(),
            "output": node.kind is NodeKind.OUTPUT,
            **({"module": node.module} if node.kind is NodeKind.MODULE and node.module is not None else {}),
        }
    return out


def details_json(graph: Graph) -> str:
    """`node_details` as compact JSON."""
    return json.dumps(node_details(graph), separators=(",", ":"))


def _rows(node: Node, saved: list[Node] | tuple[Node, ...], modules: dict[str, ModuleInfo]) -> list[list[str]]:
    rows: list[list[str]] = []
    if node.tensor is not None:
        rows += _tensor_rows(node.tensor)
    # An op's attrs are its arguments (dim, alpha); a module box's are facts (type, ops, params).
    prefix = "" if node.kind is NodeKind.MODULE else "attribute "
    rows += [[f"{prefix}{k}", v] for k, v in node.attrs]
    for s in saved:
        t = s.tensor
        rows.append(["saved", f"{s.name}: " + ("freed by backward" if t is None or t.freed
                                                 else f"{t.shape_text} {t.dtype} {human_bytes(t.bytes)}")])
    if node.module is not None:
        info = modules.get(node.module)
        name = node.module or "(the root module)"
        rows.append(["module", name + (f" ({info.type})" if info else "")])
        if info and info.params and node.kind is not NodeKind.MODULE:  # a box lists its params in attrs
            rows.append(["module parameters", f"{info.params:,} ({human_bytes(info.param_bytes)})"])
    if node.source:
        rows.append(["source", node.source])
    if node.grad is not None:
        rows += _grad_rows(node.grad)
    return rows


def _tensor_rows(t: TensorInfo) -> list[list[str]]:
    if t.freed:
        return [["tensor", "freed by backward"]]
    rows = [["shape", t.shape_text], ["dtype", t.dtype], ["device", t.device],
            ["size", f"{t.numel:,} element{'' if t.numel == 1 else 's'}, {human_bytes(t.bytes)}"]]
    if t.name:
        rows.insert(0, ["tensor", t.name])
    if t.values is not None:
        rows.append(["values", ", ".join(str(v) for v in t.values)])
    rows.append(["requires grad", "yes" if t.requires_grad else "no"])
    return rows


def _grad_rows(g: GradInfo) -> list[list[str]]:
    rows = [["gradient norm", f"{g.norm:.4g}"], ["gradient max |g|", f"{g.max_abs:.4g}"],
            ["gradient mean |g|", f"{g.mean_abs:.4g}"], ["gradient zeros", f"{g.zero_fraction:.1%}"]]
    if g.nan or g.inf:
        rows.append(["gradient non-finite", f"{g.nan:,} nan, {g.inf:,} inf of {g.numel:,}"])
    if g.values is not None:
        rows.append(["gradient values", ", ".join(str(v) for v in g.values)])
    return rows
