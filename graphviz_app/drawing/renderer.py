"""Draw a Graph with Graphviz and write it as SVG, PNG, PDF, DOT or JSON."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Unpack

import graphviz
from graphviz.quoting import attr_list

from ..analysis.collapse import collapse
from ..analysis.regions import region_names, show_regions
from ..errors import RenderError, UnsupportedFormatError
from ..model import Graph, NodeKind
from .clusters import clustered
from .dot_text import dot_id, escaped_string, free_id, html_text
from .fallback import DEFAULT_TIMEOUT, Drawing, View, lay_out_within
from .options import COLOR_BY, RANKDIRS, DrawKeywords, DrawOptions, check_choices
from .overlays import Overlay, overlay_for
from .style import (
    CROSS_DEVICE_STYLE,
    EDGE_STYLE,
    KIND_LOOK,
    KIND_STYLE,
    KIND_TITLE,
    device_color,
    node_label,
)

__all__ = [
    "FORMATS", "EXPORT_FORMATS", "RANKDIRS", "COLOR_BY", "DEFAULT_TIMEOUT", "DrawOptions",
    "render", "export", "export_drawing", "save",
]

FORMATS = ("svg", "png", "pdf", "dot", "json", "html")  # by suffix
EXPORT_FORMATS = (*FORMATS, "model-explorer")  # html and model-explorer: the whole graph, no layout here

def render(
    graph: Graph,
    *,
    rankdir: str = "TB",
    legend: bool = True,
    max_attr_chars: int = 50,
    depth: int | None = None,
    roll: bool = False,
    expanded: frozenset[str] = frozenset(),
    clusters: bool = True,
    color_by: str = "device",
) -> graphviz.Digraph:
    """Lay out nothing yet: build the Graphviz description of `graph`.

    Args:
        graph: the traced graph.
        rankdir: Graphviz direction, one of TB, BT, LR, RL.
        legend: add a box explaining the node shapes and device colours.
        max_attr_chars: cut op attribute lines longer than this.
        depth: draw every module deeper than this as one box (see `collapse.collapse`).
        roll: fold repeated sibling modules into one box (see `collapse.collapse`).
        expanded: modules to open although deeper than `depth`; torch.compile's regions
            are boxes too, open when `expanded` names them (see `regions.show_regions`).
        clusters: frame each module's nodes in a cluster labelled `name: Type`
            (graphs traced with module information only).
        color_by: "device" (fill by device) or "gradient": edges coloured and
            widened by log10 of the gradient norm, NaN/Inf nodes in red, the
            NaN origin marked, small gradients written out, a summary line.
            Needs a graph traced with `gradients=True`. Or "order": nodes
            filled by order of derivative (see `record_orders`). Or "check": nodes
            filled by a model check's verdict, the culprit red with its source line
            (a graph carrying one: `analysis.model_check_nodes.with_check`).

    Returns:
        A `graphviz.Digraph`; `.source` is DOT text, `.pipe("svg")` lays it out.

    Raises:
        RenderError: `rankdir` is not one Graphviz knows, or `color_by` is
            "gradient" and the graph has no gradients, or "order" and it has no orders.
        CollapseError: `depth` or `expanded` is malformed.
    """
    check_choices(rankdir, color_by)
    shown = show_regions(collapse(graph, depth=depth, roll=roll, expanded=expanded), expanded=expanded)
    return _draw(shown, rankdir=rankdir, legend=legend, max_attr_chars=max_attr_chars, clusters=clusters,
                 color_by=color_by)


def _draw(
    graph: Graph, *, rankdir: str, legend: bool, max_attr_chars: int, clusters: bool, color_by: str,
    overlay: Overlay | None = None,
) -> graphviz.Digraph:
    """The Graphviz description of a graph already collapsed as it is to be drawn."""
    grad = overlay or overlay_for(graph, color_by)
    dot = graphviz.Digraph(
        name="autograd",
        graph_attr={"rankdir": rankdir, "fontname": "Helvetica", "fontsize": "12"},
        node_attr={"fontname": "Helvetica", "fontsize": "11", "height": "0.2"},
        edge_attr={"arrowsize": "0.7"},
    )
    cross = graph.cross_device_ops()
    # Statements are appended as Digraph.node()/edge() write them, but each of
    # the few distinct attribute sets is quoted once: re-quoting them per node
    # was two thirds of the time on a 20,000-node graph.
    node_attrs: dict[tuple[NodeKind, str | None, bool], str] = {}
    lines: list[str] = []
    for node in graph.nodes:
        key = (node.kind, node.device, node.id in cross)
        attrs = node_attrs.get(key)
        if attrs is None:
            style = dict(KIND_STYLE[node.kind], fillcolor=device_color(node.device))
            if key[2]:
                style.update(CROSS_DEVICE_STYLE)
            attrs = node_attrs[key] = attr_list(kwargs=style)[2:]  # 'k=v ...]'
        text, extra = node_label(node, max_attr_chars=max_attr_chars), ""
        if grad is not None:
            text, extra = grad.node(node, text)
        label = escaped_string(text)  # node_label and the overlays escape each line (dot_text)
        # An overlay's attributes come last: Graphviz keeps the last value of one given twice.
        lines.append(f"\t{dot_id(node.id)} [label={label} {attrs[:-1]} {extra.rstrip()}]\n" if extra
                     else f"\t{dot_id(node.id)} [label={label} {attrs}\n")
    dot.body.extend(clustered(graph, lines) if clusters else lines)
    edge_text = {kind: attr_list(kwargs=style) for kind, style in EDGE_STYLE.items()}
    for edge in graph.edges:
        text = (grad.edge_attrs(edge) if grad is not None else None) or edge_text[edge.kind]
        dot.body.append(f"\t{dot_id(edge.src)} -> {dot_id(edge.dst)}{text}\n")
    if legend and graph.nodes:
        _add_legend(dot, graph, bool(cross), grad.legend_rows() if grad is not None else [])
    if grad is not None:
        dot.graph_attr.update(grad.graph_attrs())
    return dot


def _add_legend(dot: graphviz.Digraph, graph: Graph, has_cross: bool, extra: list[str]) -> None:
    kinds = [k for k in NodeKind if any(n.kind is k for n in graph.nodes)]
    devices = sorted({n.device for n in graph.nodes if n.device and n.device != "unknown"})
    rows = ['<TR><TD COLSPAN="2"><B>legend</B></TD></TR>']
    rows += [f"<TR><TD>{KIND_LOOK[k]}</TD><TD>{KIND_TITLE[k]}</TD></TR>" for k in kinds]
    rows += [
        f'<TR><TD BGCOLOR="{device_color(d)}">fill</TD><TD>on {html_text(d)}</TD></TR>'
        for d in devices
    ]
    if has_cross:
        rows.append(
            f'<TR><TD><FONT COLOR="{CROSS_DEVICE_STYLE["color"]}">red border</FONT></TD>'
            "<TD>op whose inputs are on another device</TD></TR>"
        )
    rows += extra
    table = '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">' + "".join(rows)
    dot.node(free_id("legend", {n.id for n in graph.nodes}), f"<{table}</TABLE>>", shape="plaintext", fontsize="9")


def export(graph: Graph, fmt: str, *, options: DrawOptions | None = None, **keywords: Unpack[DrawKeywords]) -> bytes:
    """The graph as bytes in `fmt` (svg, png, pdf, dot, json, html or model-explorer).

    "html" is the interactive viewer as one self-contained file, "model-explorer" the graph
    as Google's Model Explorer reads it (see `graphviz_app.viewer`); both hold the whole graph.

    Args:
        graph: the traced graph.
        fmt: the format.
        options: the drawing options as one record (`DrawOptions`); the defaults when None.
        **keywords: any field of `DrawOptions` (rankdir, legend, max_attr_chars, depth, roll,
            expanded, clusters, color_by, engine, timeout, progress, measured, overlays), replacing
            that field of `options`.

    Raises:
        UnsupportedFormatError: `fmt` is none of those, or `measured` is given for a format other than html.
        DotNotFoundError: the layout program is needed and missing.
        LayoutTimeout: not even the smallest view could be laid out in time (a RenderError).
        RenderError: the layout failed, the viewer's bundle is missing (html), or an option is not
            one `render` takes.
        CollapseError: `depth` or `expanded` is malformed.
        TypeError: a keyword names no option.
    """
    return _export(graph, fmt, DrawOptions.of(options, keywords, caller="export"))


def _export(graph: Graph, fmt: str, o: DrawOptions) -> bytes:
    fmt = fmt.lower().lstrip(".")
    if fmt not in EXPORT_FORMATS:
        raise UnsupportedFormatError(
            f"cannot write format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}"
        )
    _refuse_html_only(o, fmt)
    if fmt in ("html", "model-explorer"):
        # Compiled regions open onto their ops, under module-like names: the viewer folds them as boxes.
        return _viewer_export(show_regions(graph, expanded=region_names(graph)), fmt, o)
    if fmt in ("json", "dot"):
        shown = collapse(graph, depth=o.depth, roll=o.roll, expanded=o.expanded)  # once per drawing
        if fmt == "json":
            return shown.to_json(indent=1).encode()
        return _dot_source(shown, o).encode()
    drawn = _export_drawing(graph, fmt, o)
    for note in drawn.notes:
        # At the line that called export() or save(): _export <- export or save <- that line.
        warnings.warn(note, stacklevel=3)
    return drawn.data


def export_drawing(
    graph: Graph, fmt: str, *, options: DrawOptions | None = None, **keywords: Unpack[DrawKeywords],
) -> Drawing:
    """Lay out `graph` into `fmt` (svg, png or pdf) as `export` does, and say what was drawn.

    Takes what `export` takes and raises what it raises.

    Args:
        graph: the traced graph.
        fmt: svg, png or pdf.
        options: the drawing options as one record (`DrawOptions`); the defaults when None.
        **keywords: any field of `DrawOptions`, replacing that field of `options`.

    Returns:
        A `fallback.Drawing`: the bytes, the graph drawn (folded or cut if the deadline
        asked for it), the engine, the notes (`export` turns them into warnings), and any
        layouts stopped on the way with whether the machine was busy then.
    """
    o = DrawOptions.of(options, keywords, caller="export_drawing")
    _refuse_html_only(o, fmt)
    return _export_drawing(graph, fmt, o)


def _refuse_html_only(o: DrawOptions, fmt: str) -> None:
    """Raise UnsupportedFormatError for an option only the HTML viewer shows, given for another format."""
    if fmt == "html":
        return
    if o.measured is not None:
        raise UnsupportedFormatError(f"a measurement is shown by the HTML viewer only, not in {fmt!r}: "
                                     "write a .html file, or leave out measured=")
    if o.overlays:
        raise UnsupportedFormatError(f"overlays are colourings of the HTML viewer only, not of {fmt!r}: "
                                     "write a .html file, or leave out overlays=")


def _export_drawing(graph: Graph, fmt: str, o: DrawOptions) -> Drawing:
    return lay_out_within(graph, fmt.lower().lstrip("."), view=View(o.depth, o.roll, o.expanded),
                          to_dot=lambda shown: _dot_source(shown, o), engine=o.engine, timeout=o.timeout,
                          clusters=o.clusters, legend=o.legend, progress=o.progress)


def _dot_source(shown: Graph, o: DrawOptions) -> str:
    """The DOT text of a graph already collapsed: compiled regions as boxes, or open where expanded."""
    shown = show_regions(shown, expanded=o.expanded)
    return _draw(shown, rankdir=o.rankdir, legend=o.legend, max_attr_chars=o.max_attr_chars, clusters=o.clusters,
                 color_by=o.color_by).source


def _viewer_export(graph: Graph, fmt: str, o: DrawOptions) -> bytes:
    from ..viewer import page_html, payload, viewer_html
    from ..viewer.model_explorer import model_explorer_json

    if fmt == "html" and any(n.order for n in graph.nodes):  # gradients of gradients: an "order" colouring
        from .order_style import order_viewer_overlay

        return page_html(payload(graph, rankdir=o.rankdir, extra_overlays=[order_viewer_overlay(graph)],
                                 measured=o.measured, user=o.overlays)).encode()
    if fmt == "html":
        return viewer_html(graph, rankdir=o.rankdir, measured=o.measured, overlays=o.overlays).encode()
    return model_explorer_json(graph).encode()


def save(
    graph: Graph | tuple[Graph, Graph], path: str | Path, *, format: str | None = None,
    options: DrawOptions | None = None, labels: tuple[str, str] | None = None, **keywords: Unpack[DrawKeywords],
) -> Path:
    """Write `graph` to `path`, the format chosen by its suffix.

    Args:
        graph: the traced graph; or a pair ``(graph_a, graph_b)`` written to a .html file as two
            synced panes, nodes aligned by `diff()` and coloured by change (`viewer.compare`).
        path: where to write; the suffix (.svg .png .pdf .dot .json .html) picks the format.
        format: the format when not the suffix's, e.g. "model-explorer" for a `.json` path.
        options: the drawing options as one record (`DrawOptions`); the defaults when None.
        **keywords: any field of `DrawOptions` (rankdir, legend, max_attr_chars, depth, roll,
            expanded, clusters, color_by, engine, timeout, progress, measured, overlays), replacing
            that field of `options`; a layout gets 60 s by default, then a smaller view is drawn,
            with a note. `overlays` (a .html file only): your own numbers, ``{"latency_ms": {node id
            or module name: value}}``, each a colouring with a legend, in the details and the module
            table. `measured` (a .html file only): a measurement of the step `graph` was traced
            from, its live bytes charted beside the predicted ones (`m = measure(model, x)`;
            `save(m.graph, "step.html", measured=m.measured)`).
        labels: a pair's names, one per pane (``("fp32", "bf16")``); ("a", "b") when None.

    Returns:
        The path written.

    Raises:
        UnsupportedFormatError: the suffix names no format this writes.
        RenderError: the file cannot be written, the viewer's bundle is missing (.html; the
            message says how to get it), or as for `export`.
        TypeError: a keyword names no option.
    """
    if isinstance(graph, tuple):
        other = sorted(set(keywords) - {"rankdir"}) + (["format"] if format else []) + (["options"] if options else [])
        if other:
            raise TypeError(f"save() of a pair of graphs takes labels= and rankdir= only, not {', '.join(other)}")
        return _save_pair(graph, Path(path), labels, rankdir=keywords.get("rankdir", "TB"))
    if labels is not None:
        raise TypeError("save(labels=...) names the panes of a pair of graphs: pass (graph_a, graph_b)")
    o = DrawOptions.of(options, keywords, caller="save")
    path = Path(path)
    suffix = path.suffix.lower().lstrip(".") if format is None else format
    if suffix not in (FORMATS if format is None else EXPORT_FORMATS):
        raise UnsupportedFormatError(
            f"cannot tell the format of {str(path)!r} from its suffix {path.suffix!r}: "
            f"end the name in one of {', '.join('.' + f for f in FORMATS)}"
        )
    data = _export(graph, suffix, o)
    try:
        path.write_bytes(data)
    except OSError as e:
        raise RenderError(f"cannot write {str(path)!r}: {e.strerror}") from e
    return path


def _save_pair(pair: tuple[Graph, Graph], path: Path, labels: tuple[str, str] | None, *, rankdir: str) -> Path:
    """Two graphs in synced panes, one .html file (the only format a pair is written as)."""
    from ..viewer.compare import compare_html

    if len(pair) != 2:
        raise TypeError(f"save() takes one graph or a pair (graph_a, graph_b), got a tuple of {len(pair)}")
    if path.suffix.lower() != ".html":
        raise UnsupportedFormatError(
            f"a pair of graphs is written as synced panes in an .html file, not {path.suffix or 'no suffix'!r}: "
            "end the name in .html, or draw one picture of the diff with drawing.diff_style.save_diff")
    text = compare_html(pair[0], pair[1], labels=labels or ("a", "b"), rankdir=rankdir)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise RenderError(f"cannot write {str(path)!r}: {e.strerror}") from e
    return path
