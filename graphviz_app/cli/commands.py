"""The command line: render a graph, check gradients, serve the web page."""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gradcheck.errors import GradcheckError

from ..drawing.layout import PURE_ABOVE_WORK
from ..errors import DotNotFoundError, GraphvizAppError, RenderError
from ..expr.compose import Composed, compose
from ..expr.errors import ExprError
from ..expr.help import LANGUAGE_HELP
from ..expr.limits import Limits
from ..expr.validator import parse, validate
from ..runner import RunnerError
from .diff import add_diff_parser, run_diff
from .files import FileProblem, check_output, check_script, named_path, read_input, read_program
from .memory import add_memory_parser, run_memory
from .model_check import ModulesUsageError, add_module_options, report_text, run_model_check
from .numbers import LONGEST_TIMEOUT_S, device, real, whole
from .progress import Deadline, Progress
from .saved import WHOLE_GRAPH_FORMATS, is_saved_graph, load_saved_graph, output_format
from .worker import CHECK_JOB, run_job, script_stopped, trace_program, trace_script

if TYPE_CHECKING:
    from ..model import Graph

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_BAD_INPUT", "EXIT_ENVIRONMENT"]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3

# The default --timeout: the whole command (the program, tracing, the layout). Without
# one, a graph that `dot` or graphviz-pure cannot finish (a 1,000-step chain on a
# large stack) leaves the CLI waiting.
LAYOUT_SECONDS = 300.0

_SCRIPT = re.compile(r"^(?P<path>.+\.py):(?P<func>[A-Za-z_][A-Za-z0-9_]*)$")

_EXAMPLES = """\
examples:
  graphviz-app render "((x+2)**2+3).mean()" --var "x=torch.arange(3., requires_grad=True)" -o graph.svg
  graphviz-app render model.py:build -o graph.png --rankdir LR --no-saved
  graphviz-app render model.py:build -o model.svg --depth 2 --roll
  graphviz-app render model.py:build -o model.html          (the interactive viewer, one file)
  graphviz-app render g.json -o g.html                      (a graph saved with save(graph, "g.json"))
  graphviz-app render g.json -o me.json --format model-explorer
  graphviz-app render "enc(x).sum()" --var "enc=nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 6)" \\
      --var "x=torch.randn(3, 2, 8)" -o enc.svg --depth 3 --roll
  graphviz-app check "((x+2)**2+3).mean()" --var "x=torch.arange(3., requires_grad=True)" --expected "2*(x+2)/3"
  graphviz-app check "custom.square_wrong_backward(x).sum()" --var "x=torch.arange(3.)" --wrt x
  graphviz-app check "torch.relu(x).sum()" --var "x=torch.tensor([0., 1., -1.], requires_grad=True)" \
      --expected "(x > 0).double()" --kinks warn
  graphviz-app check "torch.tanh(x).sum()" --var "x=torch.randn(4, requires_grad=True)" --fwd --order 2
  graphviz-app memory model.py:build --batch 1,8,32 --dtype bfloat16 --device meta --budget 16GiB --optimizer adam
  graphviz-app serve --port 8501

exit codes: 0 success, 1 the gradient check failed, 2 bad input (arguments, files,
expressions, scripts), 3 the environment failed (Graphviz or streamlit missing, ...).
"""


_RENDER_DESCRIPTION = """\
Draw the autograd graph of SCRIPT.py:FUNCTION, of an expression, or of a graph saved as JSON.
FUNCTION takes no arguments and returns one of:
  the output tensor(s)                       return loss
  the output and what names its leaves       return loss, model
                                             return loss, model.named_parameters()
  a model and its inputs, run under record() return model, x
  so its modules can be drawn                return model, (x, y)
  ... with keyword inputs                    return model, (x,), {'labels': y}
  a dict, 'args', 'kwargs' and 'loss' optional (with 'loss' the graph drawn is of loss(output)):
      return {'model': model, 'args': (x,), 'kwargs': {...}, 'loss': lambda out: out.loss}
Notes on the graph go to stderr."""


