"""What an operation costs beyond its output: temporaries and multiply-adds, judged from shapes.

An einsum with a scalar output can contract through a 150**4-element
intermediate, and a convolution on the CPU unfolds its input into columns
(im2col) far larger than input or output; both are sized here before they
run. Multiply-adds bound the time of one operation, which the evaluator's
clock cannot stop once it started.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .slow_ops import POOLS, cdist_cost, norm_cost, pool_cost

__all__ = ["Cost", "operation_cost"]

_HUGE = 2**62
_MATMULS = ("matmul", "mm", "bmm", "mv", "dot", "vdot", "inner")


@dataclass(frozen=True, slots=True)
class Cost:
    """The largest temporary (elements) and the multiply-adds of one operation.

    For ops slower per element than a matmul (`slow_ops`), `multiply_adds`
    counts multiply-add equivalents and `detail` says what they are made of.
    """

    temporary: int = 0
    multiply_adds: int = 0
    detail: str = ""


def _prod(sizes: Sequence[int]) -> int:
    return min(math.prod(sizes), _HUGE)


def operation_cost(name: str, values: Sequence[Any], kwargs: dict[str, Any], out_numel: int | None) -> Cost | None:
    """The cost of op `name` on these arguments (tensor first for methods); None if not modelled."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if name in _MATMULS and len(tensors) == 2 and out_numel is not None:
        inner = tensors[0].shape[-1] if tensors[0].dim() else 1
        return Cost(multiply_adds=min(out_numel * inner, _HUGE))
    if name == "linear" and len(tensors) >= 2 and out_numel is not None:
        return Cost(multiply_adds=min(out_numel * (tensors[1].shape[-1] if tensors[1].dim() else 1), _HUGE))
    if name == "bilinear" and len(tensors) >= 3 and out_numel is not None and tensors[2].dim() == 3:
        _, d1, d2 = tensors[2].shape
        return Cost(temporary=0, multiply_adds=min(out_numel * d1 * d2, _HUGE))
    if name == "tensordot" and len(tensors) == 2 and out_numel is not None:
        # One contraction of size K: |a|*|b|*|out| = (n*K)*(K*m)*(n*m) = (n*m*K)**2.
        return Cost(multiply_adds=min(math.isqrt(tensors[0].numel() * tensors[1].numel() * max(out_numel, 1)), _HUGE))
    if name == "einsum":
        return _einsum_cost(values)
    if name in ("conv1d", "conv2d"):
        return _conv_cost(values, kwargs, spatial=1 if name == "conv1d" else 2)
    slow = (cdist_cost(values, kwargs, out_numel) if name == "cdist"
            else pool_cost(name, values, kwargs, out_numel) if name in POOLS
            else norm_cost(values, kwargs) if name == "norm" else None)
    return None if slow is None else Cost(multiply_adds=slow.units, detail=slow.detail)


# einsum ------------------------------------------------------------------
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_term(labels: Any) -> str | None:
    if not isinstance(labels, (list, tuple)):
        return None
    parts = []
    for label in labels:
        if label is Ellipsis:
            parts.append("...")
        elif type(label) is int and 0 <= label < len(_LETTERS):
            parts.append(_LETTERS[label])
        else:
            return None
    return "".join(parts)


