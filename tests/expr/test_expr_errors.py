"""Every error a person can meet, with the message it must carry, and the limits."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
import torch

from graphviz_app.errors import GraphvizAppError
from graphviz_app.expr import ExprError, Limits, evaluate, validate
from graphviz_app.expr.translate import explain

HAS_CUDA = torch.cuda.is_available()


def _error(source: str, **kwargs: object) -> ExprError:
    with pytest.raises(ExprError) as info:
        evaluate(source, **kwargs)  # type: ignore[arg-type]
    return info.value


# --- syntax and names --------------------------------------------------------

def test_syntax_error_carries_line_col_and_a_caret_under_the_problem() -> None:
    err = _error("x = torch.ones(3)\ny = (x + 2\ny")
    assert err.kind == "syntax" and err.line == 2 and err.col == 5
    assert "'(' was never closed" in err.message
    assert err.excerpt == "y = (x + 2\n    ^"
    assert str(err).startswith("line 2, col 5: syntax error:")


def test_undefined_name_says_to_define_it_above() -> None:
    err = _error("((x+2)**2+3).mean()")
    assert (err.kind, err.line, err.col) == ("name", 1, 3)
    assert err.message.startswith("x is not defined: define it above the expression")


def test_misspelt_name_suggests_the_defined_one() -> None:
    with pytest.raises(ExprError, match=r"weight is not defined.*did you mean weights\?"):
        validate("weights = torch.ones(3)\nweight.sum()")


def test_name_used_before_its_assignment_is_undefined() -> None:
    with pytest.raises(ExprError, match=r"line 1, col 5: y is not defined"):
        validate("x = y + 1\ny = torch.ones(1)\nx")


# --- torch errors explained --------------------------------------------------

def test_shape_mismatch_names_both_shapes_and_the_dimension() -> None:
    err = _error("a = torch.ones(3)\nb = torch.ones(4)\na + b")
    assert err.kind == "shape" and (err.line, err.col) == (3, 1)
    assert "a has shape (3,); b has shape (4,)" in err.message
    assert "sizes 3 and 4 differ at dimension 0" in err.message


def test_matmul_shape_mismatch_names_inner_sizes() -> None:
    err = _error("w = torch.ones(2, 3)\nv = torch.ones(4, 5)\nw @ v")
    assert err.kind == "shape"
    assert "2x3 and 4x5" in err.message and "w has shape (2, 3); v has shape (4, 5)" in err.message
    assert "inner sizes 3 and 4 must be equal" in err.message


def test_integer_tensor_requiring_grad_says_write_3_dot() -> None:
    err = _error("x = torch.arange(3, requires_grad=True)\nx.sum()")
    assert err.kind == "dtype" and (err.line, err.col) == (1, 5)
    assert "only floating-point tensors can require gradients" in err.message
    assert "write 3. instead of 3, or pass dtype=torch.float32" in err.message


@pytest.mark.skipif(HAS_CUDA, reason="checks the message on a machine without a GPU")
@pytest.mark.parametrize(
    ("source", "device"),
    [
        ("torch.ones(3, device='cuda')", "cuda"),
        ("torch.ones(3).cuda()", "cuda"),
        ("torch.ones(3).to('cuda:1')", "cuda:1"),
        ("torch.zeros(2, device=torch.device('cuda:0'))", "cuda:0"),
    ],
)
def test_cuda_without_a_gpu_says_what_is_available_and_that_cpu_works(source: str, device: str) -> None:
    err = _error(source)
    assert err.kind == "device" and err.line == 1
    assert f"device '{device}' was asked for, but torch.cuda.is_available() is False here" in err.message
    assert "use device='cpu'" in err.message


@pytest.mark.skipif(HAS_CUDA, reason="checks the message on a machine without a GPU")
def test_cuda_default_device_without_gpu_is_refused_up_front() -> None:
    with pytest.raises(ExprError, match=r"torch.cuda.is_available\(\) is False"):
        evaluate("torch.ones(1)", device="cuda")


@pytest.mark.cuda
def test_cuda_index_beyond_the_gpus_says_how_many_there_are() -> None:
    err = _error("torch.ones(3, device='cuda:99')")
    assert "this machine has" in err.message and "cuda:0 to cuda:" in err.message


@pytest.mark.cuda
def test_device_mismatch_on_a_real_gpu_says_which_tensor_is_where() -> None:
    err = _error("a = torch.ones(3, device='cuda')\nb = torch.ones(3)\na + b")
    assert err.kind == "device"
    assert "a is on cuda:0, b is on cpu" in err.message and ".to(" in err.message


def test_device_mismatch_as_torch_reports_it_on_cuda_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU here: make torch.add fail exactly as it does with a cpu and a cuda tensor.
    def add(*args: object, **kwargs: object) -> None:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
        )

    monkeypatch.setattr(torch, "add", add)
    err = _error("a = torch.ones(3)\nb = torch.ones(3)\ntorch.add(a, b)")
    assert err.kind == "device" and err.line == 3
    assert "mixes tensors on different devices: torch found tensors on cuda:0 and on cpu" in err.message
    assert "Move them to one device, e.g. with .to('cuda:0')" in err.message


def test_device_mismatch_names_each_operand_and_its_device() -> None:
    cpu, meta = torch.ones(3), torch.ones(3, device="meta")
    try:
        cpu + meta
    except RuntimeError as e:
        message, kind = explain(e, "a + b", [("a", cpu), ("b", meta)])
    assert kind == "device"
    assert "a is on cpu, b is on meta" in message


def test_cuda_out_of_memory_says_how_much_was_asked_and_free(monkeypatch: pytest.MonkeyPatch) -> None:
    def ones(*args: object, **kwargs: object) -> None:
        raise torch.OutOfMemoryError(
            "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 15.77 GiB "
            "of which 3.50 GiB is free. Of the allocated memory 11.2 GiB is allocated by PyTorch"
        )

    monkeypatch.setattr(torch, "ones", ones)
    err = _error("torch.ones(5000, 1000)")
    assert err.kind == "memory"
    assert (
        "CUDA ran out of memory in torch.ones(...): it asked for 20.00 GiB and 3.50 GiB was free on GPU 0"
        in err.message
    )


@pytest.mark.parametrize(
    "text",
    [
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
        "to allocate 40000000000 bytes. Error code 12 (Cannot allocate memory)",
        "out of memory",
    ],
)
def test_cpu_out_of_memory_is_not_reported_as_cuda(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    def ones(*args: object, **kwargs: object) -> None:
        raise torch.OutOfMemoryError(text)

    monkeypatch.setattr(torch, "ones", ones)
    err = _error("torch.ones(5000, 1000)")
    assert err.kind == "memory"
    assert "CUDA" not in err.message and "GPU" not in err.message
    assert err.message.startswith("torch.ones(...) ran out of memory asking for more than the machine gives")


def test_other_torch_failures_name_the_call_and_torchs_reason() -> None:
    err = _error("x = torch.ones(2, 3)\nx.reshape(4)")
    assert err.kind == "torch" and err.line == 2
    assert err.message.startswith("x.reshape(...) failed: shape '[4]' is invalid")


# --- limits ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("source", "limits", "message"),
    [
        ("x" * 11, Limits(max_source_chars=10), r"11 characters long; the limit is 10 \(Limits.max_source_chars\)"),
        ("x = 1\n" + "+".join(["1"] * 50), Limits(max_nodes=40), r"more than 40 syntax nodes \(Limits.max_nodes\)"),
        ("x = torch.ones(1)\n" + "-" * 30 + "x", Limits(max_depth=10),
         r"nests deeper than 10 levels \(Limits.max_depth\)"),
        ("torch.randn(int(3e10))", Limits(), r"30,000,000,000 elements .* limit is 10,000,000 elements per tensor"),
        ("torch.ones(1000, 1001)", Limits(max_tensor_elements=10**6), r"1,001,000 elements"),
        ("a = torch.ones(10**6)\nb = a * 2\nb", Limits(max_total_bytes=6 * 10**6),
         r"8,000,000 bytes .* limit is 6,000,000 bytes in all"),
        ("torch.ones(10**4, 1) + torch.ones(1, 10**4)", Limits(), r"would create a tensor of 100,000,000 elements"),
        ("for i in range(5000):\n    y = 1\ntorch.ones(1)", Limits(),
         r"runs 5,000 times; the limit is 1,000 iterations"),
        ("n = 600\nfor i in range(n):\n    for j in range(2):\n        y = 1\ntorch.ones(1)", Limits(),
         r"loops would run 1,002 iterations in all; the limit is 1,000"),
        ("10**10**10", Limits(), r"integer beyond 64 bits"),
        ("1" + "0" * 40, Limits(), r"integer literal has 41 digits"),
        ("[0] * 10**6", Limits(), r"list of 1,000,000 items"),
    ],
)
def test_each_limit_has_its_own_message(source: str, limits: Limits, message: str) -> None:
    with pytest.raises(ExprError, match=message) as info:
        evaluate(source, limits=limits)
    assert info.value.kind == "limit"


def test_the_seeds_huge_randn_is_refused_before_allocating() -> None:
    # 3e10 float32 would be 120 GB; refusal must come from the shape, not from a failed malloc.
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _error("torch.randn(int(3e10))")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB


def test_wall_time_limit_stops_a_long_program() -> None:
    source = "w = torch.ones(200, 200) / 200\ny = w\nfor i in range(1000):\n    y = y @ w\ny"
    # Only the clock may stop it: 1000 products of 160 KB would pass the default byte limit.
    err = _error(source, limits=Limits(max_seconds=0.05, max_total_bytes=10**10))
    assert err.kind == "time"
    assert "ran longer than 0.05 s (Limits.max_seconds)" in err.message


def test_depth_far_beyond_python_recursion_is_an_expr_error() -> None:
    deep = Limits(max_depth=10**6, max_nodes=10**6)
    with pytest.raises(ExprError, match=r"nests too deeply") as info:
        evaluate("x = torch.ones(1)\n" + "-" * 4000 + "x", limits=deep)
    assert info.value.kind == "limit"


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"Limits.max_depth must be a positive number, got 0"):
        Limits(max_depth=0)


# --- the error type ----------------------------------------------------------

def test_expr_error_is_one_class_in_the_project_hierarchy_and_survives_pickling() -> None:
    err = _error("x = torch.ones(3)\nx.__class__")
    assert isinstance(err, GraphvizAppError) and isinstance(err, ValueError)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.message, copy.line, copy.col, copy.kind, str(copy)) == (
        err.message, err.line, err.col, err.kind, str(err))


def test_message_is_one_line_even_when_torch_says_more() -> None:
    err = _error("x = torch.ones(2, 3)\nx.view(7)")
    assert "\n" not in str(err)


def test_error_column_counts_characters_not_bytes() -> None:
    err = _error("s = 'ééé'; y + 1")
    assert (err.line, err.col) == (1, 12)


def test_validate_runs_nothing_and_does_not_load_torch() -> None:
    code = (
        "import sys\nfrom graphviz_app.expr import validate\n"
        "validate('torch.manual_seed(1)\\nx = torch.randn(int(3e10))\\nx')\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
