"""The tracer's walk: grad_fn.next_functions breadth first, into Nodes and Edges."""

from __future__ import annotations

import dataclasses
import gc
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch

from ..model import MODIFIED_IN_PLACE, PACKED_BY_HOOK, STATE_ATTR, Edge, EdgeKind, Graph, Node, NodeKind
from .big_stack import FREE_GUARD_NODES, consumers_first, release_in_order
from .fast_records import new_edge, new_node
from .param_owners import NamedParams, module_infos, owner_module
from .tensor_info import TensorDescriber
from .torch_internals import (
    FREED,
    MODIFIED,
    PACKED,
    NodeType,
    node_type,
    output_metadata,
    output_sizes,
    recorded_tags,
    saved_values,
    sequence_nr,
    tags_written,
    view_base,
)

__all__ = ["Walker", "WalkOptions"]


# Saved values whose text is str(value): the most common attributes.
_SCALARS = frozenset({int, float, bool, str, type(None)})
# Saved value types whose equal values have equal text once the type is part
# of the key (1 == True); floats are out, as 0.0 == -0.0.
_PLAIN = frozenset({int, bool, str, type(None)})


_NOT_READ = object()


def _ints(values: tuple[Any, ...]) -> bool:
    for v in values:
        if type(v) is not int:
            return False
    return True


