"""The Report: plain data, stable JSON, per-element arrays for the web page, readable text."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import torch

from gradcheck import Report, check
from gradcheck.report import SCHEMA_VERSION

D = torch.float64

TOP_KEYS = {
    "schema_version",
    "passed",
    "mode",
    "pairs",
    "inputs",
    "outputs",
    "device",
    "autograd_dtype",
    "numerical_dtype",
    "expected_dtype",
    "numerical_method",
    "autograd_method",
    "eps",
    "atol",
    "rtol",
    "precision_floor",
    "timings",
    "memory",
    "notes",
    "modes",
    "order",
    "kinks",
    "forward_method",
    "hvp_method",
}
PAIR_KEYS = {
    "output_index",
    "input_index",
    "output_shape",
    "input_shape",
    "shape",
    "numel",
    "passed",
    "blame",
    "max_abs_error",
    "max_rel_error",
    "failed_count",
    "worst",
    "worst_elements",
    "comparisons",
    "failed",
    "kink_count",
    "autograd",
    "numerical",
    "expected",
    "error",
    "failed_mask",
    "constant_ratio",
    "nonfinite",
    "check",
    "sides",
    "kinks_accepted",
    "atol",
    "rtol",
}
ELEMENT_KEYS = {
    "index",
    "output_element",
    "input_element",
    "autograd",
    "numerical",
    "expected",
    "abs_error",
    "rel_error",
    "failed",
}


def _failing_matrix_report(**options: Any) -> Report:
    """A (2, 3) -> (2, 3) function whose expected Jacobian is wrong at one element."""
    x = torch.linspace(0.5, 1.5, 6, dtype=D).reshape(2, 3).requires_grad_()

    def expected(x: torch.Tensor) -> torch.Tensor:
        jac = torch.diag_embed(torch.cos(x).reshape(-1)).reshape(2, 3, 2, 3)
        jac[1, 2, 1, 2] += 1.0
        return jac

    return check(torch.sin, x, expected=expected, **options)


def test_to_dict_is_strict_json_with_the_documented_keys() -> None:
    data = _failing_matrix_report().to_dict()
    text = json.dumps(data, allow_nan=False)

    assert set(data) == TOP_KEYS and data["schema_version"] == SCHEMA_VERSION
    assert set(data["pairs"][0]) == PAIR_KEYS
    assert set(data["pairs"][0]["worst"]) == ELEMENT_KEYS
    assert set(data["timings"]) == {
        "autograd_s",
        "numerical_s",
        "expected_s",
        "compare_s",
        "total_s",
        "forward_s",
        "second_order_s",
    }
    assert set(data["memory"]) == {
        "budget_bytes",
        "chunk_size",
        "chunk_bytes",
        "oom_retries",
        "out_of_memory",
    }
    assert json.loads(text)["pairs"][0]["blame"] == "expected"


def test_to_dict_is_stable_apart_from_timings() -> None:
    first, second = _failing_matrix_report().to_dict(), _failing_matrix_report().to_dict()
    first.pop("timings"), second.pop("timings")

    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_small_pairs_carry_every_element_for_the_table_and_heatmap() -> None:
    pair = _failing_matrix_report().pair(0, 0)

    assert pair.shape == (2, 3, 2, 3) and pair.numel == 36
    for values in (pair.autograd, pair.numerical, pair.expected, pair.error, pair.failed_mask):
        assert values is not None and len(values) == 36
    assert pair.failed == (35,) and pair.failed_mask is not None and pair.failed_mask[35]
    assert pair.worst.index == (1, 2, 1, 2)
    assert pair.worst.expected == pytest.approx(pair.worst.autograd + 1.0)
    assert pair.error is not None and pair.error[35] == pytest.approx(1.0)


def test_large_pairs_keep_only_the_worst_elements() -> None:
    pair = _failing_matrix_report(detail_limit=10).pair(0, 0)

    assert pair.autograd is None and pair.error is None and pair.failed_mask is None
    assert 1 <= len(pair.worst_elements) <= 10
    assert pair.worst_elements[0].index == (1, 2, 1, 2) and pair.worst_elements[0].failed
    assert pair.failed == (35,) and pair.failed_count == 1


def test_non_finite_values_become_strings_in_json() -> None:
    report = check(torch.sqrt, torch.tensor([-1.0, 4.0], dtype=D, requires_grad=True))
    data = report.to_dict()

    assert not report.passed
    assert data["pairs"][0]["autograd"][0] == "nan"
    json.dumps(data, allow_nan=False)  # raises on a bare NaN


def _walk(value: Any) -> list[Any]:
    if dataclasses.is_dataclass(value):
        return [x for f in dataclasses.fields(value) for x in _walk(getattr(value, f.name))]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _walk(v)]
    return [value]


def test_the_report_holds_no_torch_objects_and_is_frozen() -> None:
    report = _failing_matrix_report()
    leaves = _walk(report)

    assert all(isinstance(v, (bool, int, float, str, type(None))) for v in leaves)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.passed = True  # type: ignore[misc]


def test_pair_lookup_names_the_pairs_that_exist() -> None:
    with pytest.raises(
        KeyError,
        match=r"no pair \(output 1, input 0\) in this report; the checked pairs are \[\(0, 0\)\]",
    ):
        _failing_matrix_report().pair(1, 0)


def test_text_shows_the_failing_element_and_its_values() -> None:
    text = str(_failing_matrix_report())

    assert text.startswith("gradcheck FAILED: 1 of 1 (output, input) pair(s) disagree")
    assert "FAIL: expected (hand derivation) likely wrong" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("out[1, 2] in[1, 2]"))
    assert row.split()[-1] == "FAIL"
    assert "element: out[...] the element of output 0, in[...] the element of input 0" in text
    assert "time:" in text.splitlines()[-1]


def _factor_three_report(**options: Any) -> Report:
    x = torch.linspace(0, 2, 20, dtype=D, requires_grad=True)
    return check(
        lambda x: ((x + 2) ** 2 + 3).mean(), x, expected=lambda x: 2 * (x + 2) / 20 * 3, **options
    )


@pytest.mark.parametrize(
    "make", [_failing_matrix_report, _factor_three_report], ids=["one-wrong", "factor-three"]
)
def test_comparing_in_small_blocks_gives_the_same_report(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gradcheck._compare as compare

    whole = make().to_dict()
    monkeypatch.setattr(compare, "BLOCK_ELEMENTS", 7)
    blocked = make().to_dict()
    whole.pop("timings"), blocked.pop("timings")

    assert blocked == whole
    assert whole["pairs"][0]["failed_count"] in (1, 20)
