"""Torch's errors, explained for people in one sentence with a fix."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from ..model import human_bytes

__all__ = ["explain", "cuda_unavailable_message", "Operand"]

# (label as typed, value) of the operands of the failing operation.
Operand = tuple[str, Any]

_SIZE_MISMATCH = re.compile(
    r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (\d+)"
)
_MATMUL = re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_DEVICES = re.compile(r"found at least two devices, (\S+?) and (\S+?)[!.]")
_OOM_ASKED = re.compile(r"[Tt]ried to allocate ([\d.]+ [KMGT]?i?B)")
_OOM_FREE = re.compile(r"of which ([\d.]+ [KMGT]?i?B) is free")
_OOM_GPU = re.compile(r"GPU (\d+)")
_CPU_ALLOC = re.compile(r"you tried to allocate (\d+) bytes")
# Where torch was built, in front of some of its messages (/__w/pytorch/pytorch/aten/src/...cpp:3016: ...).
_BUILD_PATH = re.compile(r"(?:/[\w.+-]+)+\.(?:cpp|cc|c|h|hpp|cu|cuh|py):\d+:?\s*")
_TORCH_TRACE = ("Exception raised from", "frame #")
_CUDA_MISSING = (
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver",
    "no CUDA GPUs are available",
    "CUDA driver initialization failed",
)


def explain(exc: BaseException, what: str, operands: Sequence[Operand] = ()) -> tuple[str, str]:
    """One-sentence explanation of a failure inside `what`, and its error kind.

    Args:
        exc: The exception torch (or Python) raised.
        what: The operation as the person typed it, e.g. ``x + y``.
        operands: (label, value) of its inputs, to say which tensor is where.

    Returns:
        (message, kind), kind as in `ExprError.kind`.
    """
    text = str(exc)
    first = _first_line(text) or type(exc).__name__
    on_gpu = any(marker in text for marker in ("CUDA", "GPU", "cuda"))
    if (isinstance(exc, torch.OutOfMemoryError) and on_gpu) or "CUDA out of memory" in text:
        return _oom(text, what), "memory"
    if any(marker in text for marker in _CUDA_MISSING):
        return cuda_unavailable_message("cuda"), "device"
    if "same device" in text or "is not on the expected device" in text:
        return _device_mismatch(text, what, operands), "device"
    m = _SIZE_MISMATCH.search(text)
    if m:
        return _broadcast_mismatch(m, what, operands), "shape"
    m = _MATMUL.search(text)
    if m:
        return _matmul_mismatch(m, what, operands), "shape"
    if "floating point and complex dtype can require gradients" in text:
        return _int_requires_grad(what), "dtype"
    m = _CPU_ALLOC.search(text)
    # torch.OutOfMemoryError is raised for the CPU too (and under a memory
    # limit): only a message naming CUDA or a GPU is about the GPU.
    if m or isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        asked = f" ({human_bytes(int(m.group(1)))})" if m else ""
        return f"{what} ran out of memory asking for more than the machine gives{asked}: use smaller tensors", "memory"
    if isinstance(exc, ZeroDivisionError):
        return f"{what} divides by zero", "torch"
    if isinstance(exc, OverflowError):
        return f"{what} gives a number too large to represent: use smaller numbers", "limit"
    if isinstance(exc, RecursionError):
        return f"{what} nests too deeply", "limit"
    if "SymIntArrayRef expected to contain only concrete integers" in text:
        return (f"{what} was given -9223372036854775808, the smallest 64-bit integer, as a size or padding; "
                "torch keeps that number as a marker and cannot use it: give a size within the tensor's "
                "own sizes"), "input"
    if first == "ZeroDivisionError":  # torch's Python side divided by an empty dimension
        return (f"{what} failed inside torch with a division by zero: one of the sizes it works with is 0 "
                "(an empty tensor or dimension); check the shapes of its inputs"), "shape"
    return f"{what} failed: {first}", "torch"


def _first_line(text: str) -> str:
    """Torch's message in one line: no build paths, no C++ trace, a heading ending in ':' joined to its reason.

    >>> _first_line("unflatten got an unexpected error:\\nonly one dimension can be inferred\\nException raised from")
    'unflatten got an unexpected error: only one dimension can be inferred'
    """
    lines = [_BUILD_PATH.sub("", line).strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line and not line.startswith(_TORCH_TRACE)]
    if not lines:
        return ""
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


def cuda_unavailable_message(device: str) -> str:
    """Why `device` (a cuda device) cannot be used here, and what works instead."""
    build = "built without CUDA" if torch.version.cuda is None else f"built with CUDA {torch.version.cuda}"
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        return (
            f"device {device!r} was asked for, but this machine has {count} GPU"
            f"{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1}): use one of those or device='cpu'"
        )
    return (
        f"device {device!r} was asked for, but torch.cuda.is_available() is False here "
        f"(torch {torch.__version__}, {build}): use device='cpu', which works everywhere"
    )


def _tensors(operands: Sequence[Operand]) -> list[tuple[str, torch.Tensor]]:
    found: list[tuple[str, torch.Tensor]] = []
    for label, value in operands:
        if isinstance(value, torch.Tensor):
            found.append((label, value))
        elif isinstance(value, (list, tuple)):
            found.extend((f"{label}[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor))
    return found


def _shape(t: torch.Tensor) -> str:
    dims = tuple(t.shape)
    return f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def _device_mismatch(text: str, what: str, operands: Sequence[Operand]) -> str:
    where = [(label, str(t.device)) for label, t in _tensors(operands)]
    devices = sorted({d for _, d in where})
    if len(devices) >= 2:
        placed = ", ".join(f"{label} is on {device}" for label, device in where)
        target = devices[0]
    else:
        m = _DEVICES.search(text)
        pair = m.groups() if m else ("one device", "another")
        placed = f"torch found tensors on {pair[0]} and on {pair[1]}"
        target = pair[0]
    return (
        f"{what} mixes tensors on different devices: {placed}. Move them to one device, "
        f"e.g. with .to({target!r}), or create them all with the same device="
    )


def _broadcast_mismatch(m: re.Match[str], what: str, operands: Sequence[Operand]) -> str:
    a, b, dim = m.groups()
    shapes = "; ".join(f"{label} has shape {_shape(t)}" for label, t in _tensors(operands))
    shapes = f"{shapes}; " if shapes else ""
    return (
        f"{what}: the shapes do not match: {shapes}sizes {a} and {b} differ at dimension {dim} "
        "(counting from the right-aligned shapes). Make them equal, or 1 to broadcast, "
        "e.g. with .reshape(...) or .unsqueeze(...)"
    )


def _matmul_mismatch(m: re.Match[str], what: str, operands: Sequence[Operand]) -> str:
    r1, c1, r2, c2 = m.groups()
    shapes = "; ".join(f"{label} has shape {_shape(t)}" for label, t in _tensors(operands))
    shapes = f" ({shapes})" if shapes else ""
    return (
        f"{what}: the shapes cannot be multiplied: {r1}x{c1} and {r2}x{c2}{shapes}; "
        f"the inner sizes {c1} and {r2} must be equal, e.g. transpose one with .T"
    )


def _int_requires_grad(what: str) -> str:
    return (
        f"{what} makes an integer tensor, and only floating-point tensors can require gradients: "
        "write 3. instead of 3, or pass dtype=torch.float32"
    )


def _oom(text: str, what: str) -> str:
    asked = _OOM_ASKED.search(text)
    free = _OOM_FREE.search(text)
    gpu = _OOM_GPU.search(text)
    where = f"GPU {gpu.group(1)}" if gpu else "the GPU"
    asked_text = f"it asked for {asked.group(1)}" if asked else "it asked for more than was left"
    free_text = f" and {free.group(1)} was free on {where}" if free else f" on {where}"
    return (
        f"CUDA ran out of memory in {what}: {asked_text}{free_text}. Use smaller tensors, "
        "or device='cpu' where the machine's memory is larger"
    )
