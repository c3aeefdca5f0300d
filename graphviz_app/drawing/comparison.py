"""Two graphs side by side in synced panes, as one value: shown in a notebook, saved as one HTML file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.diff import GraphDiff, diff
from ..errors import RenderError, UnsupportedFormatError
from ..model import Graph
from ..viewer.compare import compare_html
from ..viewer.payload import RANKDIRS
from .notebook import pair_mimebundle

__all__ = ["Comparison", "compare"]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two graphs to show in synced panes (made by `compare`): a notebook shows it as the panes;
    `save(path)` writes them to one self-contained .html file; `html()` is that file's text."""

    graph_a: Graph
    graph_b: Graph
    labels: tuple[str, str] = ("a", "b")
    title: str | None = None
    rankdir: str = "TB"

    @property
    def diff(self) -> GraphDiff:
        """What changed from `graph_a` to `graph_b` (`graphviz_app.diff`): what the panes colour."""
        return diff(self.graph_a, self.graph_b)

    def html(self) -> str:
        """The synced panes as the text of one self-contained HTML file (no request)."""
        return compare_html(self.graph_a, self.graph_b, labels=self.labels, title=self.title, rankdir=self.rankdir)

    def save(self, path: str | Path) -> Path:
        """Write the synced panes to `path` (an .html file); returns the path.

        Raises:
            UnsupportedFormatError: `path` does not end in .html.
            RenderError: the file cannot be written, or the viewer's bundle is not built.
        """
        target = Path(path)
        if target.suffix.lower() != ".html":
            raise UnsupportedFormatError(
                f"two graphs are saved as synced panes in an .html file, not {target.suffix or 'no suffix'!r}: "
                "end the name in .html, or draw one picture of the diff with drawing.diff_style.save_diff")
        text = self.html()
        try:
            target.write_text(text, encoding="utf-8")
        except OSError as e:
            raise RenderError(f"cannot write {str(target)!r}: {e.strerror}") from e
        return target

    def __repr__(self) -> str:
        return (f"Comparison({self.labels[0]!r}: {len(self.graph_a.nodes)} nodes, "
                f"{self.labels[1]!r}: {len(self.graph_b.nodes)} nodes)")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """The synced panes (text/html), the diff drawn as one picture (image/svg+xml) and the diff's summary."""
        return self._bundle(standalone=False)

    def _repr_html_(self) -> str:
        """The synced panes alone, always carrying the viewer's script (shown outside a kernel's display)."""
        return self._bundle(standalone=True)["text/html"]

    def _bundle(self, *, standalone: bool) -> dict[str, str]:
        found = self.diff  # aligned once, for the text, the panes and the picture
        text = f"{self!r}\n{str(found).splitlines()[0]}"
        return pair_mimebundle(self.graph_a, self.graph_b, labels=self.labels, title=self.title, rankdir=self.rankdir,
                               text=text, found=found, standalone=standalone)


def compare(graph_a: Graph, graph_b: Graph, *, labels: Sequence[str] = ("a", "b"), title: str | None = None,
            rankdir: str = "TB") -> Comparison:
    """Two graphs side by side in synced panes, aligned by `diff()` and coloured by change.

    The value a notebook cell shows as the panes (pan, zoom, opening a box and selecting act on both);
    ``.save("cmp.html")`` writes the same as ``save((graph_a, graph_b), "cmp.html", labels=labels)``.

    Args:
        graph_a, graph_b: the graphs (from `trace`), the first one on the left.
        labels: one name per pane (``("fp32", "bf16")``), shown as text.
        title: the page's title; "<label a> ⟷ <label b>" when None.
        rankdir: "TB", "LR", "BT" or "RL", for both panes.

    Raises:
        TypeError: a graph is not a `Graph`.
        ValueError: `labels` is not two non-empty texts, or `rankdir` is not one of them.

    >>> from graphviz_app.model import Graph, Node, NodeKind
    >>> g = Graph((Node("n0", NodeKind.OP, "ReluBackward0"),), ())
    >>> compare(g, g, labels=("before", "after"))
    Comparison('before': 1 nodes, 'after': 1 nodes)
    """
    for name, g in (("graph_a", graph_a), ("graph_b", graph_b)):
        if not isinstance(g, Graph):
            raise TypeError(f"compare() takes two Graphs (from trace()): {name} is a {type(g).__name__}")
    if isinstance(labels, str) or len(labels) != 2 or not all(isinstance(x, str) and x.strip() for x in labels):
        raise ValueError(f"labels must be two non-empty texts, one per graph (like ('fp32', 'bf16')), got {labels!r}")
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a text or None, got {type(title).__name__}")
    return Comparison(graph_a, graph_b, (labels[0], labels[1]), title, rankdir)
