"""The command line: render a graph, check gradients, forecast memory, compare graphs, serve the web page."""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Sequence

from ..errors import DotNotFoundError, GraphvizAppError, RenderError
from ..expr.errors import ExprError
from .check import run_check
from .diff import run_diff
from .failure import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, EXIT_OK, Failure
from .memory import run_memory
from .parser import build_parser
from .render import run_render

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_BAD_INPUT", "EXIT_ENVIRONMENT"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (never raises, except with --traceback)."""
    args = build_parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a module name may hold a lone surrogate: print it, do not crash
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "render": run_render, "check": run_check, "serve": _serve, "diff": run_diff,
        "memory": run_memory,
    }
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("graphviz-app: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one line for people; --traceback for developers
        if args.traceback:
            raise
        message, code = _describe(e)
        print(f"graphviz-app {args.command}: error: {' '.join(message.split())}", file=sys.stderr)
        return code


def _describe(e: Exception) -> tuple[str, int]:
    if isinstance(e, Failure):
        return str(e), e.code
    if isinstance(e, ExprError):
        return str(e), EXIT_BAD_INPUT
    if isinstance(e, (DotNotFoundError,)):
        return str(e), EXIT_ENVIRONMENT
    if isinstance(e, RenderError) and not isinstance(e, ValueError) and not isinstance(e.__cause__, OSError):
        return str(e), EXIT_ENVIRONMENT  # Graphviz failed; an unwritable path is bad input
    if isinstance(e, GraphvizAppError):
        return str(e), EXIT_BAD_INPUT
    return f"unexpected {type(e).__name__}: {e} (run with --traceback for details)", EXIT_ENVIRONMENT


def _serve(args: argparse.Namespace) -> int:
    try:
        from ..web.server import serve
    except ImportError as e:
        raise Failure(f"the web page needs streamlit: pip install 'graphviz-app[web]' ({e})", EXIT_ENVIRONMENT) from e
    return serve(host=args.host, port=args.port)


if __name__ == "__main__":  # `python -m graphviz_app.cli` (the Makefile's `make run`)
    raise SystemExit(main())
