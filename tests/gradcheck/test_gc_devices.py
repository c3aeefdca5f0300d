"""Devices as the seeds teach them, mixed-device errors, and compare_devices (CPU-simulated)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

import gradcheck.devices as devices_module
from gradcheck import DeviceError, InputError, check, compare_devices
from gradcheck._devices import resolve_device

D = torch.float64


def _x() -> torch.Tensor:
    return torch.tensor([0.0, 1.0, 2.0], dtype=D, requires_grad=True)


def _seed(x: torch.Tensor) -> torch.Tensor:
    return ((x + 2) ** 2 + 3).mean()


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (None, torch.device("cpu")),
        ("cpu", torch.device("cpu")),
        (torch.device("cpu"), torch.device("cpu")),
        ("auto", torch.device("cpu")),
        ("AUTO", torch.device("cpu")),
    ],
)
def test_device_names_resolve_without_a_gpu(
    asked: Any, expected: torch.device, no_gpu: None
) -> None:
    assert resolve_device(asked, (_x(),)) == expected


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ("cuda", torch.device("cuda")),
        ("cuda:0", torch.device("cuda", 0)),
        ("auto", torch.device("cuda")),
    ],
)
def test_cuda_names_resolve_when_a_gpu_is_there(
    asked: str, expected: torch.device, one_gpu: None
) -> None:
    assert resolve_device(asked, ()) == expected


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ("gpu", r"device='gpu' is not a device name: expected 'cpu', 'cuda', 'cuda:N'"),
        ("cuda:x", r"is not a device name"),
        (
            "cuda",
            r"asks for CUDA, but torch.cuda.is_available\(\) is False .* Use device='cpu', or device='auto'",
        ),
        ("cuda:1", r"asks for CUDA, but torch.cuda.is_available\(\) is False"),
    ],
)
def test_unusable_devices_are_clear_errors(asked: str, message: str, no_gpu: None) -> None:
    with pytest.raises(DeviceError, match=message):
        check(_seed, _x(), device=asked)


def test_a_gpu_index_that_does_not_exist_says_how_many_there_are(one_gpu: None) -> None:
    with pytest.raises(
        DeviceError, match=r"asks for GPU 3, but this machine has 1 GPU\(s\), numbered 0 to 0"
    ):
        resolve_device("cuda:3", ())


def test_inputs_on_different_devices_are_explained() -> None:
    from gradcheck._devices import common_device

    x = torch.ones(3, dtype=D, requires_grad=True)
    y = torch.ones(3, dtype=D, device="meta")  # the one other device a CPU-only machine has

    with pytest.raises(DeviceError, match=r"input 0 is on cpu, input 1 is on meta") as caught:
        common_device((x, y))
    assert "Expected all tensors to be on the same device" in str(caught.value)
    assert "pass device='cpu' / 'cuda'" in str(caught.value)


def test_mixed_devices_are_fine_once_a_device_is_given() -> None:
    x = torch.ones(3, dtype=D, requires_grad=True)
    y = torch.full((3,), 2.0, dtype=D)

    report = check(lambda x, y: (x * y).sum(), (x, y), device="cpu")
    assert report.passed and report.device == "cpu"


def test_a_function_that_mixes_devices_itself_gets_an_explanation() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
        )

    with pytest.raises(
        DeviceError, match=r"the function mixes devices: the check ran its inputs on cpu"
    ) as caught:
        check(fn, _x())
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "move it with .to('cpu')" in str(caught.value)


def test_compare_devices_on_two_cpus_agrees() -> None:
    result = compare_devices(
        _seed, _x(), devices=("cpu", "cpu"), expected=lambda x: 2 * (x + 2) / 3
    )

    assert result.agree and result.passed
    assert result.devices == ("cpu", "cpu")
    assert [r.passed for r in result.reports] == [True, True]
    (diff,) = result.differences
    assert diff.autograd_max_abs_difference == 0.0 and diff.agree
    assert "gradients AGREE across cpu, cpu" in str(result)
    assert json.loads(json.dumps(result.to_dict(), allow_nan=False))["agree"] is True


def test_compare_devices_flags_gradients_that_differ_across_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Simulates a second device whose kernels are 1% off: each check passes, yet they disagree."""
    real = devices_module.run_check
    calls: list[str] = []

    def run_check(fn: Any, inputs: Any, expected: Any, opts: Any) -> Any:
        calls.append(str(opts.device))
        if len(calls) == 2:
            return real(lambda x: fn(x) * 1.01, inputs, expected, opts)
        return real(fn, inputs, expected, opts)

    monkeypatch.setattr(devices_module, "run_check", run_check)
    result = compare_devices(_seed, _x(), devices=("cpu", "cpu"))

    assert all(r.passed for r in result.reports)
    assert not result.agree and not result.passed
    assert result.differences[0].autograd_max_abs_difference == pytest.approx(0.0267, rel=1e-2)
    assert "gradients DISAGREE across cpu, cpu" in str(result)


def test_compare_devices_refuses_a_missing_gpu_before_running_anything(no_gpu: None) -> None:
    calls: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x.sum()

    with pytest.raises(DeviceError, match="asks for CUDA"):
        compare_devices(fn, _x())
    assert calls == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"devices": ("cpu",)}, r"devices must name two or more devices"),
        ({"devices": "cpu"}, r"devices must name two or more devices"),
        ({"device": "cpu"}, r"compare_devices takes devices=\(\.\.\.\)"),
    ],
)
def test_compare_devices_option_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        compare_devices(_seed, _x(), **kwargs)


@pytest.mark.cuda
def test_seed_example_on_cuda() -> None:
    report = check(_seed, _x(), device="cuda", expected=lambda x: 2 * (x + 2) / 3)

    assert report.passed and report.device.startswith("cuda")


@pytest.mark.cuda
def test_none_keeps_cuda_inputs_on_cuda() -> None:
    report = check(_seed, _x().detach().cuda().requires_grad_())

    assert report.device.startswith("cuda") and report.inputs[0].device.startswith("cuda")


@pytest.mark.cuda
def test_cpu_and_cuda_agree() -> None:
    w = torch.linspace(-1, 1, 12, dtype=D).reshape(4, 3)
    result = compare_devices(
        lambda w, x: torch.tanh(w @ x), (w, torch.ones(3, dtype=D)), devices=("cpu", "cuda")
    )

    assert result.agree and result.passed, str(result)
