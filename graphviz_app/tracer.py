"""Walk a tensor's grad_fn chain into a plain Graph."""

from __future__ import annotations

import dataclasses
import functools
import gc
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from ._autograd import FREED, MODIFIED, is_custom_function, output_metadata, recorded_tags, saved_values
from ._records import new_edge, new_node
from .deep import FREE_GUARD_NODES, consumers_first, release_in_order
from .errors import NoGradFnError, TraceError
from .model import MODIFIED_IN_PLACE, STATE_ATTR, Edge, EdgeKind, Graph, Node, NodeKind
from .param_owners import NamedParams, first_names, model_params, module_infos, owner_module
from .tensor_info import TensorDescriber

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
    model, named_params = None, None
    if isinstance(params, torch.nn.Module):
        model, named_params = params, model_params(params)
        params = first_names(named_params)
    leaf_names = _param_names(params)
    walker = _Walker({**_param_names(names), **leaf_names}, show_saved, show_attrs, max_nodes, notes)
    walker.model, walker.model_params = model, named_params
    walker.model_ids = set(leaf_names) if model is not None else set()
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
        # Recurse only into nested sequences: most attributes are flat (stride, padding).
        inner = ", ".join([_attr_text(v) if isinstance(v, (tuple, list)) else str(v) for v in value])
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return str(value)


