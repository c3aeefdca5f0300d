"""`torch.autograd.grad` in programs: a gradient the program computes with, e.g. a gradient penalty."""

from __future__ import annotations

import ast
import contextlib
import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..tracing.orders import record_orders
from .guards import Budget, Refused
from .program import Program
from .translate import Operand, explain

__all__ = ["GRAD_PARAMETERS", "call_grad", "calls_grad", "differentiating", "tracked_inputs"]

WHAT = "torch.autograd.grad(...)"
_UNUSED = re.compile(r"differentiated Tensor at index (\d+) appears to not have been used")

# What a program may pass, in torch's order (only_inputs, allow_unused, is_grads_batched and
# materialize_grads are left out: a gradient of a tensor not used, or batched, is not drawn).
GRAD_PARAMETERS = ("outputs", "inputs", "grad_outputs", "retain_graph", "create_graph")


def call_grad(args: Sequence[Operand], kwargs: dict[str, Any], budget: Budget | None) -> tuple[torch.Tensor, ...]:
    """`torch.autograd.grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False)`.

    Checked first: outputs and inputs are tensors (or tuples or lists of them) that
    require grad, `grad_outputs` has one tensor per output shaped like it (needed for
    an output that is not a single number), and the graph is kept: `retain_graph=False`
    is refused, because drawing the graph and checking its gradients read its saved
    tensors afterwards (programs never change or free what they computed). The
    backward runs inside `record_orders()`, so with `create_graph=True` the traced
    graph says which nodes it made (order 1, or 2 for a gradient of a gradient).

    Returns:
        One gradient per input, as torch returns them (a tuple: `g, = ...` or `...[0]`).

    Raises:
        Refused: an argument the checks refuse, or torch's failure explained.

    >>> x = torch.tensor([0.5], requires_grad=True)
    >>> (g,) = call_grad([("(x ** 3).sum()", (x ** 3).sum()), ("x", x)], {"create_graph": True}, None)
    >>> g.tolist(), g.requires_grad
    ([0.75], True)
    """
    given = _bind(args, kwargs)
    outputs = _tensors(given["outputs"], "outputs")
    inputs = _tensors(given["inputs"], "inputs")
    grad_outputs = _grad_outputs(given.get("grad_outputs"), outputs)
    create_graph = _flag(given.get("create_graph"), "create_graph", default=False)
    retain = _flag(given.get("retain_graph"), "retain_graph", default=True)
    if not retain:
        raise Refused(
            f"{WHAT} with retain_graph=False would free the saved tensors of the graph it differentiates, "
            "which drawing the graph and checking its gradients still read: leave retain_graph out "
            "(programs always keep the graph)", kind="refused")
    if budget is not None:  # one gradient per input, shaped like it
        for label, t in inputs:
            budget.before(f"{WHAT} (the gradient of {label})", t.numel(), t.numel() * t.element_size())
    try:
        with record_orders():  # numbers the nodes this backward makes, for the drawing
            found = torch.autograd.grad([t for _, t in outputs], [t for _, t in inputs],
                                        grad_outputs=grad_outputs, retain_graph=True, create_graph=create_graph)
    except Exception as e:  # noqa: BLE001 - every failure is explained for people
        unused = _UNUSED.search(str(e))
        if unused is not None and int(unused.group(1)) < len(inputs):
            label = inputs[int(unused.group(1))][0]
            raise Refused(
                f"{WHAT}: the outputs were not computed from the input {label}: differentiate with respect to a "
                "variable they were computed from (an expression written inside grad(...) is a new tensor, "
                "outside the graph)", kind="input") from e
        message, kind = explain(e, WHAT, [*outputs, *inputs])
        raise Refused(message, kind) from e
    if budget is not None:
        budget.after(WHAT, found, [t for _, t in (*outputs, *inputs)])
    return tuple(found)


def _bind(args: Sequence[Operand], kwargs: dict[str, Any]) -> dict[str, Operand]:
    """Name -> (label, value) of each argument given, positional ones by torch's order."""
    if len(args) > len(GRAD_PARAMETERS):
        raise Refused(f"{WHAT} takes at most {len(GRAD_PARAMETERS)} arguments ({', '.join(GRAD_PARAMETERS)}), "
                      f"got {len(args)}", kind="input")
    given = dict(zip(GRAD_PARAMETERS, args, strict=False))
    for name, value in kwargs.items():
        if name not in GRAD_PARAMETERS:
            raise Refused(
                f"{WHAT} does not take {name}= in programs; it takes {', '.join(GRAD_PARAMETERS)}", kind="input")
        if name in given:
            raise Refused(f"{WHAT} got {name} twice: by position and as {name}=", kind="input")
        given[name] = (name, value)
    missing = [name for name in GRAD_PARAMETERS[:2] if name not in given]
    if missing:
        raise Refused(f"{WHAT} needs {' and '.join(missing)}: torch.autograd.grad(y, x, create_graph=True) "
                      "gives the gradient of y with respect to x", kind="input")
    return given


