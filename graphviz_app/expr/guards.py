"""Checks made before and after each operation: sizes, bytes, numbers, devices."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..model import human_bytes
from .costs import Cost
from .limits import Limits
from .shapes import nested_numel
from .translate import cuda_unavailable_message

__all__ = [
    "Refused",
    "Budget",
    "MAX_SEQUENCE",
    "MAX_NESTING",
    "SequenceSizes",
    "check_int",
    "int_operation_fits",
    "check_sequence_length",
    "broadcast_numel",
    "meta_run",
    "to_meta",
    "check_device",
    "tensors_in",
]

MAX_SEQUENCE = 100_000  # the longest Python list or tuple a program may build
MAX_NESTING = 32  # the deepest nesting of lists (torch tensors have at most 64 dimensions)
_INT_BITS = 63
_DEVICE = re.compile(r"(cpu|cuda)(:([0-9]{1,10}))?")  # ASCII digits: \d also matches "٣"


class Refused(Exception):
    """A guard said no; the evaluator adds the position and raises ExprError."""

    def __init__(self, message: str, kind: str = "limit") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


def tensors_in(value: Any) -> Iterable[torch.Tensor]:
    """The tensors in a value, looking one level into lists and tuples."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        yield from (v for v in value if isinstance(v, torch.Tensor))


class Budget:
    """Elements per tensor and bytes in all, checked before allocating."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.used = 0

    def before(self, what: str, numel: int, nbytes: int) -> None:
        """Refuse an operation that would make a tensor of `numel` elements."""
        limit = self.limits.max_tensor_elements
        if numel >= 2**62:
            raise Refused(f"{what} would create a tensor of unbounded size; the limit is {limit:,} "
                          "elements per tensor (Limits.max_tensor_elements)")
        if numel > limit:
            raise Refused(
                f"{what} would create a tensor of {numel:,} elements ({human_bytes(nbytes)}); "
                f"the limit is {limit:,} elements per tensor (Limits.max_tensor_elements)"
            )
        if self.used + nbytes > self.limits.max_total_bytes:
            raise Refused(
                f"{what} would bring the tensors this program created to "
                f"{self.used + nbytes:,} bytes ({human_bytes(self.used + nbytes)}); the limit is "
                f"{self.limits.max_total_bytes:,} bytes in all (Limits.max_total_bytes)"
            )

    def costly(self, what: str, cost: Cost | None, itemsize: int) -> None:
        """Refuse an operation whose temporaries or multiply-adds break the limits."""
        if cost is None:
            return
        if cost.temporary:
            self.before(f"{what} (for a temporary result on the way)", cost.temporary, cost.temporary * itemsize)
        limit = self.limits.max_multiply_adds
        if cost.multiply_adds > limit:
            amount = (f"about as long as {cost.multiply_adds:,} multiply-adds ({cost.detail})" if cost.detail
                      else f"about {cost.multiply_adds:,} multiply-adds")
            raise Refused(
                f"{what} would take {amount}; the limit is {limit:,} "
                "per operation (Limits.max_multiply_adds), as one operation cannot be stopped once "
                "started: use smaller tensors"
            )

    def lists(self, what: str, values: Iterable[Any]) -> None:
        """Refuse nested-list arguments that torch would expand into huge tensors."""
        for v in values:
            if isinstance(v, (list, tuple)) and v and isinstance(v[0], (list, tuple)):
                numel = nested_numel(v)
                if numel > self.limits.max_tensor_elements:
                    self.before(what, numel, numel * 8)

    def after(self, what: str, result: Any, inputs: Iterable[Any]) -> None:
        """Count the new memory in `result`; views of an input's storage are free."""
        shared = {t.untyped_storage().data_ptr() for v in inputs for t in tensors_in(v)}
        for t in tensors_in(result):
            if t.device.type == "meta" or t.untyped_storage().data_ptr() in shared:
                continue
            nbytes = t.numel() * t.element_size()
            self.before(what, t.numel(), nbytes)
            self.used += nbytes


