"""Which Python syntax the language keeps, and why the rest is refused."""

from __future__ import annotations

import ast

__all__ = ["ALLOWED_NODES", "REFUSED_NODES"]

ALLOWED_NODES: tuple[type, ...] = (
    ast.Module, ast.Assign, ast.AugAssign, ast.For, ast.Expr, ast.BinOp, ast.UnaryOp,
    ast.Compare, ast.Call, ast.Attribute, ast.Subscript, ast.Slice, ast.Name, ast.Constant,
    ast.Tuple, ast.List, ast.IfExp, ast.keyword, ast.Load, ast.Store, ast.unaryop,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult,
    ast.BitAnd, ast.BitOr, ast.BitXor,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)
REFUSED_NODES: dict[type, str] = {
    ast.Import: "import is not allowed: torch is already there as `torch`, torch.nn.functional as `F`",
    ast.ImportFrom: "import is not allowed: torch is already there as `torch`, torch.nn.functional as `F`",
    ast.Lambda: "lambda is not allowed: the language has no functions of its own",
    ast.FunctionDef: "def is not allowed: the language has no functions of its own",
    ast.AsyncFunctionDef: "def is not allowed: the language has no functions of its own",
    ast.ClassDef: "class is not allowed: the language has no classes of its own",
    ast.ListComp: "comprehensions are not allowed: use a `for i in range(N):` loop or whole-tensor functions",
    ast.SetComp: "comprehensions are not allowed: use a `for i in range(N):` loop or whole-tensor functions",
    ast.DictComp: "comprehensions are not allowed: use a `for i in range(N):` loop or whole-tensor functions",
    ast.GeneratorExp: "comprehensions are not allowed: use a `for i in range(N):` loop or whole-tensor functions",
    ast.JoinedStr: "f-strings are not allowed: strings are plain literals used as arguments",
    ast.While: "while loops are not allowed: use `for i in range(N):`",
    ast.With: "with is not allowed",
    ast.AsyncWith: "with is not allowed",
    ast.Global: "global is not allowed",
    ast.Nonlocal: "nonlocal is not allowed",
    ast.Starred: "* unpacking is not allowed: pass arguments one by one",
    ast.Dict: "dict literals are not allowed: use lists or tuples",
    ast.Set: "set literals are not allowed: use lists or tuples",
    ast.If: "if statements are not allowed: use `a if cond else b` or torch.where(cond, a, b)",
    ast.BoolOp: "and/or are not allowed: use & and | on boolean tensors",
    ast.NamedExpr: "the := operator is not allowed: assign on its own line",
    ast.Delete: "del is not allowed",
    ast.Try: "try is not allowed",
    ast.Raise: "raise is not allowed",
    ast.Assert: "assert is not allowed",
    ast.Return: "return is not allowed: the last line's expression is the result",
    ast.Yield: "yield is not allowed",
    ast.Await: "await is not allowed",
    ast.LShift: "<< is not allowed",
    ast.RShift: ">> is not allowed",
    ast.AnnAssign: "annotated assignments are not allowed: write `name = expression`",
}
