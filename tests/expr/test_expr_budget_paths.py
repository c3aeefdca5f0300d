"""Limits that programs used to walk around: shared nested lists, hidden temporaries, long single ops."""

from __future__ import annotations

import pytest
import torch

from graphviz_app.expr import ExprError, Limits, evaluate, expected_function

_DOUBLED = "a = [1]\nb = [1]\nfor i in range(60):\n    a = [a, a]\n    b = [b, b]\n"


@pytest.mark.parametrize(
    "last",
    ["torch.tensor([1, a])", "c = a == b\ntorch.ones(1)", "max([a, b])", "torch.ones(3)[a]", "torch.ones(3)[[a]]"],
)
def test_shared_nested_lists_are_sized_before_they_are_walked(last: str) -> None:
    # Refused where the list is built (line 4), so the last line never walks it (that hung for ever).
    with pytest.raises(ExprError, match=r"line 4, col 9: the list \[a, a\] would hold [\d,]+ items once its "
                       r"inner lists are counted each time they appear.*at most 100,000 items") as info:
        evaluate(_DOUBLED + last)
    assert info.value.kind == "limit"


def test_deeply_nested_lists_are_refused_with_the_depth() -> None:
    with pytest.raises(ExprError, match=r"nests lists 33 levels deep; the limit is 32"):
        evaluate("a = [0]\nfor i in range(40):\n    a = [a]\ntorch.tensor(a)")


def test_small_nested_lists_still_work() -> None:
    out = evaluate("a = [[1., 2.], [3., 4.]]\nb = [a, a, a]\ntorch.tensor(b).sum()").output
    assert out.item() == 30.0


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("a = torch.ones(150, 150)\ntorch.einsum('ai,bj,ab,ij->', a, a, a, a)",
         r"torch\.einsum\(\.\.\.\) \(for a temporary result on the way\) "
         r"would create a tensor of 506,250,000 elements"),
        ("a = torch.ones(150, 150)\ntorch.einsum(a, [0, 1], a, [2, 3], a, [0, 2], a, [1, 3], [])",
         r"torch\.einsum\(\.\.\.\) \(for a temporary result on the way\) "
         r"would create a tensor of 506,250,000 elements"),
        ("x = torch.ones(1, 1, 1000, 1000, dtype=torch.float64)\n"
         "w = torch.ones(1, 1, 20, 20, dtype=torch.float64)\nF.conv2d(x, w)",
         r"F\.conv2d\(\.\.\.\) \(for a temporary result on the way\) would create a tensor of 384,944,400 elements"),
        ("max(torch.ones(10**7))",
         r"max\(torch\.ones\(10\*\*7\)\) walks the tensor's 10,000,000 rows one by one"
         r".*use torch\.ones\(10\*\*7\)\.max\(\)"),
        ("x = torch.ones(3000, 3000)\nx @ x", r"x @ x would take about 27,000,000,000 multiply-adds; the limit is "
         r"20,000,000,000 per operation \(Limits\.max_multiply_adds\)"),
        ("a = torch.ones(3000, 3000)\ntorch.tensordot(a, a, dims=1)",
         r"torch\.tensordot\(\.\.\.\) would take about 27,000,000,000 multiply-adds"),
        ("x = torch.ones(1, 400, 100, 100)\nw = torch.ones(400, 400, 3, 3)\nF.conv2d(x, w, padding=1)",
         r"F\.conv2d\(\.\.\.\).* would create a tensor of 36,000,000 elements"),
    ],
)
def test_operations_are_sized_by_their_temporaries_and_work(program: str, message: str) -> None:
    with pytest.raises(ExprError, match=message) as info:
        evaluate(program)
    assert info.value.kind == "limit"


def test_one_long_convolution_is_refused_by_its_multiply_adds() -> None:
    program = "x = torch.ones(1, 16, 64, 64)\nw = torch.ones(32, 16, 3, 3)\nF.conv2d(x, w)"
    macs = 32 * 62 * 62 * 16 * 9
    with pytest.raises(ExprError, match=rf"F\.conv2d\(\.\.\.\) would take about {macs:,} multiply-adds"):
        evaluate(program, limits=Limits(max_multiply_adds=macs - 1))
    assert evaluate(program, limits=Limits(max_multiply_adds=macs)).output.shape == (1, 32, 62, 62)


