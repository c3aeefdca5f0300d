"""Evaluate a program, or turn it into a function of some of its variables."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..runner import in_worker_process
from .autograd_grad import differentiating, tracked_inputs
from .errors import ExprError
from .evaluator import Evaluation, Interpreter
from .guards import Refused, check_device
from .limits import Limits
from .program import Program
from .rehearsal import rehearse
from .validator import parse

__all__ = ["evaluate", "to_function", "expected_function", "resolve_device", "resolve_dtype"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
           "bfloat16": torch.bfloat16}


def evaluate(
    source: str, *, limits: Limits = Limits(), device: str | None = None,
    dtype: torch.dtype | str | None = None, source_lines: bool = False, isolated: bool = True,
) -> Evaluation:
    """Check and run a program; return its output and its named tensors.

    By default the program runs twice: first in an isolated worker process,
    which is ended inside any one operation still running 2 s past
    ``limits.max_seconds``, then, once it finished there, in this process, for
    live tensors with their autograd graph. So no single long operation keeps
    the call past its time limit (it takes up to twice the program's time).

    Args:
        source: Assignments, optional `for i in range(N):` loops, and a final
            expression whose value is the output.
        limits: Resource limits (see `Limits`).
        device: Device for constructors that name none: ``"cpu"``, ``"cuda"``,
            ``"cuda:N"``, ``"auto"`` (cuda when available) or None (torch's default).
        dtype: Floating dtype for constructors that name none and would
            make a floating tensor (``torch.float64`` or ``"float64"``, ...).
        source_lines: Write ``program:N`` as the source of every autograd node
            line N made (a traced graph's `Node.source`); programs that call
            nn modules always get it.
        isolated: False runs the program only in this process: it stops
            between operations at ``limits.max_seconds``, but one operation
            nobody costed runs to its end. Code already inside an isolated
            worker (whose jobs have their own hard limit) always runs so.

    Returns:
        An `Evaluation`: ``.output`` (tensor or tuple of tensors) and
        ``.variables`` (name -> tensor, in order of definition), ready for
        `graphviz_app.trace(ev.output, params=ev.variables)`.

    Raises:
        ExprError: anything refused or failing, with line and column;
            ``kind="time"`` past the time limit ("stopped inside one operation"
            when the worker had to be ended), ``"crash"`` when the program
            crashed the worker, ``"busy"`` when the process's two workers were
            taken by other threads' programs.

    >>> ev = evaluate("x = torch.arange(3., requires_grad=True)\\n((x+2)**2+3).mean()")
    >>> ev.output
    tensor(12.6667, grad_fn=<MeanBackward0>)
    >>> list(ev.variables)
    ['x']
    """
    program = parse(source, limits=limits)  # refused at once, without a worker
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    if isolated and not in_worker_process():
        rehearse(source, limits=limits, device=dev, dtype=dt)
    return Interpreter(program, limits=limits, device=dev, dtype=dt, source_lines=source_lines).run()


def to_function(
    source: str, wrt: Sequence[str], *, limits: Limits = Limits(), device: str | None = None,
    dtype: torch.dtype | str | None = None,
) -> tuple[Callable[..., Any], tuple[torch.Tensor, ...]]:
    """A program as a function of some of its variables, for the gradient checker.

    Args:
        source: The program, as for `evaluate`.
        wrt: Names of variables to make the function's arguments. Each must be
            assigned once, at the top level, outside loops (``x = ...``).
        limits, device, dtype: As for `evaluate`.

    Returns:
        ``(fn, values)``: ``fn(*tensors)`` re-runs the program with those
        variables replaced by the given tensors and returns its output;
        ``values`` are the variables' tensors from a first run. Variables that
        do not depend on `wrt` keep their values from that run, so random
        weights stay fixed between calls; that first run draws random numbers
        from a generator seeded with 0 (unless the program seeds it), so
        `to_function` and `expected_function` see the same weights. The global
        random state is left as it was. ``fn`` walks the tree without in-place
        tricks, so it works under `torch.func.vmap`.

    Raises:
        ExprError: the program fails, or a name in `wrt` is not a suitable variable.

    >>> fn, (x,) = to_function("x = torch.arange(3.)\\n((x+2)**2+3).mean()", ["x"])
    >>> fn(x + 1)
    tensor(19.6667)
    """
    prepared = _Prepared.make(source, wrt, limits, device, dtype)
    values = tuple(_tensor_variable(prepared.env, name) for name in prepared.wrt)

    def fn(*tensors: torch.Tensor) -> Any:
        with differentiating(prepared.program):
            return prepared.rerun(tensors).run().output

    fn.__name__ = fn.__qualname__ = "program"
    return fn, values


def expected_function(
    source: str, expected: str, wrt: Sequence[str], *, limits: Limits = Limits(),
    device: str | None = None, dtype: torch.dtype | str | None = None,
) -> Callable[..., Any]:
    """A hand-derived gradient expression as a function of the same variables.

    Args:
        source: The program, as for `to_function`.
        expected: An expression over the program's variables giving the
            gradient for each name in `wrt`, separated by commas when there
            are several, e.g. ``"2*(x+2)/3"``.
        wrt: As for `to_function`.
        limits, device, dtype: As for `evaluate`.

    Returns:
        ``expected_fn(*tensors)``: one gradient (one name in `wrt`) or a tuple
        of them, computed with the variables replaced like `to_function` does;
        pass it as ``gradcheck.check(fn, inputs, expected=expected_fn)``.

    Raises:
        ExprError: the expression is refused, fails, or gives the wrong count.
    """
    prepared = _Prepared.make(source, wrt, limits, device, dtype)
    try:
        hand = parse(expected, limits=limits, known=prepared.program.defined)
    except ExprError as e:
        raise ExprError(f"in the expected gradient: {e.message}", line=e.line, col=e.col,
                        kind=e.kind, source_line=e.source_line) from e
    wrt = prepared.wrt

    def expected_fn(*tensors: torch.Tensor) -> Any:
        run = prepared.rerun(tensors)
        with differentiating(prepared.program):
            run.run()
        # Checked like any program (its own budget of the same limits): unlike the
        # re-runs of the already checked program, it has never run before.
        out = Interpreter(hand, limits=limits, device=prepared.device, dtype=prepared.dtype,
                          env=run.env).run().output
        grads = out if isinstance(out, tuple) else (out,)
        if len(grads) != len(wrt):
            raise hand.error(
                hand.tree.body[-1], f"the expected gradient gives {len(grads)} value(s) for "
                f"{len(wrt)} variable(s) ({', '.join(wrt)}): write one per variable, separated by commas",
                kind="input",
            )
        return grads[0] if len(wrt) == 1 else grads

    expected_fn.__name__ = expected_fn.__qualname__ = "expected"
    return expected_fn


@dataclass(frozen=True)
class _Prepared:
    """A program, its first run, and what stays fixed when it is re-run."""

    program: Program
    wrt: tuple[str, ...]
    limits: Limits
    device: str | None
    dtype: torch.dtype | None
    env: dict[str, Any]
    frozen: dict[str, Any]

    @classmethod
    def make(cls, source: str, wrt: Sequence[str], limits: Limits, device: str | torch.device | None,
             dtype: torch.dtype | str | None) -> _Prepared:
        program = parse(source, limits=limits)
        names = _check_wrt(program, wrt)
        dev, dt = resolve_device(device), resolve_dtype(dtype)
        base = Interpreter(program, limits=limits, device=dev, dtype=dt)
        cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(0)  # the same weights for to_function and expected_function
            base.run()
        frozen = {n: base.env[n] for n in program.inputs - _dependents(program, names)}
        return cls(program, names, limits, dev, dt, base.env, frozen)

    def rerun(self, tensors: tuple[torch.Tensor, ...]) -> Interpreter:
        replace = {**self.frozen, **tracked_inputs(self.program, _bind(self.wrt, tensors), self.env)}
        return Interpreter(self.program, limits=self.limits, device=self.device, dtype=self.dtype,
                           replace=replace, checked=False)


def resolve_device(device: str | torch.device | None) -> str | None:
    """None, or a checked device string; ``"auto"`` picks cuda when available."""
    if device is None:
        return None
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        check_device(device)
    except Refused as e:
        raise ExprError(e.message, kind=e.kind) from e
    return str(device)


def resolve_dtype(dtype: torch.dtype | str | None) -> torch.dtype | None:
    """None, or a floating dtype given as a torch.dtype or its name."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        found = _DTYPES.get(dtype.removeprefix("torch."))
    else:
        found = dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else None
    if found is None:
        raise ExprError(f"dtype must be one of {', '.join(_DTYPES)}, found {dtype!r}", kind="input")
    return found


def _check_wrt(program: Program, wrt: Sequence[str]) -> tuple[str, ...]:
    names = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    if not names:
        raise ExprError("name at least one variable to differentiate, e.g. wrt=['x']", kind="input")
    for name in names:
        if name not in program.defined:
            known = ", ".join(program.defined) or "no variables"
            raise ExprError(f"{name} is not a variable of the program (it defines {known})", kind="input")
        if name not in program.inputs:
            raise ExprError(
                f"{name} is assigned more than once or inside a loop, so it is not an input: "
                "choose a variable defined once at the top level, like x = torch.arange(3.)",
                kind="input",
            )
    return names


def _tensor_variable(env: dict[str, Any], name: str) -> torch.Tensor:
    value = env[name]
    if not isinstance(value, torch.Tensor):
        raise ExprError(f"{name} is a {type(value).__name__}, not a tensor: only tensors can be inputs", kind="input")
    if not (value.is_floating_point() or value.is_complex()):
        raise ExprError(
            f"{name} has dtype {str(value.dtype).replace('torch.', '')}, which has no gradient: make {name} a "
            f"float tensor (write its numbers with a decimal point, torch.tensor([1., 2.]), or add .double())",
            kind="input",
        )
    return value


def _bind(wrt: tuple[str, ...], tensors: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
    if len(tensors) != len(wrt):
        raise ExprError(
            f"the program function takes {len(wrt)} tensor(s) ({', '.join(wrt)}), got {len(tensors)}", kind="input"
        )
    return dict(zip(wrt, tensors, strict=True))


def _dependents(program: Program, wrt: tuple[str, ...]) -> set[str]:
    """Names whose value may depend on `wrt` (assigned from them, or in loops and `with` blocks)."""
    dependent = set(wrt)
    for stmt in program.tree.body:
        if isinstance(stmt, (ast.For, ast.With, ast.AugAssign)):
            dependent.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        elif isinstance(stmt, ast.Assign):
            used = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
            if used & dependent:
                dependent.update(n.id for n in ast.walk(stmt.targets[0]) if isinstance(n, ast.Name))
    return dependent
