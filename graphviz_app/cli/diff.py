"""`graphviz-app diff A.json B.json`: what changed between two traced graphs; exit 1 when the structure did."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import GraphvizAppError
from .files import FileProblem, check_output
from .saved import load_saved_graph

__all__ = ["add_diff_parser", "run_diff", "EXIT_SAME", "EXIT_DIFFERENT"]

EXIT_SAME = 0
EXIT_DIFFERENT = 1  # nodes or edges in one graph only: a CI job fails on it

_HELP = """\
Compare two graphs saved as JSON (save(graph, "a.json"), or graphviz-app render ... -o a.json).
Nodes are aligned by module path, op and position among equals, never by node id. Prints the
nodes and edges in one graph only, shape, dtype, saved-bytes, gradient and op-attribute changes
(exponent 2 -> 3; not what graphviz-app noted on a node, such as measured bytes), and a table
of activation bytes by module. Exit 0 when no node or edge is in one graph only (shape, dtype
and byte changes alone exit 0), 1 when one is, 2 on bad input.

examples:
  graphviz-app diff before.json after.json
  graphviz-app diff fp32.json bf16.json -o diff.svg
  graphviz-app diff fp32.json bf16.json -o diff.html
"""


def add_diff_parser(sub: Any) -> None:
    """Register the `diff` subcommand on the CLI's subparsers (`parser.add_subparsers()`)."""
    parser = sub.add_parser("diff", help="compare two graphs saved as JSON; exit 1 when the structure differs",
                            description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", metavar="A.json", help="the first graph (before)")
    parser.add_argument("after", metavar="B.json", help="the second graph (after)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="draw the diff: .svg .png .pdf .dot (one picture, coloured by change), .html (the two "
                        "graphs side by side in synced panes) or .json (the drawn graph with a \"diff\" block)")
    parser.add_argument("--labels", nargs=2, metavar=("A", "B"),
                        help="the two graphs' names in the .html panes (default: the file names)")
    parser.add_argument("--rankdir", default="TB", choices=("TB", "LR", "BT", "RL"), help="layout direction")


def run_diff(args: argparse.Namespace) -> int:
    """Print the diff of the two files (and draw it with -o); the exit code says whether they differ."""
    from ..analysis.diff import diff

    before, after = load_saved_graph(args.before), load_saved_graph(args.after)
    found = diff(before, after)
    print(found)
    if args.output:
        from ..drawing.diff_style import save_diff

        try:
            check_output(Path(args.output))
        except FileProblem as e:
            raise GraphvizAppError(str(e)) from e
        try:
            if Path(args.output).suffix.lower() == ".html":
                path = _save_panes(before, after, Path(args.output), found, args)
            else:
                path = save_diff(before, after, args.output, found, rankdir=args.rankdir, timeout=300.0)
        except OSError as e:
            raise GraphvizAppError(f"cannot write {args.output}: {e.strerror or e}") from e
        print(f"wrote {path}", file=sys.stderr)
    return EXIT_DIFFERENT if found.structural else EXIT_SAME


def _save_panes(before: Any, after: Any, path: Path, found: Any, args: argparse.Namespace) -> Path:
    """The two graphs side by side in synced panes (`viewer.compare`), named by --labels or their files."""
    from ..viewer.compare import compare_html

    labels = tuple(args.labels) if args.labels else (Path(args.before).stem, Path(args.after).stem)
    if labels[0] == labels[1] and not args.labels:
        labels = (args.before, args.after)
    try:
        text = compare_html(before, after, labels=labels, rankdir=args.rankdir, found=found)
    except ValueError as e:
        raise GraphvizAppError(str(e)) from e
    path.write_text(text, encoding="utf-8")
    return path
