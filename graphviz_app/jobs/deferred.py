"""Record a script's modules before knowing its model: named once the function returns `(output, model)`.

`graphviz-app render SCRIPT.py:FUNCTION` calls the function, which builds the
model and runs its forward itself. Which model it is, the CLI learns only from
what the function returns. So the call runs under `record()`, with every module
instance tagged by a placeholder; when the function returns `(output, model)`,
the placeholders of the model's modules become their qualified names
(`transformer.h.3.attn`), as `with record(model):` would have written them, and
`--depth`/`--roll` fold the graph as `trace_model` does. When it returns plain
outputs, the module tags are taken off again (nothing names the modules); the
source lines stay.
"""

from __future__ import annotations

import itertools
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tracing.recorder import Recording

__all__ = ["DeferredNames"]

_PLACEHOLDER = "\x00graphviz-app-module-"
_MAX_WALK = 10_000_000  # nodes: a walk over a graph bigger than any model's ends there


class _Placeholders(dict[int, str]):
    """Module id -> name for `record()`: a placeholder for every instance not named yet."""

    def __init__(self) -> None:
        super().__init__()
        self._numbers = itertools.count()

    def get(self, key: int, default: Any = None) -> str:
        name = super().get(key)
        if name is None:
            name = self[key] = f"{_PLACEHOLDER}{next(self._numbers)}"
        return name


class DeferredNames:
    """A `record()` block whose modules are named after it ends (see the module's docstring).

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    >>> with DeferredNames() as names:
    ...     y = net(torch.ones(1, 2))
    >>> names.name_by(net, y)
    >>> y.grad_fn.metadata["graphviz_app.module"]
    '0'
    """

    def __init__(self) -> None:
        from ..tracing.recorder import record  # torch, on use: the CLI's parser loads without it

        self.names = _Placeholders()
        self._recording: Recording = record(None)
        self._recording.names = self.names

    def __enter__(self) -> DeferredNames:
        self._recording.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._recording.__exit__(exc_type, exc, tb)

    def name_by(self, model: Any, outputs: Any) -> None:
        """Give the nodes behind `outputs` the qualified names of `model`'s modules; others lose their tag."""
        by_placeholder = {self.names[id(m)]: name for name, m in model.named_modules() if id(m) in self.names}
        self._rewrite(outputs, by_placeholder)

    def forget(self, outputs: Any) -> None:
        """Take the block's module tags off the nodes behind `outputs` (no model names them)."""
        self._rewrite(outputs, None)

    def _rewrite(self, outputs: Any, names: dict[str, str] | None) -> None:
        import torch

        from ..tracing.torch_internals import MODULE_KEY, MODULE_TYPE_KEY

        tensors = [t for t in _tensors(outputs) if isinstance(t, torch.Tensor)]
        todo: list[Any] = [t.grad_fn for t in tensors if t.grad_fn is not None]
        seen: set[int] = set()
        while todo and len(seen) < _MAX_WALK:
            fn = todo.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            meta: dict[str, Any] = fn.metadata  # a public dict per node (a property, not a method)
            module = meta.get(MODULE_KEY)
            if isinstance(module, str) and module.startswith(_PLACEHOLDER):
                name = None if names is None else names.get(module)
                if name is None:
                    meta.pop(MODULE_KEY, None)
                    meta.pop(MODULE_TYPE_KEY, None)
                else:
                    meta[MODULE_KEY] = name
            todo.extend(child for child, _ in fn.next_functions if child is not None)


def _tensors(value: Any) -> list[Any]:
    """The tensors in nested tuples, lists and dicts (an output, or model outputs)."""
    found: list[Any] = []
    stack: list[Any] = [value]
    opened: set[int] = set()
    while stack and len(opened) < 100_000:
        item = stack.pop()
        if isinstance(item, dict):
            if id(item) not in opened:
                opened.add(id(item))
                stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            if id(item) not in opened:
                opened.add(id(item))
                stack.extend(item)
        else:
            found.append(item)
    return found
