"""The language described for people: `graphviz-app --help` prints this."""

from __future__ import annotations

import textwrap

from .allowlist import (
    BUILTIN_FUNCTIONS,
    CUSTOM_FUNCTIONS,
    F_FUNCTIONS,
    MODULE_ATTRIBUTES,
    NN_MODULES,
    TENSOR_METHODS,
    TENSOR_PROPERTIES,
    TORCH_FUNCTIONS,
)
from .limits import Limits

__all__ = ["LANGUAGE_HELP", "allowed_names"]


def _wrap(names: object, indent: str = "    ") -> str:
    return textwrap.fill(" ".join(sorted(names)), width=88, initial_indent=indent, subsequent_indent=indent)  # type: ignore[call-overload]


def allowed_names() -> dict[str, list[str]]:
    """What a program may call or read, grouped as the help text shows it."""
    return {
        "torch": sorted(TORCH_FUNCTIONS),
        "F": sorted(F_FUNCTIONS),
        "custom": sorted(CUSTOM_FUNCTIONS),
        "nn": sorted(NN_MODULES),
        "methods": sorted(TENSOR_METHODS),
        "properties": sorted(TENSOR_PROPERTIES),
        "builtins": sorted(BUILTIN_FUNCTIONS),
    }


_L = Limits()

LANGUAGE_HELP = f"""\
The expression language
  A program is assignments, then one expression: its value is the output.
  It is parsed and walked, never run as Python; only the names below exist.

    x = torch.arange(3., requires_grad=True)
    ((x+2)**2+3).mean()

  More examples:
    w = torch.randn(3, 2, requires_grad=True); b = torch.zeros(2, requires_grad=True)
    F.relu(torch.ones(4, 3) @ w + b).sum()

    total = torch.zeros(())
    for i in range(10):          # bounded loops: range(N), N <= {_L.max_loop_iterations:,} in all
        total = total + ((x+2)**2).mean()
    total

    custom.square_wrong_backward(x).sum()   # a custom backward that is wrong (by a factor 2)

  Allowed: numbers, True/False/None, strings as arguments, lists and tuples,
  + - * / // % ** @ & | ^ ~, comparisons, indexing and slicing, `a if c else b`,
  keyword arguments, `a += b` (meaning a = a + b, never in place), names defined
  above, devices "cpu" / "cuda" / "cuda:N", dtype=torch.float32 / float64 / ...

  torch.*:
{_wrap(TORCH_FUNCTIONS)}
  F.* (torch.nn.functional):
{_wrap(F_FUNCTIONS)}
  custom.*: square, cube (correct backward); square_wrong_backward, cube_wrong_backward
           (each with a right jvp, for check --fwd)
  nn.* (also torch.nn.*) modules, held in a variable and called like lin(x):
{_wrap(NN_MODULES)}
    e.g. enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4), 6); enc(x).sum()
    Parameters are counted (on torch's meta device) before they are allocated; layers[i]
    indexes an nn.Sequential / nn.ModuleList; a module's readable attributes are
    {", ".join(sorted(MODULE_ATTRIBUTES))}. Modules run in training mode; the graph names
    their ops by variable (enc.layers.0.linear1) and program line.
  tensor methods:
{_wrap(TENSOR_METHODS)}
  tensor attributes: {", ".join(sorted(TENSOR_PROPERTIES))}
  built-ins: {", ".join(sorted(BUILTIN_FUNCTIONS))}

  Refused, with a message naming the construct and its position: import, def,
  class, lambda, while, with, comprehensions, f-strings, names starting with _,
  anything not listed above (torch.load, open, getattr, os, numpy, ...).
  Limits: {_L.max_source_chars:,} characters, {_L.max_tensor_elements:,} elements per tensor,
  {_L.max_total_bytes:,} bytes of tensors in all, {_L.max_loop_iterations:,} loop iterations,
  {_L.max_multiply_adds:,} multiply-adds per matmul, einsum or convolution.
"""
