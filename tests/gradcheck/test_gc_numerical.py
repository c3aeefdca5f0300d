"""Finite differences: the vmap and loop paths agree, the fallback, chunking and OOM retries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import gradcheck._numerical as numerical
from gradcheck import CheckMemoryError, check
from gradcheck._numerical import numerical_jacobian

D = torch.float64
W = torch.linspace(-1, 1, 12, dtype=D).reshape(4, 3)
W5 = torch.linspace(-1, 1, 35, dtype=D).reshape(5, 7)

SMOOTH: list[tuple[str, Callable[..., Any], tuple[torch.Tensor, ...]]] = [
    ("elementwise", lambda x: torch.sin(x) * x**2, (torch.linspace(-2, 2, 7, dtype=D),)),
    ("tanh-Wx", lambda x: torch.tanh(W @ x), (torch.tensor([0.3, -0.2, 0.9], dtype=D),)),
    (
        "softmax-2d",
        lambda x: torch.softmax(x, dim=1),
        (torch.linspace(-1, 1, 6, dtype=D).reshape(2, 3),),
    ),
    ("two-outputs", lambda x: (x.exp(), x.sum() ** 2), (torch.linspace(0, 1, 5, dtype=D),)),
]


def _jacobians(
    fn: Callable[..., Any], args: tuple[torch.Tensor, ...]
) -> tuple[dict[Any, torch.Tensor], str]:
    outs = fn(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    result = numerical_jacobian(
        fn,
        args,
        (0,),
        tuple(range(len(outs))),
        outs,
        eps=1e-6,
        budget_bytes=2**20,
        device=torch.device("cpu"),
    )
    return result.jac, result.method


@pytest.mark.parametrize(("fn", "args"), [c[1:] for c in SMOOTH], ids=[c[0] for c in SMOOTH])
def test_vmap_and_loop_give_the_same_jacobian(
    fn: Callable[..., Any],
    args: tuple[torch.Tensor, ...],
    monkeypatch: pytest.MonkeyPatch,
    record_property: Any,
) -> None:
    batched, batched_method = _jacobians(fn, args)

    def no_vmap(*_: Any, **__: Any) -> Any:
        raise RuntimeError("vmap switched off by the test")

    monkeypatch.setattr(numerical, "vmap", no_vmap)
    looped, looped_method = _jacobians(fn, args)

    assert (batched_method, looped_method) == ("vmap", "loop")
    worst = max(float((batched[k] - looped[k]).abs().max()) for k in batched)
    record_property("max_abs_difference_vmap_vs_loop", worst)
    print(f"max |vmap - loop| = {worst:.3g}")
    assert worst <= 1e-9, f"vmap and loop Jacobians differ by {worst:.3g}"


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        pytest.param(lambda x: x * x.sum().item(), ".item()", id="item"),
        pytest.param(
            lambda x: x**2 if x.sum() > 0 else -x, "data-dependent control flow", id="control-flow"
        ),
    ],
)
def test_functions_vmap_cannot_take_fall_back_to_the_loop_with_a_note(
    fn: Callable[..., Any], reason: str
) -> None:
    report = check(fn, torch.tensor([0.5, 1.0, 1.5], dtype=D, requires_grad=True))

    assert report.numerical_method == "loop"
    note = next(
        n for n in report.notes if n.startswith("finite differences ran one element at a time")
    )
    assert reason in note


def test_loop_fallback_still_finds_the_right_gradient() -> None:
    def scaled(x: torch.Tensor) -> torch.Tensor:
        scale = 2.0 if x.sum().item() > 0 else 3.0  # .item(): not vmappable, but differentiable
        return scale * x**2

    report = check(
        scaled,
        torch.tensor([0.5, 1.0], dtype=D, requires_grad=True),
        expected=lambda x: torch.diag(4 * x),
    )

    assert report.passed and report.numerical_method == "loop"
    assert report.pair(0, 0).numerical == pytest.approx([2.0, 0.0, 0.0, 4.0], abs=1e-8)


def test_a_tiny_memory_budget_gives_one_element_chunks_and_the_same_answer() -> None:
    x = torch.linspace(-1, 1, 9, dtype=D, requires_grad=True)
    roomy = check(torch.tanh, x)
    tight = check(torch.tanh, x, memory_budget=1)

    assert roomy.memory.chunk_size == 9 and tight.memory.chunk_size == 1
    assert tight.numerical_method == "vmap" and tight.passed
    assert tight.pair(0, 0).numerical == pytest.approx(roomy.pair(0, 0).numerical, abs=1e-12)


@pytest.mark.parametrize("budget", [1, 2**20], ids=["one-column-chunks", "one-chunk"])
@pytest.mark.parametrize(
    ("fn", "jacobian"),
    [
        # W @ x under vmap returns its rows in column-major order, softmax in row-major order
        pytest.param(
            lambda x: torch.tanh(W5 @ x), lambda x: (1 - torch.tanh(W5 @ x) ** 2)[:, None] * W5, id="tanh-Wx"
        ),
        pytest.param(
            lambda x: torch.softmax(x[:5] * 2, 0),
            lambda x: torch.cat(
                [2 * (torch.diag(s := torch.softmax(x[:5] * 2, 0)) - torch.outer(s, s)), torch.zeros(5, 2, dtype=D)],
                dim=1,
            ),
            id="softmax",
        ),
    ],
)
def test_each_column_of_differences_lands_in_its_place(
    fn: Callable[..., Any], jacobian: Callable[..., torch.Tensor], budget: int
) -> None:
    x = torch.tensor([0.3, -0.2, 0.9, 0.1, -0.5, 0.7, 0.2], dtype=D)
    jac, method = _jacobians_budget(fn, (x,), budget)

    assert method == "vmap"
    assert jac[(0, 0)].shape == (5, 7)
    torch.testing.assert_close(jac[(0, 0)], jacobian(x), atol=1e-8, rtol=0)


def _jacobians_budget(
    fn: Callable[..., Any], args: tuple[torch.Tensor, ...], budget: int
) -> tuple[dict[Any, torch.Tensor], str]:
    outs = (fn(*args),)
    result = numerical_jacobian(
        fn, args, (0,), (0,), outs, eps=1e-6, budget_bytes=budget, device=torch.device("cpu")
    )
    return result.jac, result.method


def _oom_above(limit: int, message: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Makes finite-difference chunks of more than `limit` columns run out of memory."""
    asked: list[int] = []
    real = numerical._Slot.evaluate

    def evaluate(self: Any, cols: torch.Tensor, method: str) -> Any:
        asked.append(cols.numel())
        if cols.numel() > limit:
            raise torch.OutOfMemoryError(message)
        return real(self, cols, method)

    monkeypatch.setattr(numerical._Slot, "evaluate", evaluate)
    return asked


