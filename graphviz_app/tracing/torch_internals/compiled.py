"""torch.compile's backward graph behind a compiled node, and the function every backward call goes through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["COMPILED_BACKWARD_PATH", "compiled_backward_graph", "aot_role", "RunBackward", "wrap_run_backward"]

_UNKNOWN: Any = object()  # not an attribute's value: `is` tells it from every real one

# torch.compile's backward: a `CompiledFunctionBackward` node is the backward of an
# autograd.Function class that AOT autograd builds per compiled graph (its
# `_forward_cls`); the class keeps the backward graph, an FX GraphModule, for the
# backward compile it may still have to run (`_lazy_backward_info.bw_module`), or, on
# a hit of AOT autograd's cache, a function that loads it (`bw_module_fn`). These are
# the names torch 2.13 uses; `compiled_backward_graph` says which one it did not find.
COMPILED_BACKWARD_PATH = ("_forward_cls", "_lazy_backward_info", "bw_module")


def compiled_backward_graph(fn: Any) -> tuple[Any | None, str | None]:
    """(the FX GraphModule of compiled node `fn`'s backward, None) or (None, why it is not there).

    The graph is AOT autograd's backward graph as handed to the compiler backend
    (before inductor generates code from it).
    """
    where = f"torch {torch.__version__}"
    forward_cls = getattr(fn, COMPILED_BACKWARD_PATH[0], None)
    if forward_cls is None:
        return None, f"{type(fn).__name__} has no {COMPILED_BACKWARD_PATH[0]} in {where}: cannot reach its graph"
    info = getattr(forward_cls, COMPILED_BACKWARD_PATH[1], _UNKNOWN)
    if info is _UNKNOWN:
        return None, (
            f"the compiled function has no {COMPILED_BACKWARD_PATH[1]} in {where}: this torch keeps the "
            "backward graph elsewhere (graphviz_app.tracing.torch_internals needs updating)"
        )
    if info is None:
        return None, (
            "torch compiled this backward without keeping its graph (a backward compiled ahead of time, "
            "or loaded from the compile cache); run with torch._functorch.config.enable_autograd_cache = False "
            "and a fresh torch._dynamo.reset() to keep it"
        )
    module = getattr(info, COMPILED_BACKWARD_PATH[2], None)
    if module is None and callable(getattr(info, "bw_module_fn", None)):  # an AOT autograd cache hit
        try:
            module = info.bw_module_fn()
        except Exception as e:  # noqa: BLE001 - a cache entry torch cannot load is reported, not raised
            return None, f"the cached backward graph did not load: {type(e).__name__}: {e}"
    if not isinstance(module, torch.fx.GraphModule):
        return None, (
            f"{COMPILED_BACKWARD_PATH[1]} holds no {COMPILED_BACKWARD_PATH[2]} GraphModule in {where} "
            f"(found {type(module).__name__})"
        )
    return module, None


def aot_role(node: Any) -> tuple[str, int] | None:
    """What an input or output of AOT autograd's backward graph stands for, from its descriptor.

    ("input", i): the region's forward input i (its gradient edge `i`); ("tangent", j):
    the gradient coming in for the region's output j; ("grad", i): the gradient of
    forward input i. None when the descriptor is another kind (a mutated input, an
    alias, a random-number state) or absent (torch before descriptors).
    """
    desc = node.meta.get("desc") if hasattr(node, "meta") else node
    kind = type(desc).__name__
    if kind == "PlainAOTInput":
        return "input", int(desc.idx)
    if kind == "TangentAOTInput" and type(desc.output).__name__ == "PlainAOTOutput":
        return "tangent", int(desc.output.idx)
    if kind == "GradAOTOutput" and type(desc.grad_of).__name__ == "PlainAOTInput":
        return "grad", int(desc.grad_of.idx)
    return None


# Every Python call that runs backward (torch.autograd.grad, Tensor.backward,
# torch.autograd.backward) goes through this function of torch.autograd (torch itself
# patches it the same way for make_fx); `torch.autograd.graph` holds the original.
_RUN_BACKWARD_HOMES = (torch.autograd, torch.autograd.graph)
_RUN_BACKWARD = "_engine_run_backward"

RunBackward = Callable[..., Any]


def wrap_run_backward(wrapper: Callable[[RunBackward], RunBackward]) -> Callable[[], None]:
    """Route every backward call through `wrapper(original)`; returns the function that undoes it.

    Raises RuntimeError naming the attribute when this torch has no such function.
    """
    original = getattr(torch.autograd, _RUN_BACKWARD, None)
    if original is None:
        raise RuntimeError(
            f"torch {torch.__version__} has no torch.autograd.{_RUN_BACKWARD}: backward calls cannot be "
            "observed (graphviz_app.tracing.torch_internals needs updating)"
        )
    wrapped = wrapper(original)
    saved = [(home, getattr(home, _RUN_BACKWARD, None)) for home in _RUN_BACKWARD_HOMES]
    for home in _RUN_BACKWARD_HOMES:
        setattr(home, _RUN_BACKWARD, wrapped)

    def undo() -> None:
        for home, before in saved:
            if getattr(home, _RUN_BACKWARD, None) is wrapped:  # not replaced since by someone else
                setattr(home, _RUN_BACKWARD, before)

    return undo

