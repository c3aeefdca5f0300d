"""How each kind of node, edge and device looks: colours, shapes, labels."""

from __future__ import annotations

from ..model import STATE_ATTR, EdgeKind, Node, NodeKind, TensorInfo, human_bytes
from .dot_text import escape_text

__all__ = [
    "KIND_STYLE",
    "EDGE_STYLE",
    "KIND_TITLE",
    "KIND_LOOK",
    "CROSS_DEVICE_STYLE",
    "device_color",
    "node_label",
    "format_values",
]

# Shape and border per kind; the fill colour says the device.
KIND_STYLE: dict[NodeKind, dict[str, str]] = {
    NodeKind.OUTPUT: {"shape": "box", "style": "filled,bold", "peripheries": "2"},
    NodeKind.OP: {"shape": "box", "style": "filled,rounded"},
    NodeKind.LEAF: {"shape": "box", "style": "filled,bold"},
    NodeKind.SAVED: {"shape": "note", "style": "filled"},
    NodeKind.VIEW_BASE: {"shape": "box", "style": "filled,dotted"},
    NodeKind.MODULE: {"shape": "box3d", "style": "filled"},
}

KIND_TITLE: dict[NodeKind, str] = {
    NodeKind.OUTPUT: "output tensor",
    NodeKind.OP: "backward op",
    NodeKind.LEAF: "leaf (AccumulateGrad)",
    NodeKind.SAVED: "saved for backward",
    NodeKind.VIEW_BASE: "base of a view",
    NodeKind.MODULE: "module (collapsed)",
}

# How each kind looks, in words, for the legend.
KIND_LOOK: dict[NodeKind, str] = {
    NodeKind.OUTPUT: "double border",
    NodeKind.OP: "rounded box",
    NodeKind.LEAF: "bold box",
    NodeKind.SAVED: "folded note",
    NodeKind.VIEW_BASE: "dotted box",
    NodeKind.MODULE: "3-D box",
}

EDGE_STYLE: dict[EdgeKind, dict[str, str]] = {
    EdgeKind.DATA: {},
    EdgeKind.SAVED: {"style": "dashed", "arrowhead": "none", "color": "#868e96"},
    EdgeKind.VIEW: {"style": "dotted", "color": "#868e96"},
}

# An op whose inputs and output live on different devices.
CROSS_DEVICE_STYLE = {"color": "#e03131", "penwidth": "3"}

_CPU = "#d0ebff"
_CUDA = ("#d3f9d8", "#ffe8cc", "#f3d9fa", "#fff3bf", "#c5f6fa", "#ffdeeb", "#e5dbff", "#d8f5a2")
_OTHER = "#e9ecef"
_UNKNOWN = "#ffffff"


def device_color(device: str | None) -> str:
    """Fill colour of a device: cpu, each cuda:N and others all differ.

    >>> device_color("cpu") != device_color("cuda:0") != device_color("cuda:1")
    True
    """
    if device is None or device == "unknown":
        return _UNKNOWN
    if device == "cpu":
        return _CPU
    if device.startswith("cuda"):
        index = device.partition(":")[2]
        # isascii: "²".isdigit() is True, and int("²") raises
        return _CUDA[int(index) % len(_CUDA)] if index.isascii() and index.isdigit() else _CUDA[0]
    return _OTHER


def format_values(values: tuple[object, ...], *, limit: int = 6) -> str:
    """A short `[0, 1, 2]` text of a tensor's first values."""
    shown = [_value_text(v) for v in values[:limit]]
    more = ", ..." if len(values) > limit else ""
    return "[" + ", ".join(shown) + more + "]"


def _value_text(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _describe(t: TensorInfo) -> str:
    return f"{t.shape_text} {t.dtype} {t.device}"


def _truncate(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def node_label(node: Node, *, max_attr_chars: int = 50) -> str:
    """The label's lines, already escaped (`dot_text.escape_text`) and joined with Graphviz's `\\n`."""
    t = node.tensor
    lines: list[str]
    if node.kind is NodeKind.OP:
        lines = [node.name]
        lines += [_truncate(f"{k}: {v}", max_attr_chars) for k, v in node.attrs]
    elif node.kind is NodeKind.MODULE:
        # The title already names the type and, for a numbered run, the modules.
        lines = [node.name] + [
            _truncate(f"{k}: {v}", max_attr_chars)
            for k, v in node.attrs
            if k != "type" and not (k == "stands for" and node.name.startswith(v + ":"))
        ]
    elif t is None:
        lines = [node.name]
    elif t.freed:
        state = dict(node.attrs).get(STATE_ATTR)
        lines = [node.name, f"({state})" if state else "(freed by backward)"]
    else:
        lines = [node.name] if node.name else []
        lines.append(_describe(t))
        if node.kind is NodeKind.SAVED:
            lines.append(human_bytes(t.bytes))
        elif t.values is not None and node.kind is not NodeKind.VIEW_BASE:
            lines.append("= " + (format_values(t.values) if t.shape else _value_text(t.values[0])))
    return "\\n".join(escape_text(line) for line in lines)
