"""Run a model's forward once and keep, per module call and custom Function call, what it received.

Each call keeps detached copies of its inputs, its buffers and torch's random state as they
were when it began, its place in the call tree, and the tensor hooks and `.detach()` calls its
own code made, so that `units` can re-run exactly that call.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import linecache
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ...analysis.model_check import UnitKind
from ..recorder import _shown_path, _user_source

__all__ = ["Site", "Call", "Step", "capture", "map_tensors", "tensors_in", "source_of", "caller_site", "set_attribute",
           "cuda_devices", "DATA", "NO_GRAD", "data_property"]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True, slots=True)
class Site:
    """A tensor hook or `.detach()` a module's own code made: where, and what."""

    kind: str
    name: str
    source: str | None
    file: str
    line: int


@dataclass(eq=False)
class Call:
    """One call of a module's forward or a custom Function, as the step made it."""

    index: int
    kind: str
    path: str
    type_name: str
    name: str
    source: str | None
    target: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_inputs: tuple[bool, ...]
    rng: torch.Tensor
    cuda_rng: list[torch.Tensor] | None
    buffers: dict[str, torch.Tensor]
    parent: int | None
    depth: int
    size: int
    children: list[int] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    call: int = 0
    calls: int = 1


@dataclass
class Step:
    """Every call the step made, in the order they began (parents before children)."""

    calls: list[Call]
    notes: list[str]


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any], depth: int = 0) -> Any:
    """`value` with every tensor in nested tuples, lists, dicts and dataclasses replaced by `fn(tensor)`, in order.

    The order is `tensors_in`'s. Containers are rebuilt as their own type where it allows
    (a namedtuple, a transformers `ModelOutput`), else as a plain dict.
    """
    if isinstance(value, torch.Tensor):
        return fn(value)
    if depth > 20:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {f.name: map_tensors(getattr(value, f.name), fn, depth + 1) for f in dataclasses.fields(value)}
        try:
            return dataclasses.replace(value, **changed)
        except (TypeError, ValueError):
            return changed
    if isinstance(value, dict):
        items = [(k, map_tensors(v, fn, depth + 1)) for k, v in value.items()]
        try:
            return type(value)(items)
        except (TypeError, ValueError):
            return dict(items)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(map_tensors(v, fn, depth + 1) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(map_tensors(v, fn, depth + 1) for v in value)
    return value


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in nested tuples, lists, dicts and dataclasses, in `map_tensors` order."""
    found: list[torch.Tensor] = []
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:  # depth first, left to right: the order map_tensors visits them
        item, depth = todo.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
            continue
        if depth > 20:
            continue
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            children = [getattr(item, f.name) for f in dataclasses.fields(item)]
        elif isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, (tuple, list)):
            children = list(item)
        else:
            continue
        todo.extend((child, depth + 1) for child in reversed(children))
    return found


def source_of(fn: Any) -> str | None:
    """`"model.py:41"`: the `def` line of a function, the path as the graph shows source lines."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    return None if code is None else _def_line(code.co_filename, code.co_firstlineno)


# Keyed by file and line, not by the code object: equal code objects compiled from two files
# compare equal (co_filename is not part of a code object's equality) and would share a line.
@functools.lru_cache(maxsize=4096)
def _def_line(filename: str, first_line: int) -> str:
    """The line of `def` itself: `co_firstlineno` is the first decorator's (`@staticmethod`)."""
    line = first_line
    for offset in range(50):
        text = linecache.getline(filename, line + offset).lstrip()
        if text.startswith(("def ", "async def ")):
            line += offset
            break
        if not text.startswith("@") and offset:
            break
    return f"{_shown_path(filename)}:{line}"


def caller_site(depth: int) -> tuple[str, int] | None:
    """(file, line) of the frame `depth` levels up, when it is user code (not torch's or ours)."""
    frame = sys._getframe(depth + 1)
    name = frame.f_code.co_filename
    if name.startswith((_TORCH_DIR, _OUR_DIR)) or name.startswith("<frozen"):
        return None
    return name, frame.f_lineno


class _Capture:
    """The hooks and patches of one capture run; `calls` grows as the forward runs."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.calls: list[Call] = []
        self.stack: list[int] = []
        self.in_function = 0
        self.notes: list[str] = []

    def _new(self, kind: str, path: str, target: Any, name: str, source: str | None,
             args: tuple[Any, ...], kwargs: dict[str, Any], buffers: dict[str, torch.Tensor], size: int) -> Call:
        flat = tensors_in((args, kwargs))
        parent = self.stack[-1] if self.stack else None
        call = Call(
            index=len(self.calls), kind=kind, path=path, type_name=name.split(".")[0], name=name, source=source,
            target=target, args=map_tensors(args, _copy), kwargs=map_tensors(kwargs, _copy),
            grad_inputs=tuple(t.requires_grad for t in flat), rng=torch.get_rng_state(), cuda_rng=_cuda_rng(),
            buffers=buffers,
            parent=parent, depth=0 if parent is None else self.calls[parent].depth + 1, size=size,
        )
        self.calls.append(call)
        if parent is not None:
            self.calls[parent].children.append(call.index)
        return call

    def pre(self, path: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if self.in_function:
                return
            buffers = {k: b.detach().clone() for k, b in module.named_buffers()}
            size = sum(p.numel() for p in module.parameters())
            forward = type(module).forward
            call = self._new(UnitKind.MODULE, path, module, f"{type(module).__name__}.forward",
                             source_of(forward), args, kwargs, buffers, size)
            self.stack.append(call.index)

        return hook

    def post(self, module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        if self.in_function or not self.stack:
            return
        if self.calls[self.stack[-1]].target is module:
            self.stack.pop()

    def function_apply(self, original: Any) -> Callable[..., Any]:
        capture = self

        def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
            inner = capture.in_function or cls.__module__.startswith("torch.")
            if not inner and any(t.requires_grad for t in tensors_in((args, kwargs))):
                path = capture.calls[capture.stack[-1]].path if capture.stack else ""
                capture._new(UnitKind.FUNCTION, path, cls, f"{cls.__name__}.backward",
                             source_of(getattr(cls, "backward", None)), args, kwargs, {}, 0)
            capture.in_function += 1
            try:
                return original.__func__(cls, *args, **kwargs)
            finally:
                capture.in_function -= 1

        return apply

    def site(self, kind: str, name: str) -> None:
        where = caller_site(2)
        if where is None or not self.stack or self.in_function:
            return
        source = _user_source()
        if source is not None:
            source = source.split(" in ")[0]
        self.calls[self.stack[-1]].sites.append(Site(kind, name, source, where[0], where[1]))


def cuda_devices() -> list[int]:
    """The CUDA devices whose generators a check saves and restores: all, once CUDA is in use; else none."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return list(range(torch.cuda.device_count()))
    return []


def _cuda_rng() -> list[torch.Tensor] | None:
    return torch.cuda.get_rng_state_all() if cuda_devices() else None


def set_attribute(owner: Any, name: str, value: Any) -> None:
    """`owner.name = value`: how patches of torch's classes are set and undone (mypy refuses the assignment)."""
    setattr(owner, name, value)


def _copy(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


# The descriptor behind Tensor.data (on torch's C base class), found through the public class's MRO.
DATA = next(c.__dict__["data"] for c in torch.Tensor.__mro__ if "data" in c.__dict__)
NO_GRAD = "torch.no_grad()"  # a Site's name for a `with torch.no_grad():` block


def data_property(getter: Callable[[torch.Tensor], torch.Tensor]) -> property:
    """A `Tensor.data` whose reads go through `getter`; writes (`p.data = t`) are torch's own."""
    return property(getter, lambda tensor, value: DATA.__set__(tensor, value))


@contextmanager
def _patched(capture: _Capture) -> Iterator[None]:
    """Function.apply, Tensor.register_hook, Tensor.detach, Tensor.data and torch.no_grad report to
    `capture` while the forward runs."""
    apply_original = torch.autograd.Function.__dict__["apply"]
    hook_original = torch.Tensor.register_hook
    detach_original = torch.Tensor.detach
    enter_original = torch.no_grad.__enter__

    def register_hook(tensor: torch.Tensor, hook: Any) -> Any:
        capture.site(UnitKind.HOOK, f"hook {getattr(hook, '__qualname__', type(hook).__name__)}")
        return hook_original(tensor, hook)

    def detach(tensor: torch.Tensor) -> torch.Tensor:
        capture.site(UnitKind.DETACH, ".detach()")
        return detach_original(tensor)

    def data(tensor: torch.Tensor) -> torch.Tensor:
        capture.site(UnitKind.DATA, ".data")
        return DATA.__get__(tensor)

    def enter(self: torch.no_grad) -> None:
        capture.site(UnitKind.DETACH, NO_GRAD)
        enter_original(self)

    set_attribute(torch.autograd.Function, "apply", classmethod(capture.function_apply(apply_original)))
    set_attribute(torch.Tensor, "register_hook", register_hook)
    set_attribute(torch.Tensor, "detach", detach)
    set_attribute(torch.Tensor, "data", data_property(data))
    set_attribute(torch.no_grad, "__enter__", enter)
    try:
        yield
    finally:
        set_attribute(torch.autograd.Function, "apply", apply_original)
        set_attribute(torch.Tensor, "register_hook", hook_original)
        set_attribute(torch.Tensor, "detach", detach_original)
        delattr(torch.Tensor, "data")  # torch's own descriptor, on TensorBase, shows through again
        set_attribute(torch.no_grad, "__enter__", enter_original)
def capture(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Step, Any]:
    """Run `model(*args, **kwargs)` once with grad enabled; the calls it made and its output.

    The patches and hooks are process-wide while the forward runs (a check is not
    meant to share its process's forward with another thread).
    """
    run = _Capture(model)
    handles = []
    for path, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(run.pre(path), with_kwargs=True))
        handles.append(module.register_forward_hook(run.post, with_kwargs=True, always_call=True))
    try:
        with _patched(run), torch.enable_grad():
            output = model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    _count_calls(run.calls)
    return Step(run.calls, run.notes), output


def _count_calls(calls: list[Call]) -> None:
    """Number the calls of the same module (or the same Function in the same module)."""
    seen: dict[tuple[str, str, str], list[Call]] = {}
    for c in calls:
        seen.setdefault((c.kind, c.path, c.name), []).append(c)
    for group in seen.values():
        for k, c in enumerate(group):
            c.call, c.calls = k, len(group)
