"""Run a checked program by walking its syntax tree (no eval, exec or compile)."""

from __future__ import annotations

import ast
import operator
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from . import modules
from .allowlist import BUILTIN_FUNCTIONS, TENSOR_METHODS, TENSOR_PROPERTIES, VALUE_ATTRIBUTES
from .calls import (
    Defaults,
    Namespace,
    admit,
    call_builtin,
    call_function,
    call_method,
    check_no_namespaces,
    namespace_attribute,
    precheck,
)
from .errors import ExprError
from .guards import Budget, Refused, SequenceSizes, check_sequence_length, int_operation_fits, tensors_in
from .intdiv import check_integer_division
from .limits import Limits
from .modules import ProgramModule
from .program import Program
from .recording import ProgramRecording, program_lines, uses_modules
from .syntax import grad_mode
from .translate import Operand, explain
from .validator import range_length

__all__ = ["Evaluation", "Interpreter"]

_BINOPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv), ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod), ast.Pow: ("**", operator.pow), ast.MatMult: ("@", operator.matmul),
    ast.BitAnd: ("&", operator.and_), ast.BitOr: ("|", operator.or_), ast.BitXor: ("^", operator.xor),
    ast.Eq: ("==", operator.eq), ast.NotEq: ("!=", operator.ne), ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le), ast.Gt: (">", operator.gt), ast.GtE: (">=", operator.ge),
}
_UNARY: dict[type, tuple[str, Callable[[Any], Any]]] = {
    ast.USub: ("-", operator.neg), ast.UAdd: ("+", operator.pos),
    ast.Invert: ("~", operator.invert), ast.Not: ("not ", operator.not_),
}
_LABEL_CHARS = 40
# Python's operator precedence (higher binds tighter), to keep the brackets a
# label needs: the ast drops them, so `(a - 1) % b` would read `a - 1 % b`.
_BIN_PRECEDENCE: dict[type, int] = {
    ast.BitOr: 7, ast.BitXor: 8, ast.BitAnd: 9, ast.Add: 11, ast.Sub: 11, ast.Mult: 12, ast.Div: 12,
    ast.FloorDiv: 12, ast.Mod: 12, ast.MatMult: 12, ast.Pow: 14,
}
_ATOM = 16  # names, calls, attributes, subscripts, literals, bracketed tuples and lists
_POW = _BIN_PRECEDENCE[ast.Pow]
_GRAD_MODES: dict[str, Callable[[], Any]] = {
    "no_grad": torch.no_grad, "enable_grad": torch.enable_grad, "inference_mode": torch.inference_mode,
}


def _precedence(node: ast.AST) -> int:
    if isinstance(node, ast.BinOp):
        return _BIN_PRECEDENCE.get(type(node.op), _ATOM)
    if isinstance(node, ast.UnaryOp):
        return 5 if isinstance(node.op, ast.Not) else 13
    if isinstance(node, ast.Compare):
        return 6
    if isinstance(node, ast.IfExp):
        return 1
    return _ATOM


@dataclass(frozen=True)
class Evaluation:
    """What a program computed.

    Attributes:
        output: The last line's value: a tensor, or a tuple of tensors.
        variables: The program's named tensors, name -> tensor, in order of
            first definition (loop counters and other numbers left out).
        model: For a program that builds `nn` modules, the root module
            holding each module variable under its name (`enc.layers.0`);
            None otherwise. Its ops were recorded (`graphviz_app.record`)
            with `program:LINE` as their source.
    """

    output: torch.Tensor | tuple[torch.Tensor, ...]
    variables: dict[str, torch.Tensor] = field(default_factory=dict)
    model: torch.nn.Module | None = None

    @property
    def params(self) -> torch.nn.Module | dict[str, torch.Tensor]:
        """What to trace with: `trace(ev.output, ev.params, names=ev.variables)`."""
        return self.model if self.model is not None else self.variables


