"""A program's cost judged from its text before it runs: light, heavy, or unknown; no torch.

The server decides which worker a program may take before any of it runs, so
the judgement reads only the text: the language's own validator parses it,
then every call with literal sizes (``torch.randn(400, 20000)``,
``x.repeat(100, 100)``, ``torch.zeros((3, 3))``, ``torch.arange(3.)``) counts
its elements, times the iterations of the loops around it (``for i in
range(N)``). A program is heavy when it makes more than `MAX_LIGHT_ELEMENTS`
elements in all or runs more than `MAX_LIGHT_CALLS` calls and operators (a
big graph to lay out), or reads more than `MAX_LIGHT_READS` elements in all:
each call on a tensor of known size reads it, times its loops (``torch.median``
of a 999 x 1000 tensor 1,000 times reads a billion); unknown when it does not
pass the validator, a size is not a literal (``torch.randn(n, n)`` with `n`
not a constant), or anything in the judging itself fails, and the rest is not
heavy already. A light program can still be slow (a runaway built from small
literals): the scheduler also watches what the session's jobs cost once they ran.
"""

from __future__ import annotations

import ast
import math
from typing import Literal

from ..expr import ExprError
from ..expr.limits import Limits
from ..expr.validator import parse, range_length

__all__ = ["Verdict", "judge", "MAX_LIGHT_ELEMENTS", "MAX_LIGHT_CALLS", "MAX_LIGHT_READS"]

Verdict = Literal["light", "heavy", "unknown"]

# A million float32 elements take milliseconds to make; the runaways seen on the
# page start from several million (randn(400, 20000): 8 million) and loop over them.
MAX_LIGHT_ELEMENTS = 1_000_000
# Calls and operators run, loops counted: each adds nodes to the graph the worker lays out.
MAX_LIGHT_CALLS = 2_000
# Elements read by calls and operators, loops counted: 50 million float32 reads take tens of
# milliseconds for an add, a second or more for a sort-like median.
MAX_LIGHT_READS = 50_000_000
_RANGES = ("arange",)
_SPACES = ("linspace", "logspace")
# Calls whose arguments are sizes: the tensors they make are counted.
_MAKERS = frozenset({
    *_RANGES, *_SPACES, "full", "new_full", "randn", "rand", "zeros", "ones", "empty", "randint", "eye", "randperm",
    "repeat", "expand", "tile", "new_zeros", "new_ones", "new_empty",
})


class _Unknown(Exception):
    """A size the text does not fix."""


def judge(source: str) -> Verdict:
    """Whether `source` looks light, heavy, or cannot be judged from its text.

    >>> judge("x = torch.arange(3., requires_grad=True)\\n((x+2)**2+3).mean()")
    'light'
    >>> judge("a = torch.randn(400, 20000)\\nfor i in range(1000):\\n    b = torch.cdist(a, a).sum()\\nb")
    'heavy'
    >>> judge("import os")
    'unknown'
    """
    try:
        tree = parse(source).tree
    except ExprError:
        return "unknown"
    walker = _Walker()
    try:
        walker.statements(tree.body, 1)
    except Exception:  # noqa: BLE001 - (-1.0) ** 0.5 as a size, 1e999, ...: the worker will say what is wrong
        return "heavy" if walker.heavy() else "unknown"
    if walker.heavy():
        return "heavy"
    return "unknown" if walker.unknown else "light"


