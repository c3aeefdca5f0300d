"""The sizes judged before allocating agree with what torch then makes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from graphviz_app.expr.allowlist import (
    CUSTOM_FUNCTIONS,
    F_FUNCTIONS,
    TENSOR_METHODS,
    TENSOR_PROPERTIES,
    TORCH_CONSTANTS,
    TORCH_FUNCTIONS,
)
from graphviz_app.expr.shapes import constructor_is_floating, constructor_numel, nested_numel, op_numel

A = torch.ones(2, 3)
B = torch.ones(3, 4)
V = torch.ones(3)
BATCH = torch.ones(5, 1, 2, 3)


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("zeros", (2, 3), {}),
        ("ones", ((4, 5),), {}),
        ("randn", ([2, 2, 2],), {}),
        ("rand", (), {"size": (3,)}),
        ("full", ((2, 3), 1.5), {}),
        ("full", ((2,), 7), {}),
        ("eye", (3,), {}),
        ("eye", (3, 5), {}),
        ("arange", (10,), {}),
        ("arange", (1.0, 2.0, 0.3), {}),
        ("arange", (5, 0, -2), {}),
        ("arange", (3.0,), {}),
        ("linspace", (0, 1, 7), {}),
        ("logspace", (0, 1), {"steps": 4}),
        ("randint", (0, 5, (2, 3)), {}),
        ("randint", (5,), {"size": (4,)}),
        ("randperm", (6,), {}),
        ("tensor", ([[1, 2], [3, 4]],), {}),
        ("tensor", ([1.5, 2],), {}),
        ("tensor", (3,), {}),
    ],
)
def test_constructor_size_and_floatness_match_torch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    made = getattr(torch, name)(*args, **kwargs)
    assert constructor_numel(name, args, kwargs) == made.numel()
    assert constructor_is_floating(name, args, kwargs) == made.dtype.is_floating_point


@pytest.mark.parametrize(
    ("name", "values", "kwargs", "real"),
    [
        ("matmul", [A, B], {}, lambda: A @ B),
        ("matmul", [V, B], {}, lambda: V @ B),
        ("matmul", [A, V], {}, lambda: A @ V),
        ("matmul", [V, V], {}, lambda: V @ V),
        ("matmul", [BATCH, torch.ones(4, 3, 2)], {}, lambda: BATCH @ torch.ones(4, 3, 2)),
        ("mm", [A, B], {}, lambda: torch.mm(A, B)),
        ("mv", [A, V], {}, lambda: torch.mv(A, V)),
        ("bmm", [torch.ones(2, 2, 3), torch.ones(2, 3, 5)], {},
         lambda: torch.bmm(torch.ones(2, 2, 3), torch.ones(2, 3, 5))),
        ("linear", [torch.ones(4, 3), torch.ones(6, 3)], {}, lambda: F.linear(torch.ones(4, 3), torch.ones(6, 3))),
        ("cat", [[A, A]], {}, lambda: torch.cat([A, A])),
        ("stack", [[V, V, V]], {}, lambda: torch.stack([V, V, V])),
        ("hstack", [[A, A]], {}, lambda: torch.hstack([A, A])),
        ("outer", [V, torch.ones(4)], {}, lambda: torch.outer(V, torch.ones(4))),
        ("kron", [A, B], {}, lambda: torch.kron(A, B)),
        ("cartesian_prod", [V, torch.ones(2)], {}, lambda: torch.cartesian_prod(V, torch.ones(2))),
        ("repeat", [A, 2, 3], {}, lambda: A.repeat(2, 3)),
        ("repeat", [A, (2, 1, 3)], {}, lambda: A.repeat((2, 1, 3))),
        ("tile", [V, (4,)], {}, lambda: torch.tile(V, (4,))),
        ("expand", [torch.ones(3, 1), 3, 5], {}, lambda: torch.ones(3, 1).expand(3, 5)),
        ("expand", [torch.ones(3, 1), -1, 5], {}, lambda: torch.ones(3, 1).expand(-1, 5)),
        ("expand", [V, (2, 3)], {}, lambda: V.expand((2, 3))),
        ("broadcast_to", [V, (4, 3)], {}, lambda: torch.broadcast_to(V, (4, 3))),
        ("expand_as", [V, A], {}, lambda: V.expand_as(A)),
        ("new_zeros", [V, (2, 5)], {}, lambda: V.new_zeros((2, 5))),
        ("new_full", [V, (4,), 1.0], {}, lambda: V.new_full((4,), 1.0)),
    ],
)
def test_op_size_matches_torch(name: str, values: list[Any], kwargs: dict[str, Any], real: Any) -> None:
    assert op_numel(name, values, kwargs) == real().numel()


def test_empty_inner_dimension_matmul_is_sized_by_its_output() -> None:
    # (10**5, 0) @ (0, 10**5) has empty inputs but a 10**10-element output.
    assert op_numel("matmul", [torch.ones(10**5, 0), torch.ones(0, 10**5)], {}) == 10**10


def test_shared_nested_lists_are_counted_without_visiting_every_item() -> None:
    row = [0] * 10**4
    assert nested_numel([row] * 10**4) == 10**8
    deep: list[Any] = [1]
    for _ in range(1000):
        deep = [deep, deep]
    assert nested_numel(deep) == 2**62  # capped: 2**1000 is refused all the same


def test_every_allow_listed_name_exists_in_this_torch() -> None:
    missing = [n for n in TORCH_FUNCTIONS if not hasattr(torch, n)]
    missing += [f"F.{n}" for n in F_FUNCTIONS if not hasattr(F, n)]
    missing += [f"Tensor.{n}" for n in [*TENSOR_METHODS, *TENSOR_PROPERTIES] if not hasattr(torch.Tensor, n)]
    missing += [f"torch.{n}" for n in TORCH_CONSTANTS if not hasattr(torch, n)]
    assert missing == [], f"allow-listed but absent in torch {torch.__version__}"
    assert set(CUSTOM_FUNCTIONS) == {"square", "square_wrong_backward", "cube", "cube_wrong_backward"}