def _attr_text(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        # Recurse only into nested sequences: most attributes are flat (stride, padding).
        inner = ", ".join([_attr_text(v) if isinstance(v, (tuple, list)) else str(v) for v in value])
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return str(value)


@dataclass(frozen=True, slots=True)
class WalkOptions:
    """What a walk records, set once by `trace()`.

    `leaf_names` maps id(tensor) -> (name, tensor) for the leaves to name (the
    tensor keeps its id valid). With a `root_module`, the leaves whose ids are in
    `module_param_ids` belong to the module owning them (`module_params` is its
    named parameters). Past `guard_nodes` walked nodes, `release()` frees the
    graph node by node. Tensors in `given` existed before the step (parameters,
    buffers, inputs): records of tensors living in their storages are marked `given`.
    """

    leaf_names: Mapping[int, tuple[str, torch.Tensor]]
    show_saved: bool = True
    show_attrs: bool = True
    max_nodes: int | None = None
    root_module: torch.nn.Module | None = None
    module_params: NamedParams | None = None
    module_param_ids: frozenset[int] = frozenset()
    guard_nodes: int = FREE_GUARD_NODES
    given: tuple[torch.Tensor, ...] = ()


class Walker:
    """Breadth-first walk over grad_fn.next_functions, ids in walk order.

    An op node's id is taken when the op is discovered and its Node is built
    once, when it is visited and its attributes are known (`_visit_all`).
    `fns` lists the walked autograd nodes in discovery order and `fn_ids`
    maps each fn to its node id: together they give each node id's fn.
    """

    def __init__(self, options: WalkOptions, notes: list[str]) -> None:
        self.options = options
        self.param_names = options.leaf_names
        self.show_saved = options.show_saved
        self.show_attrs = options.show_attrs
        self.max_nodes = options.max_nodes
        self.notes = notes
        # Leaves of the root module belong to the module owning them.
        self.root_module = options.root_module
        self.module_params = options.module_params
        self.module_param_ids = options.module_param_ids
        self.guard_nodes = options.guard_nodes
        self.describe = TensorDescriber()
        # `nodes[i]` is node `n{i}`; an op's slot holds None until it is visited.
        self.nodes: list[Node | None] = []
        self.edges: list[Edge] = []
        # fn -> node id (autograd nodes hash and compare by identity, so the
        # fn itself is the key: no id() per lookup); `self.fns` lists them.
        self.fn_ids: dict[Any, str] = {}
        self.fns: list[Any] = []
        self.base_ids: dict[int, str] = {}
        self.alive: list[Any] = []
        # (fn, node id, index in nodes) of ops discovered and not yet visited.
        self.queue: deque[tuple[Any, str, int]] = deque()
        self.truncated = False
        self.freed = 0
        self.modified = 0
        self.packed = 0
        # Node class -> what node_type() says of it, looked up once per class.
        self.types: dict[type, NodeType] = {}
        # Equal attrs tuples are shared: a chain's million AddBackward0 hold one (("alpha", "1"),).
        self.attrs_seen: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        # Node classes that can never be a leaf (no `variable`): discovered inline.
        self.op_classes: set[type] = set()
        # A tuple of ints -> its attribute text.
        self.int_texts: dict[tuple[int, ...], str] = {}
        # (class, raw saved values, their types) -> attrs, for classes saving plain values only.
        self.plain_seen: dict[tuple[Any, ...], tuple[tuple[str, str], ...]] = {}
        # Whether discovery order is consumers first (every data edge goes
        # from a later-discovered fn to an earlier one): then freeing in that
        # order is safe and the guard needs no sort (true of every chain).
        self.consumers_first = True
        # Whether that holds only once leaves (AccumulateGrad, which feed ops
        # and are fed by none) move to the end: a weight shared by many ops
        # (an RNN's, across time steps) is found by the first of them.
        self.leaves_last = False
        # Node classes that are leaves (AccumulateGrad): no inputs, never visited.
        self.sink_classes: set[type] = set()
        # Node id -> bytes of each forward output, for ops an output past the first of which flows.
        self.multi_output: dict[str, tuple[int, ...] | None] = {}
        # Module name -> class name, as recorded, for every module a node belongs to.
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
        # Every op of the graph was made before (or is) an output's op: count back from the newest.
        self.newest = max(sequence_nr(t.grad_fn) for _, t in outputs)
        for shown, (path, t) in enumerate(outputs):
            if not self._room():
                self.notes.append(f"{len(outputs) - shown} output(s) from {path} on are not shown")
                break
            out_id = self._new_id()
            self.nodes.append(new_node(out_id, NodeKind.OUTPUT, path, self.describe.describe(t, path)))
            if t.is_nested:
                self.notes.append(f"{path} is a nested tensor: its shape is shown padded to its largest part")
            base = view_base(t)
            if base is not None and self._room():  # torchviz draws an output's view base too
                self.edges.append(new_edge(self._view_base(base), out_id, EdgeKind.VIEW))
            fn_id = self._discover(t.grad_fn)
            if fn_id is not None:  # None: cut off by max_nodes
                self.edges.append(new_edge(fn_id, out_id, EdgeKind.DATA, t.output_nr, 0))
        self._visit_all()
        if self.options.given:
            self._mark_given()
        for node_id, sizes in self.multi_output.items():
            i = int(node_id[1:])
            node = self.nodes[i]
            if sizes is not None and node is not None and node.kind is NodeKind.OP:
                self.nodes[i] = dataclasses.replace(node, output_bytes=sizes)
        self._add_notes()
        modules = module_infos(self.root_module, self.modules_seen, self.module_params)
        nodes = cast("tuple[Node, ...]", tuple(self.nodes))  # every slot is filled once the queue is empty
        return Graph(nodes, tuple(self.edges), tuple(self.notes), self.truncated, modules)

    def _mark_given(self) -> None:
        """Mark the records of tensors living in a storage that existed before the step (`WalkOptions.given`)."""
        names = {self.describe.known_storage(t) for t in self.options.given} - {None}
        if not names:
            return
        for i, n in enumerate(self.nodes):
            if n is not None and n.tensor is not None and n.tensor.storage in names:
                self.nodes[i] = dataclasses.replace(n, tensor=dataclasses.replace(n.tensor, given=True))

    def __enter__(self) -> Walker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Drop the walked autograd nodes, guarding a big graph so it frees one node at a time.

        Until then `fn_by_node_id()` gives the live nodes (the gradient replay needs them).
        """
        if len(self.fn_ids) > self.guard_nodes:
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                self._guard_free()
            finally:
                if gc_was_enabled:
                    gc.enable()
        self.alive.clear()
        self.fns.clear()
        self.fn_ids.clear()

    def _add_notes(self) -> None:
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
        if self.packed:
            self.notes.append(
                f"{self.packed} saved tensor(s) are packed by a saved-tensor hook (torch.utils.checkpoint "
                "recomputes them in backward): not held as tensors, so not counted"
            )
        if self.truncated:
            self.notes.append(
                f"stopped at max_nodes={self.max_nodes}: ops further from the output are not shown"
            )

    def _guard_free(self) -> None:
        """Let a big walked graph be freed node by node (see deep.release_in_order)."""
        if self.consumers_first:
            fns = self.fns
            if self.leaves_last:
                sinks = self.sink_classes
                fns = [fn for fn in fns if type(fn) not in sinks] + [fn for fn in fns if type(fn) in sinks]
            release_in_order(fns)
            return
        # fn_ids' node ids and self.fns share discovery order.
        data = ((e.src, e.dst) for e in self.edges if e.kind is EdgeKind.DATA)
        order = consumers_first(list(self.fn_ids.values()), data)
        release_in_order([self.fns[i] for i in order])

    def fn_by_node_id(self) -> dict[str, Any]:
        """After the walk: each op and leaf node's autograd node, by node id.

        `fns` stays filled after `walk()` until `release()`, so a step after it
        (the backward replay) can find the fns.
        """
        return {self.fn_ids[fn]: fn for fn in self.fns}

    def _visit_all(self) -> None:
        """Visit queued ops: build each op's node, then discover its inputs.

        The hottest loop of tracing: one pass per op, with the walker's
        attributes and methods bound to locals, and an op's node, its output
        record, its input edges and the discovery of a plain op input inline
        (each call or attribute lookup here is paid a million times on a
        million-op graph); leaves go through `_discover_new`.
        """
        queue, nodes, edges, fn_ids, types = self.queue, self.nodes, self.edges, self.fn_ids, self.types
        popleft, enqueue, add_fn = queue.popleft, queue.append, self.fns.append
        add_node, add_edge = nodes.append, edges.append
        known_id, attrs_seen, plain_get = fn_ids.get, self.attrs_seen.setdefault, self.plain_seen.get
        node_type = self._node_type
        op_classes = self.op_classes
        discover, add_saved = self._discover_new, self._add_saved
        plain_attrs, op_tags = self._plain_attrs, self._op_tags
        meta_seen, meta_info = self.describe.meta_records.get, self.describe.from_metadata
        read_saved, max_nodes = self.show_saved or self.show_attrs, self.max_nodes
        tagged = tags_written()
        seq_of, newest = sequence_nr, self.newest
        op, data = NodeKind.OP, EdgeKind.DATA
        in_order = True
        while queue:
            fn, node_id, index = popleft()
            cls = type(fn)
            name, saves, _, _, scalars = types.get(cls) or node_type(cls)
            attrs: tuple[tuple[str, str], ...] = ()
            if read_saved and saves:
                try:
                    raw = scalars(fn) if scalars is not None else _NOT_READ
                except (RuntimeError, AttributeError):  # never seen: saved_values says what it is
                    raw = _NOT_READ
                if raw is not _NOT_READ:
                    kind = type(raw)
                    # One plain saved value (a chain's alpha): plain_attrs' lookup, inlined.
                    if saves == 1 and kind in _PLAIN and (found := plain_get((cls, raw, kind))) is not None:
                        attrs = found
                    else:
                        attrs = plain_attrs(node_id, fn, raw, saves > 1)
                else:
                    attrs = add_saved(node_id, fn)
                    if attrs:
                        attrs = attrs_seen(attrs, attrs)
            leaf = nodes[index]
            if leaf is None:
                meta = output_metadata(fn)
                info = (meta_seen(meta) or meta_info(*meta)) if meta else None
                module, source = op_tags(fn) if tagged else (None, None)
                nodes[index] = new_node(node_id, op, name, info, attrs, module, source, None, newest - seq_of(fn))
            elif attrs:  # a custom Function drawn as a leaf (see _discover_new)
                nodes[index] = dataclasses.replace(leaf, attrs=attrs)
            slot = -1
            for child, output_nr in fn.next_functions:
                slot += 1
                if child is None:
                    continue
                child_id = known_id(child)
                if child_id is not None:
                    if in_order and int(child_id[1:]) < index:  # a producer found before one of its consumers
                        if type(child) in self.sink_classes:
                            self.leaves_last = True
                        else:
                            in_order = False
                elif type(child) not in op_classes and self._may_be_leaf(type(child)):
                    child_id = discover(child)
                    if child_id is None:  # cut off by max_nodes
                        continue
                else:  # _discover_new for an op, inlined
                    child_index = len(nodes)
                    if max_nodes is not None and child_index >= max_nodes:
                        self.truncated = True
                        continue
                    child_id = fn_ids[child] = f"n{child_index}"
                    add_fn(child)
                    add_node(None)
                    enqueue((child, child_id, child_index))
                add_edge(new_edge(child_id, node_id, data, output_nr, slot))
                if output_nr and child_id not in self.multi_output:  # rare: a second output flows
                    self.multi_output[child_id] = output_sizes(child)
        self.consumers_first = in_order

    def _node_type(self, cls: type) -> NodeType:
        found = self.types[cls] = node_type(cls)
        _, _, custom, holds_variable, _ = found
        if not holds_variable:
            self.op_classes.add(cls)
        elif not custom:  # torch's AccumulateGrad: a leaf, with no inputs
            self.sink_classes.add(cls)
        return found

    def _may_be_leaf(self, cls: type) -> bool:
        return (self.types.get(cls) or self._node_type(cls))[3]

    def _op_tags(self, fn: Any) -> tuple[str | None, str | None]:
        """(module, source) that `record()` wrote on op `fn`; notes the module as seen."""
        module, module_type, source = recorded_tags(fn)
        if module is not None:
            self.modules_seen.setdefault(module, module_type or "")
        return module, source

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
        return self.fn_ids.get(fn) or self._discover_new(fn)

    def _discover_new(self, fn: Any) -> str | None:
        """Give a fn not seen before its node id; None past max_nodes."""
        nodes = self.nodes
        index = len(nodes)
        if self.max_nodes is not None and index >= self.max_nodes:
            self.truncated = True
            return None
        node_id = self.fn_ids[fn] = f"n{index}"
        self.fns.append(fn)
        cls = type(fn)
        _, _, custom, holds_variable, _ = self.types.get(cls) or self._node_type(cls)
        variable = getattr(fn, "variable", None) if holds_variable else None
        if isinstance(variable, torch.Tensor):  # AccumulateGrad: a leaf
            nodes.append(self._leaf_node(node_id, variable))
            # torch's AccumulateGrad saves nothing and has no inputs; a custom
            # Function whose ctx has a `variable` tensor is drawn as a leaf
            # but may have both, so it is still visited.
            if custom:
                self.queue.append((fn, node_id, index))
        else:
            nodes.append(None)  # built by _visit_all once its attributes are read
            self.queue.append((fn, node_id, index))
        return node_id

    def _leaf_node(self, node_id: str, variable: torch.Tensor) -> Node:
        named = self.param_names.get(id(variable))
        name = named[0] if named else None
        owner = None
        if name is not None and self.root_module is not None and id(variable) in self.module_param_ids:
            owner = owner_module(name)
            self.modules_seen.setdefault(owner, "")
        info = self.describe.describe(variable, name)
        return new_node(node_id, NodeKind.LEAF, name or "", info, module=owner)

    def _plain_attrs(self, node_id: str, fn: Any, raw: Any, several: bool) -> tuple[tuple[str, str], ...]:
        """The attributes of an op whose class saves no tensor, from its raw saved values.

        Ops of a class with equal plain values (ints, bools, strings, None,
        tuples of ints) have equal attributes: each such set is turned into
        text once per walk. Other values (floats: 0.0 == -0.0) take `_add_saved`.
        """
        cls = type(fn)
        kinds: type | tuple[type, ...]
        if several:  # raw is a tuple of the values
            kinds = tuple(map(type, raw))
            plain = all(k in _PLAIN or (k is tuple and _ints(v)) for k, v in zip(kinds, raw, strict=True))
        else:
            kinds = type(raw)
            plain = kinds in _PLAIN or (kinds is tuple and _ints(raw))
        if plain:
            key = (cls, raw, kinds)
            attrs = self.plain_seen.get(key)
            if attrs is not None:
                return attrs
        attrs = self._add_saved(node_id, fn)
        attrs = self.attrs_seen.setdefault(attrs, attrs)
        if plain:
            self.plain_seen[key] = attrs
        return attrs

    def _add_saved(self, node_id: str, fn: Any) -> tuple[tuple[str, str], ...]:
        """Add a node per saved tensor (show_saved); return the attributes (show_attrs)."""
        attrs: list[tuple[str, str]] = []
        show_saved, show_attrs, nodes = self.show_saved, self.show_attrs, self.nodes
        for name, value in saved_values(fn):
            kind = type(value)
            if kind in _SCALARS:
                if show_attrs:  # the most common attributes first (alpha, dim, eps, ...)
                    attrs.append((name, str(value)))
            elif isinstance(value, torch.Tensor):
                # _add_saved_tensor, inlined: most saved values are tensors
                if show_saved and (self.max_nodes is None or self._room()):
                    saved_id = f"n{len(nodes)}"
                    nodes.append(new_node(saved_id, NodeKind.SAVED, name, self.describe.describe(value, name)))
                    self.edges.append(new_edge(saved_id, node_id, EdgeKind.SAVED))
            elif value is FREED or value is MODIFIED or value is PACKED:
                if show_saved:
                    self._add_saved_tensor(node_id, name, value)
            elif kind is tuple and _ints(value):  # sizes, strides, dims: each text made once per walk
                if show_attrs:
                    text = self.int_texts.get(value)
                    if text is None:
                        text = self.int_texts[value] = _attr_text(value)
                    attrs.append((name, text))
            elif isinstance(value, (tuple, list)):
                tensors = [(i, v) for i, v in enumerate(value) if isinstance(v, torch.Tensor) or v is PACKED]
                if not tensors:
                    if show_attrs:
                        attrs.append((name, _attr_text(value)))
                elif show_saved:
                    for i, v in tensors:
                        self._add_saved_tensor(node_id, f"{name}[{i}]", v)
            elif show_attrs:
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
        elif t is PACKED:  # unpacking would run the hook (recompute the checkpointed forward)
            self.packed += 1
            info = TensorDescriber.freed(name)
        else:
            info = self.describe.describe(t, name)
        state = ((STATE_ATTR, MODIFIED_IN_PLACE),) if t is MODIFIED else ()
        if t is PACKED:
            state = ((STATE_ATTR, PACKED_BY_HOOK),)
        self.nodes.append(new_node(saved_id, NodeKind.SAVED, name, info, state))
        self.edges.append(new_edge(saved_id, owner, EdgeKind.SAVED))
