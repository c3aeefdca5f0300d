"""The one way text from a model, a file or a program is written into DOT: a quoted, escaped string."""

from __future__ import annotations

import html
import re
from collections.abc import Container, Iterable

from graphviz.quoting import NoHtml

# Graphviz reads three languages inside a quoted string: DOT's own (`\"` and a
# backslash before a line end), escString's (`\n`, `\l`, `\N`, `\G`, ...) in
# labels, and HTML character entities (`&lt;`) in labels and SVG titles.
# `graphviz.quote()` handles only the first, and not a final backslash, so a
# name ending in one closed the string and the rest was read as DOT
# attributes (`URL=`, `image=`). Every id, label and note goes through
# `dot_string` (or `dot_lines` for a label of several lines), always quoted,
# never an HTML-like `<...>` string.
__all__ = [
    "dot_id", "free_id", "dot_string", "dot_lines", "escape_text", "escaped_string", "graphviz_attr", "html_text",
    "FORBIDDEN_ATTRS",
]

# Attributes that read files or carry links: never set from data (a test checks every drawing).
FORBIDDEN_ATTRS = frozenset({
    "image", "imagepath", "shapefile", "fontpath", "fontnames", "url", "href", "edgeurl", "edgehref",
    "headurl", "headhref", "tailurl", "tailhref", "labelurl", "labelhref", "stylesheet", "target",
    "edgetarget", "headtarget", "tailtarget", "labeltarget", "id",
})

_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x85\u2028\u2029]")
# C0 and C1 controls and DEL, after line breaks are taken: shown as visible stand-ins, never sent raw
# (a NUL ends Graphviz's C strings; the others are not XML 1.0 characters in an SVG).
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _control_picture(match: re.Match[str]) -> str:
    code = ord(match[0])
    if code < 0x20:
        return chr(0x2400 + code)  # U+2400 SYMBOL FOR NULL ... U+241F
    return "\u2421" if code == 0x7F else "\ufffd"  # DEL; a C1 control as the replacement character


def escape_text(text: str, *, line_break: str = "\\n") -> str:
    """`text` as the inside of a DOT quoted string, shown exactly as typed.

    Backslashes are doubled (no escString sequence survives), quotes escaped,
    `&` written as `&amp;` (Graphviz decodes entities in labels), line breaks
    become `line_break` (a centred `\\n` by default), a tab a space, other
    control characters their visible Unicode pictures (NUL as U+2400) and lone
    surrogates U+FFFD, so the text is valid UTF-8 for Graphviz and XML in SVG.

    >>> escape_text('a\\\\"b&c')
    'a\\\\\\\\\\\\"b&amp;c'
    """
    text = _SURROGATE.sub("\ufffd", text)
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;").replace("\t", " ")
    text = _LINE_BREAK.sub(lambda _: line_break, text)
    return _CONTROL.sub(_control_picture, text)


def dot_string(text: str) -> str:
    """`text` as a quoted DOT string, for an id, a label or a note.

    >>> dot_string('m\\\\')
    '"m\\\\\\\\"'
    >>> dot_string('<b>x</b>')
    '"<b>x</b>"'
    """
    return f'"{escape_text(text)}"'




_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})


def dot_id(text: str) -> str:
    """A node or cluster id, or a one-line label: bare when it is a plain DOT name (`n0`), else quoted and escaped.

    Always one whole id: a `:` is part of the name, never a port.

    >>> dot_id("n0"), dot_id("a:b"), dot_id("node")
    ('n0', '"a:b"', '"node"')
    """
    if _PLAIN_ID.fullmatch(text) and text.lower() not in _KEYWORDS:
        return text
    return dot_string(text)


def escaped_string(escaped: str) -> str:
    """A body `escape_text` (or `node_label`) already escaped, as a DOT string (bare when a plain name)."""
    return escaped if _PLAIN_ID.fullmatch(escaped) and escaped.lower() not in _KEYWORDS else f'"{escaped}"'


def free_id(base: str, taken: Container[str]) -> str:
    """`base`, or `base_2`, `base_3`, ...: the first not in `taken`, for a box of our own (the legend, a note).

    A saved graph may name a node "legend": our box must not merge into it.

    >>> free_id("legend", {"n0"}), free_id("legend", {"legend", "legend_2"})
    ('legend', 'legend_3')
    """
    found, k = base, 1
    while found in taken:
        k += 1
        found = f"{base}_{k}"
    return found


def graphviz_attr(text: str) -> str:
    """`text` for an attribute the graphviz package writes itself (`Digraph.graph_attr`).

    `graphviz.quote` passes a string through unchanged when it is a plain name, and otherwise
    quotes it, adding a backslash before each quote not already escaped; the escaped text
    has every quote escaped and never ends in a backslash, and is not read as HTML
    (a `graphviz.nohtml` subclass), so the result is `dot_string(text)`'s.
    """
    return NoHtml(escape_text(text))


def html_text(text: str) -> str:
    """`text` for a cell of an HTML-like label (`<TABLE>...`): entities, no controls, no lone surrogates.

    >>> html_text("<b>&")
    '&lt;b&gt;&amp;'
    """
    return html.escape(_CONTROL.sub(_control_picture, _SURROGATE.sub("\ufffd", text)), quote=True)


def dot_lines(lines: Iterable[str], *, justify: str = "center") -> str:
    """Several lines of text as one quoted label: centred, or left-justified (`justify="left"`)."""
    end = {"center": "\\n", "left": "\\l"}[justify]
    body = end.join(escape_text(line, line_break=end) for line in lines)
    return f'"{body}{end if justify == "left" else ""}"'
