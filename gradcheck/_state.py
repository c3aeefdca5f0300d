"""One check run's options, state and clock, and the Report built from them."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from gradcheck._chunks import ChunkStats, OutOfMemory, human_bytes
from gradcheck._inputs import summarize
from gradcheck._notes import dtype_label, precision_notes
from gradcheck._numerical import rounding_floor
from gradcheck.errors import InputError
from gradcheck.report import MemoryInfo, PairReport, Report, Timings

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "CPU_MEMORY_BUDGET",
    "CUDA_MEMORY_BUDGET",
    "resolve_budget",
    "DEFAULT_DETAIL_LIMIT",
    "MODES",
    "KINKS",
    "CheckOptions",
    "CheckOutcome",
    "Clock",
    "RunState",
    "build_report",
    "kinks_note",
    "oom_report",
]

# Bytes of working memory per batched chunk when memory_budget=None. On CPU a modest
# chunk runs faster than a huge one (it stays nearer the caches); a GPU wants big batches.
CPU_MEMORY_BUDGET = 32 * 2**20
CUDA_MEMORY_BUDGET = 1024 * 2**20
DEFAULT_MEMORY_BUDGET = None
DEFAULT_DETAIL_LIMIT = 10_000  # pairs up to this many elements keep every element
MODES = ("rev", "fwd")
KINKS = ("fail", "warn", "pass")

Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """`check`'s keyword options, validated; the defaults are `check`'s."""

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    device: str | torch.device | None = None
    dtype: torch.dtype | None = torch.float64
    fast: bool = False
    memory_budget: int | None = DEFAULT_MEMORY_BUDGET
    detail_limit: int = DEFAULT_DETAIL_LIMIT
    seed: int = 0
    modes: tuple[str, ...] = ("rev",)
    order: int = 1
    kinks: str = "fail"
    screen: bool | None = None

    def __post_init__(self) -> None:
        for name in ("eps", "atol", "rtol"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InputError(f"{name} must be a finite number >= 0, but got {value!r}")
        if self.eps == 0:
            raise InputError("eps must be > 0: it is the finite-difference step (default 1e-6)")
        if self.dtype is not None and not (
            isinstance(self.dtype, torch.dtype) and self.dtype.is_floating_point
        ):
            raise InputError(
                f"dtype must be a floating torch dtype (torch.float64, torch.float32, ...) "
                f"or None, but got {self.dtype!r}"
            )
        if not isinstance(self.seed, int):
            raise InputError(f"seed must be an int, but got {self.seed!r}")
        budget = self.memory_budget
        if budget is not None and (not isinstance(budget, int) or budget < 1):
            raise InputError(
                f"memory_budget must be a positive int (bytes) or None, but got {budget!r}"
            )
        if not isinstance(self.detail_limit, int) or self.detail_limit < 0:
            raise InputError(f"detail_limit must be an int >= 0, but got {self.detail_limit!r}")
        self._check_modes()

    def _check_modes(self) -> None:
        modes = self.modes
        if isinstance(modes, str) or not modes or not all(isinstance(m, str) and m in MODES for m in modes):
            raise InputError(
                f"modes must be a non-empty tuple of {', '.join(map(repr, MODES))} (reverse mode: the "
                f"backward; forward mode: jvp), but got {modes!r}"
            )
        if len(set(modes)) != len(modes):
            raise InputError(f"modes names a mode twice: {modes!r}")
        if self.order not in (1, 2) or isinstance(self.order, bool):
            raise InputError(
                f"order must be 1 (gradients) or 2 (also the gradient of the gradient and "
                f"Hessian-vector products), but got {self.order!r}"
            )
        if self.kinks not in KINKS:
            raise InputError(
                f"kinks must be one of {', '.join(map(repr, KINKS))} (what a verified kink with a valid "
                f"one-sided gradient does to the verdict), but got {self.kinks!r}"
            )
        if self.screen not in (None, True, False):
            raise InputError(
                f"screen must be None (screen pairs too large to keep every element), True or False, "
                f"but got {self.screen!r}"
            )
        if self.screen and (self.fast or self.modes != ("rev",) or self.order != 1):
            raise InputError(
                "screen=True probes the reverse-mode Jacobian at first order only; drop screen=True to "
                "use fast=True, forward mode (modes=...) or second order (order=2)"
            )
        if self.fast and (self.modes != ("rev",) or self.order != 1):
            raise InputError(
                "fast=True compares random projections of the reverse-mode Jacobian only; drop fast=True "
                "to check forward mode (modes=...) or second order (order=2)"
            )


@dataclass(slots=True)
class CheckOutcome:
    """A report and the full Jacobians behind it (float64, on cpu), for compare_devices."""

    report: Report
    autograd: dict[Pair, torch.Tensor]
    numerical: dict[Pair, torch.Tensor]


@dataclass(slots=True)
class Clock:
    """Wall-clock seconds per part of the check, summed over its `with clock(name)` blocks."""

    seconds: dict[str, float] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - begin

    def timings(self) -> Timings:
        """The seconds so far, as the report's Timings."""
        s = self.seconds
        return Timings(
            autograd_s=s.get("autograd", 0.0),
            numerical_s=s.get("numerical", 0.0),
            expected_s=s.get("expected", 0.0),
            compare_s=s.get("compare", 0.0),
            forward_s=s.get("forward", 0.0),
            second_order_s=s.get("second order", 0.0),
            total_s=time.perf_counter() - self.start,
        )


