"""The screen: large Jacobians probed with random ±1 vectors first, element by element only on a miss.

A full check of an (m, n) Jacobian costs 2n evaluations of fn and m backward
passes. The screen costs 2k evaluations and k backward passes per output: for
k random ±1 vectors u_b over the input and v_a over the output it compares the
k x k numbers v_a^T J u_b that autograd (and a hand derivation) give against
central differences of fn along u_b (every input element moved by ±eps at once).

Why a miss is unlikely: say element (r, c) of the error E = J_autograd - J is
larger than atol. Fix every sign but v_r: flipping v_r moves w = v^T E[:, c] by
2|E_rc| > 2 atol, so |w| <= atol for at most one of the two signs; with k
independent v, all k miss with probability at most 2^-k. Given some |w| > atol,
the same argument on u_c bounds the k u's missing by 2^-k. So an element whose
error exceeds the probes' tolerance passes every probe with probability at most 2^(1-k).

The tolerance is atol plus the rounding a probe's finite difference carries,
`ROUNDING` x unit roundoff x sum|f(x)| / eps (the ±1-weighted sum over the output
adds each output element's rounding): it grows with the output's size and
magnitude, so an absolute atol alone rejected correct gradients of 200,000 inputs,
while a wrong element larger than it is still found.
A pair that misses is settled by a second step (`SECOND_STEP` times eps): agreement
there passes it (the first step's rounding); finite differences agreeing at both
steps while autograd does not blame autograd; steps disagreeing with each other
blame the differences. Then every element is compared, which says which elements
disagree, unless that comparison is larger than `FULL_WORK_LIMIT`: then the screened
report stands, with a note saying so and a sampled block of elements compared
(`_sample`); screen=False compares every element anyway.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from gradcheck._autograd import no_grad_notes, vector_jacobian_products
from gradcheck._chunks import plan_chunk, run_chunked
from gradcheck._detached import settle_detached
from gradcheck._inputs import autograd_copies, call_outputs, checked_outputs
from gradcheck._numerical import NumericalResult, directional_differences
from gradcheck._sample import sampled_notes
from gradcheck._setup import hand_jacobians, numerical_base
from gradcheck._state import CheckOutcome, RunState, build_report
from gradcheck.report import Blame, Check, Comparison, Element, PairReport

__all__ = ["PROBES", "SECOND_STEP", "ROUNDING", "FULL_WORK_LIMIT", "screen_note", "run_screen", "full_work"]

PROBES = 20  # k: an element off by more than the tolerance passes every probe with probability <= 2^(1-k)
SECOND_STEP = 10.0  # a missed pair is differenced again with this many times eps (rounding shrinks 10x)
ROUNDING = 8.0  # unit roundoffs per output value a probe's difference may carry (fn's own arithmetic, summing)
_UNIT = float(torch.finfo(torch.float64).eps) / 2
# Above this many input-element evaluations (2 n evaluations of fn, each touching its n inputs and
# m outputs: 2 n (n + m)), a missed screen does not fall back to every element: 200,000 inputs
# would take minutes, past any job's limit. About 10 s of float64 arithmetic on one core.
FULL_WORK_LIMIT = 4_000_000_000

Pair = tuple[int, int]


def screen_note(k: int = PROBES) -> str:
    """The sentence a screened report carries: what was compared and how sure a pass is."""
    return (
        f"screened: each pair compared the {k} x {k} numbers v^T J u for random ±1 vectors u over "
        f"the input and v over the output, by autograd and by central differences along u (every input "
        f"element moved by ±eps at once), to atol plus the rounding such a difference carries "
        f"({ROUNDING:g} x unit roundoff x sum|f(x)| / eps). An element off by more than that would have "
        f"failed one with probability at least 1 - 2^-{k - 1}; then every element is compared where affordable. Pass "
        "screen=False (CLI: --every-element) to compare every element anyway."
    )


def full_work(s: RunState) -> int:
    """Input-element evaluations comparing every element takes: 2 n evaluations of fn, each n + m values."""
    n = sum(s.args[i].numel() for i in s.diff)
    m = sum(s.outputs[o].numel() for o in s.checked)
    return 2 * n * (n + m)


def run_screen(state: RunState, expected: Any) -> CheckOutcome | None:
    """The screened check of `state`, or None when it does not apply or a probe misses.

    Runs on a copy of `state`, so that the element-by-element check that follows a
    None starts from where this one started.
    """
    s = dataclasses.replace(state, notes=list(state.notes), complex_outputs=list(state.complex_outputs))
    opts = s.opts
    if opts.screen is False or opts.fast or opts.modes != ("rev",) or opts.order != 1:
        return None
    if s.complex_inputs or any(s.args[i].dtype != torch.float64 for i in s.diff):
        _not_screened(state)
        return None
    leaves = autograd_copies(s.args, s.diff, s.device)
    with s.clock("autograd"), torch.enable_grad():
        outs = call_outputs(s.fn, leaves, found_complex=s.complex_outputs)
    s.checked = checked_outputs(outs)
    s.outputs = tuple(y.detach() for y in outs)
    if not _worth_it(s):
        return None
    if s.complex_outputs or any(s.outputs[o].dtype != torch.float64 for o in s.checked):
        _not_screened(state)
        return None
    base = numerical_base(s)
    if any(s.num_args[i].dtype != torch.float64 for i in s.diff) or any(y.dtype != torch.float64 for y in base):
        _not_screened(state)
        return None
    with s.clock("expected"):
        wanted = hand_jacobians(s, expected)
    gen = torch.Generator().manual_seed(s.opts.seed)
    v = {o: _signs(gen, (PROBES, s.outputs[o].numel()), s.device) for o in s.checked}
    u = {i: _signs(gen, (PROBES, s.args[i].numel()), s.device) for i in s.diff}
    with s.clock("autograd"):
        autograd, ag_method = _autograd_side(s, leaves, outs, v, u)
    s.notes += no_grad_notes(outs, s.checked)
    with s.clock("numerical"):
        found = _numerical_side(s, base, v, u, s.opts.eps)
    if found is None:
        return None
    numerical, fd_method = found
    hand = {pair: v[pair[0]] @ j.reshape(v[pair[0]].shape[1], -1) @ u[pair[1]].T for pair, j in wanted.items()}
    sizes = {o: float(base[o].abs().nan_to_num(0.0, 0.0, 0.0).sum()) for o in s.checked}  # sum|f(x)|
    with s.clock("compare"):
        pairs = [
            _pair(s, o, i, autograd[(o, i)], numerical[(o, i)], hand.get((o, i)), _floor(sizes[o], s.opts.eps))
            for o in s.checked for i in s.diff
        ]
    if not all(p.passed for p in pairs):
        settled = _second_step(s, (leaves, outs), base, v, u, (autograd, numerical, hand), pairs, sizes)
        if settled is None:
            return None
        pairs = settled
    s.notes.append(screen_note())
    report = build_report(s, pairs, base, f"{fd_method}, {PROBES} ±1 directions", ag_method, mode="screened")
    return CheckOutcome(report, {}, {})


def _second_step(
    s: RunState,
    graph: tuple[Sequence[Any], Sequence[torch.Tensor]],
    base: list[torch.Tensor],
    v: dict[int, torch.Tensor],
    u: dict[int, torch.Tensor],
    sides: tuple[dict[Pair, torch.Tensor], dict[Pair, torch.Tensor], dict[Pair, torch.Tensor]],
    pairs: list[PairReport],
    sizes: dict[int, float],
) -> list[PairReport] | None:
    """The missed pairs differenced again with SECOND_STEP * eps: the pairs settled, or None to compare every element.

    A pair agreeing at the second step passes (note added); one that does not is blamed from the
    two steps. Every element is compared next (None) unless that is larger than FULL_WORK_LIMIT;
    then the screened pairs stand, with a note saying why no element was located.
    """
    autograd, first, hand = sides
    leaves, outs = graph
    step = s.opts.eps * SECOND_STEP
    with s.clock("numerical"):
        found = _numerical_side(s, base, v, u, step)
    if found is None:
        return None
    second = found[0]
    settled = []
    for p in pairs:
        key = (p.output_index, p.input_index)
        if p.passed:
            settled.append(p)
            continue
        again = _pair(s, *key, autograd[key], second[key], hand.get(key), _floor(sizes[key[0]], step))
        if again.passed:
            s.notes.append(
                f"screen: output {key[0]}, input {key[1]} missed at eps={s.opts.eps:g} (by {p.max_abs_error:.3g}) "
                f"and agreed at a second step of {step:g}: the first step's rounding, not the gradient"
            )
            settled.append(again)
            continue
        both = _floor(sizes[key[0]], s.opts.eps) + _floor(sizes[key[0]], step)
        settled.append(dataclasses.replace(again, blame=_blame(again, _within(s, first[key], second[key], both))))
    if all(p.passed for p in settled):
        return settled
    work = full_work(s)
    if s.opts.screen is False or work <= FULL_WORK_LIMIT:
        return None
    settled = settle_detached(s.fn, leaves, settled, s.notes)
    s.notes.append(
        f"screen: the probes disagree at eps={s.opts.eps:g} and at a second step of {step:g}; comparing every "
        f"element would take {work:,} input-element evaluations (2 evaluations of fn per input element), above "
        f"the {FULL_WORK_LIMIT:,} this check allows, so only a sample of elements is compared. Check a smaller "
        "input (the same code computes its gradient), or pass screen=False (CLI: --every-element) to compare "
        "every element anyway"
    )
    with s.clock("numerical"):
        missed = [(p.output_index, p.input_index) for p in settled if not p.passed]
        s.notes += sampled_notes(s, leaves, outs, base, missed)
    return settled


def _blame(pair: PairReport, steps_agree: bool) -> str:
    """Which side a pair that missed at both steps points at (see `Blame`)."""
    ok = {c.name: c.passed for c in pair.comparisons}
    if not steps_agree:
        return Blame.NUMERICAL  # the differences move with the step: they cannot settle it
    if ok.get("autograd~numerical"):
        return Blame.EXPECTED
    if ok.get("expected~numerical"):
        return Blame.AUTOGRAD
    return Blame.SHARED if ok.get("expected~autograd") else Blame.AUTOGRAD


def _within(s: RunState, a: torch.Tensor, b: torch.Tensor, floor: float) -> bool:
    """Whether two k x k probe matrices agree to atol + `floor`."""
    gap = (a - b).abs()
    return bool(torch.isfinite(gap).all()) and float(gap.max()) <= s.opts.atol + floor


def _floor(size: float, step: float) -> float:
    """The rounding a probe's central difference with `step` may carry: ROUNDING units of sum|f(x)| / step."""
    return ROUNDING * _UNIT * size / step


