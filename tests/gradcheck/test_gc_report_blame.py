"""What a report's JSON says is wrong: the side its text names."""

from __future__ import annotations

import torch

from gradcheck import Blame, check


def test_to_dict_names_reverse_mode_where_a_forward_pair_blames_it() -> None:
    """A forward-mode pair's third side is reverse mode: its JSON says "reverse", as its text does."""
    from custom_functions import exp_function

    report = check(exp_function(2.0, 1.0).apply, torch.tensor([0.1, 0.5], dtype=torch.float64, requires_grad=True),
                   modes=("rev", "fwd"))
    pairs = {p["check"]: p for p in report.to_dict()["pairs"]}
    assert pairs["fwd"]["blame"] == Blame.REVERSE and pairs["rev"]["blame"] == Blame.AUTOGRAD
    assert "FAIL: reverse mode likely wrong" in str(report)