class _Walker:
    """Breadth-first walk over grad_fn.next_functions, ids in walk order.

    An op node's id is taken when the op is discovered and its Node is built
    once, when it is visited and its attributes are known (`_fn_node`).
    `fns` lists the walked autograd nodes in discovery order and `fn_ids`
    maps id(fn) to node id: together they give each node id's fn.
    """

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
        # `nodes[i]` is node `n{i}`; an op's slot holds None until it is visited.
        self.nodes: list[Node | None] = []
        self.edges: list[Edge] = []
        # id(fn) -> node id; `self.fns` keeps each fn alive so ids stay unique.
        self.fn_ids: dict[int, str] = {}
        self.fns: list[Any] = []
        self.base_ids: dict[int, str] = {}
        self.alive: list[Any] = []
        # (fn, node id, index in nodes) of ops discovered and not yet visited.
        self.queue: deque[tuple[Any, str, int]] = deque()
        self.truncated = False
        self.freed = 0
        self.modified = 0
        # Called with the graph and the walked fns by node id while they are alive.
        self.finish: Callable[[Graph, dict[str, Any]], Graph] | None = None
        # Set by trace() for an nn.Module as params: leaves then belong to
        # the module owning them; module name -> class name, as recorded.
        self.model: torch.nn.Module | None = None
        self.model_params: NamedParams | None = None
        self.model_ids: set[int] = set()  # ids of the model's own parameters among the named leaves
        self.modules_seen: dict[str, str] = {}

    def _new_id(self) -> str:
        return f"n{len(self.nodes)}"

    def _room(self) -> bool:
        """Whether one more node fits under max_nodes; marks the graph truncated if not."""
        if self.max_nodes is not None and len(self.nodes) >= self.max_nodes:
            self.truncated = True
            return False
        return True

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
        for shown, (path, t) in enumerate(outputs):
            if not self._room():
                self.notes.append(f"{len(outputs) - shown} output(s) from {path} on are not shown")
                break
            out_id = self._new_id()
            self.nodes.append(new_node(out_id, NodeKind.OUTPUT, path, self.describe.describe(t, path)))
            if t.is_nested:
                self.notes.append(f"{path} is a nested tensor: its shape is shown padded to its largest part")
            if t._is_view() and self._room():  # torchviz draws an output's view base too
                self.edges.append(new_edge(self._view_base(t._base), out_id, EdgeKind.VIEW))
            fn_id = self._discover(t.grad_fn)
            if fn_id is not None:  # None: cut off by max_nodes
                self.edges.append(new_edge(fn_id, out_id, EdgeKind.DATA, t.output_nr, 0))
        self._visit_all()
        if self.freed:
            self.notes.append(
                f"{self.freed} saved tensor(s) were already freed by backward(); "
                "trace before backward(), or call backward(retain_graph=True), to see them"
            )
        if self.modified:
            self.notes.append(
                f"{self.modified} saved tensor(s) were modified in place after the op saved them: "
                "backward() through this graph will fail; use the out-of-place op (x = x.add(1), "
                "not x.add_(1)) or .clone() before modifying"
            )
        if self.truncated:
            self.notes.append(
                f"stopped at max_nodes={self.max_nodes}: ops further from the output are not shown"
            )
        modules = module_infos(self.model, self.modules_seen, self.model_params)
        graph = Graph(tuple(self.nodes), tuple(self.edges), tuple(self.notes), self.truncated, modules)  # type: ignore[arg-type]
        if self.finish is not None:
            graph = self.finish(graph, self.fn_by_node_id())
        if len(self.fn_ids) > FREE_GUARD_NODES:
            self._guard_free()
        self.alive.clear()
        return graph

    def _guard_free(self) -> None:
        """Let a big walked graph be freed node by node (see deep.release_in_order)."""
        # fn_ids' node ids and self.fns share discovery order.
        data = ((e.src, e.dst) for e in self.edges if e.kind is EdgeKind.DATA)
        order = consumers_first(list(self.fn_ids.values()), data)
        release_in_order([self.fns[i] for i in order])

    def fn_by_node_id(self) -> dict[str, Any]:
        """After the walk: each op and leaf node's autograd node, by node id.

        `fns` stays filled after `walk()` so a step after it (`finish`, the
        backward replay) can find the fns; the walker is dropped when trace() returns.
        """
        return {self.fn_ids[id(fn)]: fn for fn in self.fns}

    def _visit_all(self) -> None:
        """Visit queued ops: build each op's node, then discover its inputs.

        The hottest loop of tracing: one pass per op, with the walker's
        attributes and methods bound to locals (each attribute lookup here is
        paid a million times on a million-op graph).
        """
        queue, nodes, edges, fn_ids = self.queue, self.nodes, self.edges, self.fn_ids
        popleft, add_edge, known_id = queue.popleft, edges.append, fn_ids.get
        discover, fn_node, add_saved = self._discover, self._fn_node, self._add_saved
        read_saved = self.show_saved or self.show_attrs
        data = EdgeKind.DATA
        while queue:
            fn, node_id, index = popleft()
            attrs = add_saved(node_id, fn) if read_saved else ()
            leaf = nodes[index]
            if leaf is None:
                nodes[index] = fn_node(node_id, fn, None, attrs)
            elif attrs:  # a custom Function drawn as a leaf (see _discover)
                nodes[index] = dataclasses.replace(leaf, attrs=attrs)
            slot = -1
            for child, output_nr in fn.next_functions:
                slot += 1
                if child is None:
                    continue
                child_id = known_id(id(child)) or discover(child)
                if child_id is not None:
                    add_edge(new_edge(child_id, node_id, data, output_nr, slot))

    def _view_base(self, base: torch.Tensor) -> str:
        """The node of a view's base tensor, one per base however many views share it."""
        known = self.base_ids.get(id(base))
        if known is None:
            known = self.base_ids[id(base)] = self._new_id()
            self.alive.append(base)
            self.nodes.append(
                new_node(known, NodeKind.VIEW_BASE, "view base", self.describe.describe(base, None))
            )
        return known

    def _discover(self, fn: Any) -> str | None:
        known = self.fn_ids.get(id(fn))
        if known is not None:
            return known
        if not self._room():
            return None
        index = len(self.nodes)
        node_id = self.fn_ids[id(fn)] = f"n{index}"
        self.fns.append(fn)
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):  # AccumulateGrad: a leaf
            self.nodes.append(self._fn_node(node_id, fn, variable, ()))
            # torch's AccumulateGrad saves nothing and has no inputs; a custom
            # Function whose ctx has a `variable` tensor is drawn as a leaf
            # but may have both, so it is still visited.
            if is_custom_function(fn):
                self.queue.append((fn, node_id, index))
        else:
            self.nodes.append(None)  # built by _visit once its attributes are read
            self.queue.append((fn, node_id, index))
        return node_id

    def _fn_node(self, node_id: str, fn: Any, variable: torch.Tensor | None, attrs: tuple[tuple[str, str], ...]) -> Node:
        """The one place op and leaf nodes are built."""
        if variable is not None:
            named = self.param_names.get(id(variable))
            name = named[0] if named else None
            owner = None
            if name is not None and self.model is not None and id(variable) in self.model_ids:
                owner = owner_module(name)
                self.modules_seen.setdefault(owner, "")
            info = self.describe.describe(variable, name)
            return new_node(node_id, NodeKind.LEAF, name or "", info, module=owner)
        meta = output_metadata(fn)
        info = self.describe.from_metadata(*meta) if meta else None
        module, module_type, source = recorded_tags(fn)
        if module is not None:
            self.modules_seen.setdefault(module, module_type or "")
        # type(fn).__name__, as torchviz: fn.name() spells some C++ nodes
        # "torch::autograd::CopySlices" where torchviz says "CopySlices".
        return new_node(node_id, NodeKind.OP, type(fn).__name__, info, attrs, module=module, source=source)

    def _add_saved(self, node_id: str, fn: Any) -> tuple[tuple[str, str], ...]:
        """Add a node per saved tensor (show_saved); return the attributes (show_attrs)."""
        attrs: list[tuple[str, str]] = []
        for name, value in saved_values(fn):
            if isinstance(value, torch.Tensor):
                # _add_saved_tensor, inlined: most saved values are tensors
                if self.show_saved and (self.max_nodes is None or self._room()):
                    nodes = self.nodes
                    saved_id = f"n{len(nodes)}"
                    nodes.append(new_node(saved_id, NodeKind.SAVED, name, self.describe.describe(value, name)))
                    self.edges.append(new_edge(saved_id, node_id, EdgeKind.SAVED))
            elif value is FREED or value is MODIFIED:
                if self.show_saved:
                    self._add_saved_tensor(node_id, name, value)
            elif isinstance(value, (tuple, list)):
                tensors = [(i, v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
                if not tensors:
                    if self.show_attrs:
                        attrs.append((name, _attr_text(value)))
                elif self.show_saved:
                    for i, v in tensors:
                        self._add_saved_tensor(node_id, f"{name}[{i}]", v)
            elif self.show_attrs:
                attrs.append((name, str(value)))
        return tuple(attrs)

    def _add_saved_tensor(self, owner: str, name: str, t: Any) -> None:
        if not self._room():
            return
        saved_id = self._new_id()
        if t is FREED:
            self.freed += 1
            info = TensorDescriber.freed(name)
        elif t is MODIFIED:  # torch refuses to unpack it: nothing is known of it either
            self.modified += 1
            info = TensorDescriber.freed(name)
        else:
            info = self.describe.describe(t, name)
        state = ((STATE_ATTR, MODIFIED_IN_PLACE),) if t is MODIFIED else ()
        self.nodes.append(new_node(saved_id, NodeKind.SAVED, name, info, state))
        self.edges.append(new_edge(saved_id, owner, EdgeKind.SAVED))