def _not_screened(state: RunState) -> None:
    """No screen for this dtype; with screen=True, a note in the element-by-element report says why."""
    if state.opts.screen:
        state.notes.append(
            "screen=True: not screened, as the screen compares real float64 values only (inputs, outputs "
            "and finite differences); every element was compared instead."
        )


def _worth_it(s: RunState) -> bool:
    """screen=True always; by default only when every pair is too large to keep each element anyway."""
    if s.opts.screen:
        return True
    sizes = [s.outputs[o].numel() * s.args[i].numel() for o in s.checked for i in s.diff]
    return bool(sizes) and min(sizes) > s.opts.detail_limit


def _signs(gen: torch.Generator, shape: tuple[int, int], device: torch.device) -> torch.Tensor:
    """Random ±1 float64 values, from a seeded CPU generator so runs repeat exactly."""
    bits = torch.randint(0, 2, shape, generator=gen, dtype=torch.float64)
    return (bits * 2 - 1).to(device)


def _autograd_side(
    s: RunState,
    leaves: Sequence[Any],
    outs: Sequence[torch.Tensor],
    v: dict[int, torch.Tensor],
    u: dict[int, torch.Tensor],
) -> tuple[dict[Pair, torch.Tensor], str]:
    """v_a^T J u_b per pair by autograd: k backward passes per output, each weighting that output alone."""
    live = [o for o in s.checked if outs[o].requires_grad]
    result = {
        (o, i): torch.zeros(PROBES, PROBES, dtype=torch.float64, device=s.device) for o in s.checked for i in s.diff
    }
    if not live:
        return result, "backward"
    rows = PROBES * len(live)  # rows [p k, (p + 1) k) weight output live[p] by its v, the others by 0
    grads = {i: torch.empty(rows, leaves[i].numel(), dtype=torch.float64, device=s.device) for i in s.diff}
    methods: list[str] = []

    def work(start: int, stop: int) -> None:
        cotangents = {}
        for p, o in enumerate(live):
            weights = torch.zeros(stop - start, outs[o].numel(), dtype=torch.float64, device=s.device)
            lo, hi = max(start, p * PROBES), min(stop, (p + 1) * PROBES)
            if lo < hi:
                weights[lo - start : hi - start] = v[o][lo - p * PROBES : hi - p * PROBES]
            cotangents[o] = weights.to(outs[o].dtype).reshape(stop - start, *outs[o].shape)
        found, method = vector_jacobian_products(s.fn, leaves, s.diff, outs, cotangents)
        methods.append(method)
        for i in s.diff:
            grads[i][start:stop] = found[i]

    stats = plan_chunk(
        budget_bytes=s.budget,
        item_elements=sum(x.numel() for x in leaves if isinstance(x, torch.Tensor)) + sum(y.numel() for y in outs),
        itemsize=max(leaves[i].element_size() for i in s.diff),
        total=rows,
        working_factor=2,
    )
    run_chunked(rows, stats, work, s.device)
    for p, o in enumerate(live):
        for i in s.diff:
            result[(o, i)] = grads[i][p * PROBES : (p + 1) * PROBES] @ u[i].T
    return result, methods[-1]