def _sublist_equation(values: Sequence[Any]) -> tuple[str, list[torch.Tensor]] | None:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as ``("ab,bc->ac", [a, b])``."""
    operands, terms = list(values[0::2]), [_sublist_term(v) for v in values[1::2]]
    output = None
    if len(values) % 2 == 1:  # a trailing output sublist
        output, operands = _sublist_term(values[-1]), operands[:-1]
        terms = terms[: len(operands)]
        if output is None:
            return None
    if not operands or any(t is None for t in terms) or not all(isinstance(t, torch.Tensor) for t in operands):
        return None
    equation = ",".join(terms) + (f"->{output}" if output is not None else "")  # type: ignore[arg-type]
    return equation, operands


def _einsum_operands(values: Sequence[Any]) -> tuple[str, list[torch.Tensor]] | None:
    if values and isinstance(values[0], torch.Tensor):
        return _sublist_equation(values)
    if not values or not isinstance(values[0], str):
        return None
    rest = list(values[1:])
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        rest = list(rest[0])
    if not rest or not all(isinstance(t, torch.Tensor) for t in rest):
        return None
    return values[0].replace(" ", ""), rest


def _einsum_terms(
    equation: str, operands: list[torch.Tensor]
) -> tuple[list[list[str]], list[str], dict[str, int]] | None:
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        return None
    sizes: dict[str, int] = {}
    labelled: list[list[str]] = []
    for term, t in zip(terms, operands, strict=True):
        letters = term.replace("...", "")
        if not letters.isalpha() and letters:
            return None
        n_ellipsis = t.dim() - len(letters) if "..." in term else 0
        if n_ellipsis < 0 or (n_ellipsis == 0 and "..." not in term and len(letters) != t.dim()):
            return None
        # Ellipsis dims get names "0", "1", ... counted from the right, as they broadcast.
        head, _, tail = term.partition("...")
        names = list(head) + [str(n_ellipsis - 1 - i) for i in range(n_ellipsis)] + list(tail)
        for label, size in zip(names, t.shape, strict=True):
            sizes[label] = max(sizes.get(label, 1), int(size))
        labelled.append(names)
    if arrow:
        head, _, tail = rhs.partition("...")
        dots = sorted({n for names in labelled for n in names if n.isascii() and n.isdigit()}, key=int, reverse=True)
        output = list(head) + (dots if "..." in rhs else []) + list(tail)
    else:
        counts: dict[str, int] = {}
        for names in labelled:
            for n in names:
                counts[n] = counts.get(n, 0) + 1
        output = [n for n in counts if n.isascii() and n.isdigit()] + sorted(
            n for n, c in counts.items() if c == 1 and not (n.isascii() and n.isdigit()))
    return labelled, output, sizes


def _einsum_cost(values: Sequence[Any]) -> Cost | None:
    found = _einsum_operands(values)
    if found is None:
        return None
    equation, operands = found
    parsed = _einsum_terms(equation, operands)
    if parsed is None:
        return None  # torch will reject the equation with its own message
    labelled, output, sizes = parsed
    optimal = _opt_einsum_cost(equation, operands)
    if optimal is not None:
        return optimal
    # Without opt_einsum torch contracts left to right, keeping the labels a
    # later operand or the output still needs.
    current, temporary, macs = set(labelled[0]), 0, _prod([sizes[n] for n in set(labelled[0])])
    for k in range(1, len(labelled)):
        combined = current | set(labelled[k])
        later = set(output).union(*map(set, labelled[k + 1 :]))
        current = combined & later
        macs = min(macs + _prod([sizes[n] for n in combined]), _HUGE)
        if k < len(labelled) - 1:
            temporary = max(temporary, _prod([sizes[n] for n in current]))
    return Cost(temporary=temporary, multiply_adds=macs)


def _opt_einsum_cost(equation: str, operands: list[torch.Tensor]) -> Cost | None:
    """The path torch itself takes when opt_einsum is installed and enabled."""
    backend = getattr(torch.backends, "opt_einsum", None)
    if backend is None or not backend.is_available() or not backend.enabled:
        return None
    try:
        import opt_einsum

        _, info = opt_einsum.contract_path(equation, *[tuple(t.shape) for t in operands], shapes=True,
                                           optimize=backend.strategy or "auto")
    except Exception:  # noqa: BLE001 - an old opt_einsum or an odd equation: use our estimate
        return None
    return Cost(temporary=min(int(info.largest_intermediate), _HUGE), multiply_adds=min(int(info.opt_cost), _HUGE))


# convolution ---------------------------------------------------------------
def _expand(value: Any, n: int) -> list[int] | None:
    if type(value) is int:
        return [value] * n
    if isinstance(value, (list, tuple)) and len(value) == n and all(type(v) is int for v in value):
        return list(value)
    return None


def _conv_cost(values: Sequence[Any], kwargs: dict[str, Any], *, spatial: int) -> Cost | None:
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    bound = dict(zip(names, values, strict=False))  # positional arguments may stop early
    bound.update({k: v for k, v in kwargs.items() if k in names})
    x, w = bound.get("input"), bound.get("weight")
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor) or w.dim() != spatial + 2:
        return None
    if x.dim() not in (spatial + 1, spatial + 2):
        return None
    batch = x.shape[0] if x.dim() == spatial + 2 else 1
    channels, lengths = x.shape[-spatial - 1], list(x.shape[-spatial:])
    kernel = list(w.shape[2:])
    stride = _expand(bound.get("stride", 1), spatial)
    dilation = _expand(bound.get("dilation", 1), spatial)
    padding = bound.get("padding", 0)
    if stride is None or dilation is None or 0 in stride:
        return None
    if padding == "same":
        out = lengths
    else:
        pads = [0] * spatial if padding == "valid" else _expand(padding, spatial)
        if pads is None:
            return None
        out = [max((n + 2 * p - d * (k - 1) - 1) // s + 1, 0)
               for n, p, d, k, s in zip(lengths, pads, dilation, kernel, stride, strict=True)]
    columns = _prod([batch, channels, *kernel, *out])  # the CPU's im2col buffer
    macs = _prod([batch, w.shape[0], *out, w.shape[1], *kernel])
    return Cost(temporary=columns, multiply_adds=macs)