class Interpreter:
    """Runs one program once. Not thread-safe; make one per run.

    Args:
        program: A program from `validator.parse`.
        limits: The limits to enforce while running.
        device: Default device for constructors that name none.
        dtype: Default floating dtype for constructors that name none.
        replace: Values for some top-level variables; their assignments
            are skipped (used by `to_function`).
        checked: False skips the memory accounting (for re-runs of an
            already checked program on tensors of the same shapes, which
            may be vmap's batched tensors).
        env: Variables defined before the program starts.
    """

    def __init__(
        self, program: Program, *, limits: Limits, device: str | None, dtype: torch.dtype | None,
        replace: Mapping[str, Any] | None = None, checked: bool = True,
        env: Mapping[str, Any] | None = None, source_lines: bool = False,
    ) -> None:
        self.program = program
        self.limits = limits
        self.env: dict[str, Any] = dict(env or {})
        self.replace = dict(replace or {})
        self.defaults = Defaults(device, dtype, Budget(limits) if checked else None)
        self.deadline = time.perf_counter() + limits.max_seconds
        self.iterations = 0
        self.sizes = SequenceSizes()
        self.line = 0
        # Only a first, checked run records (re-runs may be under vmap).
        self.recording = ProgramRecording(lambda: self.line) if checked and uses_modules(program.tree) else None
        # A program with modules gets its lines from the recording already.
        self.source_lines = source_lines and checked and self.recording is None

    def run(self) -> Evaluation:
        """Run the program; raises ExprError for anything refused or failing."""
        try:
            return self._run()
        except ExprError:
            raise
        except RecursionError as e:  # only with a Limits.max_depth far above the default
            raise ExprError("the program nests too deeply to evaluate: lower Limits.max_depth "
                            "or split it into assignments", kind="limit") from e
        except Exception as e:  # noqa: BLE001 - a server must get ExprError, never a surprise
            raise ExprError(f"the evaluator failed unexpectedly ({type(e).__name__}: {e}); "
                            "please report this program", kind="internal") from e

    def _run(self) -> Evaluation:
        if self.recording is None:
            if self.source_lines:
                with program_lines(lambda: self.line):
                    return self._run_body()
            return self._run_body()
        with self.recording:
            evaluation = self._run_body()
        self.recording.refresh(self.env)
        root = self.recording.root
        has_calls = next(root.children(), None) is not None
        return Evaluation(evaluation.output, evaluation.variables, root if has_calls else None)

    def _run_body(self) -> Evaluation:
        body = self.program.tree.body
        for stmt in body[:-1]:
            self._statement(stmt)
        last = body[-1]
        assert isinstance(last, ast.Expr)  # guaranteed by the validator
        output = self._output(last.value, self._value(last.value))
        variables = {k: v for k, v in self.env.items() if isinstance(v, torch.Tensor)}
        return Evaluation(output=output, variables=variables)

    def _output(self, node: ast.AST, value: Any) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
            return tuple(value)
        found = f"a module ({value.type_name}): call it, e.g. {self._label(node)}(x)" if isinstance(
            value, ProgramModule) else type(value).__name__
        raise self.program.error(
            node, f"the last line must give a tensor (or tensors separated by commas), "
            f"found {found}", kind="input",
        )

    # statements ---------------------------------------------------------
    def _statement(self, stmt: ast.stmt) -> None:
        self._tick(stmt)
        if isinstance(stmt, ast.Assign):
            self._assign(stmt)
        elif isinstance(stmt, ast.AugAssign):
            # `a += b` means `a = a + b`: never in place, so the graph stays whole.
            target = stmt.target
            assert isinstance(target, ast.Name)
            value = self._binop(stmt, stmt.op, (target.id, self.env[target.id]),
                                (self._operand(stmt.value, _BIN_PRECEDENCE.get(type(stmt.op), _ATOM), right=True),
                                 self._value(stmt.value)))
            self.env[target.id] = value
        elif isinstance(stmt, ast.For):
            self._for(stmt)
        elif isinstance(stmt, ast.With):
            self._with(stmt)
        elif isinstance(stmt, ast.Expr):
            self._value(stmt.value)

    def _assign(self, stmt: ast.Assign) -> None:
        target = stmt.targets[0]
        if isinstance(target, ast.Name) and target.id in self.replace:
            self.env[target.id] = self.replace[target.id]
            return
        value = self._value(stmt.value)
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            return
        names = [n.id for n in target.elts]  # type: ignore[attr-defined]
        if not isinstance(value, (tuple, list)) or len(value) != len(names):
            count = len(value) if isinstance(value, (tuple, list)) else 1
            raise self.program.error(
                stmt, f"{', '.join(names)} = ... needs {len(names)} values, found {count}", kind="input"
            )
        self.env.update(zip(names, value, strict=True))

    def _for(self, stmt: ast.For) -> None:
        call = stmt.iter
        assert isinstance(call, ast.Call) and isinstance(stmt.target, ast.Name)
        bounds = [self._value(a) for a in call.args]
        if not all(type(b) is int for b in bounds):
            raise self.program.error(call, "range() needs whole numbers, e.g. range(10) or range(int(n))", kind="input")
        if len(bounds) == 3 and bounds[2] == 0:
            raise self.program.error(call, "range(...) is invalid: its step must not be zero", kind="input")
        count = range_length(*bounds)
        limit = self.limits.max_loop_iterations
        if self.iterations + count > limit:
            raise self.program.error(
                call, f"the loops would run {self.iterations + count:,} iterations in all; the "
                f"limit is {limit:,} (Limits.max_loop_iterations)", kind="limit",
            )
        self.iterations += count
        for i in range(*bounds):
            self.env[stmt.target.id] = i
            for inner in stmt.body:
                self._statement(inner)

    def _with(self, stmt: ast.With) -> None:
        # The mode comes from this table, never from the program's names: the validator let
        # through only `with torch.<mode>():`, and `torch.<mode>` is reachable nowhere else.
        mode = _GRAD_MODES[grad_mode(stmt) or ""]
        with mode():
            for inner in stmt.body:
                self._statement(inner)

    # expressions --------------------------------------------------------
    def _value(self, node: ast.AST) -> Any:
        # Recursive, but the validator bounded the depth (Limits.max_depth).
        method = getattr(self, f"_e_{type(node).__name__}", None)
        if method is None:  # the validator refuses these first; never reached
            raise self.program.error(node, f"{type(node).__name__} is not part of the language")
        return method(node)

    def _e_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _e_Name(self, node: ast.Name) -> Any:
        name = node.id
        if name in ("torch", "F", "custom", "nn"):
            return Namespace(name)
        if name in BUILTIN_FUNCTIONS:
            raise self.program.error(node, f"{name} is a function: call it, e.g. {name}(x)")
        if name not in self.env:
            raise self.program.error(node, f"{name} is not defined yet at this point", kind="name")
        return self.env[name]

    def _e_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return self._sized(node, tuple(self._value(e) for e in node.elts))

    def _e_List(self, node: ast.List) -> list[Any]:
        return self._sized(node, [self._value(e) for e in node.elts])

    def _sized(self, node: ast.AST, value: Any) -> Any:
        # Literals can nest earlier lists without copying them ([a, a]): size them here,
        # before comparing, converting or indexing walks every item.
        try:
            self.sizes.check(value, f"the list {self._label(node)}")
        except Refused as e:
            raise self.program.error(node, e.message, kind=e.kind) from e
        return value

    def _e_Slice(self, node: ast.Slice) -> slice:
        parts = [None if p is None else self._value(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def _e_IfExp(self, node: ast.IfExp) -> Any:
        test = self._value(node.test)
        try:
            chosen = bool(test)
        except Exception as e:  # noqa: BLE001
            raise self._failure(node, e, f"if {self._label(node.test)}", [(self._label(node.test), test)]) from e
        return self._value(node.body if chosen else node.orelse)

    def _e_UnaryOp(self, node: ast.UnaryOp) -> Any:
        symbol, fn = _UNARY[type(node.op)]
        operand = self._value(node.operand)
        label = self._operand(node.operand, _precedence(node))
        what = f"{symbol}{label}"
        if isinstance(operand, (str, list, tuple)) and not isinstance(node.op, ast.Not):
            raise self.program.error(node, f"{what}: {symbol.strip()} needs a number or a tensor", kind="input")
        return self._apply(node, what, fn, [(label, operand)])

    def _e_BinOp(self, node: ast.BinOp) -> Any:
        parent = _precedence(node)
        left = (self._operand(node.left, parent), self._value(node.left))
        right = (self._operand(node.right, parent, right=True), self._value(node.right))
        return self._binop(node, node.op, left, right)

    def _e_Compare(self, node: ast.Compare) -> Any:
        left = (self._operand(node.left, 6), self._value(node.left))
        right = (self._operand(node.comparators[0], 6, right=True), self._value(node.comparators[0]))
        return self._binop(node, node.ops[0], left, right)

    def _binop(self, node: ast.AST, op: ast.AST, left: Operand, right: Operand) -> Any:
        symbol, fn = _BINOPS[type(op)]
        what = f"{left[0]} {symbol} {right[0]}"
        a, b = left[1], right[1]
        space = next((v for v in (a, b) if isinstance(v, Namespace)), None)
        if space is not None:
            raise self.program.error(node, f"{what}: {space.path} is a namespace (a group of functions), not a value: "
                                     f"call one of its functions, e.g. {space.path}.ones(3)", kind="input")
        if isinstance(a, str) or isinstance(b, str):
            if symbol in ("==", "!="):
                return fn(a, b)
            raise self.program.error(
                node, f"{what}: strings are only used as arguments, not in arithmetic", kind="input"
            )
        if type(a) is int and type(b) is int and not int_operation_fits(symbol, a, b):
            raise self.program.error(
                node, f"{what} gives an integer beyond 64 bits; use floats (e.g. 10.0**100)", kind="limit"
            )
        if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
            self._check_sequence_op(node, what, symbol, a, b)
        try:
            check_integer_division(symbol, a, b, what=what)
        except Refused as e:
            raise self.program.error(node, e.message, kind=e.kind) from e
        if symbol == "@":
            return self._apply(node, what, fn, [left, right], growth="meta", name="matmul")
        return self._apply(node, what, fn, [left, right], growth="broadcast")

    def _check_sequence_op(self, node: ast.AST, what: str, symbol: str, a: Any, b: Any) -> None:
        if symbol == "+" and isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            length = len(a) + len(b)
        elif symbol == "*" and (type(a) is int or type(b) is int):
            seq, times = (a, b) if isinstance(a, (list, tuple)) else (b, a)
            length = len(seq) * max(times, 0)
        elif symbol in ("==", "!="):
            return
        else:
            raise self.program.error(
                node, f"{what}: lists and tuples only support + and * by a whole number", kind="input"
            )
        try:
            check_sequence_length(length, what)
        except Refused as e:
            raise self.program.error(node, e.message, kind=e.kind) from e

    def _e_Subscript(self, node: ast.Subscript) -> Any:
        base = self._value(node.value)
        index = self._value(node.slice)
        what = f"{self._operand(node.value, _ATOM)}[{self._label(node.slice)}]"
        if isinstance(base, ProgramModule):
            try:
                return modules.index_module(self._label(node.value), base, index)
            except Refused as e:
                raise self.program.error(node, e.message, kind=e.kind) from e
        if not isinstance(base, (torch.Tensor, tuple, list)):
            raise self.program.error(
                node, f"{what}: only tensors, lists and tuples can be indexed, not {type(base).__name__}", kind="input"
            )
        parts = index if isinstance(index, tuple) else (index,)
        fancy = any(isinstance(p, (torch.Tensor, list)) for p in parts)
        growth = "meta" if isinstance(base, torch.Tensor) and fancy else "same"
        operands = [(self._operand(node.value, _ATOM), base), ("index", index)]
        return self._apply(node, what, operator.getitem, operands, growth=growth)

    def _e_Attribute(self, node: ast.Attribute) -> Any:
        base = self._value(node.value)
        label, attr = self._operand(node.value, _ATOM), node.attr
        try:
            if isinstance(base, Namespace):
                return namespace_attribute(base, attr)
            if isinstance(base, ProgramModule):
                return modules.module_attribute(label, base, attr)
        except Refused as e:
            raise self.program.error(node, e.message, kind=e.kind) from e
        if isinstance(base, torch.Tensor):
            if attr in TENSOR_PROPERTIES:
                return admit(getattr(base, attr), f"{label}.{attr}")  # fixed allow-list name
            if attr in TENSOR_METHODS:
                raise self.program.error(node, f"{label}.{attr} is a method: call it, e.g. {label}.{attr}()")
        kind = "device" if isinstance(base, torch.device) else "dtype" if isinstance(base, torch.dtype) else (
            "return_types" if type(base).__module__ == "torch.return_types" else None)
        if kind is not None and attr in VALUE_ATTRIBUTES[kind]:
            value = getattr(base, attr)  # fixed allow-list name on a plain value
            return admit(value, f"{label}.{attr}")
        raise self.program.error(node, f"{label}.{attr}: a {type(base).__name__} has no allowed attribute {attr!r}")

    def _e_Call(self, node: ast.Call) -> Any:
        self._tick(node)
        args = [(self._label(a), self._value(a)) for a in node.args]
        kwargs = {k.arg: self._value(k.value) for k in node.keywords if k.arg is not None}
        func = node.func
        try:
            if isinstance(func, ast.Name) and func.id in BUILTIN_FUNCTIONS:
                return call_builtin(func.id, args, kwargs)
            if isinstance(func, ast.Name):
                return self._call_module(func.id, self.env.get(func.id), args, kwargs)
            if isinstance(func, ast.Subscript):
                return self._call_module(self._label(func), self._value(func), args, kwargs)
            assert isinstance(func, ast.Attribute)
            base = self._value(func.value)
            if isinstance(base, Namespace):
                return call_function(base, func.attr, args, kwargs, self.defaults)
            return call_method((self._operand(func.value, _ATOM), base), func.attr, args, kwargs, self.defaults)
        except Refused as e:
            raise self.program.error(node, e.message, kind=e.kind) from e

    def _call_module(self, name: str, value: Any, args: list[Operand], kwargs: dict[str, Any]) -> Any:
        if not isinstance(value, ProgramModule):
            head = f"{name}(...) is not an allowed function" if name.isidentifier() else \
                f"only named functions can be called, not {name}"
            raise Refused(f"{head}: only a variable holding an nn module (or layers[i] of an nn.Sequential "
                          f"or nn.ModuleList) can be called, and {name} is a {type(value).__name__}", kind="input")
        check_no_namespaces(f"{name}(...)", [v for _, v in args], kwargs)
        if self.recording is not None:
            self.recording.refresh(self.env)
        result = modules.call_module(name, value, args, kwargs, self.defaults.budget)
        return admit(result, f"{name}(...)")

    # helpers ------------------------------------------------------------
    def _apply(self, node: ast.AST, what: str, fn: Callable[..., Any], operands: list[Operand],
               *, growth: str = "same", name: str = "") -> Any:
        self._tick(node)
        values = [v for _, v in operands]
        budget = self.defaults.budget
        try:
            if budget is not None and any(True for v in values for _ in tensors_in(v)):
                budget.lists(what, values)
                precheck(fn, growth, what, values, {}, budget, name=name)
            result = fn(*values)
            if budget is not None:
                budget.after(what, result, values)
            return admit(result, what)
        except Refused as e:
            raise self.program.error(node, e.message, kind=e.kind) from e
        except Exception as e:  # noqa: BLE001 - every failure is explained for people
            raise self._failure(node, e, what, operands) from e

    def _failure(self, node: ast.AST, exc: BaseException, what: str, operands: list[Operand]) -> ExprError:
        message, kind = explain(exc, what, operands)
        return self.program.error(node, message, kind=kind)

    def _operand(self, node: ast.AST, parent: int, *, right: bool = False) -> str:
        """`node`'s label as an operand of an operator of precedence `parent`, bracketed where needed."""
        label, own = self._label(node), _precedence(node)
        # Same precedence: the left operand groups first, except for ** (right to left).
        if own < parent or (own == parent < _ATOM and right != (parent == _POW)):
            return f"({label})"
        return label

    def _label(self, node: ast.AST) -> str:
        text = " ".join(self.program.text(node).split())
        return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 3] + "..."

    def _tick(self, node: ast.AST) -> None:
        self.line = getattr(node, "lineno", self.line)
        if time.perf_counter() > self.deadline:
            raise self.program.error(
                node, f"the program ran longer than {self.limits.max_seconds:g} s "
                "(Limits.max_seconds): use smaller tensors or fewer loop iterations", kind="time",
            )
