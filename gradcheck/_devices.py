"""Devices as the seeds teach them: cpu, cuda, cuda:N, auto; and the errors around them."""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from gradcheck.errors import DeviceError

__all__ = [
    "resolve_device",
    "common_device",
    "is_out_of_memory",
    "requested_bytes_text",
    "same_device_error",
    "free_cached_memory",
]

_DEVICE_FORMS = "'cpu', 'cuda', 'cuda:N' (N = GPU index), 'auto', a torch.device or None"
_SAME_DEVICE = "Expected all tensors to be on the same device"


def resolve_device(device: str | torch.device | None, inputs: Sequence[object]) -> torch.device:
    """The device the check runs on.

    Args:
        device: None keeps the inputs' own device; "auto" is cuda when available
            else cpu; otherwise anything `torch.device` accepts.
        inputs: the user's inputs; tensors among them decide the device for None.

    Raises:
        DeviceError: an unknown device name, CUDA asked for where there is none,
            a GPU index that does not exist, or inputs on mixed devices with None.
    """
    if device is None:
        return common_device(inputs)
    if isinstance(device, str) and device.strip().lower() == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise DeviceError(
            f"device={device!r} is not a device name: expected {_DEVICE_FORMS}"
        ) from e
    if resolved.type == "cuda":
        _require_cuda(resolved, device)
    return resolved


def _require_cuda(resolved: torch.device, asked: object) -> None:
    if not torch.cuda.is_available():
        raise DeviceError(
            f"device={asked!r} asks for CUDA, but torch.cuda.is_available() is False here "
            f"(torch {torch.__version__}; a CPU-only build or no visible GPU). "
            "Use device='cpu', or device='auto' to take a GPU only when there is one."
        )
    count = torch.cuda.device_count()
    if resolved.index is not None and resolved.index >= count:
        raise DeviceError(
            f"device={asked!r} asks for GPU {resolved.index}, but this machine has {count} "
            f"GPU(s), numbered 0 to {count - 1}. Use 'cuda:0' or plain 'cuda'."
        )


def common_device(inputs: Sequence[object]) -> torch.device:
    """The one device all tensor inputs share (cpu when there are none).

    Raises:
        DeviceError: when tensor inputs live on different devices, naming each one.
    """
    where = [(i, x.device) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    devices = {d for _, d in where}
    if len(devices) <= 1:
        return next(iter(devices), torch.device("cpu"))
    listing = ", ".join(f"input {i} is on {d}" for i, d in where)
    raise DeviceError(
        f"the inputs are on different devices: {listing}. PyTorch runs an operation on "
        f"one device only, so the function would fail with '{_SAME_DEVICE}, but found at "
        "least two devices'. Move them to one device yourself (x.to('cuda')), or pass "
        "device='cpu' / 'cuda' and the check will move copies of all of them there."
    )


def same_device_error(error: BaseException, device: torch.device) -> DeviceError | None:
    """A DeviceError explaining PyTorch's mixed-device error, or None for other errors."""
    if not isinstance(error, RuntimeError) or _SAME_DEVICE not in str(error):
        return None
    return DeviceError(
        f"the function mixes devices: the check ran its inputs on {device}, but the "
        f"function also uses a tensor on another device (PyTorch: {str(error).strip()}). "
        "A tensor the function captures (a weight, a module's parameters, a constant "
        "made with device=...) must be on the inputs' device: move it with "
        f".to('{device}'), or pass it as one of the inputs so the check moves it too."
    )


def is_out_of_memory(error: BaseException) -> bool:
    """Whether an exception is an allocator running out of memory (CUDA or CPU)."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


def requested_bytes_text(error: BaseException) -> str | None:
    """The amount an out-of-memory message says was asked for, e.g. '111.76 GiB'."""
    text = str(error)
    match = re.search(r"[Tt]ried to allocate ([\d.]+ ?[KMGT]?i?B)", text)
    if match:
        return match.group(1)
    match = re.search(r"allocate (\d+) bytes", text)
    return f"{int(match.group(1))} bytes" if match else None


def free_cached_memory(device: torch.device) -> None:
    """Gives cached GPU blocks back so a smaller retry can fit."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
