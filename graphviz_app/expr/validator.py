"""Parse a program and check it against the language, without running anything."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .allowlist import (
    ALL_ATTRIBUTES,
    BUILTIN_FUNCTIONS,
    NAMESPACES,
    REFUSED_MODULES,
    RESERVED_NAMES,
    refusal_reason,
)
from .errors import ExprError
from .limits import Limits
from .program import Program
from .syntax import ALLOWED_NODES, REFUSED_NODES, WITH_REFUSED, grad_mode

__all__ = ["parse", "validate", "range_length"]

_INT64_MAX = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")
# Python refuses decimal literals past 4,300 digits while parsing, with advice
# (sys.set_int_max_str_digits) a person typing a program cannot follow.
_LONG_DECIMAL = re.compile(r"\d[\d_]{100,}")
_DIGITS_LIMIT = "for integer string conversion"
_INT_LIMIT_ADVICE = "integers must fit in 64 bits (at most 9,223,372,036,854,775,807): write 1e30 for a large float"


def range_length(start: int, stop: int | None = None, step: int = 1) -> int:
    """len(range(...)) without OverflowError for lengths beyond 64 bits (step != 0)."""
    if stop is None:
        start, stop = 0, start
    if step > 0:
        return max(0, (stop - start + step - 1) // step)
    return max(0, (start - stop - step - 1) // -step)

def validate(source: str, *, limits: Limits = Limits()) -> None:
    """Parse and check a program without running any of it.

    Cheap enough to call on every keystroke. Checks the syntax, every
    construct, name and attribute against the allow-list, the size limits
    that can be known before running, and that every name is defined
    above its use.

    Args:
        source: The program: assignments, optional `for i in range(N):`
            loops, and a final expression.
        limits: Size limits (source length, syntax nodes, depth, loop length).

    Raises:
        ExprError: naming the problem and its line and column.

    >>> validate("x = torch.arange(3., requires_grad=True)\\n((x+2)**2+3).mean()")
    >>> validate("x.__class__")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    graphviz_app.expr.errors.ExprError: line 1, col 1: attribute names starting with _ are not allowed \