class _Fail(Exception):
    """A failure already worded for people, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage block: the person asked for something specific.
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (its --help documents the expression language)."""
    parser = _Parser(
        prog="graphviz-app",
        description="See, and check, PyTorch's autograd graph.",
        epilog=_EXAMPLES + "\n" + LANGUAGE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--traceback", action="store_true", help="show Python tracebacks on errors (for debugging)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{render,check,memory,diff,serve}",
                                parser_class=_Parser)
    render = sub.add_parser(
        "render", help="draw the graph of a script's function or of an expression",
        description=_RENDER_DESCRIPTION,
        epilog=LANGUAGE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    render.add_argument("target", nargs="?", metavar="SCRIPT.py:FUNCTION | EXPRESSION | SAVED.json")
    render.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="output file: .svg .png .pdf .dot .json or .html (the interactive viewer)")
    render.add_argument("--format", choices=("model-explorer",),
                        help="write this format whatever the output's suffix: model-explorer "
                        "(Google's Model Explorer JSON)")
    render.add_argument("--rankdir", default="TB", choices=("TB", "LR", "BT", "RL"),
                        help="layout direction (default TB)")
    render.add_argument("--no-saved", action="store_true", help="hide the tensors ops saved for backward")
    render.add_argument("--max-nodes", type=whole(1), metavar="N", help="stop drawing after N nodes")
    render.add_argument("--depth", type=whole(0), metavar="N",
                        help="draw every module deeper than N as one box (0: the root's children; needs a "
                        "graph recorded with its modules, e.g. a function returning (model, inputs))")
    render.add_argument("--roll", action="store_true",
                        help="fold consecutive identical sibling modules into one box marked ×k")
    render.add_argument("--gradients", action="store_true",
                        help="replay backward: colour edges by gradient norm, mark where NaN/Inf first appears")
    render.add_argument("--color-by", choices=("device", "gradient", "order", "check"),
                        help="what fills the nodes: device (the default), gradient (as --gradients), order "
                        "(of derivative: the forward's ops, the backward's made by a create_graph=True "
                        "gradient, the backward of that; the function runs inside record_orders()), or check "
                        "(a saved graph written by `check --modules -o FILE.json`: each node by its module's verdict)")
    render.add_argument("--overlay", action="append", default=[], metavar="NAME=FILE.json",
                        help="colour the interactive viewer (.html) by your own numbers: FILE.json holds "
                        "{node id or module name: number}, shown as the colouring NAME (repeatable)")
    _time_options(render)
    render.add_argument("--engine", default="auto", choices=("auto", "dot", "graphviz-pure"),
                        help="layout program (default auto: dot; graphviz-pure for SVG/PNG when dot is "
                        "missing, or when the layout's work, nodes + edges + 2 x the ranks long edges cross, "
                        f"is above {PURE_ABOVE_WORK:,}, where graphviz-pure is measured faster)")
    _program_options(render)
    check = sub.add_parser(
        "check", help="check an expression's gradients (or a model's, module by module) against finite differences",
        description="Check autograd's gradients of an expression against finite differences, and "
        "optionally against a hand-derived gradient; with SCRIPT.py:FUNC --modules, the backward of every module "
        "of the model FUNC returns. Exit 0 when it passes, 1 when it fails.",
        epilog=LANGUAGE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("target", nargs="?", metavar="EXPRESSION | SCRIPT.py:FUNC")
    check.add_argument("--expected", metavar="EXPR",
                       help="hand-derived gradient, e.g. \"2*(x+2)/3\" (one per --wrt name, comma-separated)")
    check.add_argument("--wrt", metavar="NAMES",
                       help="variables to differentiate, comma-separated (default: those with requires_grad=True)")
    check.add_argument("--eps", type=real(0.0, low_open=True), help="finite-difference step (default 1e-6)")
    check.add_argument("--atol", type=real(0.0), help="absolute tolerance (default 1e-5; 1e-7 with --modules)")
    check.add_argument("--rtol", type=real(0.0), help="relative tolerance (default 1e-3; 1e-5 with --modules)")
    check.add_argument("--fast", action="store_true", help="fast mode: random projections instead of full Jacobians")
    check.add_argument("--fwd", action="store_true",
                       help="also check forward mode (jvp) against finite differences and reverse mode")
    check.add_argument("--order", type=whole(1, 2), default=1, metavar="{1,2}",
                       help="2: also check second order (double backward, Hessian-vector products); default 1")
    check.add_argument("--kinks", choices=("fail", "warn", "pass"),
                       help="at a verified kink (relu at 0) where each gradient is a valid one-sided or "
                       "sub-gradient: fail (default; pass with --modules), pass with a warning on stderr, or pass "
                       "with a note")
    check.add_argument("--every-element", action="store_true",
                       help="compare every Jacobian element even when all of the screen's random probes agree "
                       "(by default a Jacobian too large to list is screened first)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    _time_options(check)
    _program_options(check)
    add_module_options(check)
    add_memory_parser(sub)
    serve = sub.add_parser("serve", help="start the web page", description="Start the web page (needs streamlit).")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=whole(1, 65535), default=8501, help="TCP port (default 8501)")
    add_diff_parser(sub)
    return parser


def _time_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=real(0.0, LONGEST_TIMEOUT_S, low_open=True), metavar="SECONDS",
                        help=f"the most the command may take: the program, tracing, checking and the layout "
                        f"(default {LAYOUT_SECONDS:g}); a program in the language stops at "
                        f"{Limits().max_seconds:g} s on its own")
    parser.add_argument("--progress", action="store_true",
                        help="say on stderr which step is running once it takes over a second (the default "
                        "only when stderr is a terminal)")


