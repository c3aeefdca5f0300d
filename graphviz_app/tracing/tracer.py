"""Walk a tensor's grad_fn chain into a plain Graph."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from ..errors import NoGradFnError, TraceError
from ..model import Graph
from . import big_stack
from .compiled import COMPILED_NODE, add_regions
from .memory.op_temporaries import mark_meta_op_temporaries
from .orders import add_orders, orders_written
from .param_owners import all_named_params, first_names
from .replay import replay
from .walker import Walker, WalkOptions

__all__ = ["trace"]

Params = torch.nn.Module | Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]


def trace(
    outputs: Any,
    params: Params | None = None,
    *,
    show_saved: bool = True,
    show_attrs: bool = True,
    max_nodes: int | None = None,
    gradients: bool = False,
    grad_outputs: Any = None,
    names: Mapping[str, torch.Tensor] | None = None,
    given: Iterable[torch.Tensor] = (),
    op_temporaries: bool = False,
) -> Graph:
    """Trace the autograd graph behind `outputs` into a Graph.

    Args:
        outputs: a tensor, or any nesting of tuples, lists and dicts of
            tensors. Other values are skipped with a note in `Graph.notes`.
        params: names for leaf tensors: a dict name -> tensor or an iterable
            of (name, tensor) pairs, so `model.named_parameters()` works.
            An `nn.Module` names leaves by its `named_parameters()`, puts
            each leaf in the module that owns it, and fills `Graph.modules`.
        show_saved: add a node for each tensor an op saved for backward.
        show_attrs: keep ops' non-tensor attributes (dim, alpha, ...).
        max_nodes: the most nodes of any kind (outputs, ops, leaves, saved
            tensors) the graph holds; past it the graph is marked `truncated`.
        gradients: replay backward once (hooks, `torch.autograd.grad`,
            `retain_graph=True`; `.grad` fields untouched) and put gradient
            statistics on every node and data edge, and the op where NaN/Inf
            first appears in `Graph.nonfinite_origin`.
        grad_outputs: with `gradients`, the gradients of the outputs, in the
            same nesting as `outputs`; default all ones.
        names: more leaf names, name -> tensor, for leaves `params` does not
            name (a program's variables beside its modules); they belong to
            no module.
        given: tensors that existed before the step (inputs, buffers): the
            records of tensors in their storages are marked `TensorInfo.given`,
            which `memory_timeline` does not count.
        op_temporaries: run each distinct op's backward once on meta and write
            the bytes it makes and frees inside on the op (as `measure()`
            records them), so `memory_timeline` counts them; `trace_model`
            does this.

    Returns:
        A Graph holding no reference to any tensor or autograd node.

    Raises:
        NoGradFnError: an output has no grad_fn; the message says why.
        TraceError: `outputs` holds no tensor, or `params` is malformed.
        GradientError: with `gradients`, backward cannot be replayed (saved
            tensors freed, graph cut by `max_nodes`, bad `grad_outputs`).

    >>> import torch
    >>> from graphviz_app.model import NodeKind
    >>> x = torch.arange(3., requires_grad=True)
    >>> [n.name for n in trace(((x + 2) ** 2 + 3).mean()).of_kind(NodeKind.OP)]
    ['MeanBackward0', 'AddBackward0', 'PowBackward0', 'AddBackward0']
    """
    if max_nodes is not None and max_nodes < 1:
        raise TraceError(f"max_nodes must be a positive number of nodes, got {max_nodes}")
    named, notes = _flatten_outputs(outputs)
    root_module, module_params = None, None
    if isinstance(params, torch.nn.Module):
        root_module, module_params = params, all_named_params(params)
        params = first_names(module_params)
    leaf_names = _param_names(params)
    options = WalkOptions(
        leaf_names={**_param_names(names), **leaf_names},
        show_saved=show_saved,
        show_attrs=show_attrs,
        max_nodes=max_nodes,
        root_module=root_module,
        module_params=module_params,
        module_param_ids=frozenset(leaf_names) if root_module is not None else frozenset(),
        guard_nodes=big_stack.FREE_GUARD_NODES,  # read per call: a test may lower it
        given=tuple(given),
    )
    with_graph = [(path, t) for path, t in named if t.grad_fn is not None]
    if not with_graph:
        path, t = named[0]
        raise NoGradFnError(_no_grad_fn_reason(path, t))
    for path, t in named:
        if t.grad_fn is None:
            notes.append(f"{path} has no autograd graph and was skipped: " + _why_skipped(t))
    given_grads = _flatten_outputs(grad_outputs)[0] if gradients and grad_outputs is not None else None
    with Walker(options, notes) as walker:  # releases the walked nodes on the way out
        graph = walker.walk(with_graph)
        if op_temporaries:
            graph = mark_meta_op_temporaries(graph, walker.fn_by_node_id())
        if any(n.name == COMPILED_NODE for n in graph.nodes):  # torch.compile's regions: read their inside
            graph = add_regions(graph, walker.fn_by_node_id())
        if orders_written():  # record_orders() numbered nodes made by a backward
            graph = add_orders(graph, walker.fn_by_node_id())
        if gradients:
            graph = replay(graph, walker.fn_by_node_id(), outputs=with_graph, grad_outputs=given_grads)
    return graph


def _flatten_outputs(outputs: Any) -> tuple[list[tuple[str, torch.Tensor]], list[str]]:
    found: list[tuple[str, torch.Tensor]] = []
    notes: list[str] = []
    # id -> path of each container opened: a list that contains itself (or one
    # shared many times) is opened once, so flattening always ends.
    opened: dict[int, str] = {}
    stack: list[tuple[str, Any]] = [("output", outputs)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, torch.Tensor):
            found.append((path, value))
        elif isinstance(value, (Mapping, tuple, list)) and id(value) in opened:
            if not value:  # () is one shared object: nothing to say of it
                continue
            notes.append(
                f"{path} is the same {type(value).__name__} as {opened[id(value)]}: "
                "its tensors are traced once, under that name"
            )
        elif isinstance(value, Mapping):
            opened[id(value)] = path
            stack.extend((f"{path}[{k!r}]", v) for k, v in reversed(list(value.items())))
        elif isinstance(value, (tuple, list)):
            opened[id(value)] = path
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
        else:
            notes.append(f"{path} is a {type(value).__name__}, not a tensor: ignored")
    if not found:
        raise TraceError(
            f"found no tensor to trace in a {type(outputs).__name__}: pass the tensor "
            "returned by your computation (or a tuple/list/dict of them)"
        )
    return found, notes


def _param_names(
    params: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | None,
) -> dict[int, tuple[str, torch.Tensor]]:
    if params is None:
        return {}
    items = params.items() if isinstance(params, Mapping) else params
    names: dict[int, tuple[str, torch.Tensor]] = {}
    try:
        for item in items:
            # Unpacking a bare tensor (module.parameters()) would split its first
            # dim into a "name" and a "tensor" and name nothing, silently.
            if isinstance(item, torch.Tensor):
                raise TraceError(f"found a bare tensor of shape {tuple(item.shape)}, not a pair")
            name, tensor = item
            if not isinstance(tensor, torch.Tensor):
                raise TraceError(
                    f"params[{name!r}] is a {type(tensor).__name__}, expected a tensor"
                )
            names[id(tensor)] = (str(name), tensor)  # the tensor keeps the id valid
    except (TypeError, ValueError) as e:
        raise TraceError(
            "params must be a dict name -> tensor or an iterable of (name, tensor) pairs "
            f"such as model.named_parameters(): {e}"
        ) from e
    return names


def _why_no_graph(t: torch.Tensor) -> str:
    if t.requires_grad:
        return (
            "it is a leaf tensor (created by you, not computed), so no operation "
            "recorded a graph behind it; trace a result computed from it, e.g. (x * 2).sum()"
        )
    if t.is_inference():
        return (
            "it was made under torch.inference_mode(), which records no graph; "
            "compute it outside inference_mode"
        )
    return (
        "it does not require grad: it was computed under torch.no_grad(), from a "
        ".detach()ed tensor, or from inputs without requires_grad=True; create the "
        "inputs with requires_grad=True, e.g. torch.arange(3., requires_grad=True)"
    )


def _why_skipped(t: torch.Tensor) -> str:
    """Why one output among others that have graphs has none: no advice to change the inputs."""
    if not (t.is_floating_point() or t.is_complex()):
        return (f"it holds {t.dtype} values (indices, counts or masks), which have no gradient; "
                "nothing to do, the other outputs are traced")
    if t.requires_grad or t.is_inference():
        return _why_no_graph(t)
    return ("nothing that requires grad reaches it (a mask or positions computed from indices, or a value "
            "made under torch.no_grad() or detached); nothing to do unless you meant it to carry a gradient, "
            "the other outputs are traced")


def _no_grad_fn_reason(path: str, t: torch.Tensor) -> str:
    return f"cannot trace {path}: it has no grad_fn because " + _why_no_graph(t)