(x.__class__): they reach Python internals
    """
    parse(source, limits=limits)


def parse(source: str, *, limits: Limits = Limits(), known: Iterable[str] = ()) -> Program:
    """Like `validate`, and return the checked `Program` for the evaluator.

    `known` names variables defined before this program runs (the program
    a hand-gradient expression refers to). Raises only `ExprError`, whatever
    the text: the server runs this on every keystroke.
    """
    try:
        return _parse(source, limits, known)
    except ExprError:
        raise
    except RecursionError as e:
        raise ExprError("the program nests too deeply to check: use fewer brackets or split it into "
                        "assignments", kind="limit") from e
    except Exception as e:  # noqa: BLE001 - the page must get the language's own error, never a surprise
        raise ExprError(f"the checker failed unexpectedly on this program ({type(e).__name__}); please "
                        "report the program. Changing the line you typed last usually gets past it",
                        kind="internal") from e


def _parse(source: str, limits: Limits, known: Iterable[str]) -> Program:
    if not isinstance(source, str):
        raise ExprError(f"expected the program as text (str), found {type(source).__name__}", kind="input")
    if len(source) > limits.max_source_chars:
        raise ExprError(
            f"the program is {len(source):,} characters long; the limit is "
            f"{limits.max_source_chars:,} (Limits.max_source_chars)",
            kind="limit",
        )
    if not source.strip():
        raise ExprError("the program is empty: write an expression such as ((x+2)**2+3).mean()", kind="syntax")
    _check_text(source)
    tree = _parse_syntax(source)
    if not tree.body:
        raise ExprError(
            "the program has only comments: add an expression to show on its last line, "
            "e.g. ((x+2)**2+3).mean()", kind="syntax",
        )
    draft = Program(source, tree, (), frozenset())
    _check_tree(tree, draft, limits)
    defined, inputs = _Scope(draft, known).run(tree)
    return Program(source, tree, defined, inputs)


def _check_text(source: str) -> None:
    """Refuse text that is not valid Unicode (the parser would fail obscurely)."""
    found = _SURROGATE.search(source)
    if found is None:
        return
    before = source[: found.start()]
    line = before.count("\n") + 1
    col = found.start() - (before.rfind("\n") + 1) + 1
    text = source.split("\n")[line - 1]
    raise ExprError(
        f"the program contains a lone surrogate character (U+{ord(found.group()):04X}), which is not "
        "valid Unicode text, in a string or comment: delete it or type the character you meant",
        line=line, col=col, kind="syntax", source_line=_SURROGATE.sub("\ufffd", text),
    )


def _parse_syntax(source: str) -> ast.Module:
    # ast.parse builds a syntax tree only; nothing is compiled to code or run.
    try:
        return ast.parse(source, mode="exec")
    except SyntaxError as e:
        text = e.text.rstrip("\r\n") if e.text else None
        col = e.offset if e.offset and e.offset > 0 else None
        if _DIGITS_LIMIT in str(e.msg):
            raise _long_decimal(e.lineno, text) from e
        raise ExprError(
            f"syntax error: {e.msg}", line=e.lineno, col=col, kind="syntax", source_line=text
        ) from e
    except (RecursionError, MemoryError, ValueError) as e:
        raise ExprError(
            "the program nests too deeply for the parser: use fewer brackets or split it into assignments",
            kind="limit",
        ) from e


def _long_decimal(line: int | None, text: str | None) -> ExprError:
    """The parser's refusal of a decimal literal past 4,300 digits, in words a person can act on."""
    found = _LONG_DECIMAL.search(text or "")
    col = found.start() + 1 if found else None
    digits = f"{sum(ch.isdigit() for ch in found.group()):,} digits" if found else "more than 4,300 digits"
    return ExprError(f"the integer literal has {digits}; {_INT_LIMIT_ADVICE}", line=line, col=col,
                     kind="limit", source_line=text)


@dataclass(frozen=True)
class _Context:
    limits: Limits
    loop_iters: frozenset[int]  # ids of the range(...) calls that are loop heads
    assigned: frozenset[str] = frozenset()  # names the program assigns (one may hold a module)
    grad_heads: frozenset[int] = frozenset()  # ids of `torch.no_grad` (...) in the heads of allowed `with`s