CUDA_OOM = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.77 GiB"


def test_out_of_memory_halves_the_chunk_and_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _oom_above(4, CUDA_OOM, monkeypatch)
    report = check(torch.sin, torch.linspace(0, 1, 16, dtype=D, requires_grad=True))

    assert report.passed
    assert asked[:3] == [16, 8, 4]  # halved twice, then the rest in chunks of 4
    assert report.memory.chunk_size == 4 and report.memory.oom_retries == 2
    assert sum(asked[2:]) == 16


def test_cpu_allocator_failures_are_retried_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def cpu_oom(self: Any, cols: torch.Tensor, method: str) -> Any:
        if cols.numel() > 2:
            raise RuntimeError(
                "DefaultCPUAllocator: can't allocate memory: you tried to allocate 800000 bytes"
            )
        return real(self, cols, method)

    real = numerical._Slot.evaluate
    monkeypatch.setattr(numerical._Slot, "evaluate", cpu_oom)
    report = check(torch.sin, torch.linspace(0, 1, 8, dtype=D, requires_grad=True))

    assert report.passed and report.memory.chunk_size == 2


def test_out_of_memory_at_one_element_is_reported_with_the_amount(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _oom_above(0, CUDA_OOM, monkeypatch)
    x = torch.linspace(0, 1, 4, dtype=D, requires_grad=True)
    report = check(torch.sin, x)

    assert not report.passed and report.pairs == ()
    assert "2.00 GiB" in (report.memory.out_of_memory or "")
    assert "gradcheck DID NOT FINISH: out of memory" in str(report)
    with pytest.raises(CheckMemoryError, match=r"the allocator was asked for 2\.00 GiB") as caught:
        check(torch.sin, x, raise_exception=True)
    assert caught.value.report.memory.chunk_size == 1


MIB = 2**20


@pytest.mark.parametrize(
    ("budget", "device", "free", "expected"),
    [
        (None, "cpu", None, 32 * MIB),
        (5 * MIB, "cpu", None, 5 * MIB),
        (None, "cuda", 8192 * MIB, 1024 * MIB),  # plenty free: the 1 GiB default
        (None, "cuda", 1024 * MIB, 256 * MIB),  # little free: a quarter of it
        (64 * MIB, "cuda", 1024 * MIB, 64 * MIB),
    ],
)
def test_the_default_budget_depends_on_the_device(
    budget: int | None,
    device: str,
    free: int | None,
    expected: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gradcheck._state import resolve_budget

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 16384 * MIB))
    assert resolve_budget(budget, torch.device(device)) == expected


def test_the_report_states_the_budget_and_the_chunk_it_chose() -> None:
    report = check(torch.sin, torch.linspace(0, 1, 50, dtype=D, requires_grad=True))

    assert report.memory.budget_bytes == 32 * MIB
    assert report.memory.chunk_size == 50
    assert 0 < report.memory.chunk_bytes <= report.memory.budget_bytes


def test_out_of_memory_on_the_autograd_side_is_retried_too(monkeypatch: pytest.MonkeyPatch) -> None:
    import gradcheck._autograd as autograd

    real = autograd._functorch_rows
    sizes: list[int] = []

    def rows(state: Any, cotangents: list[torch.Tensor]) -> Any:
        count = cotangents[0].shape[0]
        sizes.append(count)
        if count > 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB.")
        return real(state, cotangents)

    monkeypatch.setattr(autograd, "_functorch_rows", rows)
    report = check(torch.sin, torch.linspace(0, 1, 12, dtype=D, requires_grad=True))

    assert report.passed and report.autograd_method == "vmap(vjp)"
    assert sizes[:3] == [12, 6, 3] and report.memory.oom_retries == 2