@dataclass(slots=True)
class RunState:
    """What one check run accumulates on its way to a Report."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    diff: tuple[int, ...]
    device: torch.device
    opts: CheckOptions
    clock: Clock
    budget: int
    num_fn: Callable[..., Any]  # what finite differences call: fn, or a cast copy of it
    user_fn: Callable[..., Any]  # fn as given (complex inputs as complex tensors)
    notes: list[str] = field(default_factory=list)
    stats: ChunkStats | None = None
    outputs: tuple[torch.Tensor, ...] = ()
    checked: tuple[int, ...] = ()
    num_args: tuple[Any, ...] = ()
    expected_dtype: str | None = None
    retries: int = 0  # out-of-memory halvings on the autograd side
    complex_inputs: tuple[int, ...] = ()
    complex_outputs: list[int] = field(default_factory=list)
    forward_method: str | None = None
    hvp_method: str | None = None
    float64_jac: dict[Pair, torch.Tensor] | None = None  # autograd on the float64 copies, when asked for
    float64_fwd: dict[Pair, torch.Tensor] | None = None  # forward mode on them, when asked for


def resolve_budget(budget: int | None, device: torch.device) -> int:
    """The chunk memory budget in bytes: `budget`, or the device's default for None.

    On CUDA the default is also capped at a quarter of the memory free right now.
    """
    if budget is not None:
        return budget
    if device.type != "cuda":
        return CPU_MEMORY_BUDGET
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(CUDA_MEMORY_BUDGET, free // 4))


def build_report(
    state: RunState,
    pairs: list[PairReport],
    base: list[torch.Tensor],
    method: str,
    ag_method: str,
    mode: str | None = None,
) -> Report:
    """The Report of a finished run; `mode` is "fast" or "full" by the options unless given."""
    opts = state.opts
    num_dtype = state.num_args[state.diff[0]].dtype
    # NaN/Inf outputs fail on their own; the rounding floor is that of the finite values.
    scale = max((float(y.abs().nan_to_num(0.0, 0.0, 0.0).max()) for y in base if y.numel()), default=0.0)
    floor = rounding_floor(num_dtype, scale, opts.eps)
    notes = state.notes + precision_notes(
        autograd_dtypes=[state.args[i].dtype for i in state.diff],
        numerical_dtype=num_dtype,
        max_input=_max_input(state),
        floor=floor,
        eps=opts.eps,
        atol=opts.atol,
        rtol=opts.rtol,
        requested_dtype=opts.dtype,
    )
    accepted = sum(p.kinks_accepted for p in pairs)
    if accepted:
        notes.append(kinks_note(accepted, opts.kinks))
    stats = state.stats or ChunkStats(chunk_size=1, item_bytes=0)
    return Report(
        passed=all(p.passed for p in pairs),
        mode=mode or ("fast" if opts.fast else "full"),
        pairs=tuple(pairs),
        inputs=summarize(state.args, state.diff),
        outputs=summarize(state.outputs, state.checked),
        device=str(state.device),
        autograd_dtype=dtype_label(state.args[i].dtype for i in state.diff),
        numerical_dtype=dtype_label(state.num_args[i].dtype for i in state.diff),
        expected_dtype=state.expected_dtype,
        numerical_method=method,
        autograd_method=ag_method,
        eps=opts.eps,
        atol=opts.atol,
        rtol=opts.rtol,
        precision_floor=floor,
        timings=state.clock.timings(),
        memory=MemoryInfo(
            state.budget, stats.chunk_size, stats.chunk_bytes, stats.retries + state.retries, None
        ),
        notes=tuple(dict.fromkeys(notes)),
        modes=opts.modes,
        order=opts.order,
        kinks=opts.kinks,
        forward_method=state.forward_method,
        hvp_method=state.hvp_method,
    )


def kinks_note(accepted: int, kinks: str) -> str:
    """The sentence saying that kinks were accepted, and how to see them fail."""
    return (
        f"kinks={kinks!r}: {accepted} element(s) passed only because the function has a verified kink "
        "there (its one-sided slopes differ, as relu at 0) and each gradient given is one of them or "
        "between them (a valid one-sided or sub-gradient); finite differences give their average. "
        "kinks='fail' fails them."
    )


def _max_input(state: RunState) -> float:
    return max(
        (float(state.num_args[i].abs().max()) for i in state.diff if state.num_args[i].numel()),
        default=0.0,
    )


def oom_report(state: RunState, oom: OutOfMemory) -> Report:
    stats = oom.stats
    asked = oom.asked or "an amount the error does not say"
    text = (
        f"out of memory on {state.device} even in chunks of one input element (our estimate: "
        f"{human_bytes(stats.chunk_bytes)} per chunk, after {stats.retries} halvings); the "
        f"allocator was asked for {asked} ({oom.message}). Free memory held elsewhere, use "
        "fast=True (two evaluations per input), or check on another device."
    )
    opts = state.opts
    return Report(
        passed=False,
        mode="fast" if opts.fast else "full",
        pairs=(),
        inputs=summarize(state.args, state.diff),
        outputs=summarize(state.outputs, state.checked),
        device=str(state.device),
        autograd_dtype=dtype_label(state.args[i].dtype for i in state.diff),
        numerical_dtype=dtype_label([opts.dtype or state.args[state.diff[0]].dtype]),
        expected_dtype=state.expected_dtype,
        numerical_method="none",
        autograd_method="none",
        eps=opts.eps,
        atol=opts.atol,
        rtol=opts.rtol,
        precision_floor=0.0,
        timings=state.clock.timings(),
        memory=MemoryInfo(state.budget, stats.chunk_size, stats.chunk_bytes, stats.retries, text),
        notes=tuple(dict.fromkeys(state.notes)),
        modes=opts.modes,
        order=opts.order,
        kinks=opts.kinks,
    )
