"""`torch.autograd.grad` in programs: gradients of gradients, drawn with their orders, checked, refused when unsafe."""

from __future__ import annotations

import pytest
import torch

import gradcheck
from graphviz_app import trace
from graphviz_app.expr import ExprError, evaluate, validate
from graphviz_app.expr.api import expected_function, to_function
from graphviz_app.model import NodeKind

PENALTY = (
    "torch.manual_seed(0)\n"
    "x = torch.randn(4, requires_grad=True)\n"
    "y = (x.tanh() ** 2).sum()\n"
    "g, = torch.autograd.grad(y, x, create_graph=True)\n"
    "(g ** 2).sum()\n"
)
# d/dx of sum((2 t (1 - t^2))^2), t = tanh(x)
PENALTY_GRAD = "8 * x.tanh() * (1 - x.tanh()**2)**2 * (1 - 3 * x.tanh()**2)"


def _hand_gradient(x: torch.Tensor) -> torch.Tensor:
    t = x.detach().tanh()
    return 8 * t * (1 - t**2) ** 2 * (1 - 3 * t**2)


def _orders(source: str) -> dict[int, set[str]]:
    ev = evaluate(source)
    graph = trace(ev.output, ev.params)
    found: dict[int, set[str]] = {}
    for n in graph.nodes:
        if n.kind is NodeKind.OP:
            found.setdefault(n.order or 0, set()).add(n.name)
    return found


@pytest.mark.parametrize(
    "unpack",
    ["g, = torch.autograd.grad(y, x, create_graph=True)", "(g,) = torch.autograd.grad(y, x, create_graph=True)",
     "g = torch.autograd.grad(y, x, create_graph=True)[0]",
     "g = torch.autograd.grad(outputs=y, inputs=x, create_graph=True)[0]",
     "g = torch.autograd.grad(y, [x], None, None, True)[0]"],
)
def test_a_gradient_penalty_gives_torchs_value_and_gradient(unpack: str) -> None:
    ev = evaluate(PENALTY.replace("g, = torch.autograd.grad(y, x, create_graph=True)", unpack))
    x = ev.variables["x"]
    t = x.detach().tanh()
    assert ev.output.item() == pytest.approx(float(((2 * t * (1 - t**2)) ** 2).sum()), rel=1e-6)
    (dx,) = torch.autograd.grad(ev.output, x)  # the page's backward of the program's output
    torch.testing.assert_close(dx, _hand_gradient(x))


def test_the_traced_penalty_carries_the_order_of_each_node() -> None:
    orders = _orders(PENALTY)
    assert set(orders) == {0, 1}
    assert "TanhBackward0" in orders[0] and "TanhBackwardBackward0" in orders[1]


def test_a_gradient_of_a_gradient_is_order_2() -> None:
    orders = _orders(
        "x = torch.tensor([0.5, -1.0], requires_grad=True)\n"
        "g, = torch.autograd.grad(x.tanh().sum(), x, create_graph=True)\n"
        "h, = torch.autograd.grad(g.sum(), x, create_graph=True)\n"
        "(g + h).sum()\n"
    )
    assert set(orders) == {0, 1, 2}
    assert "TanhBackwardBackward0" in orders[2]


def test_the_graph_is_kept_for_drawing_with_gradients() -> None:
    ev = evaluate(PENALTY)
    graph = trace(ev.output, ev.params, gradients=True)  # replays backward: every saved tensor still held
    assert not any(n.tensor is not None and n.tensor.freed for n in graph.nodes)
    x_leaf = next(n for n in graph.nodes if n.kind is NodeKind.LEAF and n.name == "x")
    assert x_leaf.grad is not None and x_leaf.grad.finite


def test_grad_outputs_gives_the_gradient_of_a_tensor_output() -> None:
    ev = evaluate(
        "x = torch.tensor([1.0, 2.0], requires_grad=True)\n"
        "g, = torch.autograd.grad(x ** 3, x, grad_outputs=torch.ones(2), create_graph=True)\n"
        "g\n"
    )
    assert ev.output.tolist() == pytest.approx([3.0, 12.0])


