"""`graphviz-app check`: --kinks, --fwd, --order 2, and --expected errors said to be in --expected."""

from __future__ import annotations

import json

import pytest

from graphviz_app import cli

RELU = [
    "torch.relu(x).sum()",
    "--var",
    "x=torch.tensor([0., 1., -1.], requires_grad=True)",
    "--expected",
    "(x > 0).double()",
]


@pytest.mark.parametrize(
    ("kinks", "code", "warns"),
    [("fail", cli.EXIT_CHECK_FAILED, False), ("warn", cli.EXIT_OK, True), ("pass", cli.EXIT_OK, False)],
)
def test_relu_at_zero_with_the_right_hand_gradient_under_each_kinks_value(
    kinks: str, code: int, warns: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: exited 1 whatever was asked."""
    args = ["check", *RELU] + ([] if kinks == "fail" else ["--kinks", kinks])

    assert cli.main(args) == code
    out, err = capsys.readouterr()
    assert ("ok (1 kink(s) accepted)" in out) is (kinks != "fail")
    assert ("graphviz-app check: warning: kinks='warn'" in err) is warns


def test_fwd_and_order_two_add_their_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "check",
            "(torch.tanh(x) * x).sum()",
            "--var",
            "x=torch.tensor([0.5, -1., 2.], requires_grad=True)",
            "--fwd",
            "--order",
            "2",
            "--json",
        ]
    )

    report = json.loads(capsys.readouterr().out)
    assert code == cli.EXIT_OK and report["passed"]
    assert (report["modes"], report["order"]) == (["rev", "fwd"], 2)
    assert [p["check"] for p in report["pairs"]] == ["rev", "fwd", "rev2", "rev2-u", "hvp"]


def test_order_two_still_blames_a_wrong_first_order_backward(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = cli.main(
        ["check", "custom.square_wrong_backward(x).sum()", "--var", "x=torch.arange(3.)", "--wrt", "x", "--order", "2"]
    )

    out = capsys.readouterr().out
    assert code == cli.EXIT_CHECK_FAILED
    assert "FAIL: autograd (backward) likely wrong" in out


def test_a_wrong_count_of_expected_values_is_said_to_be_in_expected(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: reported "in --var 1"."""
    code = cli.main(
        [
            "check",
            "(x*y).sum()",
            "--var",
            "x=torch.arange(3., requires_grad=True)",
            "--var",
            "y=torch.ones(3, requires_grad=True)",
            "--expected",
            "y",
        ]
    )

    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT
    assert "error: in --expected (y): the expected gradient gives 1 value(s) for 2 variable(s) (x, y)" in err
    assert "--var" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--order", "3"], "argument --order: expected a whole number from 1 to 2, found 3"),
        (["--kinks", "ignore"], "argument --kinks: invalid choice: 'ignore'"),
        (["--fast", "--fwd"], "fast=True compares random projections of the reverse-mode Jacobian only"),
    ],
)
def test_bad_mode_options_exit_2_with_one_line(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        code = cli.main(["check", *RELU, *extra])
        raise SystemExit(code)
    assert caught.value.code == cli.EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_derivation_that_repeats_the_backwards_mistake_is_called_shared(
    as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: finite differences were blamed ("may not be smooth here, or eps ...")."""
    code = cli.main(
        [
            "check",
            "custom.square_wrong_backward(x).sum()",
            "--var",
            "x=torch.arange(1., 4., requires_grad=True)",
            "--expected",
            "x",  # the backward's own mistake: the 2 of the square forgotten
            *(["--json"] if as_json else []),
        ]
    )

    out = capsys.readouterr().out
    assert code == cli.EXIT_CHECK_FAILED
    if as_json:
        assert [p["blame"] for p in json.loads(out)["pairs"]] == ["shared"]
    else:
        assert "FAIL: derivation and backward may share a mistake" in out
        assert (
            "your derivation and the backward agree with each other but not with finite differences: "
            "they may share one mistake" in out
        )
        assert "may not be smooth here" not in out


def test_an_integer_variable_is_named_in_the_float_dtype_advice(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "found input 0: torch.int64", for a variable the command line calls y."""
    code = cli.main(["check", "y.sum()", "--var", "y=torch.tensor([1, 2])", "--wrt", "y"])

    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT
    assert "error: y has dtype int64, which has no gradient: make y a float tensor" in err
    assert "input 0" not in err


def test_fwd_through_a_custom_function_names_reverse_mode_as_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the demonstration Functions had no jvp, and --fwd failed with torch's raw message."""
    code = cli.main(
        [
            "check",
            "custom.square_wrong_backward(x).sum()",
            "--var",
            "x=torch.arange(1., 4., requires_grad=True)",
            "--fwd",
        ]
    )

    out = capsys.readouterr().out
    assert code == cli.EXIT_CHECK_FAILED
    assert "FAIL: autograd (backward) likely wrong" in out and "FAIL: reverse mode likely wrong" in out


@pytest.mark.parametrize(("flags", "mode"), [([], "screened"), (["--every-element"], "full")])
def test_every_element_turns_the_screen_off(flags: list[str], mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", "torch.sin(x)", "--var", "x=torch.linspace(-1, 1, 120, dtype=torch.float64, requires_grad=True)"]

    assert cli.main([*args, "--json", *flags]) == cli.EXIT_OK
    assert json.loads(capsys.readouterr().out)["mode"] == mode