class _Walker:
    """Adds up elements made and calls run, each times the iterations of its loops."""

    def __init__(self) -> None:
        self.elements = 0
        self.calls = 0
        self.reads = 0
        self.unknown = False  # a size the text does not fix
        self.constants: dict[str, int | float] = {}
        self.sizes: dict[str, int] = {}  # tensor name -> elements, where the text fixes it

    def heavy(self) -> bool:
        return self.elements > MAX_LIGHT_ELEMENTS or self.calls > MAX_LIGHT_CALLS or self.reads > MAX_LIGHT_READS

    def statements(self, body: list[ast.stmt], times: int) -> None:
        for stmt in body:
            if isinstance(stmt, ast.For):
                self.statements(stmt.body, times * self.loop_length(stmt.iter))
                continue
            if isinstance(stmt, ast.With):
                self.statements(stmt.body, times)
                continue
            try:
                self.expression(stmt, times)
            except _Unknown:
                self.unknown = True
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.size_of(stmt.targets[0].id, stmt.value)
            if (times == 1 and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                try:
                    self.constants[stmt.targets[0].id] = self.number(stmt.value)
                except _Unknown:
                    self.constants.pop(stmt.targets[0].id, None)

    def loop_length(self, head: ast.expr) -> int:
        if not isinstance(head, ast.Call):  # the validator allows only `range(...)` heads
            return Limits().max_loop_iterations
        try:
            args = [int(self.number(a)) for a in head.args]
        except (_Unknown, ValueError, OverflowError):
            return Limits().max_loop_iterations  # all loops together run at most this often
        if len(args) == 3 and args[2] == 0:
            return 0
        return min(range_length(*args), Limits().max_loop_iterations)

    def size_of(self, name: str, value: ast.expr) -> None:
        """Remember the elements of tensor `name`: what a maker made, else the largest tensor its call read."""
        size = 0
        if isinstance(value, ast.Call):
            try:
                size = self.made(value)
            except _Unknown:
                size = 0
        if not size:
            size = max(self.read_by(value), default=0)
        if size:
            self.sizes[name] = size
        else:
            self.sizes.pop(name, None)

    def read_by(self, node: ast.AST) -> list[int]:
        """The sizes of the known tensors one call or operator reads directly (its receiver and operands)."""
        parts: list[ast.AST] = []
        if isinstance(node, ast.Call):
            parts = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                parts.append(node.func.value)
        elif isinstance(node, ast.BinOp):
            parts = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp):
            parts = [node.operand]
        elif isinstance(node, ast.Subscript):
            parts = [node.value]
        return [self.sizes[p.id] for p in parts if isinstance(p, ast.Name) and p.id in self.sizes]

    def expression(self, node: ast.AST, times: int) -> None:
        unknown = False
        for sub in ast.walk(node):
            if isinstance(sub, (ast.BinOp, ast.UnaryOp, ast.Call)):
                self.reads += times * sum(self.read_by(sub))
            if isinstance(sub, (ast.BinOp, ast.UnaryOp)):
                self.calls += times
            if not isinstance(sub, ast.Call):
                continue
            self.calls += times
            try:
                self.elements += times * self.made(sub)
            except _Unknown:
                unknown = True
        if unknown:
            raise _Unknown

    def made(self, call: ast.Call) -> int:
        """Elements a call that takes sizes makes (0 for an op on tensors: sized by what it reads)."""
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if name not in _MAKERS:
            return 0
        args = call.args
        if name in _RANGES:
            bounds = [self.number(a) for a in args]
            if not bounds:
                return 0
            start, stop = (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
            step = bounds[2] if len(bounds) >= 3 else 1
            return 0 if step == 0 else max(0, math.ceil((stop - start) / step))
        if name in _SPACES:
            return int(self.number(args[2])) if len(args) >= 3 else 100
        for arg in args:  # a shape given as one tuple: randint(0, 9, (3, 4)), full((3, 3), 7.)
            if isinstance(arg, (ast.Tuple, ast.List)):
                return max(0, math.prod(int(self.number(e)) for e in arg.elts))
        sizes = []
        for arg in args:
            value = self.number(arg)
            if not isinstance(value, int):
                break  # full(3, 7.5): the fill value ends the sizes
            sizes.append(value)
        if name == "randint" and len(sizes) > 1:
            return 0  # randint(low, high) without a size tuple makes no tensor
        return max(0, math.prod(sizes)) if sizes else 0

    def number(self, node: ast.AST) -> int | float:
        """The value of a literal size: numbers, names of constants, + - * // ** and int()/float()."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.constants[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.number(node.operand)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("int", "float") and len(node.args) == 1:
            value = self.number(node.args[0])
            return int(min(value, 2**62)) if getattr(node.func, "id", "") == "int" else float(value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)):
            left, right = self.number(node.left), self.number(node.right)
            if isinstance(node.op, ast.Pow):
                if not (abs(right) < 64 and abs(left) < 2**16):
                    return 2**62
                power = left ** right
                if not isinstance(power, (int, float)):  # (-1.0) ** 0.5 is complex: no size
                    raise _Unknown
                return power
            if isinstance(node.op, ast.FloorDiv):
                return left // right if right else 0
            result = left + right if isinstance(node.op, ast.Add) else left - right if isinstance(node.op, ast.Sub) \
                else left * right
            return min(result, 2**62)
        raise _Unknown
