"""Turn what a `SCRIPT.py:FUNCTION` returned into a Graph: outputs, (outputs, parameters), or (model, inputs)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import TraceError

if TYPE_CHECKING:
    from ..model import Graph

__all__ = ["script_graph"]

_FORMS = (
    "return the output tensor(s) (return loss), the output and its parameters "
    "(return loss, model.named_parameters()), or a model and its inputs (return model, x)"
)


def script_graph(
    result: Any, target: str, *, show_saved: bool = True, max_nodes: int | None = None, gradients: bool = False,
) -> Graph:
    """Trace what the person's function returned.

    Args:
        result: the function's return value.
        target: "SCRIPT.py:FUNCTION", for messages.
        show_saved, max_nodes, gradients: as for `trace()`.

    Raises:
        TraceError: the value is none of the forms, saying which ones work.
    """
    # The script made any tensor it returns, so torch is loaded if there is one.
    torch = sys.modules.get("torch")
    found = type(result).__name__
    if torch is None:
        raise TraceError(f"{target} returned {found}, not tensors: {_FORMS}")
    options: dict[str, Any] = {"show_saved": show_saved, "max_nodes": max_nodes, "gradients": gradients}
    if isinstance(result, torch.nn.Module):
        raise TraceError(f"{target} returned a model without inputs: return the model and its inputs, "
                         "e.g. return model, x (or model, (x, y))")
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.nn.Module):
        return _trace_model(result[0], _inputs(result[1:], target), target, options)
    outputs, params = result, None
    if isinstance(result, tuple) and len(result) == 2 and _looks_like_params(result[1], torch):
        outputs, params = result[0], _params(result[1], torch, target)
    if not _has_tensor(outputs, torch):
        raise TraceError(f"{target} returned {found}, not tensors: {_FORMS}")
    from ..tracing.tracer import trace

    return trace(outputs, params, **options)


def _inputs(rest: Any, target: str) -> tuple[Any, ...]:
    if not rest:
        raise TraceError(f"{target} returned a model without inputs: return model, x (or model, (x, y))")
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        return tuple(rest[0])  # (model, (x, y)): the inner tuple holds the positional inputs
    return tuple(rest)


def _trace_model(root_module: Any, inputs: tuple[Any, ...], target: str, options: dict[str, Any]) -> Graph:
    from ..tracing.module_trace import trace_model  # runs the forward under record(root_module)

    try:
        return trace_model(root_module, *inputs, **options)
    except TraceError:
        raise
    except Exception as e:  # the person's forward failed: say so, in their terms
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise TraceError(f"{target}: calling the returned model on its inputs raised "
                         f"{type(e).__name__}{': ' + text if text else ''}") from e


def _looks_like_params(value: Any, torch: Any) -> bool:
    """True for a module, named_parameters() (a generator), or a dict / list of name -> leaf tensor."""
    if isinstance(value, (torch.nn.Module, Iterator)):
        return True
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list):
        items = value
    else:
        return False
    # A dict of outputs has tensors with a grad_fn; parameters are leaves.
    return bool(items) and all(
        isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
        and isinstance(item[1], torch.Tensor) and item[1].grad_fn is None
        for item in items
    )


def _params(value: Any, torch: Any, target: str) -> dict[str, Any]:
    if isinstance(value, torch.nn.Module):
        return dict(value.named_parameters())
    items = list(value.items()) if isinstance(value, Mapping) else list(value)
    bad = [item for item in items if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                                          and isinstance(item[1], torch.Tensor))]
    if bad:
        raise TraceError(f"{target} returned (output, parameters) whose parameters hold {type(bad[0]).__name__} "
                         f"{str(bad[0])[:60]!r}, not (name, tensor) pairs: return loss, model.named_parameters()")
    return dict(items)


def _has_tensor(value: Any, torch: Any) -> bool:
    stack, seen = [value], 0
    while stack and seen < 10_000:
        item, seen = stack.pop(), seen + 1
        if isinstance(item, torch.Tensor):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False
