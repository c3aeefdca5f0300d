"""`graphviz-app check SCRIPT.py:FUNC --modules`: parse the options, run the check in a worker, print the report.

The model is loaded and checked in a worker process (`graphviz_app.jobs.model_check`),
which the command's --timeout stops.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ..runner import JobRef, RunnerError
from .files import SCRIPT_TARGET, FileProblem, check_output, check_script
from .worker import run_script_job, script_stopped

__all__ = ["add_module_options", "run_model_check", "report_text", "ModulesUsageError", "MODEL_CHECK_JOB",
           "MODEL_CHECK_SECONDS"]

MODEL_CHECK_JOB = JobRef("graphviz_app.jobs.model_check", "model_check_job")
# The default --timeout: a real model's every module checked takes minutes on a CPU.
MODEL_CHECK_SECONDS = 1800.0


_FORMATS = (".html", ".dot", ".json")


class ModulesUsageError(ValueError):
    """A bad argument of `check --modules`; the message says what to give instead."""


def add_module_options(check: argparse.ArgumentParser) -> None:
    """The options of `check SCRIPT.py:FUNC --modules` (--eps, --atol, --rtol, --kinks, --fwd, --order, --json,
    --timeout and --progress are the expression check's, with the model check's defaults)."""
    group = check.add_argument_group(
        "checking a model module by module (SCRIPT.py:FUNC --modules; FUNC returns (model, inputs) as for render)")
    group.add_argument("--modules", action="store_true",
                       help="check the backward of each module call, custom autograd.Function and tensor hook "
                       "of the model FUNC returns, and name the one that is wrong")
    group.add_argument("--strategy", choices=("all", "bisect"), default="all",
                       help="all: every unit, children before parents (default); bisect: the model, then only "
                       "the children of what did not pass")
    group.add_argument("--include", action="append", default=[], metavar="PATTERN",
                       help="check only modules whose path matches (fnmatch, e.g. 'blocks.*'); repeatable")
    group.add_argument("--skip", action="append", default=[], metavar="PATTERN",
                       help="do not check modules whose path matches; repeatable")
    group.add_argument("--max-evaluations", type=int, metavar="N", help="stop after N forward evaluations")
    group.add_argument("--budget-seconds", type=float, metavar="S", help="stop checking after S seconds")
    group.add_argument("--probes", type=int, default=12, metavar="K",
                       help="random directions per side (default 12)")
    group.add_argument("--output", "-o", metavar="FILE.html|FILE.dot|FILE.json",
                       help="also draw the model's graph coloured by verdict (the culprit red)")


def run_model_check(args: argparse.Namespace) -> tuple[bool, str, dict[str, Any], str | None]:
    """Check the script's model in the worker: (passed, report text, report dict, drawing written or None).

    Raises:
        ModulesUsageError: a bad argument, or a script stopped by --timeout, with a message for the person.
        Exception: the job's own errors (TraceError, ModelCheckError), as raised.
    """
    script = SCRIPT_TARGET.match(args.target or "")
    if script is None:
        raise ModulesUsageError(f"--modules checks a model: give SCRIPT.py:FUNC, where FUNC returns (model, inputs); "
                         f"got {args.target!r}")
    if args.var or args.program or args.expected or args.wrt:
        raise ModulesUsageError("--modules checks the model FUNC returns: --var, --program, --expected and --wrt "
                         "belong to an expression's check")
    if args.output:
        if Path(args.output).suffix.lower() not in _FORMATS:
            raise ModulesUsageError(f"--output {args.output}: choose a .html (the interactive viewer), .dot or .json "
                                    "(the graph carrying the verdicts) file")
        try:
            check_output(Path(args.output))
        except FileProblem as e:
            raise ModulesUsageError(str(e)) from e
    try:
        check_script(Path(script["path"]))
    except FileProblem as e:
        raise ModulesUsageError(str(e)) from e
    request = {
        "strategy": args.strategy, "include": tuple(args.include), "skip": tuple(args.skip),
        "max_evaluations": args.max_evaluations, "seconds": args.budget_seconds, "probes": args.probes,
        "eps": 1e-6 if args.eps is None else args.eps, "atol": 1e-7 if args.atol is None else args.atol,
        "rtol": 1e-5 if args.rtol is None else args.rtol, "kinks": args.kinks or "pass",
        "modes": ("rev", "fwd") if args.fwd else ("rev",), "order": args.order,
        "output": None if args.output is None else str(Path(args.output).resolve()),
        "progress": bool(args.progress),
    }
    timeout = args.timeout or MODEL_CHECK_SECONDS
    try:
        return run_script_job(MODEL_CHECK_JOB, script["path"], script["func"], args.target, request, os.getcwd(),
                              seconds=timeout)
    except RunnerError as e:
        raise ModulesUsageError(script_stopped(args.target, e, timeout)) from e


def report_text(passed: bool, text: str, report: dict[str, Any], written: str | None, as_json: bool) -> str:
    """What the command prints: the report (or its JSON), and the drawing it wrote."""
    if as_json:
        return json.dumps(report, indent=2)
    return text + (f"\nwrote {written}" if written else "")
