"""The screen: large Jacobians pass on random ±1 probes, and any miss leads to the element-by-element check."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from custom_functions import Cube, SinRightVmap, SinWrongVmap

from gradcheck import Blame, InputError, check, compare_devices
from gradcheck._screen import PROBES

D = torch.float64
N = 150  # a 150 x 150 Jacobian has 22,500 elements: over the default detail_limit of 10,000


def _x(n: int = N, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, dtype=D, generator=torch.Generator().manual_seed(seed)).requires_grad_()


def _mixing(x: torch.Tensor) -> torch.Tensor:
    """A smooth function whose every output depends on every input."""
    w = torch.linspace(-1, 1, x.numel() ** 2, dtype=x.dtype).reshape(x.numel(), x.numel()).cos()
    return torch.tanh(w @ x) * x.sum().sin()


def _sin_with_errors(errors: tuple[tuple[int, int, float], ...] = (), factor: float = 1.0) -> Any:
    """sin(x) + 0.01 sum(x) with a backward off by `factor`, and by delta at each Jacobian element (r, c, delta)."""

    class Sin(SinRightVmap):
        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            g = grad * x.cos() * factor
            for r, c, delta in errors:
                g = g + delta * grad[r] * torch.nn.functional.one_hot(torch.tensor(c), x.numel()).to(x.dtype)
            return g

    def fn(x: torch.Tensor) -> torch.Tensor:
        return Sin.apply(x) + 0.01 * x.sum()  # every output depends on every input

    return fn


def test_a_large_right_jacobian_passes_on_the_screen_with_its_note() -> None:
    report = check(_mixing, _x())

    assert report.passed and report.mode == "screened", str(report)
    pair = report.pairs[0]
    assert pair.numel == N * N and pair.failed_count == 0 and pair.autograd is None
    assert 0 <= pair.max_abs_error <= 1e-5
    assert report.numerical_method == f"vmap, {PROBES} ±1 directions"
    assert any(n.startswith("screened: each pair compared the 20 x 20 numbers") for n in report.notes)
    text = str(report)
    assert "screened (random ±1 probes v^T J u)" in text
    assert "a probe passes when |a - b| <= atol=1e-05 + the rounding" in text


def test_screen_false_and_small_jacobians_compare_every_element() -> None:
    full = check(_mixing, _x(), screen=False)
    small = check(_mixing, _x(40))  # 1,600 elements: every element fits the report

    assert full.passed and full.mode == "full" and full.pairs[0].numel == N * N
    assert small.passed and small.mode == "full" and small.pairs[0].autograd is not None


def test_screen_true_screens_a_small_jacobian_too() -> None:
    report = check(torch.sin, _x(10), screen=True)

    assert report.passed and report.mode == "screened"


@pytest.mark.parametrize("seed", range(8))
def test_one_wrong_element_is_found_and_named(seed: int) -> None:
    """Off by 5e-3 (over atol + rtol |J| there): the screen misses, the full check names the element."""
    report = check(_sin_with_errors(((37, 37, 5e-3),)), _x(seed=seed), seed=seed)

    assert not report.passed and report.mode == "full", str(report)
    pair = report.pairs[0]
    assert pair.blame == Blame.AUTOGRAD and pair.failed_count == 1
    assert pair.worst.input_element == (37,) and pair.worst.output_element == (37,)


@pytest.mark.parametrize("seed", range(8))
def test_two_errors_that_cancel_in_half_the_probes_are_found(seed: int) -> None:
    """+d at (5, 10) and -d at (5, 11) cancel whenever u_10 == u_11: each of 20 directions has a 1/2 chance."""
    report = check(_sin_with_errors(((5, 10, 5e-3), (5, 11, -5e-3))), _x(seed=seed), seed=seed)

    assert not report.passed and report.mode == "full", str(report)
    assert {x.input_element for x in report.pairs[0].worst_elements if x.failed} == {(10,), (11,)}


def test_an_error_within_rtol_reaches_the_element_check_and_passes_there() -> None:
    """1e-4 relative is over atol in the probes but inside rtol element by element: the verdict is the full one."""
    fn = _sin_with_errors(factor=1 + 1e-4)

    screened, full = check(fn, _x()), check(fn, _x(), screen=False)

    assert screened.passed and screened.mode == "full"
    assert full.passed and full.pairs[0].max_abs_error == screened.pairs[0].max_abs_error


def test_a_wrong_hand_jacobian_is_blamed_after_the_screen() -> None:
    x = _x()
    right = torch.diag(x.detach().cos())
    wrong = right.clone()
    wrong[3, 3] += 0.5

    ok = check(torch.sin, x, expected=right)
    bad = check(torch.sin, x, expected=wrong)

    assert ok.passed and ok.mode == "screened" and ok.pairs[0].comparisons[1].name == "expected~autograd"
    assert not bad.passed and bad.mode == "full"
    assert bad.pairs[0].blame == Blame.EXPECTED and bad.pairs[0].failed_count == 1


@pytest.mark.parametrize("kinks", ["fail", "pass"])
def test_kinks_behave_as_without_the_screen(kinks: str) -> None:
    x = (torch.arange(121, dtype=D) - 60) / 30  # x[60] is 0 exactly: relu's kink
    x.requires_grad_()

    report = check(torch.relu, x, expected=lambda x: torch.diag((x > 0).to(x.dtype)), kinks=kinks)

    assert report.mode == "full"
    assert report.passed is (kinks == "pass")
    assert report.kinks_accepted == (1 if kinks == "pass" else 0)


def test_an_output_autograd_cannot_reach_fails_element_by_element() -> None:
    report = check(lambda x: x.detach().sin() + 0.0 * x, _x())

    assert not report.passed and report.mode == "full"


def test_a_wrong_vmap_rule_is_not_trusted_by_the_screen() -> None:
    report = check(SinWrongVmap.apply, _x())

    assert report.passed and report.mode == "full" and report.numerical_method == "loop"
    assert any(n.startswith("fn gives different values under vmap") for n in report.notes)


def test_an_old_style_function_is_screened_in_a_loop() -> None:
    report = check(Cube.apply, _x())

    assert report.passed and report.mode == "screened"
    assert report.numerical_method == f"loop, {PROBES} ±1 directions"
    assert report.autograd_method == "batched backward"


def test_every_pair_of_several_inputs_and_outputs_is_screened_and_a_wrong_one_found() -> None:
    a, b = _x(seed=1), _x(seed=2)
    wrong_b = _sin_with_errors(((5, 5, 1e-2),))

    right = check(lambda a, b: (a * b, a.sin() + b.sum()), (a, b))
    wrong = check(lambda a, b: (a * b, a.sin() + wrong_b(b)), (a, b))

    assert right.passed and right.mode == "screened" and len(right.pairs) == 4
    assert not wrong.passed and wrong.mode == "full"
    assert [(p.output_index, p.input_index) for p in wrong.failed_pairs] == [(1, 1)]


def test_float32_and_complex_inputs_are_not_screened() -> None:
    x32 = torch.randn(N, requires_grad=True)
    z = torch.randn(N, dtype=torch.complex128, requires_grad=True)

    assert check(torch.sin, x32).mode == "full"
    assert check(lambda z: (z * z).real, z).mode == "full"
    asked = check(torch.sin, x32, screen=True)
    assert asked.passed and asked.mode == "full"
    assert any(n.startswith("screen=True: not screened, as the screen compares real float64") for n in asked.notes)


def test_a_tiny_memory_budget_screens_in_chunks_of_directions() -> None:
    report = check(_mixing, _x(), memory_budget=20_000)

    assert report.passed and report.mode == "screened"
    assert report.memory.chunk_size < PROBES


def test_the_same_seed_repeats_the_probes_exactly() -> None:
    first, again, other = (check(_mixing, _x(), seed=s) for s in (3, 3, 4))

    assert first.pairs[0].worst == again.pairs[0].worst
    assert first.pairs[0].worst != other.pairs[0].worst


def test_non_finite_inputs_are_left_to_the_element_check() -> None:
    x = _x().detach().clone()
    x[7] = float("nan")

    report = check(torch.sin, x.requires_grad_())

    assert not report.passed and report.mode == "full" and report.pairs[0].blame == Blame.NONFINITE


def test_compare_devices_compares_whole_jacobians() -> None:
    result = compare_devices(_mixing, _x(), devices=("cpu", "cpu"))

    assert result.agree and all(r.mode == "full" for r in result.reports)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"screen": "yes"}, "screen must be None"),
        ({"screen": True, "fast": True}, "screen=True probes the reverse-mode Jacobian at first order only"),
        ({"screen": True, "order": 2}, "drop screen=True"),
    ],
)
def test_screen_options_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        check(torch.sin, _x(4), **options)


def test_the_torch_agreement_corpus_gets_torchs_verdicts_when_screened() -> None:
    """Every right function passes on the screen; every wrong one misses it and fails element by element."""
    from tests.gradcheck.test_gc_torch_agreement import CORPUS

    for name, fn, make, torch_verdict in CORPUS:
        report = check(fn, make(), screen=True)
        assert report.passed is torch_verdict, name
        assert report.mode == ("screened" if torch_verdict else "full"), name
