"""A program that builds nn modules runs under `record`, its module variables the roots, its lines the sources."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..tracing.recorder import Recording, record
from ..tracing.torch_internals import SOURCE_KEY, next_sequence_nr, replace_children, tag_untagged
from .modules import ProgramModule

__all__ = ["Program", "uses_modules", "ProgramRecording", "program_lines"]

_LINE_KEY = "graphviz_app.program_line"


class Program(torch.nn.Module):
    """The root module of a program: one child per variable holding a module, named by the variable."""

    def forward(self, *args: Any) -> Any:  # never called: the program calls its modules itself
        raise NotImplementedError("a program's modules are called by the program")


def uses_modules(tree: ast.Module) -> bool:
    """Whether a program names `nn` or `torch.nn.<Module>` (so it may build modules)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "nn":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "nn" and isinstance(node.value, ast.Name):
            return True
    return False


def roots(env: Mapping[str, Any]) -> dict[str, torch.nn.Module]:
    """Module variables, those inside no other one first, so `seq.0` wins over a variable `lin`."""
    held: dict[str, torch.nn.Module] = {}
    for name, value in env.items():
        if isinstance(value, ProgramModule):
            held[name] = value.module
        elif isinstance(value, (list, tuple)):  # layers = [nn.Linear(4, 4), ...]: layers.0, layers.1
            held.update((f"{name}.{i}", v.module) for i, v in enumerate(value) if isinstance(v, ProgramModule))
    inner: set[int] = set()
    for module in held.values():
        inner.update(id(m) for m in module.modules() if m is not module)
    top = {n: m for n, m in held.items() if id(m) not in inner}
    return {**top, **{n: m for n, m in held.items() if n not in top}}


class ProgramRecording:
    """`record(root)` plus program lines as sources, while a program runs.

    Args:
        line: Gives the program line being run.
    """

    def __init__(self, line: Callable[[], int]) -> None:
        self.root = Program()
        self._line = line
        self._bound: tuple[tuple[str, int], ...] = ()
        self._recording: Recording | None = None
        self._mode: TorchFunctionMode | None = None

    def __enter__(self) -> ProgramRecording:
        self._recording = record(self.root).__enter__()
        try:
            self._mode = program_lines(self._line)
            self._mode.__enter__()
        except BaseException:
            self._recording.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._mode is not None:
                self._mode.__exit__(*exc)
        finally:
            if self._recording is not None:
                self._recording.__exit__(*exc)

    def refresh(self, env: Mapping[str, Any]) -> None:
        """Name modules by the variables holding them now (before a module call)."""
        found = roots(env)
        bound = tuple((n, id(m)) for n, m in found.items())
        if bound == self._bound:
            return
        self._bound = bound
        # A variable may be called `eval` or `forward`, names add_module refuses.
        replace_children(self.root, found)
        if self._recording is not None:
            self._recording.names = {id(m): name for name, m in self.root.named_modules()}


def program_lines(line: Callable[[], int]) -> TorchFunctionMode:
    """A mode writing `program:N` (N from `line()`) as the source of every node the program makes."""
    return _LineMode(next_sequence_nr(), line)


class _LineMode(TorchFunctionMode):
    """Writes the program line as the source of every node a torch call made (record's tag is torch's line)."""

    def __init__(self, first: int, line: Callable[[], int]) -> None:
        super().__init__()
        self.first = first
        self.line = line

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        items = result if isinstance(result, (tuple, list)) else (result,)
        for item in items:
            fn = getattr(item, "grad_fn", None) if isinstance(item, torch.Tensor) else None
            if fn is not None:
                self._stamp(fn)
        return result

    def _stamp(self, fn: Any) -> None:
        # The recorder's walk, with its own mark: record() has already written
        # torch's line as the source of these nodes, and the program line replaces it.
        tag = {_LINE_KEY: True, SOURCE_KEY: f"program:{self.line()}"}
        tag_untagged(fn, self.first, lambda _seq: tag, seen_key=_LINE_KEY)