def _check_tree(tree: ast.Module, program: Program, limits: Limits) -> None:
    nodes = _walk(tree, program, limits)
    assigned = frozenset(n.id for n, _ in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    # The head of an allowed `with` is checked whole by grad_mode, not as an attribute on the allow-list:
    # `torch.no_grad` stays unreachable anywhere else.
    heads = frozenset(id(n.items[0].context_expr.func) for n, _ in nodes  # type: ignore[attr-defined]
                      if isinstance(n, ast.With) and grad_mode(n) is not None)
    ctx = _Context(limits, frozenset(id(n.iter) for n, _ in nodes if isinstance(n, ast.For)), assigned, heads)
    # Three passes, so the message names the most telling problem: a refused
    # construct first (lambda, import), then a refused name (os, __class__),
    # then anything else. Within a pass, the first in reading order wins; at
    # one position the outermost construct (`lambda`, not its arguments) and
    # the innermost name (`__class__` before `.system` in `x.__class__.system`).
    for check, inner_first in ((_check_construct, False), (_check_names, True), (_check_rest, True)):
        problems: list[tuple[int, int, int, int, ExprError]] = []
        for seq, (node, depth) in enumerate(nodes):
            try:
                check(node, program, ctx)
            except ExprError as e:
                problems.append((e.line or 0, e.col or 0, -depth if inner_first else depth, seq, e))
        if problems:
            raise min(problems, key=lambda p: p[:4])[4]


def _walk(tree: ast.Module, program: Program, limits: Limits) -> list[tuple[ast.AST, int]]:
    """Every node with its depth; iterative, as the depth is not checked yet."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    nodes: list[tuple[ast.AST, int]] = []
    while stack:
        node, depth = stack.pop()
        nodes.append((node, depth))
        if len(nodes) > limits.max_nodes:
            raise program.error(
                node, f"the program has more than {limits.max_nodes:,} syntax nodes "
                "(Limits.max_nodes): make it shorter", kind="limit",
            )
        if depth > limits.max_depth:
            raise program.error(
                node, f"the program nests deeper than {limits.max_depth} levels "
                "(Limits.max_depth): split it into assignments", kind="limit",
            )
        stack.extend((child, depth + 1) for child in reversed(list(ast.iter_child_nodes(node))))
    return nodes


def _check_construct(node: ast.AST, program: Program, ctx: _Context) -> None:
    if not hasattr(node, "lineno"):
        return  # operators, contexts, arguments...: judged with the node holding them
    for op in _operators(node):
        if type(op) in REFUSED_NODES:
            raise program.error(node, REFUSED_NODES[type(op)])
    if isinstance(node, ast.With):
        if grad_mode(node) is None:
            raise program.error(node, WITH_REFUSED)
        return
    if type(node) in REFUSED_NODES:
        raise program.error(node, REFUSED_NODES[type(node)])
    if not isinstance(node, ALLOWED_NODES):
        raise program.error(node, f"{type(node).__name__} is not part of the expression language")
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1:
            raise program.error(node, "chained comparisons like a < b < c are not allowed: write (a < b) & (b < c)")
        if not isinstance(node.ops[0], ALLOWED_NODES):
            raise program.error(node, "only == != < <= > >= comparisons are allowed (not `is` or `in`)")
    elif isinstance(node, ast.keyword) and node.arg is None:
        raise program.error(node, "** unpacking is not allowed: write keyword arguments one by one")


def _operators(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.BinOp, ast.AugAssign, ast.UnaryOp)):
        return [node.op]
    return []


def _check_names(node: ast.AST, program: Program, ctx: _Context) -> None:
    if isinstance(node, ast.Name):
        _check_identifier(node.id, node, program)
        if node.id in REFUSED_MODULES:
            raise program.error(node, f"{node.id} is not available: {refusal_reason(node.id)}")
        if isinstance(node.ctx, ast.Store) and node.id in RESERVED_NAMES:
            raise program.error(node, f"{node.id} is a built-in name and cannot be assigned: pick another name")
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise program.error(
                node, f"attribute names starting with _ are not allowed ({program.text(node.value)}.{node.attr}): "
                "they reach Python internals",
            )
        _check_identifier(node.attr, node, program)
    elif isinstance(node, ast.keyword) and node.arg is not None:
        _check_identifier(node.arg, node, program)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        reason = refusal_reason(node.func.id)
        if node.func.id not in BUILTIN_FUNCTIONS and reason is not None:
            raise program.error(node, f"{node.func.id}() is not allowed: {reason}")


def _check_rest(node: ast.AST, program: Program, ctx: _Context) -> None:
    if isinstance(node, ast.Attribute):
        if id(node) not in ctx.grad_heads:
            _check_attribute(node, program)
    elif isinstance(node, ast.Call):
        _check_call(node, program, ctx.loop_iters, ctx.assigned)
    elif isinstance(node, ast.keyword):
        _check_keyword(node, program)
    elif isinstance(node, ast.Constant):
        _check_constant(node, program)
    elif isinstance(node, ast.Assign):
        _check_assign_targets(node, program)
    elif isinstance(node, ast.AugAssign) and not isinstance(node.target, ast.Name):
        raise program.error(node, "augmented assignment needs a plain name on the left, e.g. total += loss")
    elif isinstance(node, ast.For):
        _check_for(node, program, ctx.limits)


def _check_identifier(name: str, node: ast.AST, program: Program) -> None:
    if not name.isascii():
        odd = next(ch for ch in name if not ch.isascii())
        raise program.error(
            node, f"names must be plain ASCII: {name!r} contains {odd!r} (U+{ord(odd):04X}), "
            "which only looks like a Latin letter",
        )
    if name.startswith("_"):
        raise program.error(node, f"names starting with _ are not allowed ({name}): they reach Python internals")


def _namespace_path(node: ast.AST) -> str | None:
    """'torch.nn' for the expression `torch.nn`, None if not a namespace chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in ("torch", "F", "custom", "nn"):
        return None
    path = ".".join([node.id, *reversed(parts)])
    return path if path in NAMESPACES else None


def _check_attribute(node: ast.Attribute, program: Program) -> None:
    attr = node.attr
    shown = f"{program.text(node.value)}.{attr}"
    path = _namespace_path(node.value)
    if path is not None:
        allowed = attr in NAMESPACES[path]
        shown = f"{path}.{attr}"
    else:
        allowed = attr in ALL_ATTRIBUTES
    if not allowed:
        reason = refusal_reason(attr)
        if reason is not None:
            raise program.error(node, f"{shown} is not allowed: {reason}")
        raise program.error(
            node, f"{shown} is not on the allow-list of functions, methods and attributes "
            "(graphviz-app --help lists them)",
        )


def _check_call(node: ast.Call, program: Program, loop_iters: frozenset[int], assigned: frozenset[str]) -> None:
    func = node.func
    if isinstance(func, ast.Attribute):
        return
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in assigned:
        return  # layers[i](h): a module from an nn.Sequential / nn.ModuleList variable
    if not isinstance(func, ast.Name):
        raise program.error(node, f"only named functions can be called, not {program.text(func)}")
    if func.id == "range" and id(node) not in loop_iters:
        raise program.error(node, "range(...) can only be used as `for i in range(N):`")
    if func.id in assigned and func.id not in BUILTIN_FUNCTIONS:
        return  # a variable holding a module (the evaluator refuses calling anything else)
    if func.id not in BUILTIN_FUNCTIONS:
        reason = refusal_reason(func.id)
        if reason is not None:
            raise program.error(node, f"{func.id}() is not allowed: {reason}")
        raise program.error(
            node, f"{func.id}(...) is not an allowed function: call torch.*, F.*, custom.* "
            "functions, nn.* modules held in a variable, tensor methods, or one of "
            f"{', '.join(sorted(BUILTIN_FUNCTIONS - {'range'}))}",
        )


def _check_keyword(node: ast.keyword, program: Program) -> None:
    if node.arg in ("out", "inplace"):
        raise program.error(
            node, f"{node.arg}= is not allowed (it writes into an existing tensor): assign the result instead"
        )


def _check_constant(node: ast.Constant, program: Program) -> None:
    value = node.value
    if isinstance(value, (bytes, bytearray)):
        raise program.error(node, "bytes literals are not allowed")
    if isinstance(value, int) and not isinstance(value, bool) and value > _INT64_MAX:
        # Sized in bits, never converted to decimal: a long hex literal has more
        # decimal digits than Python converts (ValueError past 4,300).
        typed = program.text(node)
        if typed[:2].lower() in ("0x", "0o", "0b"):
            shown = typed if len(typed) <= 24 else f"{typed[:12]}...{typed[-4:]} ({len(typed):,} characters)"
            size = f"{shown} needs {value.bit_length():,} bits"
        else:
            size = f"has {sum(ch.isdigit() for ch in typed):,} digits"
        raise program.error(node, f"the integer literal {size}; {_INT_LIMIT_ADVICE}", kind="limit")


def _check_assign_targets(node: ast.Assign, program: Program) -> None:
    if len(node.targets) != 1:
        raise program.error(node, "chained assignment a = b = ... is not allowed: assign one name per line")
    target = node.targets[0]
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return
    if not isinstance(target, ast.Name):
        raise program.error(
            target, f"only names can be assigned, not {program.text(target)}: "
            "tensors are never changed in place; write a new name",
        )


def _check_for(node: ast.For, program: Program, limits: Limits) -> None:
    if not isinstance(node.target, ast.Name):
        raise program.error(node.target, "the loop variable must be a plain name: for i in range(N):")
    if node.orelse:
        raise program.error(node, "for ... else is not allowed")
    it = node.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and 1 <= len(it.args) <= 3 and not it.keywords):
        raise program.error(it, "a loop must be `for i in range(N):` (or range(start, stop[, step]))")
    if all(isinstance(a, ast.Constant) and type(a.value) is int for a in it.args):
        args = [a.value for a in it.args]  # type: ignore[attr-defined]
        steps = range_length(*args) if len(args) < 3 or args[2] != 0 else 0
        if steps > limits.max_loop_iterations:
            # A count from a long hex literal has more decimal digits than Python prints.
            shown = f"{steps:,}" if steps.bit_length() <= 256 else f"more than 2**{steps.bit_length() - 1}"
            raise program.error(
                it, f"the loop runs {shown} times; the limit is "
                f"{limits.max_loop_iterations:,} iterations (Limits.max_loop_iterations)", kind="limit",
            )


