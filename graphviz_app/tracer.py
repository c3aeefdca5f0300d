"""Walk a tensor's grad_fn chain into a plain Graph."""

from __future__ import annotations

import dataclasses
import functools
import gc
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from ._autograd import FREED, output_metadata, saved_values
from .errors import NoGradFnError, TraceError
from .model import Edge, EdgeKind, Graph, Node, NodeKind
from .tensor_info import TensorDescriber

__all__ = ["trace"]

Params = Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]


def trace(
    outputs: Any,
    params: Params | None = None,
    *,
    show_saved: bool = True,
    show_attrs: bool = True,
    max_nodes: int | None = None,
    gradients: bool = False,
    grad_outputs: Any = None,
) -> Graph:
    """Trace the autograd graph behind `outputs` into a Graph.

    Args:
        outputs: a tensor, or any nesting of tuples, lists and dicts of
            tensors. Other values are skipped with a note in `Graph.notes`.
        params: names for leaf tensors: a dict name -> tensor or an iterable
            of (name, tensor) pairs, so `model.named_parameters()` works.
        show_saved: add a node for each tensor an op saved for backward.
        show_attrs: keep ops' non-tensor attributes (dim, alpha, ...).
        max_nodes: stop adding op and leaf nodes past this many; the graph
            is then marked `truncated`.
        gradients: replay backward once (hooks, `torch.autograd.grad`,
            `retain_graph=True`; `.grad` fields untouched) and put gradient
            statistics on every node and data edge, and the op where NaN/Inf
            first appears in `Graph.nonfinite_origin`.
        grad_outputs: with `gradients`, the gradients of the outputs, in the
            same nesting as `outputs`; default all ones.

    Returns:
        A Graph holding no reference to any tensor or autograd node.

    Raises:
        NoGradFnError: an output has no grad_fn; the message says why.
        TraceError: `outputs` holds no tensor, or `params` is malformed.
        GradientError: with `gradients`, backward cannot be replayed (saved
            tensors freed, graph cut by `max_nodes`, bad `grad_outputs`).

    >>> import torch
    >>> x = torch.arange(3., requires_grad=True)
    >>> [n.name for n in trace(((x + 2) ** 2 + 3).mean()).of_kind(NodeKind.OP)]
    ['MeanBackward0', 'AddBackward0', 'PowBackward0', 'AddBackward0']
    """
    if max_nodes is not None and max_nodes < 1:
        raise TraceError(f"max_nodes must be a positive number of nodes, got {max_nodes}")
    named, notes = _flatten_outputs(outputs)
    walker = _Walker(_param_names(params), show_saved, show_attrs, max_nodes, notes)
    with_graph = [(path, t) for path, t in named if t.grad_fn is not None]
    if not with_graph:
        path, t = named[0]
        raise NoGradFnError(_no_grad_fn_reason(path, t))
    for path, t in named:
        if t.grad_fn is None:
            notes.append(f"{path} has no autograd graph and was skipped: " + _why_no_graph(t))
    if gradients:
        from . import gradflow  # the replay is its own module; plain traces skip it

        given = _flatten_outputs(grad_outputs)[0] if grad_outputs is not None else None
        walker.finish = functools.partial(gradflow.replay, outputs=with_graph, grad_outputs=given)
    return walker.walk(with_graph)


def _flatten_outputs(outputs: Any) -> tuple[list[tuple[str, torch.Tensor]], list[str]]:
    found: list[tuple[str, torch.Tensor]] = []
    notes: list[str] = []
    stack: list[tuple[str, Any]] = [("output", outputs)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, torch.Tensor):
            found.append((path, value))
        elif isinstance(value, Mapping):
            stack.extend((f"{path}[{k!r}]", v) for k, v in reversed(list(value.items())))
        elif isinstance(value, (tuple, list)):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
        else:
            notes.append(f"{path} is a {type(value).__name__}, not a tensor: ignored")
    if not found:
        raise TraceError(
            f"found no tensor to trace in a {type(outputs).__name__}: pass the tensor "
            "returned by your computation (or a tuple/list/dict of them)"
        )
    return found, notes


def _param_names(params: Params | None) -> dict[int, tuple[str, torch.Tensor]]:
    if params is None:
        return {}
    items = params.items() if isinstance(params, Mapping) else params
    names: dict[int, tuple[str, torch.Tensor]] = {}
    try:
        for item in items:
            # Unpacking a bare tensor (model.parameters()) would split its first
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


def _no_grad_fn_reason(path: str, t: torch.Tensor) -> str:
    return f"cannot trace {path}: it has no grad_fn because " + _why_no_graph(t)


