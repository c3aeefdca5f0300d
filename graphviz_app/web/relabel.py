"""Time-outs re-labelled by what the machine did to the job, measured: `overtime` (a retry will not help) or `time`.

A job stopped at its time limit with a CPU of its own would stop at the same point
again; one that got a fraction of a CPU (other programs ran) may pass at a quieter
moment. The runner measures the CPU the job got (`IsolatedRunner.last_usage`); where
it cannot, the page's own jobs running beside it are the evidence, and the message says so.
"""

from __future__ import annotations

from ..runner import JobTimeout, JobUsage
from .cache import layout_stopped_by_load
from .results import Failure

__all__ = ["relabel_time_out", "relabel_layout_time_out"]


def relabel_time_out(message: str, peak: int, usage: JobUsage | None) -> JobTimeout:
    """`time` when other programs took the CPU the job needed (measured), `overtime` when it had one to itself."""
    share = None if usage is None else usage.share
    if usage is not None and share is not None:
        if not usage.busy:
            return JobTimeout(
                f"{message}. It had a CPU to itself ({share:.0%} of one, measured over its {usage.wall_s:.1f} s), "
                "so it would stop at the same point again: a retry will not help", kind="overtime")
        return JobTimeout(
            f"{message}. The machine was busy: it got {share:.0%} of a CPU over its {usage.wall_s:.1f} s "
            "(measured), so it may pass at a quieter moment", kind="time")
    # Not measured (no /proc): judged from the page's own jobs only, and said so.
    if peak <= 1:
        return JobTimeout(
            f"{message}. No other program of this page ran beside it (the CPU it got was not measured here), "
            "so it would likely stop at the same point again: a retry will not help", kind="overtime")
    return JobTimeout(
        f"{message}. {peak - 1} other program{'s' if peak > 2 else ''} ran beside it, so it "
        "may pass at a quieter moment", kind="time")


def relabel_layout_time_out(result: Failure, usage: JobUsage | None) -> Failure:
    """A layout stopped at its deadline because the machine was busy: `time` (retry, never cached)."""
    if not layout_stopped_by_load(result) and not (usage is not None and usage.busy and _layout_timed_out(result)):
        return result
    text = result.message
    if "the machine was busy" not in text and usage is not None and usage.share is not None:
        text += (f". The machine was busy: the job got {usage.share:.0%} of a CPU over its {usage.wall_s:.1f} s "
                 "(measured), so it may pass at a quieter moment")
    return Failure(text, kind="time", line=result.line, col=result.col, excerpt=result.excerpt)


def _layout_timed_out(result: Failure) -> bool:
    return result.kind == "render" and " took over " in result.message and "laying out" in result.message
