"""Open torch.compile's `CompiledFunctionBackward` nodes: the ops, saved tensors and lines inside."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import torch

from ..model import REGION_TYPE, CompiledRegion, Edge, EdgeKind, Graph, ModuleInfo, Node, NodeKind, TensorInfo
from .fast_records import new_node, new_tensor_info
from .tensor_info import dtype_name
from .torch_internals import aot_role, compiled_backward_graph

__all__ = ["COMPILED_NODE", "add_regions", "region_name", "module_path", "stack_source", "fx_op_name"]

COMPILED_NODE = "CompiledFunctionBackward"

# What a region's inside cannot show, said once per region.
_FUSED_NOTE = (
    "these are AOT autograd's backward ops as handed to the compiler backend; a code-generating backend "
    "(inductor) fuses them into kernels, which are not shown"
)


def region_name(module: str | None, number: int) -> str:
    """The module-like name a region's box opens under: inside the region node's module, if any.

    >>> region_name(None, 1), region_name("enc.layers", 2)
    ('[compiled region 1]', 'enc.layers.[compiled region 2]')
    """
    own = f"[compiled region {number}]"
    return f"{module}.{own}" if module else own


_GETATTR = re.compile(r"getattr\(([^()]*), '([^']*)'\)")
_ROOT = re.compile(r"^[LG]\[[^\]]*\]")


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
    """
    if not stack_trace:
        return None
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', stack_trace)
    if not frames:
        return None
    path, line, func = frames[-1]
    return f"{os.path.basename(path)}:{line} in {func}"


def fx_op_name(target: Any) -> str:
    """An FX call's name as people read it: `aten.mm.default`, `getitem`.

    >>> import operator
    >>> fx_op_name(torch.ops.aten.mm.default), fx_op_name(operator.getitem)
    ('aten.mm.default', 'getitem')
    """
    if hasattr(target, "overloadpacket"):  # an aten operator overload
        return str(target)
    return getattr(target, "__name__", None) or str(target)


def _tensor(val: Any, meta: Any) -> TensorInfo | None:
    """What an FX node's value (a fake tensor) says of the tensor it makes; None for other values.

    The shape and dtype come from the node's plain `tensor_meta` record when it has one
    (a fake tensor's own attributes go through its dispatch, several times slower).
    """
    if not isinstance(val, torch.Tensor):
        return None
    shape_of = meta if meta is not None and hasattr(meta, "shape") else val
    shape = tuple(int(d) for d in shape_of.shape)
    numel = math.prod(shape)
    dtype = shape_of.dtype
    itemsize = _ITEMSIZE.get(dtype) or _ITEMSIZE.setdefault(dtype, val.element_size())
    return new_tensor_info(None, shape, dtype_name(dtype), str(val.device), numel, numel * itemsize, False)


_ITEMSIZE: dict[Any, int] = {}  # dtype -> bytes per element


