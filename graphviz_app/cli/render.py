"""`graphviz-app render`: trace a script, an expression or a saved graph, and draw it in the format asked for."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ..expr.errors import ExprError
from ..expr.limits import Limits
from ..runner import RunnerError
from .failure import EXIT_OK, Failure
from .files import SCRIPT_TARGET, FileProblem, check_output, named_path, read_input
from .parser import LAYOUT_SECONDS
from .program import (
    check_script_path,
    composed_program,
    located,
    progress_of,
    validate_program,
)
from .progress import Deadline, Progress
from .saved import WHOLE_GRAPH_FORMATS, is_saved_graph, load_saved_graph, output_format
from .worker import script_stopped, trace_program, trace_script

if TYPE_CHECKING:
    from ..model import Graph

__all__ = ["run_render"]


def run_render(args: argparse.Namespace) -> int:
    if not args.format:
        _check_suffix(args.output)
    try:
        check_output(Path(args.output))  # a FIFO would block the writer, a device is no picture
    except FileProblem as e:
        raise Failure(str(e)) from e
    color_by = args.color_by or ("gradient" if args.gradients else "device")
    args.gradients = args.gradients or color_by == "gradient"  # gradient colouring needs the replay
    overlays = _overlays(args)
    from ..analysis.collapse import NO_MODULES_NOTE, collapse
    from ..analysis.regions import region_names, show_regions
    from ..analysis.repeats import find_repeats
    from ..drawing.renderer import save

    deadline, progress = Deadline(args.timeout or LAYOUT_SECONDS), progress_of(args)
    if is_saved_graph(args.target):
        traced = load_saved_graph(args.target)
    else:
        traced = _trace_target(args, deadline, progress)
    whole = output_format(args.output, args.format) in WHOLE_GRAPH_FORMATS  # the viewer folds it itself
    with progress.step(f"folding modules (depth {args.depth}{', roll' if args.roll else ''})"):
        graph = traced if whole else collapse(traced, depth=args.depth, roll=args.roll)
    for note in graph.notes:  # truncation, skipped outputs, no module information, ...
        hint = "; here: let SCRIPT.py:FUNCTION return the model and its inputs (return model, x)"
        if not SCRIPT_TARGET.match(args.target or ""):
            hint += ', or build the layers with nn.* modules, e.g. --var "lin=nn.Linear(3, 2)", and call them'
        print(f"graphviz-app render: note: {note}{hint if note == NO_MODULES_NOTE else ''}", file=sys.stderr)
    repeat = find_repeats(traced)  # forward passes the graph holds: a loss accumulated over steps
    if repeat is not None:
        print(f"graphviz-app render: note: {repeat}", file=sys.stderr)
    if color_by == "order":
        _check_orders(graph, args.target)
    if color_by == "check" and not graph.checks:
        raise Failure(f"--color-by check colours by a model check's verdicts, and {args.target} carries none: "
                    "write one with `graphviz-app check SCRIPT.py:FUNC --modules -o check.json`, "
                    "then render check.json")
    seconds = round(deadline.left(), 1)
    try:
        with progress.step(f"drawing {len(graph.nodes):,} nodes (deadline {seconds:g} s)") as say, \
                warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            path = save(graph, args.output, format=args.format, rankdir=args.rankdir, engine=args.engine,
                        color_by=color_by, timeout=seconds, progress=say, overlays=overlays)
    except OSError as e:
        raise Failure(f"cannot write {args.output}: {e.strerror or e}") from e
    except ValueError as e:  # an --overlay naming a node or module the graph does not have
        raise Failure(f"--overlay: {e}") from e
    for w in warned:  # what the drawing folded or cut to meet the deadline, a shrunk PNG, ...
        print(f"graphviz-app render: note: {' '.join(str(w.message).split())}", file=sys.stderr)
    shown = graph
    if whole and graph.regions:  # the viewer opens compiled regions: say what that drew, and what it refused
        shown = show_regions(graph, expanded=region_names(graph))
        for note in shown.notes[len(graph.notes):]:
            print(f"graphviz-app render: note: {note}", file=sys.stderr)
    sizes = (len(shown.nodes), len(shown.edges))
    drawn = (f"; drawn as {sizes[0]:,} nodes, {sizes[1]:,} edges"
             if sizes != (len(traced.nodes), len(traced.edges)) else "")
    held = (f"; holds {repeat.count} forward passes: a {repeat.ops}-op block repeated {repeat.count} times, "
            "see the note" if repeat is not None else "")
    print(f"wrote {path} ({traced.summary(saved_traced=not args.no_saved)}{drawn}{held})")
    if args.gradients:
        _print_gradients(graph)
    return EXIT_OK


def _overlays(args: argparse.Namespace) -> dict[str, dict[str, float | None]] | None:
    """The --overlay files read: NAME -> {node id or module name: number}; None when there are none."""
    if not args.overlay:
        return None
    if output_format(args.output, args.format) != "html":
        raise Failure(f"--overlay colours the interactive viewer: end the output's name in .html, "
                      f"found {args.output!r}")
    found: dict[str, dict[str, float | None]] = {}
    for given in args.overlay:
        name, eq, file = given.rpartition("=")  # the last "=": a name may hold one, a file name seldom does
        if not eq or not name.strip() or not file:
            raise Failure(f"--overlay takes NAME=FILE.json, e.g. --overlay latency_ms=latency.json, got {given!r}")
        try:
            values = json.loads(read_input(Path(file), limit=64 * 2**20, what=f"the --overlay file for {name!r}"))
        except FileProblem as e:
            raise Failure(str(e)) from e
        except json.JSONDecodeError as e:
            raise Failure(f"--overlay {name}: {file} is not JSON ({e.msg} at line {e.lineno}); write "
                        '{"node id or module name": number, ...}') from e
        if not isinstance(values, dict):
            raise Failure(f"--overlay {name}: {file} holds a JSON {type(values).__name__}; write "
                        '{"node id or module name": number, ...}')
        found[name] = values
    return found


def _check_orders(graph: Graph, target: str | None) -> None:
    from ..analysis.orders import has_orders

    if has_orders(graph):
        return
    where = (f"{target} was saved from a graph traced outside record_orders()" if is_saved_graph(target)
             else f"{target or 'the program'} computes no gradient with create_graph=True")
    raise Failure(
        f"--color-by order needs orders of derivative, and {where}: return (or trace) a result of "
        "torch.autograd.grad(y, x, create_graph=True), e.g. a gradient penalty; or use --color-by device"
    )


def _print_gradients(graph: Graph) -> None:
    from ..analysis.gradient_report import gradient_summary

    print(gradient_summary(graph))  # the NaN origin, if any, is among the notes on stderr


def _trace_target(args: argparse.Namespace, deadline: Deadline, progress: Progress) -> Graph:
    script = SCRIPT_TARGET.match(args.target or "")
    options = {"show_saved": not args.no_saved, "max_nodes": args.max_nodes, "gradients": args.gradients}
    if script and not (args.var or args.program):
        check_script_path(Path(script["path"]))
        # The person's own code, in a worker the command can stop at its --timeout.
        with progress.step(f"running {script['func']}() of {script['path']} and tracing it in a worker process"):
            try:
                return trace_script(script["path"], script["func"], args.target, options,
                                    orders=args.color_by == "order", seconds=deadline.left())
            except RunnerError as e:
                raise Failure(script_stopped(args.target, e, args.timeout or LAYOUT_SECONDS)) from e
    problem = named_path(args.target) if args.target and not (args.var or args.program) else None
    if problem is not None:  # a directory or a file given where SCRIPT.py:FUNCTION was meant
        raise Failure(problem)
    composed = composed_program(args)
    validate_program(composed)  # fails fast, before any process starts
    seconds = deadline.left()
    try:  # in a worker process the command can stop: a program never leaves it waiting
        with progress.step(f"running the program and tracing it in a worker process (the program stops at "
                           f"{Limits().max_seconds:g} s)"):
            graph, notes = trace_program(composed.source, {"device": args.device, "dtype": args.dtype, **options},
                                         seconds=seconds)
    except (ExprError, RunnerError) as e:
        raise Failure(located(composed, e, args)) from e
    for note in notes:  # gradients that could not be replayed
        print(f"graphviz-app render: note: {note}", file=sys.stderr)
    return graph


def _check_suffix(output: str) -> None:
    from ..drawing.renderer import FORMATS

    suffix = Path(output).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise Failure(f"cannot write format {suffix or '(no suffix)'!r} ({output}): choose one of "
                    f"{', '.join('.' + f for f in FORMATS)}")
