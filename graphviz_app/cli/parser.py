"""The command line's arguments: every command, its options and its help."""

from __future__ import annotations

import argparse
from typing import NoReturn

from ..drawing.layout import PURE_ABOVE_WORK
from ..expr.help import LANGUAGE_HELP
from ..expr.limits import Limits
from .diff import add_diff_parser
from .failure import EXIT_BAD_INPUT
from .memory import add_memory_parser
from .model_check import add_module_options
from .numbers import LONGEST_TIMEOUT_S, device, real, whole

__all__ = ["LAYOUT_SECONDS", "build_parser"]

# The default --timeout: the whole command (the program, tracing, the layout). Without
# one, a graph that `dot` or graphviz-pure cannot finish (a 1,000-step chain on a
# large stack) leaves the CLI waiting.
LAYOUT_SECONDS = 300.0

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
