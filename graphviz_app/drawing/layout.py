"""Run a layout program on DOT text: Graphviz's `dot`, or the pip-installable graphviz-pure.

The choice, from benchmarks/README.md: `dot` when it is on PATH (it writes
every format, PDF included) unless the layout's measured cost (`cost.measure`:
nodes, edges and the virtual nodes long edges add) says graphviz-pure will
be faster; graphviz-pure for SVG/PNG when `dot` is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sysconfig
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from ..errors import DotNotFoundError, RenderError
from .cost import LayoutCost

__all__ = [
    "ENGINES", "PURE_FORMATS", "PURE_ABOVE_WORK", "HEARTBEAT_S", "LayoutTimeout", "find_engine", "choose_engine",
    "lay_out",
]

ENGINES = ("auto", "dot", "graphviz-pure")
PURE_FORMATS = ("svg", "png")
# Above this much layout work (LayoutCost.work) graphviz-pure is predicted faster than dot:
# the two fits cross near 2,400 (benchmarks/README.md, "layout-budget").
PURE_ABOVE_WORK = 2_500
HEARTBEAT_S = 5.0  # a running layout reports progress this often

INSTALL_DOT = (
    "Graphviz's 'dot' program was not found on PATH; install it and try again: "
    "'sudo apt-get install graphviz' (Debian/Ubuntu), 'brew install graphviz' (macOS) "
    "or 'conda install -c conda-forge graphviz'; for SVG and PNG only, "
    "'pip install graphviz-pure' also works"
)


class LayoutTimeout(RenderError):
    """A layout ran past its deadline and was stopped.

    `wall_seconds` is how long it ran, `cpu_seconds` how much CPU the layout
    program got in that time (None where the platform does not say), so a
    caller can tell a layout too big for the deadline from one starved by a
    busy machine (`busy`): only the first is worth remembering as a result.
    """

    def __init__(self, message: str, *, engine: str, wall_seconds: float, cpu_seconds: float | None) -> None:
        super().__init__(message)
        self.engine = engine
        self.wall_seconds = wall_seconds
        self.cpu_seconds = cpu_seconds

    @property
    def busy(self) -> bool:
        """Whether the layout got less than half a CPU for its time: other work slowed it down."""
        return self.cpu_seconds is not None and self.cpu_seconds < 0.5 * self.wall_seconds


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


def choose_engine(engine: str, fmt: str, cost: LayoutCost | int) -> str:
    """Which program lays out a graph of this cost (or this many nodes, roughly) into `fmt`.

    "auto": graphviz-pure for SVG/PNG when `dot` is missing or when the cost
    model predicts it faster; otherwise `dot`.
    """
    if engine not in ENGINES:
        raise RenderError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine != "auto":
        return engine
    pure_ok = fmt in PURE_FORMATS and find_engine("graphviz-pure") is not None
    if find_engine("dot") is None:
        return "graphviz-pure" if pure_ok else "dot"
    work = cost.work if isinstance(cost, LayoutCost) else 3 * cost  # a plain count: about 3 work per node
    return "graphviz-pure" if pure_ok and work > PURE_ABOVE_WORK else "dot"


def lay_out(
    source: str, fmt: str, *, engine: str = "auto", node_count: int = 0, timeout: float | None = None,
    cost: LayoutCost | None = None, progress: Callable[[str], None] | None = None,
) -> bytes:
    """Lay out DOT `source` into `fmt` bytes (svg, png or pdf).

    Args:
        source: DOT text.
        fmt: svg, png or pdf.
        engine: "auto", "dot" or "graphviz-pure" (see `choose_engine`).
        node_count: nodes drawn, for messages (and the choice when `cost` is not given).
        timeout: seconds the layout may run, None for no limit.
        cost: the measured cost of the drawing, which "auto" chooses by.
        progress: called with a line every `HEARTBEAT_S` seconds while the layout runs.

    Raises:
        DotNotFoundError: the chosen program is not installed.
        LayoutTimeout: it ran past `timeout` (a RenderError).
        RenderError: it failed or cannot write `fmt`.
    """
    chosen = choose_engine(engine, fmt, cost if cost is not None else node_count)
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
    stdout, stderr, code = _run(command, source.encode(), chosen=chosen, node_count=node_count, timeout=timeout,
                                progress=progress)
    if code != 0:
        raise RenderError(_failure_message(chosen, code, stderr, node_count))
    # cairo draws at most 32,767 pixels a side; dot shrinks bigger bitmaps and only says so on stderr.
    scaled = re.search(rb"Scaling by ([0-9.]+) to fit", stderr)
    if scaled:
        warnings.warn(f"the {fmt.upper()} was shrunk to {float(scaled[1]):.0%} of full size: {chosen} draws "
                      "bitmaps of at most 32,767 pixels a side; save .svg for a full-size picture", stacklevel=3)
    return stdout


def _run(
    command: list[str], data: bytes, *, chosen: str, node_count: int, timeout: float | None,
    progress: Callable[[str], None] | None,
) -> tuple[bytes, bytes, int]:
    """Run the layout program, reporting every HEARTBEAT_S seconds and stopping it at `timeout`."""
    # RUST_BACKTRACE=0: a graphviz-pure panic prints its message, not a backtrace.
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env)
    except OSError as e:
        raise RenderError(f"cannot run {chosen} ({command[0]}): {e.strerror or e}") from e
    given: bytes | None = data
    with proc:
        while True:
            waited = time.monotonic() - start
            left = None if timeout is None else timeout - waited
            step = HEARTBEAT_S if left is None else max(min(HEARTBEAT_S, left), 0.0)
            try:
                out, err = proc.communicate(input=given, timeout=step)
                return out, err, proc.returncode
            except subprocess.TimeoutExpired as e:
                given = None  # sent already: communicate() keeps feeding it
                waited = time.monotonic() - start
                if timeout is not None and waited >= timeout:
                    cpu = _cpu_seconds(proc.pid)
                    proc.kill()
                    proc.communicate()
                    raise _timeout(chosen, node_count, timeout, waited, cpu) from e
                if progress is not None:
                    limit = f" of {timeout:g}" if timeout is not None else ""
                    progress(f"still laying out {node_count:,} nodes with {chosen}: {waited:.0f} s{limit} s")


def _timeout(chosen: str, node_count: int, timeout: float, waited: float, cpu: float | None) -> LayoutTimeout:
    if cpu is not None and cpu < 0.5 * waited:
        why = (f"; it got {cpu:.1f} s of CPU in that time: the machine was busy, so trying again when it is "
               "quieter may succeed")
    elif cpu is not None:
        why = f" ({cpu:.1f} s of CPU: the graph is too big for the time, not the machine too busy)"
    else:
        why = ""
    return LayoutTimeout(
        f"laying out {node_count:,} nodes with {chosen} took over {timeout:.3g} s{why}; draw fewer "
        "nodes (max_nodes, depth), allow more time (timeout) or save .dot / .json instead",
        engine=chosen, wall_seconds=waited, cpu_seconds=cpu,
    )


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a running child has used (Linux /proc), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


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
