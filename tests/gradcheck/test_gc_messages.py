"""Messages a person can act on: short input errors under pytest, refused inputs, Jacobian indices, notes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from custom_functions import OldSquare

from gradcheck import InputError, check

ROOT = Path(__file__).resolve().parents[2]
D = torch.float64

BAD_CALLS = {
    "list_of_floats_to_the_fixture": "gradcheck(lambda x: (x ** 2).sum(), [1.0, 2.0])",
    "negative_eps": "check(lambda x: (x ** 2).sum(), torch.tensor([1.0]), eps=-1.0)",
    "sparse_input": (
        "assert_gradients(lambda x: x.to_dense().sum(), "
        "torch.eye(3, dtype=torch.float64).to_sparse().requires_grad_())"
    ),
    "meta_input": "check(lambda x: x.sum(), torch.ones(2, device='meta', requires_grad=True))",
    "wrong_expected_shape": "check(lambda x: (x ** 2).sum(), torch.ones(3), expected=torch.ones(2))",
    "unknown_mode": "check(lambda x: x.sum(), torch.ones(2), modes=('rev', 'jvp'))",
    "no_jvp": "check(Old.apply, torch.ones(2, dtype=torch.float64, requires_grad=True), modes=('fwd',))",
    "mixed_devices_option": "compare_devices(lambda x: x.sum(), torch.ones(2), devices=('cpu',))",
}

TEST_FILE = textwrap.dedent(
    """
    import torch
    from gradcheck import assert_gradients, check, compare_devices


    class Old(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    """
) + "".join(f"\n\ndef test_{name}(gradcheck):\n    {call}\n" for name, call in BAD_CALLS.items())


@pytest.mark.slow
def test_input_errors_under_pytest_are_short_and_show_none_of_the_checkers_source(tmp_path: Path) -> None:
    """Before: 47-51 lines per error, mostly the checker's own source."""
    (tmp_path / "test_user.py").write_text(TEST_FILE)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    out = done.stdout
    assert f"{len(BAD_CALLS)} failed" in out, out[-3000:]
    body = out[out.index("= FAILURES =") : out.index("short test summary")]
    sections = body.split("\n___")[1:]
    assert len(sections) == len(BAD_CALLS)
    for section in sections:
        lines = section.strip().splitlines()
        assert len(lines) <= 25, section
        assert "gradcheck/" not in section and "_ _ _" not in section, section  # one frame: the test's
        places = [line.split(":")[0] for line in lines if re.match(r"^\S+\.py:\d+: ", line)]
        assert places == ["test_user.py"], section
        assert re.search(r"^E +gradcheck\.errors\.(InputError|ShapeMismatchError|DeviceError): ", section, re.M), (
            section
        )


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([1.0, 2.0], r"inputs is a list of numbers, not a tensor: make it one, e.g. torch.tensor\(\[1.0, 2.0\]"),
        ((1.0, 2.0), r"inputs is a tuple of numbers, not a tensor"),
        ((torch.ones(2, dtype=torch.long), [1.0, 2.0]), r"input 1 is a list of numbers, not a tensor"),
        (
            torch.eye(2, dtype=D).to_sparse(),
            r"input 0 is a sparse tensor \(layout torch.sparse_coo\).* Pass input.to_dense\(\)",
        ),
        (torch.ones(2, dtype=D, device="meta"), r"input 0 is on the meta device: it has a shape \(2,\) but no values"),
        ((torch.ones(2, dtype=torch.long), "x"), r"input 1: a str, not a tensor"),
    ],
    ids=["list", "tuple", "list-among-tensors", "sparse", "meta", "string"],
)
def test_unusable_inputs_are_refused_saying_what_they_are(inputs: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check(lambda *xs: xs[0].sum(), inputs)


def test_the_float_dtype_advice_names_no_variable_it_cannot_know() -> None:
    with pytest.raises(InputError, match=r"Make the inputs to differentiate float tensors") as caught:
        check(lambda y: y.sum(), torch.tensor([1, 2]))
    assert "Make x" not in str(caught.value)


def test_integer_and_boolean_outputs_are_named_for_what_they_are() -> None:
    x = torch.ones(3, dtype=D, requires_grad=True)
    with pytest.raises(InputError, match=r"\(found torch.int64, torch.bool\); boolean and integer outputs have no"):
        check(lambda x: (x.argmax(), x > 0), x)


def test_a_jacobian_index_says_which_part_is_output_and_which_input() -> None:
    x = torch.linspace(0.5, 1.5, 6, dtype=D).reshape(2, 3).requires_grad_()
    jac = torch.diag_embed(torch.cos(x).reshape(-1)).reshape(2, 3, 2, 3)
    jac[0, 2, 1, 0] += 1.0

    text = str(check(torch.sin, x, expected=jac))

    assert "element: out[...] the element of output 0, in[...] the element of input 0" in text
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("out[0, 2] in[1, 0]"))
    assert row[-1] == "FAIL"


def test_an_old_style_function_gets_one_short_note_about_vmap() -> None:
    """Before: a 4-line note in every report."""
    report = check(OldSquare.apply, torch.tensor([0.5, 1.0, 2.0], dtype=D, requires_grad=True))

    about_vmap = [n for n in report.notes if "vmap" in n]
    assert report.passed and len(about_vmap) == 1
    assert about_vmap[0].startswith("fn uses an autograd.Function without setup_context")
    assert len(about_vmap[0]) < 200
