"""One check run at first order: reverse and forward mode against finite differences, or fast mode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch

from gradcheck._autograd import AutogradResult, autograd_jacobian
from gradcheck._chunks import plan_chunk, run_chunked
from gradcheck._compare import PairData, compare_pair
from gradcheck._detached import settle_detached
from gradcheck._fast import analytic_projections, project_fast, random_projections
from gradcheck._forward import forward_jacobian
from gradcheck._inputs import autograd_copies, call_outputs, checked_outputs
from gradcheck._lowprec import as_rounding, is_low_precision, suspect, tested_tolerance
from gradcheck._numerical import NumericalResult, numerical_jacobian
from gradcheck._pairs import Differences, judge
from gradcheck._screen import run_screen
from gradcheck._second import second_order_pairs
from gradcheck._setup import hand_jacobians, numerical_base
from gradcheck._state import CheckOutcome, RunState, build_report
from gradcheck.report import Check, PairReport

__all__ = ["run_full", "run_fast"]

Pair = tuple[int, int]


def run_full(state: RunState, expected: Any, expected_hessian: Any) -> CheckOutcome:
    """Whole Jacobians by each asked-for mode and by finite differences, compared element by element.

    Large reverse-mode Jacobians are screened first (`run_screen`): when every
    probe agrees the check ends there, else it goes on here element by element.
    """
    screened = run_screen(state, expected)
    if screened is not None:
        return screened
    opts = state.opts
    leaves = autograd_copies(state.args, state.diff, state.device)
    ag = None
    with state.clock("autograd"):
        if "rev" in opts.modes:
            ag = autograd_jacobian(
                state.fn,
                leaves,
                state.diff,
                budget_bytes=state.budget,
                device=state.device,
                found_complex=state.complex_outputs,
            )
            state.outputs, state.checked = ag.outputs, ag.checked
            state.notes += ag.notes
            state.retries = ag.stats.retries
        else:
            outs = call_outputs(state.fn, leaves, found_complex=state.complex_outputs)
            state.outputs, state.checked = tuple(y.detach() for y in outs), checked_outputs(outs)
    base = numerical_base(state)
    opts = state.opts  # the step and tolerances may have been chosen for fn's own dtype
    with state.clock("expected"):
        wanted = hand_jacobians(state, expected)
    with state.clock("numerical"):
        nm = numerical_jacobian(
            state.num_fn,
            state.num_args,
            state.diff,
            state.checked,
            base,
            eps=opts.eps,
            atol=opts.atol,
            budget_bytes=state.budget,
            device=state.device,
        )
    state.stats = nm.stats
    state.notes += nm.notes
    fd = Differences(
        state.num_fn, state.num_args, state.checked, base, [nm.floors[o] for o in state.checked], nm.method, opts.eps
    )
    pairs: list[PairReport] = []
    if ag is not None:
        with state.clock("compare"):
            pairs += [_rev_pair(state, ag, nm, fd, wanted, o, i) for o in state.checked for i in state.diff]
    if "fwd" in opts.modes:
        pairs += _fwd_pairs(state, leaves, nm, fd, ag.jac if ag is not None else wanted, ag is not None)
    pairs = settle_detached(state.fn, leaves, pairs, state.notes)
    if opts.order == 2:
        with state.clock("second order"):
            pairs += second_order_pairs(state, leaves, expected_hessian)
    report = build_report(state, pairs, base, nm.method, ag.method if ag is not None else "none")
    return CheckOutcome(
        report,
        {p: t.cpu() for p, t in ag.jac.items()} if ag is not None else {},
        {p: t.cpu() for p, t in nm.jac.items()},
    )


def _pair_data(
    state: RunState, o: int, i: int, tested: torch.Tensor, numerical: torch.Tensor, third: torch.Tensor | None
) -> PairData:
    numerical = numerical.cpu()
    dtypes = (state.args[i].dtype, state.outputs[o].dtype)
    tested_tol = None
    if is_low_precision(*dtypes):
        scale = float(numerical.abs().nan_to_num(0.0, 0.0, 0.0).max()) if numerical.numel() else 0.0
        tested_tol = tested_tolerance(dtypes, state.opts.atol, state.opts.rtol, scale)
    return PairData(
        output_index=o,
        input_index=i,
        output_shape=tuple(state.outputs[o].shape),
        input_shape=tuple(state.args[i].shape),
        autograd=tested.cpu(),
        numerical=numerical,
        expected=None if third is None else third.reshape(tested.shape).cpu(),
        atol=state.opts.atol,
        rtol=state.opts.rtol,
        kinks=state.opts.kinks,
        tested_tol=tested_tol,
    )


def _rev_pair(
    state: RunState,
    ag: AutogradResult,
    nm: NumericalResult,
    fd: Differences,
    wanted: dict[Pair, torch.Tensor],
    o: int,
    i: int,
) -> PairReport:
    """One reverse-mode pair; a low-precision backward that is right in float64 is only rounding."""
    data = _pair_data(state, o, i, ag.jac[(o, i)], nm.jac[(o, i)], wanted.get((o, i)))
    report = judge(data, fd, state.checked.index(o), detail_limit=state.opts.detail_limit)
    if data.tested_tol is None or not suspect(report):
        return report
    precise = _float64_autograd(state)
    return report if precise is None else as_rounding(report, data, precise[(o, i)])


def _float64_autograd(state: RunState) -> dict[Pair, torch.Tensor] | None:
    """The same backward run on the float64 copies finite differences used (once per run)."""
    if state.float64_jac is None and state.num_args[state.diff[0]].dtype == torch.float64:
        leaves = autograd_copies(state.num_args, state.diff, state.device)
        result = autograd_jacobian(state.num_fn, leaves, state.diff, budget_bytes=state.budget, device=state.device)
        state.float64_jac = result.jac
    return state.float64_jac


def _fwd_pairs(
    state: RunState,
    leaves: Sequence[Any],
    nm: NumericalResult,
    fd: Differences,
    third: dict[Pair, torch.Tensor],
    reverse: bool,
) -> list[PairReport]:
    """Forward-mode pairs: jvp columns against finite differences and reverse mode (or expected)."""
    with state.clock("forward"):
        fw = forward_jacobian(
            state.fn,
            tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in leaves),
            state.diff,
            state.checked,
            budget_bytes=state.budget,
            device=state.device,
        )
    state.forward_method = fw.method
    state.notes += fw.notes
    sides = ("forward", "numerical", "reverse" if reverse else "expected")
    pairs = []
    with state.clock("compare"):
        for o in state.checked:
            for i in state.diff:
                data = _pair_data(state, o, i, fw.jac[(o, i)], nm.jac[(o, i)], third.get((o, i)))
                data = replace(data, check=Check.FWD, sides=sides, third_tested=reverse)
                report = judge(data, fd, state.checked.index(o), detail_limit=state.opts.detail_limit)
                if data.tested_tol is not None and suspect(report, third_tested=reverse):
                    report = _fwd_rounding(state, report, data, (o, i), reverse)
                pairs.append(report)
    return pairs


def _fwd_rounding(state: RunState, report: PairReport, data: PairData, pair: Pair, reverse: bool) -> PairReport:
    """A low-precision forward pair checked again with forward (and reverse) mode on the float64 copies."""
    if state.num_args[state.diff[0]].dtype != torch.float64:
        return report
    if state.float64_fwd is None:
        args = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in state.num_args)
        state.float64_fwd = forward_jacobian(
            state.num_fn, args, state.diff, state.checked, budget_bytes=state.budget, device=state.device
        ).jac
    precise_reverse = _float64_autograd(state) if reverse else None
    third = None if precise_reverse is None else precise_reverse[pair]
    return as_rounding(report, data, state.float64_fwd[pair], third)


def run_fast(state: RunState, expected: Any) -> CheckOutcome:
    """u^T J v for random unit vectors u, v by autograd, finite differences and `expected`."""
    opts = state.opts
    leaves = autograd_copies(state.args, state.diff, state.device)
    with state.clock("autograd"), torch.enable_grad():
        graph_outputs = call_outputs(state.fn, leaves, found_complex=state.complex_outputs)
    state.outputs = tuple(y.detach() for y in graph_outputs)
    state.checked = checked_outputs(graph_outputs)
    base = numerical_base(state)
    opts = state.opts
    with state.clock("expected"):
        wanted = hand_jacobians(state, expected)
    proj = random_projections(
        {o: state.outputs[o].numel() for o in state.checked},
        {i: state.args[i].numel() for i in state.diff},
        seed=opts.seed,
        device=state.device,
    )
    with state.clock("autograd"):
        analytic = analytic_projections(graph_outputs, leaves, state.diff, state.checked, proj)
    state.stats = plan_chunk(budget_bytes=state.budget, item_elements=1, itemsize=1, total=1)
    data: list[PairData] = []

    def work(start: int, stop: int) -> None:
        data[:] = project_fast(
            state.num_fn,
            analytic,
            state.num_args,
            base,
            diff=state.diff,
            checked=state.checked,
            expected=wanted,
            proj=proj,
            eps=opts.eps,
            atol=opts.atol,
            rtol=opts.rtol,
        )

    with state.clock("numerical"):
        run_chunked(1, state.stats, work, state.device)
    state.notes.append(
        f"fast mode: each pair compares the single number u^T J v for random positive unit "
        f"vectors u, v (seed {opts.seed}), with atol scaled by sum(u) * sum(v); a wrong "
        "Jacobian almost never passes, but the failing element is not located. Run with "
        "fast=False to see which elements disagree."
    )
    with state.clock("compare"):
        pairs = [compare_pair(d, detail_limit=opts.detail_limit) for d in data]
    report = build_report(state, pairs, base, "projection", "projection")
    return CheckOutcome(report, {}, {})
