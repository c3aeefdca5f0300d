"""A drop-in for torchviz's `make_dot`: change one import, keep the call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import graphviz

from .drawing.renderer import render

__all__ = ["make_dot"]


def make_dot(
    var: Any,
    params: Mapping[str, Any] | None = None,
    show_attrs: bool = False,
    show_saved: bool = False,
    max_attr_chars: int = 50,
) -> graphviz.Digraph:
    """Draw the autograd graph of `var`, with torchviz's signature and return type.

    Unlike torchviz it walks iteratively (no RecursionError on deep graphs),
    keeps saved tensors apart from the inputs they equal, shows dtype and
    device, and does not fail on saved tensors already freed by backward().

    Args:
        var: the output tensor (or a tuple/list/dict of them).
        params: names for leaf tensors, e.g. `dict(model.named_parameters())`.
        show_attrs: show ops' non-tensor attributes.
        show_saved: show the tensors ops saved for backward.
        max_attr_chars: cut attribute lines longer than this.

    Returns:
        A `graphviz.Digraph`, as torchviz returns.
    """
    from .tracing.tracer import trace  # torch is needed only once a graph is traced

    graph = trace(var, params, show_saved=show_saved, show_attrs=show_attrs)
    return render(graph, max_attr_chars=max_attr_chars, legend=False)
