"""Run a layout program on DOT text: Graphviz's `dot`, or the pip-installable graphviz-pure.

The decision, from benchmarks/README.md: `dot` when it is on PATH (it writes
every format, PDF included); graphviz-pure for SVG/PNG when `dot` is missing,
and for graphs above BIG_GRAPH_NODES nodes, where it lays out 1.6-2.8x faster.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sysconfig
import warnings
from pathlib import Path

from ..errors import DotNotFoundError, RenderError

__all__ = ["ENGINES", "BIG_GRAPH_NODES", "PURE_FORMATS", "find_engine", "choose_engine", "lay_out"]

ENGINES = ("auto", "dot", "graphviz-pure")
BIG_GRAPH_NODES = 2000
PURE_FORMATS = ("svg", "png")

INSTALL_DOT = (
    "Graphviz's 'dot' program was not found on PATH; install it and try again: "
    "'sudo apt-get install graphviz' (Debian/Ubuntu), 'brew install graphviz' (macOS) "
    "or 'conda install -c conda-forge graphviz'; for SVG and PNG only, "
    "'pip install graphviz-pure' also works"
)


def find_engine(name: str) -> str | None:
    """The path of the layout program `name`, or None when it is not installed.

    graphviz-pure is also looked for beside this Python (a virtualenv's bin/),
    which is not on PATH when the environment is not activated.
    """
    found = shutil.which(name)
    if found is None and name == "graphviz-pure":
        beside = Path(sysconfig.get_path("scripts")) / name
        found = str(beside) if beside.is_file() else None
    return found


def choose_engine(engine: str, fmt: str, node_count: int) -> str:
    """Which program lays out a graph of `node_count` nodes into `fmt`."""
    if engine not in ENGINES:
        raise RenderError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine != "auto":
        return engine
    pure_ok = fmt in PURE_FORMATS and find_engine("graphviz-pure") is not None
    if find_engine("dot") is None:
        return "graphviz-pure" if pure_ok else "dot"
    return "graphviz-pure" if pure_ok and node_count > BIG_GRAPH_NODES else "dot"


def lay_out(
    source: str, fmt: str, *, engine: str = "auto", node_count: int = 0, timeout: float | None = None
) -> bytes:
    """Lay out DOT `source` into `fmt` bytes (svg, png or pdf).

    Raises:
        DotNotFoundError: the chosen program is not installed.
        RenderError: it failed, timed out, or cannot write `fmt`.
    """
    chosen = choose_engine(engine, fmt, node_count)
    if chosen == "graphviz-pure" and fmt not in PURE_FORMATS:
        raise RenderError(
            f"graphviz-pure cannot write {fmt.upper()}; choose .svg or .png, or install "
            "Graphviz's dot for PDF"
        )
    exe = find_engine(chosen)
    if exe is None:
        raise DotNotFoundError(
            INSTALL_DOT if chosen == "dot" else "graphviz-pure is not installed: pip install graphviz-pure"
        )
    command = [exe, f"-T{fmt}"] if chosen == "dot" else [exe, "-Kdot", f"-T{fmt}"]
    try:
        # RUST_BACKTRACE=0: a graphviz-pure panic prints its message, not a backtrace.
        env = {**os.environ, "RUST_BACKTRACE": "0"}
        done = subprocess.run(command, input=source.encode(), capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise RenderError(
            f"laying out {node_count} nodes with {chosen} took over {timeout:g} s; draw fewer "
            "nodes (max_nodes) or save .dot / .json instead"
        ) from e
    except OSError as e:
        raise RenderError(f"cannot run {chosen} ({exe}): {e.strerror or e}") from e
    if done.returncode != 0:
        raise RenderError(_failure_message(chosen, done.returncode, done.stderr, node_count))
    # cairo draws at most 32,767 pixels a side; dot shrinks bigger bitmaps and only says so on stderr.
    scaled = re.search(rb"Scaling by ([0-9.]+) to fit", done.stderr)
    if scaled:
        warnings.warn(f"the {fmt.upper()} was shrunk to {float(scaled[1]):.0%} of full size: {chosen} draws "
                      "bitmaps of at most 32,767 pixels a side; save .svg for a full-size picture", stacklevel=3)
    return done.stdout


_PANIC_NEW = re.compile(r"panicked at [^\n]*:\n(?P<msg>[^\n]+)")  # Rust >= 1.73: message on the next line
_PANIC_OLD = re.compile(r"panicked at '(?P<msg>.*?)', ")


def _failure_message(chosen: str, code: int, stderr: bytes, node_count: int) -> str:
    """One line for people: no Rust backtraces, and what to do after a crash."""
    text = stderr.decode(errors="replace").strip()
    other = "graphviz-pure" if chosen == "dot" else "dot"
    advice = (f"draw fewer nodes (--max-nodes / max_nodes), try engine {other!r}, "
              "or save .dot / .json instead")
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = (" (Graphviz's dot overflows its stack on long chains of operations)"
               if chosen == "dot" and -code == signal.SIGSEGV else "")
        return f"{chosen} crashed ({name}) laying out {node_count} nodes{why}: {advice}"
    panic = _PANIC_NEW.search(text) or _PANIC_OLD.search(text)
    if panic is not None:
        return f"{chosen} crashed laying out {node_count} nodes ({panic['msg'].strip()}): {advice}"
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("note:", "stack backtrace:", "  "))]
    detail = "; ".join(lines[:3]) if lines else f"exit code {code}"
    return f"{chosen} failed to lay out the graph: {detail}"
