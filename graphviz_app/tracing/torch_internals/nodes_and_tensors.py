"""Tags on autograd nodes (module, source line), sequence numbers, and private facts of tensors and modules."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import torch

__all__ = ["MODULE_KEY", "MODULE_TYPE_KEY", "SOURCE_KEY", "RecordedTags", "tags_written", "recorded_tags",
           "next_sequence_nr", "tag_untagged", "view_base", "version_counter", "storage_identity",
           "torch_function_disabled", "replace_children", "sequence_nr", "is_leaf_node"]

# What `graphviz_app.record` writes into `grad_fn.metadata` (a public, per-node
# dict). The keys are namespaced so they never clash with the user's own tags.
MODULE_KEY = "graphviz_app.module"
MODULE_TYPE_KEY = "graphviz_app.module_type"
SOURCE_KEY = "graphviz_app.source"  # present on every node the recorder saw

# torch's stubs for torch._C._functions list no AccumulateGrad, though the class is there.
_ACCUMULATE_GRAD = torch._C._functions.AccumulateGrad  # type: ignore[attr-defined]

RecordedTags = tuple[str | None, str | None, str | None]
_NO_TAGS: RecordedTags = (None, None, None)


# Set once `tag_untagged` has written a tag: until then no node of this
# process carries one, and a walk need not read `fn.metadata` (which makes a
# dict on every node it is read from).
_tagged = False


def tags_written() -> bool:
    """Whether any node of this process may carry tags written by `tag_untagged`."""
    return _tagged


def recorded_tags(fn: Any) -> RecordedTags:
    """(module, module type, source) that `record()` wrote on node `fn`, None where absent."""
    try:
        meta = fn.metadata
    except (AttributeError, RuntimeError):
        return _NO_TAGS
    if not meta:
        return _NO_TAGS
    return meta.get(MODULE_KEY), meta.get(MODULE_TYPE_KEY), meta.get(SOURCE_KEY)


_peek_sequence_nr = getattr(torch.autograd, "_get_sequence_nr", None)


def next_sequence_nr() -> int:
    """The autograd sequence number the next node made on this thread will get.

    Sequence numbers are per thread and increase with every node created, so
    a node numbered at least this was made after this call.
    """
    if _peek_sequence_nr is not None:
        return _peek_sequence_nr()
    # Without torch's private peek: make and drop a one-element probe node.
    with torch_function_disabled(), torch.inference_mode(False), torch.enable_grad():
        probe = torch.zeros((), requires_grad=True).clone()
    assert probe.grad_fn is not None, "a clone of a tensor that requires grad has a grad_fn"
    return probe.grad_fn._sequence_nr() + 1


def tag_untagged(
    fn: Any, first: int, tags: Callable[[int], Mapping[str, Any]], *, seen_key: str = SOURCE_KEY
) -> None:
    """Tag `fn` and every node behind it not yet seen by the recorder.

    The walk stops at nodes already tagged (holding `seen_key`), at leaves
    (AccumulateGrad, whose sequence number is the maximum) and at nodes
    numbered below `first`, so a tensor computed before recording began is
    never claimed. `tags(n)` gives what to write on a node numbered `n`; it
    must include `seen_key`.
    """
    global _tagged
    _tagged = True  # before the first write: a walk on another thread then reads tags
    todo = [fn]
    while todo:
        node = todo.pop()
        if type(node) is _ACCUMULATE_GRAD:
            continue
        meta = node.metadata
        if seen_key in meta:
            continue
        seq = node._sequence_nr()
        if seq < first:
            continue
        meta.update(tags(seq))
        for child, _ in node.next_functions:
            if child is not None:
                todo.append(child)


def view_base(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor `t` is a view of, or None when `t` owns its memory."""
    return t._base if t._is_view() else None


def version_counter(t: torch.Tensor) -> int:
    """How many times `t`'s memory has been written in place (torch bumps it on every in-place op)."""
    return t._version


def storage_identity(storage: torch.UntypedStorage) -> int:
    """A number naming `storage` for as long as it lives, also when it has no data pointer (meta)."""
    return storage._cdata


def torch_function_disabled() -> Any:
    """A context in which torch-function modes and subclass overrides are off."""
    return torch._C.DisableTorchFunction()


def replace_children(module: torch.nn.Module, children: Mapping[str, torch.nn.Module]) -> None:
    """Make `children` the module's only submodules, whatever their names.

    `add_module` refuses names that are attributes of nn.Module (`eval`, `forward`),
    which a program's variables may be called; the child table takes any name.
    """
    module._modules.clear()
    module._modules.update(children)


# An autograd node's sequence number: per thread, increasing with every node the
# forward creates (AccumulateGrad's is the largest integer). torch names it privately.
sequence_nr: Callable[[Any], int] = operator.methodcaller("_sequence_nr")


def is_leaf_node(fn: Any) -> bool:
    """Whether autograd node `fn` is a leaf's AccumulateGrad (it makes no node when it runs)."""
    return type(fn) is _ACCUMULATE_GRAD
