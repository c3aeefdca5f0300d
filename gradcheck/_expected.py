"""Reading the user's hand-derived gradient into one Jacobian per (output, input) pair."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gradcheck._inputs import shape_text
from gradcheck.errors import InputError, ShapeMismatchError

__all__ = ["normalize_expected"]

Pair = tuple[int, int]

_FORMS = (
    "a tensor (one output, one input); a tuple with one gradient per input (one "
    "output) or one Jacobian per output (one input); or a tuple of tuples, "
    "expected[output][input], for several of both. None skips an entry."
)


def normalize_expected(
    value: Any,
    *,
    outputs: Sequence[int],
    inputs: Sequence[int],
    n_outputs: int,
    n_inputs: int,
    shapes: dict[Pair, tuple[tuple[int, ...], tuple[int, ...]]],
    device: torch.device,
) -> dict[Pair, torch.Tensor]:
    """Maps the user's expected gradient(s) onto (output, input) pairs.

    Args:
        value: what `expected` is, or what the `expected` callable returned.
        outputs: indices of the checked outputs; `n_outputs` counts all outputs.
        inputs: indices of the differentiated inputs; `n_inputs` counts all inputs.
        shapes: (output shape, input shape) of each pair.
        device: where the Jacobians are compared.

    Returns:
        One float64 Jacobian of shape output shape + input shape per given pair.

    Raises:
        ShapeMismatchError: a wrong count of entries or a wrong shape, naming both.
    """
    if _is_leaf(value):
        grid: list[list[Any]] = [[value]]
    else:
        items = list(value)
        if items and all(v is None or _is_leaf(v) for v in items):
            grid = _flat_to_grid(items, len(outputs), len(inputs), n_outputs, n_inputs)
        else:
            grid = [[None] * len(inputs) if row is None else _row(row) for row in items]
    grid = _select(grid, outputs, n_outputs, "outputs", "expected[output]")
    result: dict[Pair, torch.Tensor] = {}
    for o, row in zip(outputs, grid, strict=True):
        row = _select(row, inputs, n_inputs, "inputs", f"expected[{o}]")
        for i, entry in zip(inputs, row, strict=True):
            if entry is not None:
                result[(o, i)] = _as_jacobian(entry, (o, i), shapes[(o, i)], device)
    return result


def _is_leaf(value: Any) -> bool:
    """A tensor or a (nested) list of numbers: one gradient, not a tuple of them."""
    if isinstance(value, torch.Tensor) or hasattr(value, "__array__"):
        return True
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, list):
        return all(isinstance(v, (int, float, list)) for v in value)
    if isinstance(value, tuple):
        return False
    raise InputError(f"expected must be {_FORMS} Found a {type(value).__name__}.")


def _row(row: Any) -> list[Any]:
    if _is_leaf(row):
        return [row]
    return list(row)


def _flat_to_grid(
    items: list[Any], n_out: int, n_in: int, all_out: int, all_in: int
) -> list[list[Any]]:
    """A flat tuple of gradients: per input when there is one output, else per output."""
    if n_out == 1 and len(items) in (n_in, all_in):
        return [items]
    if n_in == 1 and len(items) in (n_out, all_out):
        return [[v] for v in items]
    raise ShapeMismatchError(
        f"expected has {len(items)} entries, but the check has {n_out} checked output(s) "
        f"and {n_in} differentiated input(s), so a flat tuple is ambiguous or the wrong "
        f"length. expected must be {_FORMS}"
    )


def _select(
    items: list[Any], chosen: Sequence[int], total: int, what: str, where: str
) -> list[Any]:
    """Keeps the entries of the chosen indices, given either all entries or only those."""
    if len(items) == len(chosen):
        return items
    if len(items) == total:
        return [items[k] for k in chosen]
    raise ShapeMismatchError(
        f"{where} has {len(items)} entries, but there are {len(chosen)} checked {what} "
        f"(of {total} in all): give one entry per checked {what[:-1]}, or one per "
        f"{what[:-1]} with None for the others."
    )


def _as_jacobian(
    entry: Any, pair: Pair, shapes: tuple[tuple[int, ...], tuple[int, ...]], device: torch.device
) -> torch.Tensor:
    out_shape, in_shape = shapes
    try:
        tensor = torch.as_tensor(entry).detach().to(device=device, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise InputError(
            f"expected gradient for output {pair[0]}, input {pair[1]} is not a number array: {e}"
        ) from e
    want = tuple(out_shape) + tuple(in_shape)
    if tuple(tensor.shape) != want:
        raise ShapeMismatchError(
            f"expected gradient for output {pair[0]}, input {pair[1]} has shape "
            f"{shape_text(tensor.shape)}, but output {pair[0]} has shape {shape_text(out_shape)} "
            f"and input {pair[1]} has shape {shape_text(in_shape)}, so its Jacobian has shape "
            f"{shape_text(want)} (output shape + input shape; the input's shape alone for a "
            "scalar output). Reshape it, or return it from the expected function in that shape."
        )
    return tensor
