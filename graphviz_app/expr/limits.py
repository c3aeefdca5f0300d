"""The resource limits an expression program runs under."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """How much a program may ask for; each limit has its own error message.

    Attributes:
        max_source_chars: Longest program text, in characters.
        max_nodes: Most syntax-tree nodes (roughly: names, numbers, operators).
        max_depth: Deepest nesting of the syntax tree (brackets, calls, operators).
        max_tensor_elements: Most elements in any one tensor a program makes
            (checked before the tensor is allocated).
        max_total_bytes: Most bytes of tensors a program may create, all
            tensors added up (views of an existing tensor are free).
        max_loop_iterations: Most ``for`` iterations, all loops together
            (one ``range(N)`` may not exceed it either).
        max_multiply_adds: Most multiply-adds in one matmul, einsum or
            convolution (estimated from shapes before it runs): one operation
            cannot be stopped once started, so this bounds its time.
        max_seconds: Wall time, checked between operations. The isolated
            worker (where `evaluate` runs a program first) adds a hard limit
            that also stops one long operation.

    >>> Limits(max_total_bytes=10**6).max_total_bytes
    1000000
    """

    max_source_chars: int = 10_000
    max_nodes: int = 5_000
    max_depth: int = 50
    max_tensor_elements: int = 10_000_000
    max_total_bytes: int = 100_000_000
    max_loop_iterations: int = 1_000
    max_multiply_adds: int = 20_000_000_000
    max_seconds: float = 10.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(
                    f"Limits.{f.name} must be a positive number, got {value!r}"
                )