def _program_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--var", action="append", default=[], metavar="NAME=EXPR",
                        help="define a variable, e.g. --var \"x=torch.arange(3., requires_grad=True)\" (repeatable)")
    parser.add_argument("--program", metavar="FILE",
                        help="read definitions (and the expression, if not given) from FILE")
    parser.add_argument("--device", metavar="DEVICE", type=device("cpu", "cuda", "auto"),
                        help="default device for tensors: cpu, cuda, cuda:N or auto")
    parser.add_argument("--dtype", metavar="DTYPE", choices=("float32", "float64", "float16", "bfloat16"),
                        help="default floating dtype for tensors: float32, float64, float16, bfloat16")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (never raises, except with --traceback)."""
    args = build_parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a module name may hold a lone surrogate: print it, do not crash
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "render": _render, "check": _check, "serve": _serve, "diff": run_diff,
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
    if isinstance(e, _Fail):
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


def _render(args: argparse.Namespace) -> int:
    if not args.format:
        _check_suffix(args.output)
    try:
        check_output(Path(args.output))  # a FIFO would block the writer, a device is no picture
    except FileProblem as e:
        raise _Fail(str(e)) from e
    color_by = args.color_by or ("gradient" if args.gradients else "device")
    args.gradients = args.gradients or color_by == "gradient"  # gradient colouring needs the replay
    overlays = _overlays(args)
    from ..analysis.collapse import NO_MODULES_NOTE, collapse
    from ..analysis.regions import region_names, show_regions
    from ..analysis.repeats import find_repeats
    from ..drawing.renderer import save

    deadline, progress = Deadline(args.timeout or LAYOUT_SECONDS), _progress(args)
    if is_saved_graph(args.target):
        traced = load_saved_graph(args.target)
    else:
        traced = _trace_target(args, deadline, progress)
    whole = output_format(args.output, args.format) in WHOLE_GRAPH_FORMATS  # the viewer folds it itself
    with progress.step(f"folding modules (depth {args.depth}{', roll' if args.roll else ''})"):
        graph = traced if whole else collapse(traced, depth=args.depth, roll=args.roll)
    for note in graph.notes:  # truncation, skipped outputs, no module information, ...
        hint = "; here: let SCRIPT.py:FUNCTION return the model and its inputs (return model, x)"
        if not _SCRIPT.match(args.target or ""):
            hint += ', or build the layers with nn.* modules, e.g. --var "lin=nn.Linear(3, 2)", and call them'
        print(f"graphviz-app render: note: {note}{hint if note == NO_MODULES_NOTE else ''}", file=sys.stderr)
    repeat = find_repeats(traced)  # forward passes the graph holds: a loss accumulated over steps
    if repeat is not None:
        print(f"graphviz-app render: note: {repeat}", file=sys.stderr)
    if color_by == "order":
        _check_orders(graph, args.target)
    if color_by == "check" and not graph.checks:
        raise _Fail(f"--color-by check colours by a model check's verdicts, and {args.target} carries none: "
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
        raise _Fail(f"cannot write {args.output}: {e.strerror or e}") from e
    except ValueError as e:  # an --overlay naming a node or module the graph does not have
        raise _Fail(f"--overlay: {e}") from e
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
        raise _Fail(f"--overlay colours the interactive viewer: end the output's name in .html, found {args.output!r}")
    found: dict[str, dict[str, float | None]] = {}
    for given in args.overlay:
        name, eq, file = given.rpartition("=")  # the last "=": a name may hold one, a file name seldom does
        if not eq or not name.strip() or not file:
            raise _Fail(f"--overlay takes NAME=FILE.json, e.g. --overlay latency_ms=latency.json, got {given!r}")
        try:
            values = json.loads(read_input(Path(file), limit=64 * 2**20, what=f"the --overlay file for {name!r}"))
        except FileProblem as e:
            raise _Fail(str(e)) from e
        except json.JSONDecodeError as e:
            raise _Fail(f"--overlay {name}: {file} is not JSON ({e.msg} at line {e.lineno}); write "
                        '{"node id or module name": number, ...}') from e
        if not isinstance(values, dict):
            raise _Fail(f"--overlay {name}: {file} holds a JSON {type(values).__name__}; write "
                        '{"node id or module name": number, ...}')
        found[name] = values
    return found


def _check_orders(graph: Graph, target: str | None) -> None:
    from ..analysis.orders import has_orders

    if has_orders(graph):
        return
    where = (f"{target} was saved from a graph traced outside record_orders()" if is_saved_graph(target)
             else f"{target or 'the program'} computes no gradient with create_graph=True")
    raise _Fail(
        f"--color-by order needs orders of derivative, and {where}: return (or trace) a result of "
        "torch.autograd.grad(y, x, create_graph=True), e.g. a gradient penalty; or use --color-by device"
    )


def _progress(args: argparse.Namespace) -> Progress:
    return Progress(f"graphviz-app {args.command}", enabled=True if args.progress else None)


def _print_gradients(graph: Graph) -> None:
    from ..analysis.gradient_report import gradient_summary

    print(gradient_summary(graph))  # the NaN origin, if any, is among the notes on stderr


def _trace_target(args: argparse.Namespace, deadline: Deadline, progress: Progress) -> Graph:
    script = _SCRIPT.match(args.target or "")
    options = {"show_saved": not args.no_saved, "max_nodes": args.max_nodes, "gradients": args.gradients}
    if script and not (args.var or args.program):
        _check_script(Path(script["path"]))
        # The person's own code, in a worker the command can stop at its --timeout.
        with progress.step(f"running {script['func']}() of {script['path']} and tracing it in a worker process"):
            try:
                return trace_script(script["path"], script["func"], args.target, options,
                                    orders=args.color_by == "order", seconds=deadline.left())
            except RunnerError as e:
                raise _Fail(script_stopped(args.target, e, args.timeout or LAYOUT_SECONDS)) from e
    problem = named_path(args.target) if args.target and not (args.var or args.program) else None
    if problem is not None:  # a directory or a file given where SCRIPT.py:FUNCTION was meant
        raise _Fail(problem)
    composed = _compose(args)
    _validate(composed)  # fails fast, before any process starts
    seconds = deadline.left()
    try:  # in a worker process the command can stop: a program never leaves it waiting
        with progress.step(f"running the program and tracing it in a worker process (the program stops at "
                           f"{Limits().max_seconds:g} s)"):
            graph, notes = trace_program(composed.source, {"device": args.device, "dtype": args.dtype, **options},
                                         seconds=seconds)
    except (ExprError, RunnerError) as e:
        raise _Fail(_located(composed, e, args)) from e
    for note in notes:  # gradients that could not be replayed
        print(f"graphviz-app render: note: {note}", file=sys.stderr)
    return graph


def _validate(composed: Composed) -> None:
    try:
        validate(composed.source)
    except ExprError as e:
        raise _Fail(composed.locate(e)) from e


def _located(composed: Composed, e: ExprError | RunnerError, args: argparse.Namespace) -> str:
    """The worker's error, positioned in the part the person typed; a time-out says which limit."""
    if isinstance(e, RunnerError):
        text = e.message
    else:
        text = composed.locate(e)
    if e.kind == "time" and getattr(e, "line", None) is None:
        text += (f" (the program may run {Limits().max_seconds:g} s, Limits.max_seconds; the whole command "
                 f"--timeout {args.timeout or LAYOUT_SECONDS:g} s)")
    return text


