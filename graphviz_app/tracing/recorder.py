"""Record, while an `nn.Module` runs forward, which module and which source line made each autograd node."""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
from collections.abc import Iterable, Mapping
from types import FrameType, TracebackType
from typing import Any

import torch
from torch.nn.modules import module as _nn_module
from torch.overrides import TorchFunctionMode

from ..errors import TraceError
from .torch_internals import (
    MODULE_KEY,
    MODULE_TYPE_KEY,
    SOURCE_KEY,
    next_sequence_nr,
    tag_untagged,
    torch_function_disabled,
)

__all__ = ["record", "Recording"]

# A module's place on the call stack: (id of the module, qualified name, class
# name, the sequence number of the first node its forward could make).
_Frame = tuple[int, str, str, int]


class _ThreadState(threading.local):
    """What recording means on this thread: torch's modes and sequence numbers are per thread."""

    def __init__(self) -> None:
        self.recordings: list[Recording] = []
        self.calls: list[_Frame] = []  # the modules whose forward is running, innermost last
        self.first = 0  # nodes numbered from this on were made while recording
        self.mode: _TagMode | None = None


_state = _ThreadState()

# Module hooks are process-wide: installed while any thread records, and a
# hook does nothing on a thread that is not recording.
_hooks_lock = threading.Lock()
_hooks: list[Any] = []
_hook_users = 0


def record(model: torch.nn.Module | None = None) -> Recording:
    """Tag every autograd node made inside the block with its module and source line.

    Inside `with record(model):`, each new backward node gets in its public
    `grad_fn.metadata` dict the qualified name of the innermost module whose
    forward was running (`"layers.3.self_attn"`, `""` for `model` itself; no
    entry outside any module) and the first line of user code that made it
    (`"models/net.py:42 in forward"`, the path from the package or project
    root). Nodes an op makes internally (`F.linear` makes `AddmmBackward0`
    and `TBackward0`) are attributed to the same module; tensors computed
    before the block are never claimed. `trace()` copies the tags into
    `Node.module` and `Node.source`.

    Args:
        model: the root module, which names modules by `named_modules()`.
            Without it, or for a module outside it, the name is the class name.

    Returns:
        A context manager; blocks may nest (the innermost block's module names first).
        Every hook and mode is removed on exit, also when the block raises.

    Raises:
        TraceError: `model` is not an `nn.Module`.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    >>> with record(net):
    ...     y = net(torch.ones(1, 2))
    >>> y.grad_fn.metadata["graphviz_app.module"]
    '0'
    """
    if model is not None and not isinstance(model, torch.nn.Module):
        raise TraceError(
            f"record() expects the model, an nn.Module, got a {type(model).__name__}; "
            "pass the module you call (e.g. record(model)), or nothing to name modules by class"
        )
    return Recording(model)


class Recording:
    """The context manager `record()` returns."""

    def __init__(self, root_module: torch.nn.Module | None) -> None:
        self.root_module = root_module
        self.names: dict[int, str] = {}

    def __enter__(self) -> Recording:
        if self.root_module is not None:
            # The root module stays alive while recording, so ids are stable.
            self.names = {id(m): name for name, m in self.root_module.named_modules()}
        state = _state
        if not state.recordings:
            state.first = next_sequence_nr()
            state.calls = []
            _install_hooks()
            try:
                state.mode = _TagMode()
                state.mode.__enter__()
            except BaseException:
                _remove_hooks()
                raise
        state.recordings.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        state = _state
        if self in state.recordings:
            state.recordings.remove(self)
        if state.recordings:
            return
        mode, state.mode = state.mode, None
        state.calls = []
        try:
            if mode is not None:
                mode.__exit__(exc_type, exc, tb)
        finally:
            _remove_hooks()


def _install_hooks() -> None:
    global _hook_users
    with _hooks_lock:
        if _hook_users == 0:
            _hooks.append(_nn_module.register_module_forward_pre_hook(_enter_module))
            # always_call: a forward that raises still leaves the call stack.
            _hooks.append(_nn_module.register_module_forward_hook(_leave_module, always_call=True))
        _hook_users += 1


def _remove_hooks() -> None:
    global _hook_users
    with _hooks_lock:
        _hook_users -= 1
        if _hook_users == 0:
            while _hooks:
                _hooks.pop().remove()