class _Scope:
    """Checks that every name is defined above its use, in program order."""

    def __init__(self, program: Program, known: Iterable[str]) -> None:
        self.program = program
        self.defined: dict[str, None] = dict.fromkeys(known)
        self.assignments: dict[str, int] = {}
        self.top_once: set[str] = set()

    def run(self, tree: ast.Module) -> tuple[tuple[str, ...], frozenset[str]]:
        last = tree.body[-1]
        if not isinstance(last, ast.Expr):
            raise self.program.error(
                last, "a program ends with the expression to show on its last line, "
                "e.g. ((x+2)**2+3).mean(); the last line here is not an expression",
            )
        self._statements(tree.body, in_loop=False)
        inputs = frozenset(n for n in self.top_once if self.assignments[n] == 1)
        return tuple(n for n in self.defined if n in self.assignments), inputs

    def _statements(self, body: list[ast.stmt], *, in_loop: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.For):
                self._uses(stmt.iter)
                self._define(stmt.target, top=False)
                self._statements(stmt.body, in_loop=True)
            elif isinstance(stmt, ast.Assign):
                self._uses(stmt.value)
                target = stmt.targets[0]
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                for name in names:
                    self._define(name, top=not in_loop and isinstance(target, ast.Name))
            elif isinstance(stmt, ast.AugAssign):
                self._uses(stmt.target)
                self._uses(stmt.value)
                self._define(stmt.target, top=False)
            elif isinstance(stmt, ast.Expr):
                self._uses(stmt.value)
            elif isinstance(stmt, ast.With):
                # Names assigned in a block are never inputs: to_function does not replace them.
                self._statements(stmt.body, in_loop=True)

    def _define(self, node: ast.expr, *, top: bool) -> None:
        assert isinstance(node, ast.Name)  # guaranteed by _check_node
        self.defined.setdefault(node.id, None)
        self.assignments[node.id] = self.assignments.get(node.id, 0) + 1
        if top:
            self.top_once.add(node.id)

    def _uses(self, expr: ast.AST) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id not in self.defined and node.id not in RESERVED_NAMES:
                raise self.program.error(node, self._undefined_message(node.id), kind="name")

    def _undefined_message(self, name: str) -> str:
        reason = refusal_reason(name)
        if reason is not None:
            return f"{name} is not available: {reason}"
        message = (f"{name} is not defined: define it above the expression, "
                   f"e.g. {name} = torch.arange(3., requires_grad=True)")
        close = difflib.get_close_matches(name, [*self.defined, *RESERVED_NAMES], n=1)
        return message + (f" (or did you mean {close[0]}?)" if close else "")
