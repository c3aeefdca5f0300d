"""Messages that used to be torch's internals or empty: each says what is wrong and what to do."""

from __future__ import annotations

import re

import pytest
import torch

from graphviz_app.expr import ExprError, evaluate
from graphviz_app.expr.translate import explain

_NOT_SHOWN = re.compile(r"/__w/|\.cpp:|\.h:\d|Namespace' object|^ZeroDivisionError$|error:$")

CASES = [
    # F.pad whose padding overflows torch's 64-bit sums
    ("x = torch.ones(3)\nF.pad(x, (2**62, 2**62))", r"F\.pad\(\.\.\.\) would create a tensor of unbounded size"),
    ("x = torch.ones(2, 3)\nF.pad(x, (9223372036854775807, 1), mode='reflect')", r"unbounded size"),
    ("x = torch.ones(3)\nF.pad(x, (-4611686018427387904, 1))",
     r"removes 4,611,686,018,427,387,904 elements from dimension 0 of the input, which has 3 .*at most as many"),
    ("x = torch.ones(3)\nF.pad(x, (-4, 1))", r"removes 4 elements from dimension 0 of the input, which has 3"),
    # take_along_dim / gather on an empty dimension
    ("x = torch.ones(3, 0)\ntorch.take_along_dim(x, torch.zeros(3, 2, dtype=torch.long), 1)",
     r"take_along_dim\(\.\.\.\) picks elements along dimension 1 of the input \(shape \(3, 0\)\), which has none.*"
     r"Give indices with size 0 there too"),
    ("x = torch.ones(3, 0)\nx.gather(1, torch.zeros(3, 2, dtype=torch.long))", r"x\.gather\(\.\.\.\) picks elements"),
    ("x = torch.ones(0)\nx.take_along_dim(torch.zeros(2, dtype=torch.long))",
     r"along the flattened input, which has none"),
    # unflatten with two sizes to infer
    ("x = torch.ones(2, 6)\nx.unflatten(1, (-1, -1))",
     r"x\.unflatten\(\.\.\.\) has more than one -1 among the sizes \(-1, -1\).*Give the other sizes, e.g\. \(2, -1\)"),
    # a namespace where a value (a function) was meant
    ("l = nn.TransformerEncoderLayer(8, 2, activation=torch)\nl(torch.ones(3, 2, 8))",
     r"was given activation=torch, the torch namespace .*pass the activation by name, e\.g\. activation='gelu'"),
    ("l = nn.Linear(8, 2)\nl(F)", r"l\(\.\.\.\) was given F, the F namespace .*pass a number, a string or a tensor"),
    ("x = torch.ones(2)\nx + torch", r"x \+ torch: torch is a namespace .*call one of its functions"),
    # labels keep the brackets the person typed
    ("a = torch.tensor([-1], dtype=torch.int32)\n(-2147483647 - 1) % a",
     r"^\(-2147483647 - 1\) % a divides the smallest int32 value"),
    ("a = torch.ones(3)\nb = torch.ones(4)\n(a + 1) * b",
     r"^\(a \+ 1\) \* b: the shapes do not match: \(a \+ 1\) has shape"),
    ("a = torch.ones(3)\nb = torch.ones(4)\na - (b - 1)", r"^a - \(b - 1\): the shapes"),
    ("a = torch.ones(3)\nb = torch.ones(4)\nc = a\nc *= b + 1\nc", r"^c \* \(b \+ 1\): the shapes"),
    ("a = torch.ones(3)\n(a + a)[7]", r"^\(a \+ a\)\[7\] failed: index 7 is out of bounds"),
    ("a = torch.ones(3)\n(-a).reshape(7)", r"^\(-a\)\.reshape\(\.\.\.\) failed"),
]


@pytest.mark.parametrize(("program", "message"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_unclear_torch_failures_get_a_message_saying_what_to_do(program: str, message: str) -> None:
    with pytest.raises(ExprError) as info:
        evaluate(program)
    assert re.search(message, info.value.message), info.value.message
    assert not _NOT_SHOWN.search(info.value.message), info.value.message


@pytest.mark.parametrize(
    "program",
    [
        "torch.tensor([-128], dtype=torch.int8) // -1",
        "torch.tensor([-32768], dtype=torch.int16) % -1",
        "torch.div(torch.tensor([-128], dtype=torch.int8), -1, rounding_mode='trunc')",
        "torch.tensor([-32768], dtype=torch.int16).div(torch.tensor([-1], dtype=torch.int16), rounding_mode='trunc')",
        "torch.fmod(torch.tensor([-128], dtype=torch.int8), -1)",
    ],
)
def test_int8_and_int16_division_by_minus_one_is_allowed_as_it_wraps_instead_of_trapping(program: str) -> None:
    # C++ widens int8/int16 to int before dividing: no SIGFPE, the result wraps as numpy's does.
    out = evaluate(program).output
    assert out.dtype in (torch.int8, torch.int16)
    assert out.tolist()[0] in (0, torch.iinfo(out.dtype).min)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_the_widths_that_trap_are_still_refused(dtype: str) -> None:
    smallest = torch.iinfo(getattr(torch, dtype)).min
    program = f"a = torch.tensor([{smallest + 1}], dtype=torch.{dtype}) - 1\ntorch.div(a, -1, rounding_mode='trunc')"
    with pytest.raises(ExprError, match=rf"divides the smallest {dtype} value .* by -1, which overflows"):
        evaluate(program)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("/__w/pytorch/pytorch/build/aten/src/ATen/RegisterCompositeExplicitAutograd_0.cpp:3016: "
         "SymIntArrayRef expected to contain only concrete integers", r"smallest 64-bit integer, as a size"),
        ("/__w/pytorch/pytorch/aten/src/ATen/native/Foo.cpp:12: something odd", r"^op\(\) failed: something odd$"),
        ("unflatten got an unexpected error:\nonly one dimension can be inferred\nException raised from x at "
         "/__w/a.h:30", r"^op\(\) failed: unflatten got an unexpected error: only one dimension can be inferred$"),
        ("ZeroDivisionError", r"division by zero: one of the sizes it works with is 0"),
    ],
)
def test_torch_texts_lose_build_paths_and_traces(text: str, shown: str) -> None:
    message, _ = explain(RuntimeError(text), "op()")
    assert re.search(shown, message), message
    assert "/__w/" not in message
