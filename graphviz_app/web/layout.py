"""Run Graphviz's `dot` on DOT text with a deadline, so a slow layout cannot outlive its job."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import DotNotFoundError, RenderError

__all__ = ["LayoutTimeout", "lay_out"]

_FORMATS = ("svg", "png", "pdf")


class LayoutTimeout(RenderError):
    """`dot` needed longer than it was given and was stopped."""


def lay_out(source: str, formats: Sequence[str], *, timeout: float) -> dict[str, bytes]:
    """Lay `source` out once with `dot` and write it in each of `formats`.

    The page's worker kills a job at its time limit, but not the programs the
    job started; `dot` can spend minutes on some graphs of a thousand nodes,
    so it gets its own deadline and is killed at it.

    Args:
        source: DOT text, e.g. `graphviz_app.renderer.render(graph).source`.
        formats: any of svg, png, pdf.
        timeout: seconds `dot` may run.

    Returns:
        format -> the bytes `dot` wrote.

    Raises:
        LayoutTimeout: `dot` ran past `timeout`.
        DotNotFoundError: `dot` is not installed.
        RenderError: `dot` failed; its message is included.
    """
    unknown = [f for f in formats if f not in _FORMATS]
    if unknown:
        raise RenderError(f"cannot lay out as {', '.join(unknown)}: choose from {', '.join(_FORMATS)}")
    dot = shutil.which("dot")
    if dot is None:
        raise DotNotFoundError(
            "Graphviz's 'dot' program was not found on PATH; install it and restart the server: "
            "'sudo apt-get install graphviz' (Debian/Ubuntu), 'brew install graphviz' (macOS)"
        )
    with tempfile.TemporaryDirectory(prefix="graphviz-app-") as tmp:
        outputs = {f: Path(tmp) / f"graph.{f}" for f in formats}
        command = [dot] + [arg for f, path in outputs.items() for arg in (f"-T{f}", f"-o{path}")]
        try:
            subprocess.run(command, input=source.encode(), capture_output=True, timeout=timeout, check=True)
        except subprocess.TimeoutExpired as e:  # subprocess.run has killed dot already
            raise LayoutTimeout(
                f"Graphviz needed more than {timeout:.0f} s to lay out this graph and was stopped: "
                "lower the node limit, hide saved tensors or attributes in the sidebar, "
                "or draw a smaller part of the program"
            ) from e
        except subprocess.CalledProcessError as e:
            detail = e.stderr.decode(errors="replace").strip()
            raise RenderError(f"Graphviz failed to lay out the graph: {detail}") from e
        return {f: path.read_bytes() for f, path in outputs.items()}