def _module_of(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """(path, class name) of the innermost module an FX node's forward code ran in."""
    stack = meta.get("fwd_nn_module_stack") or meta.get("nn_module_stack")
    if not stack:
        return None
    path, cls = list(stack.values())[-1]
    return module_path(str(path)), getattr(cls, "__name__", str(cls))


def _forward_of(meta: Mapping[str, Any]) -> str | None:
    """The forward call (as torch.compile names it: `linear_1`, `relu`) an FX node belongs to."""
    stack = meta.get("fwd_source_fn_stack") or meta.get("source_fn_stack")
    return str(stack[-1][0]) if stack else None


def add_regions(graph: Graph, fns: Mapping[str, Any]) -> Graph:
    """The graph with `regions` filled: one `CompiledRegion` per `CompiledFunctionBackward` node.

    The region's saved tensors (the node's `saved_tensors[i]` saved nodes) get the
    forward op that made them (`made by`, its `seq_nr`), its module (`forward module`)
    and its source line, where the backward graph records them.

    Args:
        graph: a traced graph.
        fns: node id -> the live autograd node (`Walker.fn_by_node_id()`).
    """
    compiled = [n for n in graph.nodes if n.kind is NodeKind.OP and n.name == COMPILED_NODE]
    if not compiled:
        return graph
    saved_ids: dict[str, list[str]] = {}
    input_ids: dict[str, dict[int, str]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED:
            saved_ids.setdefault(e.dst, []).append(e.src)
        elif e.kind is EdgeKind.DATA:
            input_ids.setdefault(e.dst, {})[e.slot] = e.src
    by_id = {n.id: n for n in graph.nodes}
    replaced: dict[str, Node] = {}
    regions = []
    for number, node in enumerate(compiled, start=1):
        name = region_name(node.module, number)
        module, reason = compiled_backward_graph(fns.get(node.id))
        if module is None:
            regions.append(CompiledRegion(node.id, name, notes=(f"{name} could not be opened: {reason}",)))
            continue
        saved = {by_id[i].name: by_id[i] for i in saved_ids.get(node.id, ())}
        reader = _Reader(node.id, name, saved)
        reader.input_names = {slot: by_id[i].name for slot, i in input_ids.get(node.id, {}).items()
                              if by_id[i].kind is NodeKind.LEAF and by_id[i].name}
        region, enriched = reader.read(module)
        regions.append(region)
        replaced.update(enriched)
    nodes = tuple(replaced.get(n.id, n) for n in graph.nodes) if replaced else graph.nodes
    return dataclasses.replace(graph, nodes=nodes, regions=tuple(regions))


class _Reader:
    """Reads one backward GraphModule into a CompiledRegion."""

    def __init__(self, node_id: str, name: str, saved: Mapping[str, Node]) -> None:
        self.node_id = node_id
        self.name = name
        self.saved = saved  # the graph's saved nodes of this region, by name ("saved_tensors[0]", ...)
        self.notes: list[str] = [_FUSED_NOTE]
        self.ids: dict[Any, str] = {}  # FX node -> inner node id
        self.saved_of: dict[Any, str] = {}  # FX placeholder -> the graph's saved node id
        self.tangent_of: dict[Any, int] = {}  # FX placeholder -> region output
        self.modules: dict[str, str] = {name: REGION_TYPE}
        self.input_names: dict[int, str] = {}  # input slot -> the name of the leaf feeding it

    def read(self, module: torch.fx.GraphModule) -> tuple[CompiledRegion, dict[str, Node]]:
        fx_nodes = list(module.graph.nodes)
        enriched = self._placeholders([n for n in fx_nodes if n.op == "placeholder"])
        nodes: list[Node] = []
        edges: list[Edge] = []
        outputs: list[tuple[int, str]] = []
        for fx in fx_nodes:
            if fx.op == "call_function":
                nodes.append(self._op(fx))
        for fx in fx_nodes:
            if fx.op != "call_function":
                continue
            own = self.ids[fx]
            for slot, arg in enumerate(fx.all_input_nodes):
                if arg in self.ids:  # backward flows from arg to fx: the graph draws fx -> arg
                    edges.append(Edge(own, self.ids[arg], EdgeKind.DATA, 0, slot))
                elif arg in self.saved_of:
                    edges.append(Edge(self.saved_of[arg], own, EdgeKind.SAVED))
                elif arg in self.tangent_of:
                    outputs.append((self.tangent_of[arg], own))
        inputs = self._inputs(next(n for n in fx_nodes if n.op == "output"))
        types = tuple(ModuleInfo(m, t or "") for m, t in self.modules.items())
        region = CompiledRegion(self.node_id, self.name, tuple(nodes), tuple(edges), tuple(inputs),
                                tuple(dict.fromkeys(outputs)), types, tuple(self.notes))
        return region, enriched

    def _placeholders(self, placeholders: list[Any]) -> dict[str, Node]:
        """Sort the inputs into saved tensors and incoming gradients; describe each saved tensor."""
        tangents: list[Any] = []
        saved: list[Any] = []
        for p in placeholders:
            role = aot_role(p)
            if (role and role[0] == "tangent") or (role is None and p.name.startswith("tangents_")):
                tangents.append(p)
            elif isinstance(p.meta.get("val"), torch.Tensor):
                saved.append(p)
        for number, p in enumerate(tangents):
            role = aot_role(p)
            self.tangent_of[p] = role[1] if role else number
        if len(tangents) and all(aot_role(p) is None for p in tangents):
            self.notes.append("torch gave no descriptors: incoming gradients are matched to outputs by position")
        return self._link_saved(saved)

    def _link_saved(self, saved: list[Any]) -> dict[str, Node]:
        names = [f"saved_tensors[{i}]" for i in range(len(saved))]
        if not self.saved:
            return {}  # traced with show_saved=False: nothing to link
        if len(self.saved) != len(saved) or any(n not in self.saved for n in names):
            self.notes.append(
                f"the backward graph reads {len(saved)} saved tensor(s), the node holds {len(self.saved)}: "
                "saved tensors are not linked to the ops that read them"
            )
            return {}
        enriched: dict[str, Node] = {}
        for name, p in zip(names, saved, strict=True):
            node = self.saved[name]
            val = p.meta.get("val")
            if node.tensor is not None and not node.tensor.freed and tuple(val.shape) != node.tensor.shape:
                self.notes.append(f"{name} has shape {node.tensor.shape_text}, the backward graph expects "
                                  f"{tuple(val.shape)}: not linked")
                continue
            self.saved_of[p] = node.id
            enriched[node.id] = dataclasses.replace(node, attrs=node.attrs + self._made_by(p),
                                                    source=stack_source(p.meta.get("stack_trace")) or node.source)
        return enriched

    def _made_by(self, p: Any) -> tuple[tuple[str, str], ...]:
        """What made a saved tensor: an input of the region, or a forward op (with its seq_nr and module)."""
        role = aot_role(p)
        if role is None and p.name.startswith("primals_") and p.name.removeprefix("primals_").isdigit():
            role = ("input", int(p.name.removeprefix("primals_")) - 1)  # torch before descriptors
        if role and role[0] == "input":
            leaf = self.input_names.get(role[1])
            return (("made by", f"input {role[1]} of the region" + (f" ({leaf})" if leaf else "")),)
        facts: list[tuple[str, str]] = []
        aten, seq, call = p.meta.get("original_aten"), p.meta.get("seq_nr"), _forward_of(p.meta)
        details = [fx_op_name(aten)] if aten is not None else []
        details += [f"seq_nr {seq}"] if seq is not None else []
        if call or details:
            facts.append(("made by", f"{call or p.name} ({', '.join(details)})" if details else str(call)))
        owner = _module_of(p.meta)
        if owner is not None and owner[0]:
            facts.append(("forward module", owner[0]))
        return tuple(facts)

    def _op(self, fx: Any) -> Node:
        own = self.ids[fx] = f"{self.node_id}/{len(self.ids)}"
        attrs: list[tuple[str, str]] = []
        seq = fx.meta.get("seq_nr")
        if seq is not None:
            attrs.append(("seq_nr", str(seq)))
        forward = _forward_of(fx.meta)
        if forward is not None:
            attrs.append(("for", forward))
        val = fx.meta.get("val")
        if isinstance(val, (tuple, list)):
            attrs.append(("outputs", str(len(val))))
        owner = _module_of(fx.meta)
        module = self.name
        if owner is not None and owner[0]:
            module = f"{self.name}.{owner[0]}"
            parts = owner[0].split(".")
            for i in range(1, len(parts)):
                self.modules.setdefault(f"{self.name}.{'.'.join(parts[:i])}", "")
            self.modules[module] = owner[1]
        return new_node(own, NodeKind.OP, fx_op_name(fx.target), _tensor(val, fx.meta.get("tensor_meta")),
                        tuple(attrs), module, stack_source(fx.meta.get("stack_trace")))

    def _inputs(self, output: Any) -> list[tuple[int, str]]:
        """(input slot of the region, op computing that input's gradient), from the graph's output."""
        grads = output.args[0] if output.args else ()
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        descs = output.meta.get("desc")
        found: list[tuple[int, str]] = []
        for position, grad in enumerate(grads):
            role = aot_role(descs[position]) if isinstance(descs, (tuple, list)) and position < len(descs) else None
            slot = role[1] if role and role[0] == "grad" else position
            if grad in self.ids:
                found.append((slot, self.ids[grad]))
            elif grad is not None and getattr(grad, "op", None) == "placeholder":
                self.notes.append(f"the gradient of input {slot} is passed through unchanged: no op computes it")
        return found