def _tensors(operand: Operand, role: str) -> list[Operand]:
    """The tensors of `outputs` or `inputs`, each with its label, all requiring grad."""
    label, value = operand
    if isinstance(value, torch.Tensor):
        items = [(label, value)]
    elif isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        items = [(f"{label}[{i}]", v) for i, v in enumerate(value)]
    else:
        found = "an empty " + type(value).__name__ if isinstance(value, (tuple, list)) and not value else (
            type(value).__name__ if not isinstance(value, (tuple, list)) else f"a {type(value).__name__} "
            "holding something other than tensors")
        raise Refused(f"{WHAT}: {role} must be a tensor or a tuple of tensors, found {found} ({label})",
                      kind="input")
    for item, t in items:
        if not t.requires_grad:
            fix = ("it was not computed from a tensor made with requires_grad=True" if role == "outputs" else
                   "differentiate with respect to a variable made with requires_grad=True, e.g. "
                   "x = torch.randn(4, requires_grad=True), or one computed from it")
            raise Refused(f"{WHAT}: the {role[:-1]} {item} does not require grad: {fix}", kind="input")
    return items


def _grad_outputs(operand: Operand | None, outputs: list[Operand]) -> list[torch.Tensor | None] | None:
    """The gradients given for the outputs, checked against their shapes; None if not given."""
    value = operand[1] if operand is not None else None
    if value is None:
        for label, t in outputs:
            if t.numel() != 1:
                raise Refused(
                    f"{WHAT}: the output {label} has shape {tuple(t.shape)}, not a single number: pass "
                    f"grad_outputs=torch.ones_like({label}) (one gradient per output, shaped like it), or "
                    f"differentiate {label}.sum()", kind="shape")
        return None
    given = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(given) != len(outputs):
        raise Refused(f"{WHAT}: grad_outputs gives {len(given)} gradient(s) for {len(outputs)} output(s): "
                      "give one per output", kind="input")
    for i, (g, (label, t)) in enumerate(zip(given, outputs, strict=True)):
        if g is not None and not isinstance(g, torch.Tensor):
            raise Refused(f"{WHAT}: grad_outputs[{i}] is a {type(g).__name__}, not a tensor: pass "
                          f"torch.ones_like({label}) or a tensor of its shape", kind="input")
        if g is not None and g.shape != t.shape:
            raise Refused(f"{WHAT}: grad_outputs[{i}] has shape {tuple(g.shape)}, the output {label} has shape "
                          f"{tuple(t.shape)}: give one gradient per output, shaped like it", kind="shape")
    return given


def _flag(operand: Operand | None, name: str, *, default: bool) -> bool:
    value = operand[1] if operand is not None else None
    if value is None:
        return default
    if type(value) is not bool:
        raise Refused(f"{WHAT}: {name} must be True or False, found {type(value).__name__}", kind="input")
    return value


@functools.lru_cache(maxsize=64)
def calls_grad(program: Program) -> bool:
    """Whether a program calls `torch.autograd.grad` (`...autograd.grad`, through a variable too)."""
    return any(
        isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.value, ast.Attribute)
        and node.value.attr == "autograd"
        for node in ast.walk(program.tree)
    )


def differentiating(program: Program) -> contextlib.AbstractContextManager[Any]:
    """What a re-run of `program` runs in: grad mode on when the program differentiates.

    A gradient checker may call the program's function under `torch.no_grad()` (to
    read its output's shape, or for finite differences); a program that calls
    `torch.autograd.grad` cannot compute its value without autograd.

    >>> from graphviz_app.expr.validator import parse
    >>> with torch.no_grad(), differentiating(parse("x = torch.ones(1)\\nx")):
    ...     torch.is_grad_enabled()
    False
    """
    return torch.enable_grad() if calls_grad(program) else contextlib.nullcontext()


def tracked_inputs(program: Program, given: dict[str, torch.Tensor], first: Mapping[str, Any]) -> dict[str, Any]:
    """The tensors a re-run of `program` replaces its variables by, tracked by autograd where it needs them.

    A program that differentiates (`torch.autograd.grad`) needs its variables to require
    grad as they did in its first run, also when the gradient checker re-runs it on
    plain tensors (finite differences): each such tensor is replaced by a detached copy
    that requires grad. Only programs that call `torch.autograd.grad` are changed; a
    tensor of `torch.func`'s transforms, which cannot be made to require grad, is left
    as given (the program then says what it cannot differentiate, and the checker runs
    without the transform).
    """
    if not calls_grad(program):
        return given
    found: dict[str, Any] = {}
    for name, t in given.items():
        before = first.get(name)
        if (isinstance(t, torch.Tensor) and not t.requires_grad and t.is_floating_point()
                and isinstance(before, torch.Tensor) and before.requires_grad):
            try:
                t = t.detach().requires_grad_()
            except RuntimeError:  # a torch.func transform's tensor
                pass
        found[name] = t
    return found