def _numerical_side(
    s: RunState, base: list[torch.Tensor], v: dict[int, torch.Tensor], u: dict[int, torch.Tensor], eps: float
) -> tuple[dict[Pair, torch.Tensor], str] | None:
    """v_a^T J u_b per pair by central differences along each u_b, and how fn was evaluated.

    None when fn gives other values under vmap than when called plainly.
    """
    result: dict[Pair, torch.Tensor] = {}
    methods: set[str] = set()
    for i in s.diff:
        found = _along(s, i, base, u[i], eps)
        if found is None:
            return None
        differences, method = found
        methods.add(method)
        for o in s.checked:
            result[(o, i)] = v[o] @ differences[o].T
    return result, " and ".join(sorted(methods))


def _along(
    s: RunState, i: int, base: list[torch.Tensor], directions: torch.Tensor, eps: float
) -> tuple[dict[int, torch.Tensor], str] | None:
    """Per checked output, the (k, m_o) central differences along each direction of input i, in chunks."""
    x = s.num_args[i]
    stats = plan_chunk(
        budget_bytes=s.budget,
        item_elements=2 * (x.numel() + sum(y.numel() for y in base)),
        itemsize=x.element_size(),
        total=PROBES,
    )
    chunks: list[NumericalResult | None] = []

    def work(start: int, stop: int) -> None:
        if chunks and chunks[-1] is None:
            return  # vmap was not trusted: the element-by-element check takes over
        chunks.append(
            directional_differences(
                s.num_fn,
                s.num_args,
                i,
                s.checked,
                base,
                directions[start:stop].to(x.dtype).reshape(stop - start, *x.shape),
                eps=eps,
                atol=s.opts.atol,
            )
        )

    run_chunked(PROBES, stats, work, s.device)
    s.stats = stats
    done = [c for c in chunks if c is not None]
    if len(done) < len(chunks):
        return None
    s.notes += [n for c in done for n in c.notes]
    differences = {o: torch.cat([c.jac[(o, i)] for c in done]) for o in s.checked}
    return differences, done[-1].method


