"""Turn what a `SCRIPT.py:FUNCTION` returned into a Graph: outputs, (outputs, model), or a model and its inputs.

The forms a function may return:

- the output tensor(s): ``return loss`` (any nesting of tuples, lists and dicts);
- the output and what names its leaves: ``return loss, model`` (the module is
  kept: leaves are placed in the modules that own them, so `--depth`/`--roll`
  fold it as `trace(loss, model)` does) or ``return loss, model.named_parameters()``;
- a model and its inputs, run under `record(model)`: ``return model, x``,
  ``return model, (x, y)``, ``return model, (x,), {"attention_mask": m}``;
- a mapping: ``return {"model": model, "args": (x,), "kwargs": {"labels": y},
  "loss": lambda out: out.loss}`` (``args``, ``kwargs`` and ``loss`` optional;
  ``loss`` is a function of the model's output, whose result is traced).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import TraceError

if TYPE_CHECKING:
    from ..model import Graph
    from .deferred import DeferredNames

__all__ = ["script_graph", "model_call", "MAPPING_KEYS"]

MAPPING_KEYS = ("model", "args", "kwargs", "loss")
_FORMS = (
    "return the output tensor(s) (return loss), the output and its parameters or model (return loss, model), "
    "or a model and its inputs (return model, x; return model, (x,), {'labels': y}; or "
    "return {'model': model, 'args': (x,), 'kwargs': {...}, 'loss': lambda out: out.loss})"
)


def script_graph(
    result: Any, target: str, *, show_saved: bool = True, max_nodes: int | None = None, gradients: bool = False,
    names: DeferredNames | None = None,
) -> Graph:
    """Trace what the person's function returned.

    Args:
        result: the function's return value.
        target: "SCRIPT.py:FUNCTION", for messages.
        show_saved, max_nodes, gradients: as for `trace()`.
        names: the recording the function ran under: `(output, model)` names the
            modules of its forward by the model, as `record(model)` would have.

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
                         "e.g. return model, x (or model, (x, y), or model, (x,), {'labels': y})")
    if isinstance(result, Mapping) and isinstance(result.get("model"), torch.nn.Module):
        model, args, kwargs, loss = _mapping(result, target)
        return _trace_call(model, args, kwargs, loss, target, options)
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.nn.Module):
        args, kwargs = _inputs(result[1:], target)
        return _trace_call(result[0], args, kwargs, None, target, options)
    outputs, params = result, None
    if isinstance(result, tuple) and len(result) == 2 and _looks_like_params(result[1], torch):
        outputs, params = result[0], _params(result[1], torch, target)
    if not _has_tensor(outputs, torch):
        raise TraceError(f"{target} returned {found}, not tensors: {_FORMS}")
    from ..tracing.tracer import trace

    if names is not None and isinstance(params, torch.nn.Module):
        names.name_by(params, outputs)  # its forward ran in the function: named now, as record(model) would
    elif names is not None:
        names.forget(outputs)

    return trace(outputs, params, **options)


def _mapping(result: Mapping[str, Any], target: str) -> tuple[Any, tuple[Any, ...], dict[str, Any], Any]:
    unknown = [str(k) for k in result if k not in MAPPING_KEYS]
    if unknown:
        raise TraceError(f"{target} returned a mapping with the key(s) {', '.join(map(repr, unknown))}; it takes "
                         f"{', '.join(map(repr, MAPPING_KEYS))}: {{'model': model, 'args': (x,), 'kwargs': {{...}}, "
                         "'loss': lambda out: out.loss}")
    args = result.get("args", ())
    kwargs = result.get("kwargs", {})
    loss = result.get("loss")
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise TraceError(f"{target}: 'kwargs' must be a dict of the forward's keyword arguments, found "
                         f"{type(kwargs).__name__}: e.g. 'kwargs': {{'input_ids': ids, 'labels': ids}}")
    if loss is not None and not callable(loss):
        raise TraceError(f"{target}: 'loss' must be a function of the model's output, found {type(loss).__name__}: "
                         "e.g. 'loss': lambda out: out.logits.sum()")
    return result["model"], tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(kwargs), loss


def model_call(result: Any, target: str) -> tuple[Any, tuple[Any, ...], dict[str, Any], Any] | None:
    """(model, args, kwargs, loss function or None) when `result` is a model with its inputs, in any form
    `script_graph` takes (a tuple, or the mapping); None when it is not a model with inputs."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(result, Mapping) and isinstance(result.get("model"), torch.nn.Module):
        return _mapping(result, target)
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.nn.Module):
        args, kwargs = _inputs(result[1:], target)
        return result[0], args, kwargs, None
    return None


def _inputs(rest: Any, target: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not rest:
        raise TraceError(f"{target} returned a model without inputs: return model, x (or model, (x, y), "
                         "or model, (x,), {'labels': y})")
    if len(rest) == 2 and isinstance(rest[1], Mapping) and all(isinstance(k, str) for k in rest[1]):
        args = rest[0]  # (model, args, kwargs)
        return (tuple(args) if isinstance(args, (tuple, list)) else (args,)), dict(rest[1])
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        return tuple(rest[0]), {}  # (model, (x, y)): the inner tuple holds the positional inputs
    return tuple(rest), {}


def _trace_call(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], loss: Callable[[Any], Any] | None,
                target: str, options: dict[str, Any]) -> Graph:
    """`model(*args, **kwargs)` (then `loss(output)`) under `record(model)`, traced with the model's modules."""
    import torch

    from ..tracing.module_trace import given_tensors
    from ..tracing.recorder import record
    from ..tracing.tracer import trace

    stage = "calling the returned model on its inputs"
    try:
        with torch.enable_grad(), record(model):
            outputs = model(*args, **kwargs)
            if loss is not None:
                stage = "the returned 'loss' function, called on the model's output,"
                outputs = loss(outputs)
    except TraceError:
        raise
    except Exception as e:  # the person's forward or loss failed: say so, in their terms
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        hint = ""
        if "input_ids" in text or "decoder_input_ids" in text or "labels" in text:
            hint = ("; a model that takes keyword arguments gets them as return model, (), {'input_ids': ids, ...} "
                    "or in the mapping form's 'kwargs'")
        raise TraceError(f"{target}: {stage} raised {type(e).__name__}{': ' + text if text else ''}{hint}") from e
    try:
        return trace(outputs, model, given=given_tensors(model, args, kwargs), **options)
    finally:
        del outputs  # freed on this (the CLI's big-stack) thread


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


def _params(value: Any, torch: Any, target: str) -> Any:
    if isinstance(value, torch.nn.Module):
        return value  # kept whole: trace() places leaves and ops in its modules, as trace(loss, model) does
    items = list(value.items()) if isinstance(value, Mapping) else list(value)
    bad = [item for item in items if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                                          and isinstance(item[1], torch.Tensor))]
    if bad:
        raise TraceError(f"{target} returned (output, parameters) whose parameters hold {type(bad[0]).__name__} "
                         f"{str(bad[0])[:60]!r}, not (name, tensor) pairs: return loss, model")
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
