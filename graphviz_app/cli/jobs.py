"""The command line's programs, run inside an isolated worker: the language's text in, plain data out.

`graphviz-app render EXPR` and `graphviz-app check EXPR` run the program here,
in a worker process the CLI can stop (`cli.isolated`), so a program never
leaves the command waiting: the evaluator stops between operations at its
time limit, costs refuse the ops known to run long, and `hard_deadline` ends
the worker inside any other op that runs past it. Loaded by the worker by
name; torch is imported on use, so the CLI itself stays free of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["trace_job", "check_job"]


def _evaluate(source: str, device: str | None, dtype: str | None) -> Any:
    from ..expr.api import evaluate
    from ..expr.deadline import hard_deadline
    from ..expr.jobs import HARD_GRACE_S
    from ..expr.limits import Limits

    with hard_deadline(Limits().max_seconds + HARD_GRACE_S):
        return evaluate(source, device=device, dtype=dtype, isolated=False)


def trace_job(source: str, device: str | None, dtype: str | None, show_saved: bool, max_nodes: int | None,
              gradients: bool) -> str:
    """Evaluate and trace a program; its graph as JSON (`Graph.from_json` reads it back).

    Raises:
        ExprError: the program is refused or fails.
        TraceError: its output has no graph.
    """
    from ..tracing.big_stack import call_with_large_stack

    def run() -> str:
        from ..tracing.tracer import trace

        ev = _evaluate(source, device, dtype)
        graph = trace(ev.output, ev.params, names=ev.variables, show_saved=show_saved, max_nodes=max_nodes,
                      gradients=gradients)
        return graph.to_json()

    # Freeing a deep autograd graph recurses in C++: on a large stack, as the CLI did in-process.
    return call_with_large_stack(run)


def check_job(source: str, wrt: tuple[str, ...], expected: str | None, device: str | None, dtype: str | None,
              tolerances: tuple[float, float, float], fast: bool, modes: tuple[str, ...] = ("rev",), order: int = 1,
              kinks: str = "fail", screen: bool | None = None) -> tuple[bool, str, dict[str, Any], tuple[str, ...]]:
    """Check the program's gradients: (passed, the report as text, as a dict, the checker's warnings).

    Args:
        wrt: the variables to differentiate; empty for those made with requires_grad=True.
        tolerances: eps, atol, rtol.
        fast, modes, order, kinks, screen: as for `gradcheck.check`.

    Raises:
        ExprError: the program or the expected gradient is refused or fails, or no variable requires grad.
        GradcheckError: the checker cannot check this function.
    """
    import warnings

    from gradcheck import GradcheckWarning, check

    from ..expr.api import expected_function, to_function
    from ..expr.deadline import hard_deadline
    from ..expr.jobs import HARD_GRACE_S
    from ..expr.limits import Limits

    names = list(wrt) or _default_wrt(source, device, dtype)
    options: dict[str, Any] = {"device": device, "dtype": dtype}
    # Each makes a first, checked run of the program (re-runs repeat the same ops).
    with hard_deadline(Limits().max_seconds + HARD_GRACE_S):
        fn, inputs = to_function(source, names, **options)
    with hard_deadline(Limits().max_seconds + HARD_GRACE_S):
        hand = _expected(expected_function(source, expected, names, **options), expected) if expected else None
    eps, atol, rtol = tolerances
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", GradcheckWarning)
        report = check(fn, inputs, expected=hand, eps=eps, atol=atol, rtol=rtol, device=device, fast=fast,
                       modes=modes, order=order, kinks=kinks, screen=screen)
    said = tuple(str(w.message) for w in warned if issubclass(w.category, GradcheckWarning))
    return report.passed, str(report), report.to_dict(), said


def _expected(hand: Callable[..., Any], text: str) -> Callable[..., Any]:
    """The hand gradient, its run-time errors (a wrong count of values) said to be in --expected."""
    from ..expr.errors import ExprError

    def expected(*tensors: Any) -> Any:
        try:
            return hand(*tensors)
        except ExprError as e:
            raise ExprError(f"in --expected ({text}): {e.message}", kind=e.kind) from e

    return expected


def _default_wrt(source: str, device: str | None, dtype: str | None) -> list[str]:
    from ..expr.errors import ExprError
    from ..expr.validator import parse

    evaluation = _evaluate(source, device, dtype)
    inputs = parse(source).inputs
    names = [n for n, t in evaluation.variables.items() if n in inputs and t.requires_grad and t.is_leaf]
    if not names:
        raise ExprError("no variable requires grad: create one with requires_grad=True, or name them with "
                        "--wrt x,y", kind="input")
    return names