def _name_of(state: _ThreadState, module: torch.nn.Module) -> str:
    """The module's qualified name; for one the model does not hold, a name inside its caller.

    A module made inside a forward (transformers' Mamba fallback makes an activation per
    call) is not among the model's `named_modules()`: it is named under the module whose
    forward called it (`"layers.0.mixer.SiLU"`), so it draws inside that module, not as a
    top-level box beside the model. Without a model, modules are named by class.
    """
    key = id(module)
    for recording in reversed(state.recordings):
        name = recording.names.get(key)
        if name is not None:
            return name
    kind = type(module).__name__
    if state.calls and any(r.root_module is not None for r in state.recordings):
        caller = state.calls[-1][1]
        return f"{caller}.{kind}" if caller else kind
    return kind


def _enter_module(module: torch.nn.Module, args: Any) -> None:
    state = _state
    if state.recordings:
        entry = (id(module), _name_of(state, module), type(module).__name__, next_sequence_nr())
        state.calls.append(entry)


def _leave_module(module: torch.nn.Module, args: Any, output: Any) -> None:
    state = _state
    if not state.calls or state.calls[-1][0] != id(module):
        return  # not recording, or the module was entered before record() began
    try:
        # Nodes no torch function made (a custom autograd.Function) become
        # visible here, at the latest, while the module is still innermost.
        if output is not None:
            with torch_function_disabled():
                for t in _tensors(output):
                    fn = _grad_fn(t)
                    if fn is not None:
                        tag_untagged(fn, state.first, _Tags(state.calls))
    finally:
        state.calls.pop()


def _tensors(value: Any, limit: int = 10_000) -> Iterable[torch.Tensor]:
    """The tensors in a module's output: nested tuples, lists and dicts, breadth first."""
    todo = [value]
    seen = 0
    while todo and seen < limit:
        item = todo.pop()
        seen += 1
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, (tuple, list)):
            todo.extend(item)
        elif isinstance(item, Mapping):
            todo.extend(item.values())


def _grad_fn(t: torch.Tensor) -> Any:
    """`t.grad_fn`, or None where reading it raises.

    Reading it is not free of rules: a view made under no_grad whose base was then changed
    in place raises "A view was created in no_grad mode ..." (torch's own initialisers do
    this: `nn.Embedding(padding_idx=...)`, `nn.init.orthogonal_`). Such a tensor has no
    node to tag; the user's code, not the recorder, should meet torch's error if it matters.
    """
    try:
        return t.grad_fn
    except RuntimeError:
        return None


class _TagMode(TorchFunctionMode):
    """Tags the nodes behind every torch call's result; the mode is off inside the handler.

    Under no_grad or inference_mode (a model's construction, its initialisers) no node is
    made, so results are not looked at: the recorder records the forward, not the set-up.
    """

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        if not torch.is_grad_enabled():
            return result
        if isinstance(result, torch.Tensor):
            fn = _grad_fn(result)
            if fn is not None:
                tag_untagged(fn, _state.first, _Tags(_state.calls))
        elif isinstance(result, (tuple, list)):  # torch.return_types.max and co. too
            tags = _Tags(_state.calls)
            for item in result:
                if isinstance(item, torch.Tensor):
                    fn = _grad_fn(item)
                    if fn is not None:
                        tag_untagged(fn, _state.first, tags)
        elif result is None and args and isinstance(args[0], torch.Tensor):
            # x[i] = v returns nothing but gives x a new node (CopySlices).
            fn = _grad_fn(args[0])
            if fn is not None:
                tag_untagged(fn, _state.first, _Tags(_state.calls))
        return result


_UNKNOWN: Any = object()


class _Tags:
    """What to write on the nodes behind one result: `tags(seq)` for a node numbered `seq`.

    A node belongs to the innermost running module whose forward began
    before the node was made: usually the innermost one, but a node no torch
    call made (a custom autograd.Function, met later by walking back) may be
    older. The source line is looked up once, for the first node tagged.
    """

    __slots__ = ("calls", "source", "by_depth")

    def __init__(self, calls: list[_Frame]) -> None:
        self.calls = calls
        self.source: str | None = _UNKNOWN
        self.by_depth: dict[int, dict[str, Any]] = {}

    def __call__(self, seq: int) -> dict[str, Any]:
        calls = self.calls
        depth = len(calls)
        while depth and calls[depth - 1][3] > seq:
            depth -= 1
        values = self.by_depth.get(depth)
        if values is None:
            if self.source is _UNKNOWN:
                self.source = _user_source()
            values = {SOURCE_KEY: self.source}
            if depth:
                _, name, type_name, _ = calls[depth - 1]
                values[MODULE_KEY], values[MODULE_TYPE_KEY] = name, type_name
            self.by_depth[depth] = values
        return values


