"""Notes on precision: which dtype each side ran in, and the error floor it implies."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from gradcheck._lowprec import TOLERANCE_UNITS, is_low_precision

__all__ = ["dtype_label", "precision_notes"]


def dtype_label(dtypes: Iterable[torch.dtype]) -> str:
    """Dtypes as one label without the torch. prefix: 'float64', or 'float32/float64'."""
    names: list[str] = []
    for d in dtypes:
        name = str(d).removeprefix("torch.")
        if name not in names:
            names.append(name)
    return "/".join(names)


def precision_notes(
    *,
    autograd_dtypes: list[torch.dtype],
    numerical_dtype: torch.dtype,
    max_input: float,
    floor: float,
    eps: float,
    atol: float,
    rtol: float,
    requested_dtype: torch.dtype | None = None,
) -> list[str]:
    """What the dtypes mean for this check: the copies made, and error floors above tolerance.

    Args:
        floor: the finite differences' rounding error, unit roundoff x max|f| / eps.
        max_input: the largest |x| among the differentiated inputs.
        requested_dtype: the dtype asked for; when it differs from `numerical_dtype`,
            fn computes in its own dtype and asking for float64 again would not help.
    """
    notes = []
    ag_label, num_label = dtype_label(autograd_dtypes), dtype_label([numerical_dtype])
    if ag_label != num_label:
        notes.append(
            f"autograd ran in the inputs' own dtype ({ag_label}); finite differences ran in "
            f"{num_label} on cast copies (your tensors are untouched)."
        )
    roundoff = torch.finfo(numerical_dtype).eps
    best = roundoff ** (1 / 3)
    if eps < roundoff * max_input / 2:
        notes.append(
            f"eps={eps:g} is below the spacing of {num_label} numbers near |x| = {max_input:g} "
            f"(about {roundoff * max_input:.2g}): x + eps rounds back to x, so finite "
            f"differences see no change and read 0. "
            f"{_higher_precision(numerical_dtype, requested_dtype)}, or use eps >= "
            f"{roundoff * max_input:.2g}."
        )
    elif floor > atol:
        notes.append(
            f"precision floor: finite differences in {num_label} with eps={eps:g} carry rounding "
            f"errors up to about {roundoff:.2g} x max|f| / eps = {floor:.2g} per element, above "
            f"atol={atol:g}; disagreements of that size are rounding, not a wrong gradient. "
            f"{_higher_precision(numerical_dtype, requested_dtype)}, or raise eps towards {best:.1g} "
            f"(the cube root of {num_label}'s unit roundoff, the best step for central "
            "differences)."
        )
    for d in dict.fromkeys(autograd_dtypes):
        ag_roundoff = torch.finfo(d).eps
        if is_low_precision(d):
            notes.append(
                f"autograd ran in {dtype_label([d])} (unit roundoff {ag_roundoff:.2g}): it is compared with "
                f"rtol={max(rtol, TOLERANCE_UNITS * ag_roundoff):.2g} and atol {TOLERANCE_UNITS} x {ag_roundoff:.2g} "
                "x the largest gradient (when above yours), and a pair that still fails is checked again with "
                "the backward in float64: if that agrees, the verdict is inconclusive (rounding), not a "
                "wrong backward."
            )
        elif ag_roundoff > rtol / 10:
            notes.append(
                f"autograd ran in {dtype_label([d])}, whose unit roundoff {ag_roundoff:.2g} is not "
                f"far below rtol={rtol:g}: relative differences near {ag_roundoff:.1g} are its "
                "rounding. Pass float32/float64 inputs to check the formula itself."
            )
    return notes


def _higher_precision(numerical: torch.dtype, requested: torch.dtype | None) -> str:
    if requested is not None and requested != numerical:
        # fn refused the requested dtype: it holds tensors of its own dtype.
        return (
            "Give fn's own tensors (weights, constants) as inputs or convert them "
            "(module.double()) so it computes in float64"
        )
    if numerical == torch.float64:
        return "Use a larger eps"
    return "Run with dtype=torch.float64 (the default)"
