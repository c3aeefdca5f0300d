"""`compare_devices`: the same check on several devices, and whether their gradients agree."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gradcheck._devices import resolve_device
from gradcheck._format import table
from gradcheck._state import CheckOptions, CheckOutcome
from gradcheck.checker import raised_here, run_check
from gradcheck.errors import InputError
from gradcheck.report import Report, to_plain

__all__ = ["DeviceDifference", "DeviceComparison", "compare_devices"]

Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class DeviceDifference:
    """How far one device's Jacobians are from the first device's, for one pair.

    `agree` when every element is within atol + rtol * |first device's value|.
    """

    device: str
    output_index: int
    input_index: int
    autograd_max_abs_difference: float
    numerical_max_abs_difference: float
    agree: bool


@dataclass(frozen=True, slots=True)
class DeviceComparison:
    """Each device's Report, and whether the gradients agree across devices.

    `passed` when every device's own check passed and all devices agree.
    """

    devices: tuple[str, ...]
    reports: tuple[Report, ...]
    differences: tuple[DeviceDifference, ...]
    agree: bool
    passed: bool
    atol: float
    rtol: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: the same conventions as `Report.to_dict`."""
        data: dict[str, Any] = to_plain(self)
        data["reports"] = [r.to_dict() for r in self.reports]
        return data

    def __str__(self) -> str:
        word = "AGREE" if self.agree else "DISAGREE"
        own = (
            "each device's own check passed"
            if all(r.passed for r in self.reports)
            else (
                "failing on "
                + ", ".join(d for d, r in zip(self.devices, self.reports, strict=True) if not r.passed)
            )
        )
        lines = [f"compare_devices: gradients {word} across {', '.join(self.devices)} ({own})"]
        rows = [
            [
                f"{d.output_index}/{d.input_index}",
                f"{self.devices[0]} vs {d.device}",
                f"{d.autograd_max_abs_difference:.3g}",
                f"{d.numerical_max_abs_difference:.3g}",
                "yes" if d.agree else "NO",
            ]
            for d in self.differences
        ]
        header = ["output/input", "devices", "autograd max diff", "numerical max diff", "agree"]
        lines += table(header, rows)
        for device, report in zip(self.devices, self.reports, strict=True):
            body = str(report).splitlines()
            lines += ["", f"on {device}:"] + ["  " + line for line in body]
        return "\n".join(lines)


def compare_devices(
    fn: Callable[..., Any],
    inputs: Any,
    *,
    devices: Sequence[str | torch.device] = ("cpu", "cuda"),
    expected: Any = None,
    **options: Any,
) -> DeviceComparison:
    """Runs `check` on each device and compares the Jacobians against the first device's.

    Args:
        fn: the function to check, as for `check`.
        inputs: a tensor or tuple of tensors; copies are moved to each device.
        devices: two or more devices ("cpu", "cuda", "cuda:1", ...), the first the reference.
        expected: the hand-derived gradient, as for `check`.
        **options: eps, atol, rtol, dtype, fast, memory_budget, detail_limit, seed.

    Raises:
        InputError: fewer than two devices, or a `device` option (use `devices`).
        DeviceError: a device that does not exist here, before anything runs.
    """
    __tracebackhide__ = True  # under pytest, errors point at the caller's line
    with raised_here():
        return _compare(fn, inputs, devices, expected, options)


def _compare(
    fn: Callable[..., Any], inputs: Any, devices: Sequence[str | torch.device], expected: Any, options: dict[str, Any]
) -> DeviceComparison:
    if "device" in options or "raise_exception" in options:
        raise InputError(
            "compare_devices takes devices=(...) and returns a DeviceComparison; drop the "
            "device= / raise_exception= options"
        )
    if isinstance(devices, (str, torch.device)) or len(devices) < 2:
        raise InputError(
            f"devices must name two or more devices, e.g. ('cpu', 'cuda'); got {devices!r}"
        )
    resolved = [resolve_device(d, ()) for d in devices]
    base = CheckOptions(**options)
    outcomes = [
        run_check(fn, inputs, expected, dataclasses.replace(base, device=device, screen=False))
        for device in resolved
    ]
    differences = tuple(
        diff
        for device, outcome in zip(resolved[1:], outcomes[1:], strict=True)
        for diff in _differences(str(device), outcomes[0], outcome, base)
    )
    reports = tuple(o.report for o in outcomes)
    agree = bool(differences) and all(d.agree for d in differences)
    return DeviceComparison(
        devices=tuple(str(d) for d in resolved),
        reports=reports,
        differences=differences,
        agree=agree,
        passed=agree and all(r.passed for r in reports),
        atol=base.atol,
        rtol=base.rtol,
    )


def _values(outcome: CheckOutcome, side: str) -> dict[Pair, torch.Tensor]:
    """Flat float64 values per pair: the full Jacobians, or a fast report's projections."""
    full = outcome.autograd if side == "autograd" else outcome.numerical
    if full:
        return {pair: t.reshape(-1) for pair, t in full.items()}
    return {
        (p.output_index, p.input_index): torch.tensor(getattr(p, side), dtype=torch.float64)
        for p in outcome.report.pairs
        if getattr(p, side) is not None
    }


def _differences(
    device: str, reference: CheckOutcome, other: CheckOutcome, opts: CheckOptions
) -> list[DeviceDifference]:
    result = []
    ref_a, ref_n = _values(reference, "autograd"), _values(reference, "numerical")
    got_a, got_n = _values(other, "autograd"), _values(other, "numerical")
    for pair in ref_a:
        if pair not in got_a:
            continue
        agree = True
        worst = []
        for ref, got in ((ref_a[pair], got_a[pair]), (ref_n[pair], got_n[pair])):
            diff = (got - ref).abs()
            agree = agree and bool((diff <= opts.atol + opts.rtol * ref.abs()).all())
            worst.append(float(diff.max()) if diff.numel() else 0.0)
        result.append(DeviceDifference(device, pair[0], pair[1], worst[0], worst[1], agree))
    return result
