"""AOT autograd's backward graph read once into plain records, kept per compiled function."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import torch

from ..model import Node, NodeKind, TensorInfo
from ..model.annotations import (
    FORWARD_MODULE_ATTR,
    MADE_BY_ATTR,
    REGION_FOR_ATTR,
    REGION_OUTPUTS_ATTR,
    REGION_SEQ_ATTR,
)
from .fast_records import new_node, new_tensor_info
from .tensor_info import dtype_name
from .torch_internals import aot_role

__all__ = ["BackwardGraph", "BackwardSaved", "backward_graph", "forget_backward_graphs",
           "module_path", "stack_source", "fx_op_name"]

# Where a backward op reads an input from (`BackwardGraph.reads`).
OP, SAVED, TANGENT = 0, 1, 2

_GETATTR = re.compile(r"getattr\(([^()]*), '([^']*)'\)")
_ROOT = re.compile(r"^[LG]\[[^\]]*\]")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@functools.lru_cache(maxsize=4096)
def module_path(dynamo_path: str) -> str:
    """A module path as torch.compile records it (`L['self'].layers[0]`) written as `named_modules()` does.

    >>> module_path("L['self'].layers[0].linear1"), module_path("L['fn'].1"), module_path("L['self']")
    ('layers.0.linear1', '1', '')
    >>> module_path("getattr(L['self'].layers, '0').norm1")
    'layers.0.norm1'
    """
    path = dynamo_path
    while (inner := _GETATTR.search(path)) is not None:  # getattr(X, 'name') -> X.name, innermost first
        path = path[: inner.start()] + f"{inner.group(1)}.{inner.group(2)}" + path[inner.end():]
    path = _ROOT.sub("", path)  # the compiled function's own argument: the root module
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\['([^']*)'\]", r".\1", path)
    return path.lstrip(".")


@functools.lru_cache(maxsize=4096)
def stack_source(stack_trace: str | None) -> str | None:
    """`"model.py:9 in forward"` from the last frame of an FX node's stack trace.

    >>> stack_source('  File "/tmp/model.py", line 9, in forward\\n    return self.b(h)\\n')
    'model.py:9 in forward'
    >>> stack_source('  File "/a/run.py", line 3, in main\\n  File "/a/net.py", line 7, in forward\\n    y = f("x")\\n')
    'net.py:7 in forward'
    """
    if not stack_trace:
        return None
    at = stack_trace.rfind('File "')  # the last frame: read from the end, not the whole trace
    while at >= 0:
        frame = _FRAME.match(stack_trace, at)
        if frame is not None:
            path, line, func = frame.groups()
            return f"{os.path.basename(path)}:{line} in {func}"
        at = stack_trace.rfind('File "', 0, at)
    return None


def fx_op_name(target: Any) -> str:
    """An FX call's name as people read it: `aten.mm.default`, `getitem`.

    >>> import operator
    >>> fx_op_name(torch.ops.aten.mm.default), fx_op_name(operator.getitem)
    ('aten.mm.default', 'getitem')
    """
    if hasattr(target, "overloadpacket"):  # an aten operator overload
        return str(target)
    return getattr(target, "__name__", None) or str(target)


@dataclasses.dataclass(frozen=True, slots=True)
class BackwardSaved:
    """One saved-tensor input of a backward graph, in the node's `saved_tensors` order.

    `input` is the region's forward input it is (None: an activation, made by the forward
    op `made_by` names); `source` the line of the forward code that made it.
    """

    shape: tuple[int, ...]
    input: int | None
    made_by: tuple[tuple[str, str], ...]
    source: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class BackwardGraph:
    """A compiled backward graph as plain records, independent of any traced graph.

    `ops` are its `call_function` nodes as the region's op nodes, made for the region
    node `node` under the region name `name` it was first read for (ids `n3/0`, `n3/1`,
    ...), `paths` the module path of the forward code each differentiates (`""`: none
    recorded), so `ops_for` can remake them for another region node. `reads` are
    (op, slot, where, which) in the graph's order: op `op` reads, at input `slot`, op
    `which` (`where` 0), saved tensor `which` (1) or the gradient coming in for region
    output `which` (2). `inputs` pair each input slot of the region with the op
    computing its gradient; `modules` are (path, class name) of the forward modules the
    ops came from, parents first; `notes_before` and `notes_after` are what could not be
    recovered, said before and after what linking the saved tensors finds. `made` keeps
    what `graphviz_app.tracing.compiled` built from it, so the next trace shares it.
    """

    node: str
    name: str
    ops: tuple[Node, ...]
    paths: tuple[str, ...]
    reads: tuple[tuple[int, int, int, int], ...]
    saved: tuple[BackwardSaved, ...]
    inputs: tuple[tuple[int, int], ...]
    modules: tuple[tuple[str, str], ...]
    notes_before: tuple[str, ...]
    notes_after: tuple[str, ...]
    made: dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def ops_for(self, node: str, name: str) -> tuple[Node, ...]:
        """The ops as nodes of region node `node` named `name`.

        >>> bw = BackwardGraph("n1", "[r]", (Node("n1/0", NodeKind.OP, "aten.neg.default", module="[r].a"),),
        ...                    ("a",), (), (), (), (), (), ())
        >>> [(n.id, n.module) for n in bw.ops_for("n4", "b.[r]")]
        [('n4/0', 'b.[r].a')]
        """
        if (node, name) == (self.node, self.name):
            return self.ops
        return tuple(
            new_node(f"{node}/{i}", op.kind, op.name, op.tensor, op.attrs, f"{name}.{path}" if path else name,
                     op.source)
            for i, (op, path) in enumerate(zip(self.ops, self.paths, strict=True))
        )


# One read per compiled function: every call of a compiled model runs the same backward
# graph (AOT autograd lowers a deep copy of it and never changes it), so a training loop
# tracing each step reads it once. Weak keys: the cache never keeps a compiled function alive.
_CACHE: weakref.WeakKeyDictionary[Any, BackwardGraph] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def backward_graph(module: torch.fx.GraphModule, node: str, name: str) -> BackwardGraph:
    """The backward GraphModule `module` read into plain records (read once per module, then kept).

    `node` and `name` are the region node and region name the ops are first made for.

    >>> import operator
    >>> g = torch.fx.Graph()
    >>> t = g.placeholder("tangents_1")
    >>> g.output((g.call_function(torch.ops.aten.neg.default, (t,)),))
    output
    >>> [(op.id, op.name) for op in backward_graph(torch.fx.GraphModule({}, g), "n0", "[r]").ops]
    [('n0/0', 'aten.neg.default')]
    """
    found = _CACHE.get(module)
    if found is None:
        found = _Reader(node, name).read(module)
        with _CACHE_LOCK:
            found = _CACHE.setdefault(module, found)
    return found


def forget_backward_graphs() -> None:
    """Forget every backward graph read and every name worked out, as in a fresh process (for measuring).

    >>> forget_backward_graphs()
    """
    with _CACHE_LOCK:
        _CACHE.clear()
    for table in (_OP_NAMES, _MODULES, _TENSORS):
        table.clear()
    module_path.cache_clear()
    stack_source.cache_clear()


_OP_NAMES: dict[int, tuple[Any, str]] = {}  # id of an FX target -> (the target, its name)
_MODULES: dict[Any, tuple[str, str]] = {}  # (dynamo path, class) -> (module path, class name)
_TENSORS: dict[Any, TensorInfo] = {}  # (shape, dtype, device) -> the record, shared: records are immutable


def _tensor(val: Any, meta: Any) -> TensorInfo | None:
    """What an FX node's value (a fake tensor) says of the tensor it makes; None for other values.

    The shape and dtype come from the node's plain `tensor_meta` record when it has one
    (a fake tensor's own attributes go through its dispatch, several times slower).
    """
    if not isinstance(val, torch.Tensor):
        return None
    shape_of = meta if meta is not None and hasattr(meta, "shape") else val
    device = val.device
    key: tuple[Any, Any, Any] | None = (shape_of.shape, shape_of.dtype, device)
    try:
        found = _TENSORS.get(key)
    except TypeError:  # a symbolic size
        found, key = None, None
    if found is None:
        shape = tuple(map(int, shape_of.shape))
        numel = math.prod(shape)
        found = new_tensor_info(None, shape, dtype_name(shape_of.dtype), str(device), numel,
                                numel * val.element_size(), False)
        if key is not None and len(_TENSORS) < 4096:
            _TENSORS[key] = found
    return found


def _op_name(target: Any) -> str:
    """`fx_op_name`, kept per target (by identity: an operator's own hash is a Python call)."""
    found = _OP_NAMES.get(id(target))
    if found is None or found[0] is not target:
        found = (target, fx_op_name(target))
        if len(_OP_NAMES) < 4096:
            _OP_NAMES[id(target)] = found
    return found[1]


def _module_of(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """(path, class name) of the innermost module an FX node's forward code ran in."""
    stack = meta.get("fwd_nn_module_stack") or meta.get("nn_module_stack")
    if not stack:
        return None
    last = next(reversed(stack.values()))
    try:
        found = _MODULES.get(last)
    except TypeError:  # not a (path, class) tuple
        found, last = None, None
    if found is None:
        path, cls = last if last is not None else next(reversed(stack.values()))
        found = module_path(str(path)), getattr(cls, "__name__", str(cls))
        if last is not None and len(_MODULES) < 4096:
            _MODULES[last] = found
    return found


def _forward_of(meta: Mapping[str, Any]) -> str | None:
    """The forward call (as torch.compile names it: `linear_1`, `relu`) an FX node belongs to."""
    stack = meta.get("fwd_source_fn_stack") or meta.get("source_fn_stack")
    return str(stack[-1][0]) if stack else None


class _Reader:
    """Reads one backward GraphModule into a BackwardGraph."""

    def __init__(self, node: str, name: str) -> None:
        self.node = node
        self.name = name
        self.notes_before: list[str] = []
        self.notes_after: list[str] = []
        self.where: dict[Any, tuple[int, int]] = {}  # FX node -> (OP|SAVED|TANGENT, index)
        self.modules: dict[str, str] = {}

    def read(self, module: torch.fx.GraphModule) -> BackwardGraph:
        fx_nodes = list(module.graph.nodes)
        saved = self._placeholders([n for n in fx_nodes if n.op == "placeholder"])
        calls = [n for n in fx_nodes if n.op == "call_function"]
        where = self.where
        for i, fx in enumerate(calls):
            where[fx] = (OP, i)
        paths: list[str] = []
        ops = tuple(self._op(i, fx, paths) for i, fx in enumerate(calls))
        reads = tuple(
            (i, slot, *where[arg]) for i, fx in enumerate(calls)
            for slot, arg in enumerate(fx.all_input_nodes) if arg in where
        )
        inputs = self._inputs(next(n for n in reversed(fx_nodes) if n.op == "output"))
        return BackwardGraph(self.node, self.name, ops, tuple(paths), reads, saved, tuple(inputs),
                             tuple(self.modules.items()), tuple(self.notes_before), tuple(self.notes_after))

    def _placeholders(self, placeholders: list[Any]) -> tuple[BackwardSaved, ...]:
        """Sort the inputs into saved tensors and incoming gradients; describe each saved tensor."""
        tangents: list[tuple[Any, tuple[str, int] | None]] = []
        saved: list[BackwardSaved] = []
        for p in placeholders:
            role = aot_role(p)
            if (role and role[0] == "tangent") or (role is None and p.name.startswith("tangents_")):
                tangents.append((p, role))
            elif isinstance(val := p.meta.get("val"), torch.Tensor):
                self.where[p] = (SAVED, len(saved))
                saved.append(self._saved(p, role, tuple(val.shape)))
        for number, (p, role) in enumerate(tangents):
            self.where[p] = (TANGENT, role[1] if role else number)
        if tangents and all(role is None for _, role in tangents):
            self.notes_before.append("torch gave no descriptors: incoming gradients are matched to outputs by position")
        return tuple(saved)

    def _saved(self, p: Any, role: tuple[str, int] | None, shape: tuple[int, ...]) -> BackwardSaved:
        """A saved tensor: an input of the region, or made by a forward op (with its seq_nr and module)."""
        if role is None and p.name.startswith("primals_") and p.name.removeprefix("primals_").isdigit():
            role = ("input", int(p.name.removeprefix("primals_")) - 1)  # torch before descriptors
        source = stack_source(p.meta.get("stack_trace"))
        if role and role[0] == "input":
            return BackwardSaved(shape, role[1], (), source)
        facts: list[tuple[str, str]] = []
        aten, seq, call = p.meta.get("original_aten"), p.meta.get("seq_nr"), _forward_of(p.meta)
        details = [_op_name(aten)] if aten is not None else []
        details += [f"seq_nr {seq}"] if seq is not None else []
        if call or details:
            facts.append((MADE_BY_ATTR, f"{call or p.name} ({', '.join(details)})" if details else str(call)))
        owner = _module_of(p.meta)
        if owner is not None and owner[0]:
            facts.append((FORWARD_MODULE_ATTR, owner[0]))
        return BackwardSaved(shape, None, tuple(facts), source)

    def _op(self, number: int, fx: Any, paths: list[str]) -> Node:
        meta = fx.meta
        seq, forward, val = meta.get("seq_nr"), _forward_of(meta), meta.get("val")
        attrs: tuple[tuple[str, str], ...] = ()
        if seq is not None:
            attrs += ((REGION_SEQ_ATTR, str(seq)),)
        if forward is not None:
            attrs += ((REGION_FOR_ATTR, forward),)
        if isinstance(val, (tuple, list)):
            attrs += ((REGION_OUTPUTS_ATTR, str(len(val))),)
        owner = _module_of(meta)
        path = ""
        if owner is not None and owner[0]:
            path = owner[0]
            if self.modules.get(path) != owner[1]:
                parts = path.split(".")
                for i in range(1, len(parts)):
                    self.modules.setdefault(".".join(parts[:i]), "")
                self.modules[path] = owner[1]
        paths.append(path)
        op: Node = new_node(f"{self.node}/{number}", NodeKind.OP, _op_name(fx.target),
                            _tensor(val, meta.get("tensor_meta")), attrs,
                            f"{self.name}.{path}" if path else self.name, stack_source(meta.get("stack_trace")))
        return op

    def _inputs(self, output: Any) -> list[tuple[int, int]]:
        """(input slot of the region, op computing that input's gradient), from the graph's output."""
        grads = output.args[0] if output.args else ()
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        descs = output.meta.get("desc")
        found: list[tuple[int, int]] = []
        for position, grad in enumerate(grads):
            role = aot_role(descs[position]) if isinstance(descs, (tuple, list)) and position < len(descs) else None
            slot = role[1] if role and role[0] == "grad" else position
            kind = self.where.get(grad)
            if kind is not None and kind[0] == OP:
                found.append((slot, kind[1]))
            elif grad is not None and getattr(grad, "op", None) == "placeholder":
                self.notes_after.append(f"the gradient of input {slot} is passed through unchanged: no op computes it")
        return found