@pytest.mark.parametrize(
    ("program", "shape"),
    [
        ("a = torch.ones(150, 150)\ntorch.einsum('ij,jk,kl->il', a, a, a)", (150, 150)),
        ("a = torch.ones(2, 3, 4)\ntorch.einsum('...ij,...jk', a, torch.ones(4, 5))", (2, 3, 5)),
        ("x = torch.ones(1, 3, 32, 32)\nw = torch.ones(8, 3, 3, 3)\nF.conv2d(x, w, padding=1)", (1, 8, 32, 32)),
        ("x = torch.ones(3, 32)\nw = torch.ones(8, 3, 5)\nF.conv1d(x, w, stride=2)", (8, 14)),
        ("a = torch.ones(2, 15, 15)\ntorch.einsum(a, [..., 0, 1], a, [..., 1, 2], [..., 0, 2])", (2, 15, 15)),
    ],
)
def test_ordinary_einsum_and_convolutions_still_run(program: str, shape: tuple[int, ...]) -> None:
    assert tuple(evaluate(program).output.shape) == shape


def test_hand_gradient_expression_has_the_same_budget() -> None:
    program = "x = torch.arange(3.)\n((x+2)**2+3).mean()"
    expected = expected_function(program, "2*(x+2)/3 + torch.ones(10**7, 20).sum()", ["x"])
    with pytest.raises(ExprError, match=r"torch\.ones\(\.\.\.\) would create a tensor of 200,000,000 elements"):
        expected(torch.arange(3.))
    fine = expected_function(program, "2*(x+2)/3", ["x"])
    assert fine(torch.arange(3.)).tolist() == pytest.approx([4 / 3, 2.0, 8 / 3])


_X = "x = torch.randn(4, 3)\nm = torch.zeros(3)\nv = torch.ones(3)\n"


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("F.relu(x, True)", r"F\.relu\(\.\.\.\) would change a tensor in place \(its inplace argument is True\).*"
         r"leave inplace at its default"),
        ("F.dropout(x, 0.5, True, True)", r"F\.dropout\(\.\.\.\) would change a tensor in place \(its inplace"),
        ("F.leaky_relu(x, 0.1, True)", r"F\.leaky_relu\(\.\.\.\) would change a tensor in place"),
        ("F.hardtanh(x, -1., 1., True)", r"F\.hardtanh\(\.\.\.\) would change a tensor in place"),
        ("F.embedding(torch.tensor([1, 2]), torch.randn(10, 3), max_norm=1.0)",
         r"max_norm renormalizes rows of the weight in place.*leave max_norm at its default"),
        ("F.batch_norm(x, m, v, training=True)", r"training=True updates running_mean and running_var in place.*"
         r"pass running_mean=None and running_var=None"),
        ("F.batch_norm(x, m, v, None, None, True)", r"training=True updates running_mean"),
        ("F.instance_norm(x.reshape(2, 3, 2), m, v)", r"use_input_stats=True updates running_mean"),
        ("torch.norm(x, 2, 0, False, v)", r"torch\.norm\(\.\.\.\) would change a tensor in place \(its out argument "
         r"writes the result into an existing tensor\).*assign the result instead"),
        ("torch.tensordot(x, x.T, 1, torch.zeros(4, 4))",
         r"torch\.tensordot\(\.\.\.\) would change a tensor in place \(its out"),
        ("F.normalize(x, 2.0, 1, 1e-12, torch.zeros(4, 3))",
         r"F\.normalize\(\.\.\.\) would change a tensor in place \(its out"),
    ],
)
def test_in_place_through_positional_and_side_effect_arguments_is_refused(program: str, message: str) -> None:
    with pytest.raises(ExprError, match=message) as info:
        evaluate(_X + program)
    assert info.value.kind == "refused"


@pytest.mark.parametrize(
    "program",
    ["F.relu(x, False)", "F.dropout(x, 0.5, False)", "torch.norm(x, 2, 0, False)", "torch.tensordot(x, x.T, 1)",
     "F.batch_norm(x, m, v)", "F.batch_norm(x, None, None, training=True)",
     "F.embedding(torch.tensor([1, 2]), torch.randn(10, 3))", "F.instance_norm(x.reshape(2, 3, 2))"],
)
def test_the_same_functions_without_side_effects_still_run_and_leave_inputs_alone(program: str) -> None:
    ev = evaluate(_X + program)
    assert isinstance(ev.output, torch.Tensor)
    assert ev.variables["m"].tolist() == [0.0, 0.0, 0.0] and ev.variables["v"].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "program",
    ["torch.ones([1] * 65)", "x = torch.ones([1] * 64)\nx.unsqueeze(0)",
     "x = torch.ones(1)\nx[None, None, None][" + "None, " * 61 + "]"],
)
def test_tensors_of_more_than_64_dimensions_are_refused_where_they_are_made(program: str) -> None:
    with pytest.raises(ExprError, match=r"gives a tensor of 65 dimensions; at most 64 are supported") as info:
        evaluate(program)
    assert info.value.kind == "shape"