def _check_suffix(output: str) -> None:
    from ..drawing.renderer import FORMATS

    suffix = Path(output).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise _Fail(f"cannot write format {suffix or '(no suffix)'!r} ({output}): choose one of "
                    f"{', '.join('.' + f for f in FORMATS)}")


def _compose(args: argparse.Namespace) -> Composed:
    text = None
    if args.program:
        try:  # at most the limit + 1 characters: --program /dev/zero is refused, not read
            text = read_program(Path(args.program), limit=Limits().max_source_chars)
        except FileProblem as e:
            raise _Fail(str(e)) from e
    try:
        return compose(args.target, definitions=args.var, program=text, program_name=args.program or "the program")
    except ExprError as e:
        raise _Fail(e.message) from e


def _check_script(path: Path) -> None:
    try:
        check_script(path)  # a directory, a FIFO or a device is refused, never opened
    except FileProblem as e:
        raise _Fail(str(e)) from e


def _check(args: argparse.Namespace) -> int:
    if args.modules:
        return _check_modules(args)
    if _SCRIPT.match(args.target or "") and not (args.var or args.program):
        raise _Fail(f"{args.target} names a script: add --modules to check the model its function returns, "
                    "module by module")
    args.eps = 1e-6 if args.eps is None else args.eps
    args.atol = 1e-5 if args.atol is None else args.atol
    args.rtol = 1e-3 if args.rtol is None else args.rtol
    args.kinks = args.kinks or "fail"
    composed = _compose(args)
    try:
        program = parse(composed.source)
    except ExprError as e:
        raise _Fail(composed.locate(e)) from e
    if args.expected:
        try:
            parse(args.expected, known=program.defined)
        except ExprError as e:
            raise _Fail(f"in the expected gradient: {e}") from e
    wrt = tuple(n.strip() for n in args.wrt.split(",") if n.strip()) if args.wrt else ()
    request = {"wrt": wrt, "expected": args.expected, "expected_label": "--expected", "device": args.device,
               "dtype": args.dtype, "eps": args.eps, "atol": args.atol, "rtol": args.rtol, "fast": args.fast,
               "modes": ("rev", "fwd") if args.fwd else ("rev",), "order": args.order, "kinks": args.kinks,
               "screen": False if args.every_element else None}
    deadline, progress = Deadline(args.timeout or LAYOUT_SECONDS), _progress(args)
    try:
        with progress.step("checking the gradients in a worker process"):
            passed, text, report, warned = run_job(CHECK_JOB, composed.source, request, seconds=deadline.left())
    except ExprError as e:
        raise _Fail(e.message if e.message.startswith(("in the expected gradient", "in --expected"))
                    else _located(composed, e, args)) from e
    except RunnerError as e:
        raise _Fail(_located(composed, e, args)) from e
    except GradcheckError as e:
        raise _Fail(str(e)) from e
    for message in warned:
        print(f"graphviz-app check: warning: {message}", file=sys.stderr)
    print(json.dumps(report, indent=2) if args.json else text)
    return EXIT_OK if passed else EXIT_CHECK_FAILED


def _check_modules(args: argparse.Namespace) -> int:
    try:
        passed, text, report, written = run_model_check(args)
    except ModulesUsageError as e:
        raise _Fail(str(e)) from e
    print(report_text(passed, text, report, written, args.json))
    return EXIT_OK if passed else EXIT_CHECK_FAILED


def _serve(args: argparse.Namespace) -> int:
    try:
        from ..web.server import serve
    except ImportError as e:
        raise _Fail(f"the web page needs streamlit: pip install 'graphviz-app[web]' ({e})", EXIT_ENVIRONMENT) from e
    return serve(host=args.host, port=args.port)


if __name__ == "__main__":  # `python -m graphviz_app.cli` (the Makefile's `make run`)
    raise SystemExit(main())
