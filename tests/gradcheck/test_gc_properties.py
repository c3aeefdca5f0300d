"""Properties over random linear and quadratic maps, whose Jacobians are known exactly."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcheck import Blame, check

D = torch.float64
_small = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False, allow_infinity=False)


@st.composite
def linear_maps(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    a = torch.tensor(draw(st.lists(_small, min_size=m * n, max_size=m * n)), dtype=D).reshape(m, n)
    x = torch.tensor(draw(st.lists(_small, min_size=n, max_size=n)), dtype=D)
    return a, x


@settings(max_examples=25, deadline=None)
@given(linear_maps())
def test_the_exact_jacobian_of_a_linear_map_passes(case: tuple[torch.Tensor, torch.Tensor]) -> None:
    a, x = case
    report = check(lambda x: a @ x, x, expected=a)

    assert report.passed, str(report)
    numerical = report.pair(0, 0).numerical
    assert numerical is not None
    assert max(abs(u - v) for u, v in zip(numerical, a.reshape(-1).tolist(), strict=True)) < 1e-6


@settings(max_examples=25, deadline=None)
@given(linear_maps(), st.data())
def test_one_wrong_element_is_found_and_blamed_on_expected(
    case: tuple[torch.Tensor, torch.Tensor], data: st.DataObject
) -> None:
    a, x = case
    row, col = data.draw(st.integers(0, a.shape[0] - 1)), data.draw(st.integers(0, a.shape[1] - 1))
    wrong = a.clone()
    wrong[row, col] += 1.0

    pair = check(lambda x: a @ x, x, expected=wrong).pair(0, 0)

    assert not pair.passed and pair.blame == Blame.EXPECTED
    assert pair.failed == (row * a.shape[1] + col,)
    assert pair.worst.index == (row, col)
