"""Whether the PNG download can be drawn in time, and whether Graphviz will shrink it; no Streamlit.

Measured (benchmarks/bench_png.py): for 1,499 nodes the layout takes 0.6 s and
cairo's rasterising 18 s, so the time goes into pixels, not the layout. The
pixel count is known before drawing: the SVG layout (the PNG job lays the graph
out first) carries the picture's size in points, and `dot -Tpng` draws 96 pixels per inch.
Graphviz's cairo renderer refuses bitmaps over 32,767 pixels a side and
scales the whole picture down ("Scaling by 0.54 to fit") without failing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_BITMAP_SIDE", "PNG_MAX_MEGAPIXELS", "PngPlan", "png_plan", "png_refusal"]

MAX_BITMAP_SIDE = 32767  # cairo's limit; Graphviz scales larger pictures down to it
# About 0.05 s per megapixel on this machine under load: 100 MPx stays well
# inside the worker's 15 s time limit, with the layout and a busy machine.
PNG_MAX_MEGAPIXELS = 100.0
_PX_PER_PT = 96 / 72
_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([0-9.]+)pt"[^>]*?\bheight="([0-9.]+)pt"', re.S)


@dataclass(frozen=True, slots=True)
class PngPlan:
    """The PNG `dot -Tpng` would draw: its size in pixels and the factor Graphviz shrinks it by."""

    width: int
    height: int
    scale: float

    @property
    def megapixels(self) -> float:
        return self.width * self.height / 1e6


def png_plan(svg: str) -> PngPlan | None:
    """The PNG of the graph drawn in `svg`, or None when the SVG names no size.

    >>> png_plan('<svg width="30000pt" height="750pt">')  # doctest: +ELLIPSIS
    PngPlan(width=32767, height=819, scale=0.8191...)
    """
    found = _SIZE.search(svg[:2000])
    if found is None:
        return None
    width, height = (float(v) * _PX_PER_PT for v in found.groups())
    scale = min(1.0, MAX_BITMAP_SIDE / max(width, height, 1.0))
    return PngPlan(round(width * scale), round(height * scale), scale)


def png_refusal(plan: PngPlan | None, *, node_count: int, time_limit: float) -> str | None:
    """Why no PNG is offered for this graph, with what to do; None when it is."""
    if plan is None or plan.megapixels <= PNG_MAX_MEGAPIXELS:
        return None
    return (
        f"No PNG for this graph: {node_count:,} nodes make a {plan.width:,} × {plan.height:,} pixel "
        f"picture ({plan.megapixels:,.0f} megapixels), and drawing those pixels takes longer than the "
        f"{time_limit:g} s a job may run (the layout itself is quick). Download the SVG instead (full "
        "size, any browser opens it), or lower the node limit in the sidebar"
    )
