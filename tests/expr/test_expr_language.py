"""What programs compute: the seeds' examples and each construct, against torch itself."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from expr_seed import SEED_GRAD, SEED_PROGRAM, SEED_VALUE

from graphviz_app.expr import ExprError, evaluate, expected_function, to_function
from graphviz_app.expr.custom import square


def test_seed_program_value_and_gradient_match_the_tutorial() -> None:
    ev = evaluate(SEED_PROGRAM)
    assert ev.output.item() == pytest.approx(SEED_VALUE)
    ev.output.backward()
    assert ev.variables["x"].grad.tolist() == pytest.approx(SEED_GRAD)


def test_variables_are_the_named_tensors_in_definition_order() -> None:
    ev = evaluate("b = torch.ones(2)\na = b * 2\nn = 3\nfor i in range(2):\n    a = a + b\na.sum()")
    assert list(ev.variables) == ["b", "a"]  # n and the loop counter are not tensors
    assert ev.variables["a"].tolist() == [4.0, 4.0]


X = torch.tensor([0.5, -1.0, 2.0])


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("x + 2", X + 2),
        ("2 - x * 3 / 4", 2 - X * 3 / 4),
        ("x ** 2 // 1 % 3", X**2 // 1 % 3),
        ("-x", -X),
        ("x @ x", X @ X),
        ("(x > 0) & (x < 1)", (X > 0) & (X < 1)),
        ("~(x > 0)", ~(X > 0)),
        ("x[1:]", X[1:]),
        ("x[::-1] if False else x[0]", X[0]),
        ("x[None, :].T", X[None, :].T),
        ("x[[0, 2]]", X[[0, 2]]),
        ("x[x > 0]", X[X > 0]),
        ("torch.exp(x).sum()", torch.exp(X).sum()),
        ("torch.clamp(x, min=0.0, max=1.0)", torch.clamp(X, min=0.0, max=1.0)),
        ("torch.where(x > 0, x, torch.zeros_like(x))", torch.where(X > 0, X, torch.zeros_like(X))),
        ("torch.cat([x, x]).reshape(2, 3).sum(dim=1)", torch.cat([X, X]).reshape(2, 3).sum(dim=1)),
        ("torch.stack((x, x), dim=1).shape[0] * x", 3 * X),
        ("torch.einsum('i,i->', x, x)", torch.einsum("i,i->", X, X)),
        ("torch.logsumexp(x, dim=0)", torch.logsumexp(X, dim=0)),
        ("torch.max(x, dim=0).values", torch.max(X, dim=0).values),
        ("torch.max(x, dim=0)[1]", torch.max(X, dim=0)[1]),
        ("x.softmax(0).log()", X.softmax(0).log()),
        ("x.norm()", X.norm()),
        ("x.double().dtype == torch.float64 and x or x", X),
        ("F.relu(x)", F.relu(X)),
        ("F.gelu(x)", F.gelu(X)),
        ("F.mse_loss(x, torch.zeros(3))", F.mse_loss(X, torch.zeros(3))),
        ("F.cross_entropy(x[None], torch.tensor([2]))", F.cross_entropy(X[None], torch.tensor([2]))),
        ("F.linear(x, torch.eye(3))", F.linear(X, torch.eye(3))),
        ("F.layer_norm(x, (3,))", F.layer_norm(X, (3,))),
        ("F.conv1d(x.reshape(1, 1, 3), torch.ones(1, 1, 2))", F.conv1d(X.reshape(1, 1, 3), torch.ones(1, 1, 2))),
        ("torch.nn.functional.softmax(x, dim=0)", F.softmax(X, dim=0)),
        ("x.to(torch.float64).cpu()", X.double()),
        ("torch.full((2,), torch.pi) * len(x)", torch.full((2,), torch.pi) * 3),
        ("custom.square(x)", X * X),
        ("custom.cube_wrong_backward(x)", X**3),
        ("x, x.sum()", (X, X.sum())),
    ],
)
def test_construct_gives_what_torch_gives(expression: str, expected: object) -> None:
    if "and x or x" in expression:  # `and`/`or` are refused: check the refusal instead
        with pytest.raises(ExprError, match="and/or are not allowed"):
            evaluate(f"x = torch.tensor([0.5, -1.0, 2.0])\n{expression}")
        return
    out = evaluate(f"x = torch.tensor([0.5, -1.0, 2.0])\n{expression}").output
    if isinstance(expected, tuple):
        assert all(torch.equal(a, b) for a, b in zip(out, expected, strict=True))
    else:
        torch.testing.assert_close(out, expected, rtol=0, atol=0)


LOOP = "x = torch.arange(3., requires_grad=True)\ntotal = 0\nfor i in range(5):\n    total = total + {loss}\n{out}"


def test_seed_loss_accumulated_without_item_keeps_the_whole_loop_in_the_graph() -> None:
    ev = evaluate(LOOP.format(loss="((x+2)**2+3).mean()", out="total"))
    assert ev.output.item() == pytest.approx(5 * SEED_VALUE)
    ev.output.backward()
    assert ev.variables["x"].grad.tolist() == pytest.approx([5 * g for g in SEED_GRAD])


def test_seed_loss_accumulated_with_item_is_a_plain_number() -> None:
    ev = evaluate(LOOP.format(loss="((x+2)**2+3).mean().item()", out="torch.tensor(total)"))
    assert ev.output.item() == pytest.approx(5 * SEED_VALUE)
    assert ev.output.grad_fn is None  # .item() cut every iteration off the graph


def test_augmented_assignment_is_out_of_place_so_leaves_keep_gradients() -> None:
    ev = evaluate("x = torch.ones(2, requires_grad=True)\ny = x * 1\ny += x\ny.sum()")
    ev.output.backward()
    assert ev.variables["x"].grad.tolist() == [2.0, 2.0]


def test_tuple_unpacking_and_manual_seed_are_reproducible() -> None:
    ev = evaluate("torch.manual_seed(0)\na, b = torch.randn(4).chunk(2)\na + b")
    torch.manual_seed(0)
    a, b = torch.randn(4).chunk(2)
    assert torch.equal(ev.output, a + b)


@pytest.mark.parametrize(
    ("source", "dtype", "want"),
    [
        ("torch.arange(3.)", torch.float64, torch.float64),
        ("torch.arange(3)", torch.float64, torch.int64),  # integer tensors stay integer
        ("torch.randn(2)", "float64", torch.float64),
        ("torch.ones(2, dtype=torch.float16)", torch.float64, torch.float16),  # explicit wins
        ("torch.tensor([1., 2.])", "bfloat16", torch.bfloat16),
    ],
)
def test_default_dtype_applies_to_floating_constructors_only(source: str, dtype: object, want: torch.dtype) -> None:
    assert evaluate(source, dtype=dtype).output.dtype == want


def test_default_device_cpu_and_auto_place_constructors() -> None:
    assert evaluate("torch.ones(2)", device="cpu").output.device.type == "cpu"
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    assert evaluate("torch.ones(2)", device="auto").output.device.type == auto


def test_to_function_reruns_with_given_tensors_and_keeps_random_weights_fixed() -> None:
    src = "x = torch.arange(3., requires_grad=True)\nw = torch.randn(3)\n((x+2)**2 * w).sum()"
    fn, (x,) = to_function(src, ["x"])
    assert x.tolist() == [0.0, 1.0, 2.0] and x.requires_grad
    assert torch.equal(fn(x), fn(x))  # w does not depend on x: drawn once
    y = torch.tensor([1.0, 1.0, 1.0])
    w = (fn(y) / 9).item()  # (1+2)**2 * sum(w) / 9 == sum(w)
    assert fn(torch.zeros(3)).item() == pytest.approx(4 * w, rel=1e-5)


def test_to_function_works_under_vmap_and_jacrev() -> None:
    fn, (x,) = to_function(SEED_PROGRAM, ["x"])
    batch = torch.stack([x.detach(), x.detach() + 1])
    assert torch.func.vmap(fn)(batch).tolist() == pytest.approx([SEED_VALUE, 59 / 3])  # x+1 = [1, 2, 3]
    assert torch.func.jacrev(fn)(x.detach()).tolist() == pytest.approx(SEED_GRAD)


def test_to_function_through_custom_function_under_vmap() -> None:
    fn, (x,) = to_function("x = torch.arange(3.)\ncustom.square(x).sum()", ["x"])
    assert torch.func.vmap(fn)(torch.ones(2, 3)).tolist() == [3.0, 3.0]


def test_expected_function_gives_the_hand_gradient_of_the_seeds() -> None:
    expected = expected_function(SEED_PROGRAM, "2*(x+2)/3", ["x"])
    fn, inputs = to_function(SEED_PROGRAM, ["x"])
    assert expected(*inputs).tolist() == pytest.approx(SEED_GRAD)
    assert expected(torch.zeros(3)).tolist() == pytest.approx([4 / 3] * 3)


def test_expected_function_for_two_variables_returns_one_gradient_each() -> None:
    src = "x = torch.ones(2, requires_grad=True)\ny = torch.ones(2, requires_grad=True)\n(x*y).sum()"
    grads = expected_function(src, "y, x", ["x", "y"])(torch.ones(2), 3 * torch.ones(2))
    assert [g.tolist() for g in grads] == [[3.0, 3.0], [1.0, 1.0]]


@pytest.mark.parametrize(
    ("wrt", "message"),
    [
        (["z"], "z is not a variable of the program"),
        (["total"], "total is assigned more than once or inside a loop"),
        (["n"], "n is a int, not a tensor"),
        ([], "name at least one variable"),
    ],
)
def test_to_function_refuses_unsuitable_variables(wrt: list[str], message: str) -> None:
    src = "x = torch.ones(2)\nn = 3\ntotal = x\ntotal = total + x\ntotal.sum()"
    with pytest.raises(ExprError, match=message):
        to_function(src, wrt)


def test_expected_gradient_with_wrong_count_says_how_many() -> None:
    expected = expected_function(SEED_PROGRAM, "x, x", ["x"])
    with pytest.raises(ExprError, match=r"gives 2 value\(s\) for 1 variable\(s\) \(x\)"):
        expected(torch.zeros(3))


def test_custom_functions_backward_right_and_wrong() -> None:
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(square, (x,))
    ev = evaluate("x = torch.tensor([1., 2.], requires_grad=True)\ncustom.square_wrong_backward(x).sum()")
    ev.output.backward()
    assert ev.variables["x"].grad.tolist() == [1.0, 2.0]  # half of the true 2*x


def test_function_and_expected_share_random_weights_and_leave_the_global_rng_alone() -> None:
    src = "x = torch.ones(3, requires_grad=True)\nw = torch.randn(3)\n(w * x).sum()"
    torch.manual_seed(123)
    before = torch.randn(2)
    torch.manual_seed(123)
    fn, (x,) = to_function(src, ["x"])
    expected = expected_function(src, "w", ["x"])
    assert torch.equal(torch.randn(2), before)  # the caller's random stream is untouched
    x = x.detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(fn(x), x)
    assert torch.equal(grad, expected(x))  # d(w.x)/dx == w, the same w on both sides
