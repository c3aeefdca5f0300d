"""Second order: the Jacobian of the gradient and Hessian-vector products, against differences of the gradient."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
from torch.func import jvp

from gradcheck._autograd import autograd_jacobian, first_line
from gradcheck._compare import PairData
from gradcheck._devices import is_out_of_memory
from gradcheck._gradient import GradientFunction, output_weights
from gradcheck._inputs import autograd_copies, overlapping
from gradcheck._lowprec import as_rounding, is_low_precision, suspect, tested_tolerance
from gradcheck._numerical import numerical_jacobian
from gradcheck._pairs import Differences, judge, judge_direction
from gradcheck._setup import hand_values
from gradcheck._state import RunState
from gradcheck.errors import InputError
from gradcheck.report import Check, PairReport

__all__ = ["second_order_pairs", "FORWARD_OVER_REVERSE", "DOUBLE_BACKWARD"]

FORWARD_OVER_REVERSE, DOUBLE_BACKWARD = "forward-over-reverse (jvp of the gradient)", "double backward"
Pair = tuple[int, int]


def second_order_pairs(state: RunState, leaves: Sequence[Any], expected_hessian: Any) -> list[PairReport]:
    """The second-order pairs: for each input i, the gradient g_i differentiated by everything it depends on.

    g is the gradient of sum_o <u_o, f_o> (u_o = 1 for a scalar output, else seeded
    random weights). "rev2" compares the Jacobian of g by each input, by double
    backward, with central differences of g; "rev2-u" the same by each weight u_o
    (the backward's derivative by its grad_output, which torch's gradgradcheck checks
    too); "hvp" compares H v (forward over reverse when fn allows it, else double
    backward) with (g(x + eps v) - g(x - eps v)) / 2 eps for a seeded random v. A
    hand-derived Hessian is the third opinion of "rev2" and "hvp".
    """
    opts = state.opts
    n_args = len(state.args)
    weights = output_weights(
        {o: tuple(state.outputs[o].shape) for o in state.checked},
        seed=opts.seed,
        dtype=torch.float64,
        device=state.device,
    )
    grad_auto = GradientFunction(state.fn, n_args, state.diff, state.checked)
    grad_num = GradientFunction(state.num_fn, n_args, state.diff, state.checked)
    by = state.diff + tuple(n_args + k for k in range(len(state.checked)))
    auto_weights = [u.to(state.outputs[o].dtype).requires_grad_() for u, o in zip(weights, state.checked, strict=True)]
    ag = autograd_jacobian(grad_auto, (*leaves, *auto_weights), by, budget_bytes=state.budget, device=state.device)
    state.notes += [n.replace("output ", "gradient ") for n in ag.notes]
    num_dtype = state.num_args[state.diff[0]].dtype
    num_args = (*state.num_args, *[u.to(num_dtype) for u in weights])
    base = [g.detach() for g in grad_num(*num_args)]
    grads = tuple(range(len(state.diff)))
    nm = numerical_jacobian(
        grad_num,
        num_args,
        by,
        grads,
        base,
        eps=opts.eps,
        atol=opts.atol,
        budget_bytes=state.budget,
        device=state.device,
    )
    if grad_num.functorch:
        state.notes += nm.notes
    elif nm.method == "loop":
        state.notes.append(
            "second order: the gradient ran through the recorded graph (torch.autograd.grad), which vmap "
            "cannot batch, so its finite differences ran one element at a time."
        )
    hand = _hessian(state, expected_hessian)
    fd = Differences(grad_num, num_args, grads, base, [nm.floors[k] for k in grads], nm.method, opts.eps)
    precise = _Float64(state, grad_num, weights, by)
    pairs = []
    for k, i in enumerate(state.diff):
        for j in by:
            if j < n_args:
                data = _data(state, i, j, ag.jac[(k, j)], nm.jac[(k, j)], hand.get((i, j)), Check.REV2)
            else:
                data = _data(state, i, state.checked[j - n_args], ag.jac[(k, j)], nm.jac[(k, j)], None, Check.REV2_U)
            report = judge(data, fd, k, detail_limit=opts.detail_limit, arg=j)
            if data.tested_tol is not None and suspect(report) and precise.usable:
                report = as_rounding(report, data, precise.jacobian(k, j))
            pairs.append(report)
    pairs += _hvp_pairs(state, grad_auto, grad_num, leaves, num_args, weights, hand, fd, precise)
    if not _scalar_outputs(state):
        state.notes.append(
            f"second order: the gradient checked is that of sum(u * output) for seeded random weights u "
            f"in [0.5, 1.5) (seed {opts.seed}), as torch's gradgradcheck takes random grad_outputs."
        )
    return pairs


def _scalar_outputs(state: RunState) -> bool:
    return len(state.checked) == 1 and state.outputs[state.checked[0]].numel() == 1


def _hessian(state: RunState, expected_hessian: Any) -> dict[Pair, torch.Tensor]:
    if expected_hessian is None:
        return {}
    if not _scalar_outputs(state):
        sizes = ", ".join(str(state.outputs[o].numel()) for o in state.checked)
        raise InputError(
            f"expected_hessian needs fn to return one scalar (the Hessian of a scalar); fn returns "
            f"{len(state.checked)} output(s) of {sizes} element(s). Check a scalar such as "
            "(weights * fn(x)).sum() instead."
        )
    shapes = {(i, j): (tuple(state.args[i].shape), tuple(state.args[j].shape)) for i in state.diff for j in state.diff}
    before = state.expected_dtype
    hand = hand_values(state, expected_hessian, outputs=state.diff, n_outputs=len(state.args), shapes=shapes)
    state.expected_dtype = before or state.expected_dtype
    return hand


_SIDES = {Check.REV2: "double backward", Check.REV2_U: "double backward", Check.HVP: "H v"}


def _data(
    state: RunState,
    i: int,
    j: int,
    tested: torch.Tensor,
    numerical: torch.Tensor,
    third: torch.Tensor | None,
    check: str,
) -> PairData:
    """Pair data for the gradient of input i by input j (by output j's weights for rev2-u)."""
    if check == Check.HVP:
        in_shape: tuple[int, ...] = ()
    else:
        in_shape = tuple((state.args if check == Check.REV2 else state.outputs)[j].shape)
    numerical = numerical.detach().to(torch.float64).cpu()
    dtypes = (state.args[i].dtype, *(state.outputs[o].dtype for o in state.checked))
    tested_tol = None
    if is_low_precision(*dtypes):
        scale = float(numerical.abs().nan_to_num(0.0, 0.0, 0.0).max()) if numerical.numel() else 0.0
        tested_tol = tested_tolerance(dtypes, state.opts.atol, state.opts.rtol, scale)
    return PairData(
        output_index=i,
        input_index=j,
        output_shape=tuple(state.args[i].shape),
        input_shape=in_shape,
        autograd=tested.detach().to(torch.float64).cpu(),
        numerical=numerical,
        expected=None if third is None else third.reshape(tested.shape).cpu(),
        atol=state.opts.atol,
        rtol=state.opts.rtol,
        kinks=state.opts.kinks,
        check=check,
        sides=(_SIDES[check], "numerical", "expected"),
        tested_tol=tested_tol,
    )


class _Float64:
    """Second-order derivatives again on the float64 copies, for a low-precision pair that fails."""

    def __init__(
        self, state: RunState, grad_num: GradientFunction, weights: list[torch.Tensor], by: tuple[int, ...]
    ) -> None:
        self.state, self.grad_num, self.weights, self.by = state, grad_num, weights, by
        self.usable = state.num_args[state.diff[0]].dtype == torch.float64
        self.jac: dict[Pair, torch.Tensor] | None = None
        self.products: dict[int, list[torch.Tensor]] = {}

    def jacobian(self, k: int, j: int) -> torch.Tensor:
        """Gradient k's Jacobian by argument j (an input, or an output's weights)."""
        if self.jac is None:
            state = self.state
            leaves = autograd_copies(state.num_args, state.diff, state.device)
            weights = [u.requires_grad_() for u in (w.clone() for w in self.weights)]
            self.jac = autograd_jacobian(
                self.grad_num, (*leaves, *weights), self.by, budget_bytes=state.budget, device=state.device
            ).jac
        return self.jac[(k, j)]

    def product(self, k: int, j: int, v: torch.Tensor) -> torch.Tensor:
        """H v of gradient k along input j."""
        if j not in self.products:
            state = self.state
            leaves = autograd_copies(state.num_args, state.diff, state.device)
            method, notes = state.hvp_method, list(state.notes)
            self.products[j] = _products(state, self.grad_num, leaves, self.weights, j, v, float64=True)
            state.hvp_method, state.notes = method, notes
        return self.products[j][k]


def _hvp_pairs(
    state: RunState,
    grad_auto: GradientFunction,
    grad_num: GradientFunction,
    leaves: Sequence[Any],
    num_args: Sequence[Any],
    weights: list[torch.Tensor],
    hand: dict[Pair, torch.Tensor],
    fd: Differences,
    precise: _Float64,
) -> list[PairReport]:
    """One "hvp" pair per (gradient i, direction along input j); failing ones probed at 2 eps too."""
    gen = torch.Generator().manual_seed(state.opts.seed + 2)
    eps = state.opts.eps
    pairs = []
    for j in state.diff:
        x = state.args[j]
        v = (torch.rand(x.numel(), generator=gen, dtype=torch.float64) + 0.5).to(state.device)
        products = _products(state, grad_auto, leaves, weights, j, v)
        steps = _Steps(grad_num, num_args, j, eps * v)
        plus, minus = steps.at(1.0), steps.at(-1.0)
        for k, i in enumerate(state.diff):
            central = (plus[k].detach().to(torch.float64) - minus[k].detach().to(torch.float64)) / (2 * eps)
            h = hand.get((i, j))
            third = None if h is None else h.reshape(state.args[i].numel(), x.numel()) @ v.to(h.device)
            data = _data(state, i, j, products[k].reshape(-1), central.reshape(-1), third, Check.HVP)
            report = judge_direction(
                data, partial(steps.gradient, k), fd.base[k], eps=eps, floor=fd.floors[k],
                detail_limit=state.opts.detail_limit,
            )
            if data.tested_tol is not None and suspect(report) and precise.usable:
                report = as_rounding(report, data, precise.product(k, j, v))
            pairs.append(report)
    return pairs


class _Steps:
    """The gradient at x_j + s * step for step multiples s, each evaluated once."""

    def __init__(self, grad_num: GradientFunction, args: Sequence[Any], j: int, step: torch.Tensor) -> None:
        self.grad_num, self.args, self.j, self.step = grad_num, args, j, step
        self.done: dict[float, tuple[torch.Tensor, ...]] = {}

    def at(self, s: float) -> tuple[torch.Tensor, ...]:
        if s not in self.done:
            self.done[s] = tuple(self.grad_num(*_moved(self.args, self.j, s * self.step)))
        return self.done[s]

    def gradient(self, k: int, s: float) -> torch.Tensor:
        return self.at(s)[k]


def _moved(args: Sequence[Any], j: int, step: torch.Tensor) -> list[Any]:
    call = list(args)
    call[j] = args[j] + step.to(args[j].dtype).reshape(args[j].shape)
    return call


def _products(
    state: RunState,
    grad_auto: GradientFunction,
    leaves: Sequence[Any],
    weights: list[torch.Tensor],
    j: int,
    v: torch.Tensor,
    *,
    float64: bool = False,
) -> list[torch.Tensor]:
    """H v along input j for every gradient: forward over reverse, else double backward (H^T v).

    Args:
        float64: the leaves are the float64 copies: keep the weights in float64 too.
    """
    primals = [x.detach() if isinstance(x, torch.Tensor) else x for x in leaves]
    us = [u if float64 else u.to(state.outputs[o].dtype) for u, o in zip(weights, state.checked, strict=True)]
    tangent = v.to(primals[j].dtype).reshape(primals[j].shape)
    if overlapping(primals[j]):
        state.notes.append(
            f"Hessian-vector products along input {j} ran by double backward: it is expanded (its elements "
            "share memory), which jvp cannot take."
        )
    elif state.hvp_method in (None, FORWARD_OVER_REVERSE) and grad_auto.functorch:

        def along_j(xj: torch.Tensor) -> tuple[torch.Tensor, ...]:
            call = list(primals)
            call[j] = xj
            return grad_auto(*call, *us)

        try:
            result = jvp(along_j, (primals[j],), (tangent,))[1]
        except Exception as e:  # noqa: BLE001 - double backward below re-raises what is real
            if is_out_of_memory(e):
                raise
            state.notes.append(
                f"Hessian-vector products ran by double backward: jvp could not take fn ({first_line(e)})."
            )
        else:
            state.hvp_method = FORWARD_OVER_REVERSE
            return [r.detach() for r in result]
    state.hvp_method = DOUBLE_BACKWARD
    xs = [leaves[i] for i in state.diff]
    with torch.enable_grad():
        grads = grad_auto(*leaves, *us)
        k = state.diff.index(j)
        if not grads[k].requires_grad:
            return [torch.zeros_like(x) for x in xs]
        out = torch.autograd.grad(grads[k], xs, grad_outputs=tangent, allow_unused=True, retain_graph=True)
    return [torch.zeros_like(x) if g is None else g.detach() for x, g in zip(xs, out, strict=True)]
