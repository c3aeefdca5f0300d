"""The options `export`, `export_drawing` and `save` share: one frozen record, built once per call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from ..analysis.memory import MeasuredMemory
from ..errors import RenderError
from .fallback import DEFAULT_TIMEOUT

__all__ = ["RANKDIRS", "COLOR_BY", "DrawOptions", "DrawKeywords", "check_choices"]

RANKDIRS = ("TB", "BT", "LR", "RL")
COLOR_BY = ("device", "gradient", "order", "check")


def check_choices(rankdir: str, color_by: str) -> None:
    """Raise RenderError unless `rankdir` and `color_by` are ones the renderer knows.

    >>> check_choices("LR", "colour")
    Traceback (most recent call last):
    ...
    graphviz_app.errors.RenderError: color_by must be one of device, gradient, order, check, got 'colour'
    """
    if rankdir not in RANKDIRS:
        raise RenderError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    if color_by not in COLOR_BY:
        raise RenderError(f"color_by must be one of {', '.join(COLOR_BY)}, got {color_by!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class DrawOptions:
    """How to draw a graph; `export`, `export_drawing` and `save` take these as keywords or as one record.

    Attributes:
        rankdir: Graphviz direction, one of TB, BT, LR, RL.
        legend: add a box explaining the node shapes and device colours.
        max_attr_chars: cut op attribute lines longer than this.
        depth: draw every module deeper than this as one box (see `collapse.collapse`); shapes JSON too.
        roll: fold repeated sibling modules into one box; shapes JSON too.
        expanded: modules to open although deeper than `depth`; compiled regions are boxes
            too, open when `expanded` names them.
        clusters: frame each module's nodes in a cluster labelled `name: Type`.
        color_by: "device", "gradient" (needs a graph traced with `gradients=True`) or
            "order" (needs one recorded with `record_orders`).
        engine: layout program: "auto" (chosen by the layout's measured cost: dot, or
            graphviz-pure for SVG/PNG when it is predicted faster or dot is missing),
            "dot" or "graphviz-pure".
        timeout: seconds the layout may take (60 by default). A view predicted or found
            to take longer is drawn folded (its largest modules as boxes) or cut to the
            nodes nearest the output, with a note in the picture and a warning; None waits
            for the full view however long it takes.
        progress: called with a line of text at each step of a layout and every few
            seconds while one runs (the CLI prints them on stderr).
        measured: html only: a measurement of the step the graph was traced from
            (`graphviz_app.memory.measure(...).measured`), charted beside the prediction.
        overlays: html only: your own numbers, ``{name: {node id or module name: value}}``, each a
            colouring of the viewer (`graphviz_app.viewer.payload.user_overlays`).

    Raises:
        RenderError: `rankdir` or `color_by` is not one the renderer knows.

    >>> DrawOptions(rankdir="LR", depth=2).depth
    2
    """

    rankdir: str = "TB"
    legend: bool = True
    max_attr_chars: int = 50
    depth: int | None = None
    roll: bool = False
    expanded: frozenset[str] = frozenset()
    clusters: bool = True
    color_by: str = "device"
    engine: str = "auto"
    timeout: float | None = DEFAULT_TIMEOUT
    progress: Callable[[str], None] | None = None
    measured: MeasuredMemory | None = None
    overlays: Mapping[str, Mapping[str, float | None]] | None = None

    def __post_init__(self) -> None:
        check_choices(self.rankdir, self.color_by)

    @classmethod
    def of(cls, options: DrawOptions | None, keywords: Mapping[str, Any], *, caller: str) -> DrawOptions:
        """`options` (or the defaults) with the fields `keywords` name replaced: what `caller` was given.

        Raises:
            TypeError: a keyword names no option (the message lists them), as Python says of any function.
            RenderError: as `DrawOptions`.

        >>> DrawOptions.of(None, {"rankdr": "LR"}, caller="save")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: save() got an unexpected keyword argument 'rankdr'; its drawing options are rankdir, legend, ...
        """
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in keywords if k not in names]
        if unknown:
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}; "
                            f"its drawing options are {', '.join(names)}")
        if options is None:
            return cls(**keywords)
        return dataclasses.replace(options, **keywords) if keywords else options


class DrawKeywords(TypedDict, total=False):
    """`DrawOptions`' fields as keyword arguments (the types of `export(..., **keywords)`)."""

    rankdir: str
    legend: bool
    max_attr_chars: int
    depth: int | None
    roll: bool
    expanded: frozenset[str]
    clusters: bool
    color_by: str
    engine: str
    timeout: float | None
    progress: Callable[[str], None] | None
    measured: MeasuredMemory | None
    overlays: Mapping[str, Mapping[str, float | None]] | None