def _library_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    inside = [os.path.dirname(torch.__file__), os.path.dirname(__file__)]
    outside: list[str] = []
    paths = sysconfig.get_paths()
    inside.append(paths["stdlib"])
    outside.extend({paths["purelib"], paths["platlib"]})  # third-party models are user code
    return (
        tuple(os.path.normcase(p) + os.sep for p in inside),
        tuple(os.path.normcase(p) + os.sep for p in outside),
    )


_INSIDE, _OUTSIDE = _library_dirs()

# Files that only pass calls through: never a useful source line.
_MACHINERY = (
    os.path.dirname(__file__) + os.sep,
    os.path.join(os.path.dirname(torch.__file__), "overrides.py"),
    os.path.join(os.path.dirname(torch.__file__), "nn", "modules", "module.py"),
    os.path.join(os.path.dirname(torch.__file__), "utils", "checkpoint.py"),
)

_USER, _LIBRARY, _PASS_THROUGH = 0, 1, 2
# By file name (a str caches its hash): one dict lookup per frame on the hot path.
_kinds: dict[str, int] = {}
_MAX_KINDS = 100_000  # generated file names must not grow it forever


def _kind(filename: str) -> int:
    if filename.startswith(_MACHINERY):
        return _PASS_THROUGH
    path = os.path.normcase(filename)
    if filename.startswith("<frozen"):
        return _LIBRARY
    if path.startswith(_OUTSIDE) and not path.startswith(_INSIDE[:2]):
        return _USER
    return _LIBRARY if path.startswith(_INSIDE) else _USER


def _user_source() -> str | None:
    """`"models/net.py:42 in forward"`: the first frame outside torch, this package and the stdlib.

    The path is `_shown_path`'s, so two files of the same name tell apart. A
    network made only of torch modules (called from `trace_model`) has no such
    frame; then the innermost line of torch's own module code, such as
    `"torch/nn/modules/transformer.py:912 in _sa_block"`, says more than nothing.
    """
    kinds = _kinds
    frame: FrameType | None = sys._getframe(1)
    fallback = None
    while frame is not None:
        filename = frame.f_code.co_filename
        kind = kinds.get(filename)
        if kind is None:
            if len(kinds) >= _MAX_KINDS:
                kinds.clear()
            kind = kinds[filename] = _kind(filename)
        if kind == _USER:
            return _where(frame)
        if kind == _LIBRARY and fallback is None:
            fallback = frame
        frame = frame.f_back
    return None if fallback is None else _where(fallback)


def _where(frame: FrameType) -> str:
    filename = frame.f_code.co_filename
    shown = _shown.get(filename)
    if shown is None:
        if len(_shown) >= _MAX_KINDS:
            _shown.clear()
        shown = _shown[filename] = _shown_path(filename)
    return f"{shown}:{frame.f_lineno} in {frame.f_code.co_name}"


_shown: dict[str, str] = {}  # file name -> the path shown, found once per file


def _shown_path(filename: str) -> str:
    """The path that names a source file among the others: from its top package's parent, or its root.

    A file inside a package (folders with `__init__.py`) is named from the
    folder above the top package: `transformers/models/gpt2/modeling_gpt2.py`,
    `torch/nn/modules/linear.py`. Any other file is named from the deepest of
    the working directory and the `sys.path` folders that holds it
    (`models/tagger.py` in a project); a file under none of them keeps its full
    path. Names that are no path (`<string>`, the language's `program`) stay as they are.

    >>> _shown_path("program")
    'program'
    >>> _shown_path(os.path.join(os.path.dirname(torch.__file__), "nn", "modules", "linear.py"))
    'torch/nn/modules/linear.py'
    """
    if not os.path.isabs(filename):
        return filename
    path = os.path.normpath(filename)
    folder, top = os.path.dirname(path), None
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        top, parent = folder, os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if top is not None:
        root = os.path.dirname(top)
    else:
        inside = [root for root in _roots() if path.startswith(root.rstrip(os.sep) + os.sep)]
        if not inside:
            return path
        root = max(inside, key=len)
    return os.path.relpath(path, root).replace(os.sep, "/")


def _roots() -> list[str]:
    """The working directory and the `sys.path` folders, absolute."""
    try:
        found = [os.getcwd()]
    except OSError:  # the working directory was removed
        found = []
    found += [os.path.abspath(p or os.curdir) for p in sys.path if isinstance(p, str)]
    return [os.path.normpath(p) for p in found]