def _pair(
    s: RunState, o: int, i: int, autograd: torch.Tensor, numerical: torch.Tensor, hand: torch.Tensor | None,
    floor: float,
) -> PairReport:
    """The pair's report: passed when every probe of every side agrees to atol + `floor` (`_floor`)."""
    sides = {"autograd": autograd, "numerical": numerical} | ({} if hand is None else {"expected": hand})
    names = [("autograd", "numerical"), ("expected", "autograd"), ("expected", "numerical")]
    comparisons = []
    worst_abs, worst_at = -1.0, 0
    for left, right in names:
        if left not in sides:
            continue
        gap = (sides[left] - sides[right]).abs().reshape(-1)
        finite = bool(torch.isfinite(gap).all())
        biggest = float(gap.max()) if finite else float("inf")
        scale = float(sides[right].abs().max())
        rel = biggest / scale if scale else (0.0 if biggest == 0 else float("inf"))
        ok = finite and biggest <= s.opts.atol + floor
        comparisons.append(Comparison(f"{left}~{right}", ok, biggest, rel, 0 if ok else 1))
        if finite and biggest > worst_abs:
            worst_abs, worst_at = biggest, int(gap.argmax())
    passed = all(c.passed for c in comparisons)
    worst = Element(
        index=(),
        autograd=float(autograd.reshape(-1)[worst_at]),
        numerical=float(numerical.reshape(-1)[worst_at]),
        expected=None if hand is None else float(hand.reshape(-1)[worst_at]),
        abs_error=max(c.max_abs_error for c in comparisons),
        rel_error=max(c.max_rel_error for c in comparisons),
        failed=not passed,
    )
    out_shape, in_shape = tuple(s.outputs[o].shape), tuple(s.args[i].shape)
    return PairReport(
        output_index=o,
        input_index=i,
        output_shape=out_shape,
        input_shape=in_shape,
        shape=out_shape + in_shape,
        numel=s.outputs[o].numel() * s.args[i].numel(),
        passed=passed,
        blame=Blame.NONE if passed else Blame.UNCLEAR,
        max_abs_error=worst.abs_error,
        max_rel_error=worst.rel_error,
        failed_count=0,
        worst=worst,
        worst_elements=(),
        comparisons=tuple(comparisons),
        failed=(),
        kink_count=0,
        autograd=None,
        numerical=None,
        expected=None,
        error=None,
        failed_mask=None,
        check=Check.REV,
        atol=s.opts.atol,
        rtol=s.opts.rtol,
    )
