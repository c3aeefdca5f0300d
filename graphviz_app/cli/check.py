"""`graphviz-app check`: an expression's gradients against finite differences, or a model's, module by module."""

from __future__ import annotations

import argparse
import json
import sys

from gradcheck.errors import GradcheckError

from ..expr.errors import ExprError
from ..expr.validator import parse
from ..runner import RunnerError
from .failure import EXIT_CHECK_FAILED, EXIT_OK, Failure
from .files import SCRIPT_TARGET
from .model_check import ModulesUsageError, report_text, run_model_check
from .parser import LAYOUT_SECONDS
from .program import composed_program, located, progress_of
from .progress import Deadline
from .worker import CHECK_JOB, run_job

__all__ = ["run_check"]


def run_check(args: argparse.Namespace) -> int:
    if args.modules:
        return _check_modules(args)
    if SCRIPT_TARGET.match(args.target or "") and not (args.var or args.program):
        raise Failure(f"{args.target} names a script: add --modules to check the model its function returns, "
                    "module by module")
    args.eps = 1e-6 if args.eps is None else args.eps
    args.atol = 1e-5 if args.atol is None else args.atol
    args.rtol = 1e-3 if args.rtol is None else args.rtol
    args.kinks = args.kinks or "fail"
    composed = composed_program(args)
    try:
        program = parse(composed.source)
    except ExprError as e:
        raise Failure(composed.locate(e)) from e
    if args.expected:
        try:
            parse(args.expected, known=program.defined)
        except ExprError as e:
            raise Failure(f"in the expected gradient: {e}") from e
    wrt = tuple(n.strip() for n in args.wrt.split(",") if n.strip()) if args.wrt else ()
    request = {"wrt": wrt, "expected": args.expected, "expected_label": "--expected", "device": args.device,
               "dtype": args.dtype, "eps": args.eps, "atol": args.atol, "rtol": args.rtol, "fast": args.fast,
               "modes": ("rev", "fwd") if args.fwd else ("rev",), "order": args.order, "kinks": args.kinks,
               "screen": False if args.every_element else None}
    deadline, progress = Deadline(args.timeout or LAYOUT_SECONDS), progress_of(args)
    try:
        with progress.step("checking the gradients in a worker process"):
            passed, text, report, warned = run_job(CHECK_JOB, composed.source, request, seconds=deadline.left())
    except ExprError as e:
        raise Failure(e.message if e.message.startswith(("in the expected gradient", "in --expected"))
                    else located(composed, e, args)) from e
    except RunnerError as e:
        raise Failure(located(composed, e, args)) from e
    except GradcheckError as e:
        raise Failure(str(e)) from e
    for message in warned:
        print(f"graphviz-app check: warning: {message}", file=sys.stderr)
    print(json.dumps(report, indent=2) if args.json else text)
    return EXIT_OK if passed else EXIT_CHECK_FAILED


def _check_modules(args: argparse.Namespace) -> int:
    try:
        passed, text, report, written = run_model_check(args)
    except ModulesUsageError as e:
        raise Failure(str(e)) from e
    print(report_text(passed, text, report, written, args.json))
    return EXIT_OK if passed else EXIT_CHECK_FAILED