def _attr_text(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_attr_text(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return str(value)


class _Walker:
    """Breadth-first walk over grad_fn.next_functions, ids in walk order."""

    def __init__(
        self,
        param_names: dict[int, tuple[str, torch.Tensor]],
        show_saved: bool,
        show_attrs: bool,
        max_nodes: int | None,
        notes: list[str],
    ) -> None:
        self.param_names = param_names
        self.show_saved = show_saved
        self.show_attrs = show_attrs
        self.max_nodes = max_nodes
        self.notes = notes
        self.describe = TensorDescriber()
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        # id(fn) -> node id; `self.alive` keeps each fn alive so ids stay unique.
        self.fn_ids: dict[int, str] = {}
        self.base_ids: dict[int, str] = {}
        self.alive: list[Any] = []
        self.queue: deque[Any] = deque()
        self.truncated = False
        self.freed = 0
        # Called with the graph and the walked fns by node id while they are alive.
        self.finish: Callable[[Graph, dict[str, Any]], Graph] | None = None

    def _new_id(self) -> str:
        return f"n{len(self.nodes)}"

    def walk(self, outputs: list[tuple[str, torch.Tensor]]) -> Graph:
        # Millions of small records would make the cyclic GC rescan them over
        # and over (quadratic time); none of them can form a cycle.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._walk(outputs)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _walk(self, outputs: list[tuple[str, torch.Tensor]]) -> Graph:
        for path, t in outputs:
            out_id = self._new_id()
            self.nodes.append(Node(out_id, NodeKind.OUTPUT, path, self.describe.describe(t, path)))
            if t._is_view():  # torchviz draws an output's view base too
                self.edges.append(Edge(self._view_base(t._base), out_id, EdgeKind.VIEW))
            fn_id = self._discover(t.grad_fn)
            if fn_id is not None:  # None: cut off by max_nodes
                self.edges.append(Edge(fn_id, out_id, EdgeKind.DATA, t.output_nr, 0))
        while self.queue:
            self._visit(self.queue.popleft())
        if self.freed:
            self.notes.append(
                f"{self.freed} saved tensor(s) were already freed by backward(); "
                "trace before backward(), or call backward(retain_graph=True), to see them"
            )
        if self.truncated:
            self.notes.append(
                f"stopped at max_nodes={self.max_nodes}: ops further from the output are not shown"
            )
        graph = Graph(tuple(self.nodes), tuple(self.edges), tuple(self.notes), self.truncated)
        if self.finish is not None:
            fns = {self.fn_ids[id(o)]: o for o in self.alive if id(o) in self.fn_ids}
            graph = self.finish(graph, fns)
        self.alive.clear()
        return graph

    def _view_base(self, base: torch.Tensor) -> str:
        """The node of a view's base tensor, one per base however many views share it."""
        known = self.base_ids.get(id(base))
        if known is None:
            known = self.base_ids[id(base)] = self._new_id()
            self.alive.append(base)
            self.nodes.append(
                Node(known, NodeKind.VIEW_BASE, "view base", self.describe.describe(base, None))
            )
        return known

    def _discover(self, fn: Any) -> str | None:
        known = self.fn_ids.get(id(fn))
        if known is not None:
            return known
        if self.max_nodes is not None and len(self.fn_ids) >= self.max_nodes:
            self.truncated = True
            return None
        node_id = self._new_id()
        self.fn_ids[id(fn)] = node_id
        self.alive.append(fn)
        self.nodes.append(self._fn_node(node_id, fn))
        self.queue.append(fn)
        return node_id

    def _fn_node(self, node_id: str, fn: Any) -> Node:
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):  # AccumulateGrad: a leaf
            named = self.param_names.get(id(variable))
            name = named[0] if named else None
            return Node(node_id, NodeKind.LEAF, name or "", self.describe.describe(variable, name))
        meta = output_metadata(fn)
        info = self.describe.from_metadata(*meta) if meta else None
        # type(fn).__name__, as torchviz: fn.name() spells some C++ nodes
        # "torch::autograd::CopySlices" where torchviz says "CopySlices".
        return Node(node_id, NodeKind.OP, type(fn).__name__, info)

    def _visit(self, fn: Any) -> None:
        node_id = self.fn_ids[id(fn)]
        if self.show_saved or self.show_attrs:
            self._add_saved(node_id, fn)
        for slot, (child, output_nr) in enumerate(fn.next_functions):
            if child is None:
                continue
            child_id = self._discover(child)
            if child_id is not None:
                self.edges.append(Edge(child_id, node_id, EdgeKind.DATA, output_nr, slot))

    def _add_saved(self, node_id: str, fn: Any) -> None:
        attrs: list[tuple[str, str]] = []
        for name, value in saved_values(fn):
            tensors = _tensors_in(value)
            if tensors is None:
                if self.show_attrs:
                    attrs.append((name, _attr_text(value)))
                continue
            if not self.show_saved:
                continue
            for label, t in tensors:
                self._add_saved_tensor(node_id, f"{name}{label}", t)
        if attrs:  # ids are list positions: n7 is self.nodes[7]
            index = int(node_id[1:])
            self.nodes[index] = dataclasses.replace(self.nodes[index], attrs=tuple(attrs))

    def _add_saved_tensor(self, owner: str, name: str, t: Any) -> None:
        saved_id = self._new_id()
        if t is FREED:
            self.freed += 1
            info = TensorDescriber.freed(name)
        else:
            info = self.describe.describe(t, name)
        self.nodes.append(Node(saved_id, NodeKind.SAVED, name, info))
        self.edges.append(Edge(saved_id, owner, EdgeKind.SAVED))


def _tensors_in(value: Any) -> list[tuple[str, Any]] | None:
    """The tensors (or FREED marks) in a saved value, or None if it holds none."""
    if value is FREED or isinstance(value, torch.Tensor):
        return [("", value)]
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
        return [(f"[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return None
