"""Which Python syntax the language keeps, and why the rest is refused."""

from __future__ import annotations

import ast

__all__ = ["ALLOWED_NODES", "REFUSED_NODES", "GRAD_MODES", "WITH_REFUSED", "grad_mode"]

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
    ast.AsyncWith: "async with is not allowed",
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

# The only blocks `with` may open: torch's grad modes, called with no arguments
# and bound to no name, so no new name or object becomes reachable.
GRAD_MODES: tuple[str, ...] = ("no_grad", "enable_grad", "inference_mode")
WITH_REFUSED = ("with is not allowed except `with torch.no_grad():`, `with torch.enable_grad():` and "
                "`with torch.inference_mode():` (one of them, no arguments, no `as`)")


def grad_mode(node: ast.With) -> str | None:
    """'no_grad' for `with torch.no_grad():`, and so on for `GRAD_MODES`; None for any other `with`.

    >>> grad_mode(ast.parse("with torch.no_grad():\\n    y = x").body[0])
    'no_grad'
    >>> grad_mode(ast.parse("with torch.no_grad() as g:\\n    y = x").body[0]) is None
    True
    """
    if len(node.items) != 1 or node.items[0].optional_vars is not None:
        return None
    call = node.items[0].context_expr
    if not (isinstance(call, ast.Call) and not call.args and not call.keywords):
        return None
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch" \
            and func.attr in GRAD_MODES:
        return func.attr
    return None