def test_without_create_graph_the_gradient_is_a_constant_of_the_program() -> None:
    ev = evaluate("x = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                  "g, = torch.autograd.grad((x ** 2).sum(), x)\n(x * g).sum()\n")
    assert ev.output.item() == pytest.approx(10.0)
    assert ev.variables["g"].grad_fn is None


@pytest.mark.parametrize("wanted", ["", "--fast", "--order 2"])
def test_the_penalty_passes_the_gradient_check_against_the_hand_gradient(wanted: str) -> None:
    fn, inputs = to_function(PENALTY, ["x"])
    expected = expected_function(PENALTY, PENALTY_GRAD, ["x"])
    options = {"": {}, "--fast": {"fast": True}, "--order 2": {"order": 2}}[wanted]
    result = gradcheck.check(fn, inputs, expected=expected, **options)
    assert result.passed, str(result)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x.sum(), x, retain_graph=False)[0]",
         r"retain_graph=False would free the saved tensors .* leave retain_graph out"),
        ("x = torch.ones(2)\nw = torch.ones(2, requires_grad=True)\ntorch.autograd.grad((x * w).sum(), x)[0]",
         r"the input x does not require grad: differentiate with respect to a variable made with "
         r"requires_grad=True"),
        ("x = torch.ones(2, requires_grad=True)\ny = torch.ones(2)\ntorch.autograd.grad(y.sum(), x)[0]",
         r"the output y.sum\(\) does not require grad"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x * 2, x)[0]",
         r"the output x \* 2 has shape \(2,\), not a single number: pass grad_outputs=torch.ones_like\(x \* 2\)"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x * 2, x, grad_outputs=torch.ones(3))[0]",
         r"grad_outputs\[0\] has shape \(3,\), the output x \* 2 has shape \(2,\)"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x.sum(), x, grad_outputs=(None, None))[0]",
         r"grad_outputs gives 2 gradient\(s\) for 1 output\(s\)"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x.sum(), x, allow_unused=True)[0]",
         r"does not take allow_unused= in programs; it takes outputs, inputs, grad_outputs"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x.sum())[0]",
         r"needs inputs: torch.autograd.grad\(y, x, create_graph=True\)"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x.sum(), x, create_graph=1)[0]",
         r"create_graph must be True or False, found int"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x.sum(), ())[0]",
         r"inputs must be a tensor or a tuple of tensors, found an empty tuple"),
        ("x = torch.ones(2, requires_grad=True)\nz = torch.ones(2, requires_grad=True)\n"
         "torch.autograd.grad(x.sum(), z)[0]",
         r"the outputs were not computed from the input z: differentiate with respect to a variable"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad(x.sum(), (x, x * 2))[0]",
         r"the outputs were not computed from the input \(x, x \* 2\)\[1\]"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd(x)", r"torch.autograd is not a function but a "
         r"namespace .*torch.autograd.grad\(\.\.\.\)"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.grad", r"torch.autograd.grad is a function: call it"),
    ],
)
def test_a_call_the_language_refuses_says_what_to_do(source: str, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        evaluate(source)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.backward(x.sum())",
         r"torch.autograd.backward is not allowed: the page or the CLI runs backward for you"),
        ("x = torch.ones(2, requires_grad=True)\ntorch.autograd.functional.jacobian(x)",
         r"torch.autograd.functional is not on the allow-list"),
    ],
)
def test_the_rest_of_torch_autograd_stays_out_of_reach(source: str, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        validate(source)


def test_the_program_never_changes_its_variables() -> None:
    ev = evaluate(PENALTY)
    x = ev.variables["x"]
    assert x.grad is None  # autograd.grad returns gradients, it never accumulates into .grad
    assert x._version == 0


def test_the_program_as_a_function_computes_its_penalty_under_no_grad() -> None:
    """The gradient checker reads the output's shape and runs finite differences without grad mode."""
    fn, (x,) = to_function(PENALTY, ["x"])
    with torch.no_grad():
        value = fn(x.detach() + 0.1)
    t = (x.detach() + 0.1).tanh()
    assert value.item() == pytest.approx(float(((2 * t * (1 - t**2)) ** 2).sum()), rel=1e-6)
