"""`with torch.no_grad():` and the other grad modes: the only `with` the language keeps, and what it changes."""

from __future__ import annotations

import pytest
import torch

from graphviz_app.expr import ExprError, evaluate, to_function
from graphviz_app.expr.validator import parse

REFUSED = r"with is not allowed except `with torch.no_grad\(\):`, `with torch.enable_grad\(\):` and " \
          r"`with torch.inference_mode\(\):`"
BODY = "\n    y = x * 2\ny.sum()"
X = "x = torch.ones(3, requires_grad=True)\n"


@pytest.mark.parametrize("head", [
    "with torch.no_grad():",
    "with torch.enable_grad():",
    "with torch.inference_mode():",
])
def test_the_three_grad_modes_are_accepted(head: str) -> None:
    assert "y" in parse(X + head + BODY).defined


@pytest.mark.parametrize("head", [
    "with torch.no_grad() as g:",  # a name bound to the mode object
    "with torch.no_grad(), torch.enable_grad():",  # two at once
    "with torch.no_grad:",  # not called
    "with torch.inference_mode(False):",  # arguments
    "with torch.enable_grad(mode=True):",
    "with torch.set_grad_enabled(False):",  # another torch context manager
    "with torch.autocast('cpu'):",
    "with torch.autograd.graph.saved_tensors_hooks(1, 2):",
    "with no_grad():",  # not through torch
    "with open('f', 'w') as f:",
    "with x:",
    "with (torch.no_grad()) as (a, b):",
])
def test_any_other_with_is_refused_saying_what_is_allowed(head: str) -> None:
    with pytest.raises(ExprError, match=REFUSED) as e:
        parse(X + head + BODY)
    assert (e.value.line, e.value.col) == (2, 1)


@pytest.mark.parametrize(("program", "message"), [
    ("y = torch.no_grad()\ny", r"torch\.no_grad is not on the allow-list"),  # the mode object stays unreachable
    ("with torch.no_grad():\n    y = torch.load('f')\ny", r"torch\.load is not allowed"),
    ("with torch.no_grad():\n    import os\n1", "import is not allowed"),
    ("with torch.no_grad():\n    y = x.__class__\ny", "attribute names starting with _ are not allowed"),
    ("with torch.no_grad():\n    y = 1", "a program ends with the expression to show"),
])
def test_a_block_body_is_checked_like_any_other_line(program: str, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        parse(X + program)


def test_under_no_grad_nothing_is_recorded_and_enable_grad_records_again() -> None:
    ev = evaluate(X + "with torch.no_grad():\n    y = x * 2\n    with torch.enable_grad():\n"
                      "        z = x * 3\nw = x * 4\n(w + y + z).sum()")
    y, z, w = (ev.variables[n] for n in "yzw")
    assert (y.grad_fn, y.requires_grad) == (None, False)
    assert type(z.grad_fn).__name__ == "MulBackward0" and type(w.grad_fn).__name__ == "MulBackward0"
    ev.output.backward()
    assert ev.variables["x"].grad.tolist() == [7.0, 7.0, 7.0]  # 4 from w, 3 from z, none from y


def test_inference_mode_makes_inference_tensors() -> None:
    ev = evaluate(X + "with torch.inference_mode():\n    y = x * 2\ny")
    assert ev.output.is_inference() and ev.output.grad_fn is None
    assert torch.is_grad_enabled()  # the mode ends with its block


def test_the_mode_ends_when_its_block_fails() -> None:
    with pytest.raises(ExprError, match=r"line 3, col 9: x @ torch.ones\(4\) failed"):
        evaluate(X + "with torch.no_grad():\n    y = x @ torch.ones(4)\ny")
    assert torch.is_grad_enabled()


def test_a_function_of_x_sees_values_computed_under_no_grad() -> None:
    f, _ = to_function(X + "with torch.no_grad():\n    y = x * 2\nz = y + 1\n(x * z).sum()", ["x"])
    assert f(torch.full((3,), 2.0)).item() == 30.0  # z is recomputed from the given x, not kept from x = 1
