"""Inputs keep their strides and storage offset on the autograd side; vmap is checked before it is trusted."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from custom_functions import SinRightVmap, SinWrongVmap

from gradcheck import Blame, check
from gradcheck._inputs import same_layout_copy

D = torch.float64


class _WrongUnlessContiguous(torch.autograd.Function):
    """2x whose backward says 3 when its input is not contiguous (a slice, an expanded view)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.odd = not inputs[0].is_contiguous()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * (3 if ctx.odd else 2)


class _WrongUnlessContiguousOld(torch.autograd.Function):
    """The same, old-style (forward takes ctx): checked by the batched backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.odd = not x.is_contiguous()
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * (3 if ctx.odd else 2)


def _every_other_column() -> torch.Tensor:
    return torch.randn(4, 8, dtype=D, generator=torch.Generator().manual_seed(0))[:, ::2].requires_grad_()


def _expanded() -> torch.Tensor:
    return torch.randn(3, 1, dtype=D, generator=torch.Generator().manual_seed(0)).expand(3, 4).requires_grad_()


LAYOUTS = [
    ("x[:, ::2]", _every_other_column),
    ("expanded", _expanded),
    ("transposed", lambda: torch.randn(3, 4, dtype=D).t().requires_grad_()),
]


@pytest.mark.parametrize(
    "fn_class", [_WrongUnlessContiguous, _WrongUnlessContiguousOld], ids=["new-style", "old-style"]
)
@pytest.mark.parametrize("make", [c[1] for c in LAYOUTS], ids=[c[0] for c in LAYOUTS])
def test_a_backward_wrong_only_for_strided_inputs_fails(fn_class: Any, make: Any) -> None:
    """Before: passed, as the inputs were cloned contiguous; torch's gradcheck fails it."""
    x = make()
    report = check(fn_class.apply, x)

    assert not report.passed and report.pair(0, 0).blame == Blame.AUTOGRAD
    assert report.pair(0, 0).constant_ratio == pytest.approx(1.5)
    if 0 not in x.stride():  # torch refuses inputs whose elements share memory
        assert torch.autograd.gradcheck(fn_class.apply, (x,), raise_exception=False) is False


def test_the_same_backward_passes_on_contiguous_inputs() -> None:
    assert check(_WrongUnlessContiguous.apply, torch.randn(4, 4, dtype=D).requires_grad_()).passed


@pytest.mark.parametrize(
    "make",
    [
        _every_other_column,
        _expanded,
        lambda: torch.arange(20, dtype=D)[5:13].reshape(2, 4),  # a storage offset of 5
    ],
    ids=["x[:, ::2]", "expanded", "offset"],
)
def test_the_copy_keeps_sizes_strides_offset_and_values_but_not_the_memory(make: Any) -> None:
    x = make().detach()
    copy = same_layout_copy(x, torch.device("cpu"))

    assert (copy.shape, copy.stride(), copy.storage_offset()) == (x.shape, x.stride(), x.storage_offset())
    assert torch.equal(copy, x)
    assert copy.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_the_users_tensor_and_its_grad_are_untouched() -> None:
    x = _every_other_column()
    before = x.detach().clone()

    check(lambda x: (x**2).sum(), x)

    assert torch.equal(x.detach(), before) and x.grad is None


def test_a_wrong_vmap_rule_falls_back_to_the_loop_with_a_note() -> None:
    """Before: the batched differences trusted vmap, and the right backward was reported as a kink."""
    report = check(SinWrongVmap.apply, torch.tensor([0.3, 0.7, 1.1], dtype=D, requires_grad=True))

    assert report.passed, str(report)
    assert report.numerical_method == "loop"
    note = next(n for n in report.notes if n.startswith("fn gives different values under vmap"))
    assert "by up to 0.891" in note and "custom vmap rule" in note


def test_a_right_vmap_rule_is_trusted() -> None:
    report = check(SinRightVmap.apply, torch.tensor([0.3, 0.7, 1.1], dtype=D, requires_grad=True))

    assert report.passed and report.numerical_method == "vmap"
    assert not any("under vmap" in n for n in report.notes)


class _JvpWrongUnlessContiguous(_WrongUnlessContiguous):
    """The same, with a jvp that says 3 for a non-contiguous input too."""

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:
        return tangent * (3 if ctx.odd else 2)


def test_forward_mode_and_second_order_keep_the_layout_too() -> None:
    forward = check(_JvpWrongUnlessContiguous.apply, _every_other_column(), modes=("fwd",))
    second = check(lambda x: (_WrongUnlessContiguous.apply(x) ** 2).sum(), _every_other_column(), order=2)

    assert not forward.passed and forward.pair(0, 0, "fwd").blame == Blame.AUTOGRAD
    assert not second.passed and {p.check for p in second.failed_pairs} == {"rev", "rev2", "rev2-u", "hvp"}


def test_an_expanded_input_gets_forward_mode_and_hessian_vector_products_with_a_note() -> None:
    """Before: forward mode raised torch's "more than one element ... refers to a single memory location"."""
    report = check(torch.exp, _expanded(), modes=("rev", "fwd"), order=2)

    assert report.passed, str(report)
    assert report.forward_method == "vmap(jvp)" and report.hvp_method == "double backward"
    assert "input 0 is expanded (its elements share memory), which forward mode cannot take" in "\n".join(report.notes)
    assert not any("single memory location" in n for n in report.notes)