class SequenceSizes:
    """How many items nested lists hold when expanded, shared sublists counted each time.

    ``a = [a, a]`` sixty times builds 2**60 items from 120 list objects;
    comparing, printing or converting it walks every one. Sizes are
    memoized per list object (kept alive here, so ids stay unique), so each
    new literal costs only its own length.
    """

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, int, int]] = {}

    def measure(self, value: Any) -> tuple[int, int]:
        """(items when expanded, nesting depth) of a list or tuple; (0, 0) otherwise."""
        if not isinstance(value, (list, tuple)):
            return 0, 0
        stack: list[tuple[Any, bool]] = [(value, False)]
        while stack:  # iterative post-order: lists built in loops nest deeply
            seq, ready = stack.pop()
            if id(seq) in self._memo:
                continue
            children = [c for c in seq if isinstance(c, (list, tuple))]
            if not ready:
                stack.append((seq, True))
                stack.extend((c, False) for c in children if id(c) not in self._memo)
                continue
            items, depth = len(seq), 0
            for c in children:
                _, c_items, c_depth = self._memo[id(c)]
                items, depth = min(items + c_items, 2**62), max(depth, c_depth)
            self._memo[id(seq)] = (seq, items, depth + 1)
        _, items, depth = self._memo[id(value)]
        return items, depth

    def check(self, value: Any, what: str) -> None:
        """Refuse a list that expands past MAX_SEQUENCE items or nests past MAX_NESTING."""
        items, depth = self.measure(value)
        if items > MAX_SEQUENCE:
            raise Refused(
                f"{what} would hold {items:,} items once its inner lists are counted each time they "
                f"appear; lists are for small literal data (at most {MAX_SEQUENCE:,} items): "
                "use torch.zeros/ones/arange for large tensors"
            )
        if depth > MAX_NESTING:
            raise Refused(f"{what} nests lists {depth} levels deep; the limit is {MAX_NESTING} "
                          "(tensors are built from lists at most a few levels deep)")


def check_int(value: Any, what: str) -> Any:
    """Refuse Python integers beyond 64 bits (torch cannot use them anyway)."""
    if type(value) is int and value.bit_length() > _INT_BITS:
        raise Refused(
            f"{what} gives an integer with {value.bit_length()} bits; integers must fit in 64 bits "
            "(write 1e30 for a large float)"
        )
    return value


def int_operation_fits(op: str, left: int, right: int) -> bool:
    """Whether an int `left op right` stays small, judged without computing it."""
    if op == "**":
        if right < 0 or abs(left) <= 1:
            return True
        return right * math.log2(abs(left)) <= _INT_BITS
    if op == "*":
        return left.bit_length() + right.bit_length() <= _INT_BITS + 1
    return True


def check_sequence_length(length: int, what: str) -> None:
    if length > MAX_SEQUENCE:
        raise Refused(
            f"{what} would make a list of {length:,} items; lists are for small literal data "
            f"(at most {MAX_SEQUENCE:,} items): use torch.zeros/ones/arange for large tensors"
        )


def broadcast_numel(values: Iterable[Any]) -> int | None:
    """Elements of the broadcast of the tensors among `values`; None if they don't broadcast."""
    shapes = [tuple(v.shape) for v in values if isinstance(v, torch.Tensor)]
    if not shapes:
        return None
    ndim = max(len(s) for s in shapes)
    numel = 1
    for i in range(1, ndim + 1):
        sizes = {s[-i] for s in shapes if len(s) >= i} - {1}
        if len(sizes) > 1:
            return None  # torch will raise the mismatch with its own message
        numel *= sizes.pop() if sizes else 1
    return numel


def to_meta(value: Any, depth: int = 0) -> Any:
    """`value` with every tensor (also inside lists and tuples) replaced by an empty one on meta."""
    if isinstance(value, torch.Tensor):
        return torch.empty_like(value, device="meta")
    if depth > 8:  # tensors sit at most a level or two deep in arguments
        return value
    if isinstance(value, list):
        return [to_meta(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(to_meta(v, depth + 1) for v in value)
    return value


def meta_run(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `fn` on meta copies of its tensors: shapes without memory. None if that fails."""
    meta_args = tuple(to_meta(a) for a in args)
    meta_kwargs = {k: to_meta(v) for k, v in kwargs.items()}
    try:
        with torch.no_grad():
            return fn(*meta_args, **meta_kwargs)
    except Exception:  # noqa: BLE001 - any failure: the real call will raise it properly
        return None


def check_device(value: Any) -> None:
    """Refuse devices other than cpu / cuda / cuda:N, and cuda where there is none."""
    if isinstance(value, torch.device):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        return
    m = _DEVICE.fullmatch(text)
    if m is None:
        raise Refused(f"device must be 'cpu', 'cuda' or 'cuda:N', found {text!r}", kind="device")
    if m.group(1) == "cpu":
        return
    index = int(m.group(3) or 0)
    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        raise Refused(cuda_unavailable_message(text), kind="device")
