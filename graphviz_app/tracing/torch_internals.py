"""The one place that reads torch's private internals.

torch exposes what a backward node saved only through generated private
attributes (`_saved_self`, `_saved_dim`, ...), the forward output's metadata
through `_input_metadata`, and a few other facts only privately: a view's base
(`_base`), a tensor's version counter (`_version`), a storage's identity
(`_cdata`), node sequence numbers (`_sequence_nr`), the dispatch-mode base class
(`torch.utils._python_dispatch.TorchDispatchMode`), switching torch-function
modes off (`torch._C.DisableTorchFunction`), a module's child table
(`_modules`), torch.compile's backward graph (`_forward_cls._lazy_backward_info`)
the function every backward call goes through (`torch.autograd._engine_run_backward`)
the fused attention kernels (`torch.ops.aten._scaled_dot_product_*`), and for a distributed
step fake tensors (`torch._subclasses`), the fake process group's store, the functional
collectives' `wait_tensor`, DDP's bucket sizes, a mesh slice's root mesh, FSDP2's unsharded
parameters, and PyTorch's memory trackers (`torch.distributed._tools`).
When a torch upgrade renames one of them, this module is the only one to change
(tests/test_architecture.py checks that no other module reads them).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "checkpoint_packs",
    "fsdp_units",
    "dtensor_shape_propagator",
    "checkpoint_inputs",
    "TorchDispatchMode",
    "view_base",
    "version_counter",
    "storage_identity",
    "torch_function_disabled",
    "replace_children",
    "sequence_nr",
    "SavedValue",
    "saved_values",
    "output_metadata",
    "output_sizes",
    "is_custom_function",
    "node_type",
    "NodeType",
    "FREED",
    "MODIFIED",
    "PACKED",
    "MODULE_KEY",
    "MODULE_TYPE_KEY",
    "SOURCE_KEY",
    "RecordedTags",
    "recorded_tags",
    "next_sequence_nr",
    "tag_untagged",
    "tags_written",
    "COMPILED_BACKWARD_PATH",
    "compiled_backward_graph",
    "aot_role",
    "RunBackward",
    "wrap_run_backward",
    "is_leaf_node",
    "fused_attention_ops",
    "fake_mode_and_converter",
    "grouped_mm_op",
    "fake_tensor_api",
    "fake_store",
    "wait_tensor_op",
    "ddp_bucket_sizes",
    "root_mesh",
    "memory_trackers",
    "fsdp_unsharded_params",
]

_SAVED_PREFIX = "_saved_"
_RAW_PREFIX = "_raw_saved_"  # a saved tensor also shows under this name

# Marks a saved tensor that backward() has already released.
FREED = object()
# Marks a saved tensor modified in place after it was saved (torch refuses to unpack it).
MODIFIED = object()
# Marks a saved tensor that a saved_tensors_hooks pair packed (torch.utils.checkpoint keeps
# no tensor and recomputes it in backward): unpacking it would run the hook, so it is not.
PACKED = object()

SavedValue = tuple[str, Any]

# What to read from a node is a property of its generated class: the
# `_saved_*` property names (with the prefix dropped) or, for a custom
# Function, None (its tensors come from `saved_tensors`). Looked up once per
# type rather than with dir() and isinstance() on every node.
_spec_by_type: dict[type, tuple[tuple[str, str], ...] | None] = {}
_UNKNOWN: Any = object()  # not a spec: `is` tells it from every real one


def _spec(cls: type) -> tuple[tuple[str, str], ...] | None:
    if issubclass(cls, torch.autograd.function.BackwardCFunction):
        spec = None
    else:
        cut = len(_SAVED_PREFIX)
        spec = tuple((a, a[cut:]) for a in dir(cls) if a.startswith(_SAVED_PREFIX))
    _spec_by_type[cls] = spec
    return spec


def is_custom_function(fn: Any) -> bool:
    """Whether `fn` is the backward node of a Python `torch.autograd.Function`."""
    cls = type(fn)
    return (_spec_by_type[cls] if cls in _spec_by_type else _spec(cls)) is None


# What a walker needs to know of a node's class before touching the node:
# its name (torchviz's type(fn).__name__; fn.name() spells some C++ nodes
# "torch::autograd::CopySlices"), how many values `saved_values` reads (most
# chain ops save one scalar or nothing; 1 for a custom Function, whose count
# is known only per node), whether it is a custom Function, whether it can
# hold a leaf's `variable` (AccumulateGrad, or a custom Function whose ctx has
# one: getattr(fn, "variable", None) on any other node raises and swallows an
# AttributeError, which costs more than the rest of discovering it), and
# `scalars` (below).
NodeType = tuple[str, int, bool, bool, Callable[[Any], Any] | None]


def node_type(cls: type) -> NodeType:
    """(name, values saved, is a custom Function, may hold `variable`, scalars) of a node class.

    `scalars`, for a class that saves no tensor, reads its raw saved values in
    one C call, in `saved_values` order: the value itself when it saves one,
    else a tuple. torch keeps a saved tensor as a SavedVariable, which also
    shows as `_raw_saved_<name>`; a class with none saves plain values only
    (alpha, dim, sizes), so one call can read them all. The values are raw:
    `saved_values` is the reading that fixes int64 signs and freed tensors.
    """
    spec = _spec_by_type[cls] if cls in _spec_by_type else _spec(cls)
    custom = spec is None
    scalars = None
    if spec and not any(a.startswith(_RAW_PREFIX) for a in dir(cls)):
        scalars = operator.attrgetter(*(attr for attr, _ in spec))
    saves = 1 if spec is None else len(spec)
    return cls.__name__, saves, custom, custom or hasattr(cls, "variable"), scalars


def saved_values(fn: Any) -> list[SavedValue]:
    """What a backward node saved for backward, as (name, value) pairs.

    Values are tensors, None, plain Python values, tuples of those, FREED when
    backward() already released them, or, for a tensor a saved-tensor hook packed,
    what the hook kept (read without running its unpack: an identity hook's tensor,
    `save_on_cpu`'s copy) or PACKED when it kept no tensor (checkpointing). Names drop the `_saved_`
    prefix; a custom Function's `ctx.save_for_backward` tensors are named
    `saved_tensors[i]`.
    """
    cls = type(fn)
    spec = _spec_by_type.get(cls, _UNKNOWN)
    if spec is _UNKNOWN:
        spec = _spec(cls)
    if spec is None:
        raws = _raw(fn, "_raw_saved_tensors")
        if _hooked(raws):
            return [(f"saved_tensors[{i}]", _held_by_hook(r)) for i, r in enumerate(raws)]
        try:
            tensors = fn.saved_tensors
        except RuntimeError as e:
            return [("saved_tensors", _unreadable(e))]
        return [(f"saved_tensors[{i}]", t) for i, t in enumerate(tensors)]
    getter = _raw_getters.get(cls, _UNKNOWN)
    if getter is _UNKNOWN:
        getter = _raw_getter(cls, spec)
    packed = _packed_names(fn, getter) if getter is not None else None
    out: list[SavedValue] = []
    for attr, name in spec:
        if packed is not None and name in packed:
            out.append((name, packed[name]))
            continue
        try:
            value = getattr(fn, attr)
        except RuntimeError as e:  # freed by backward(), or modified in place since
            value = _unreadable(e)
        kind = type(value)
        if (kind is int and value >= _INT64_SIGN) or kind is tuple:  # all _signed can change
            value = _signed(value)
        out.append((name, value))
    return out


# Node class -> one call reading the raw SavedVariables of its saved tensors (None: it saves none).
_raw_getters: dict[type, Any] = {}
_SAVED_TENSOR = torch._C._autograd.SavedTensor


def _raw_getter(cls: type, spec: tuple[tuple[str, str], ...]) -> Any:
    names = tuple(_RAW_PREFIX + name for _, name in spec if hasattr(cls, _RAW_PREFIX + name))
    getter = _raw_getters[cls] = (operator.attrgetter(*names), names) if names else None
    return getter


def _packed_names(fn: Any, getter: tuple[Any, tuple[str, ...]]) -> dict[str, Any] | None:
    """Saved name -> PACKED (or a tuple of them, for a list) for the node's values a saved-tensor hook packed.

    Reading the raw SavedVariables runs no hook; None when no value is packed (the usual case).
    """
    read, names = getter
    try:
        raws = read(fn)
    except RuntimeError:  # freed by backward(): the plain reading says so
        return None
    if len(names) == 1:
        if type(raws) is _SAVED_TENSOR and raws.unpack_hook is None:  # type: ignore[attr-defined]
            return None  # the usual case, first
        raws = (raws,)
    else:
        for raw in raws:
            if type(raw) is not _SAVED_TENSOR or raw.unpack_hook is not None:  # type: ignore[attr-defined]
                break
        else:
            return None
    found = None
    for raw_name, raw in zip(names, raws, strict=True):
        if type(raw) is _SAVED_TENSOR:
            if raw.unpack_hook is None:  # type: ignore[attr-defined]
                continue
            value: Any = _held_by_hook(raw)
        elif raw is None or not _hooked(raw):
            continue
        else:
            value = tuple(_held_by_hook(r) for r in raw)
        if found is None:
            found = {}
        found[raw_name[len(_RAW_PREFIX):]] = value
    return found


def _raw(fn: Any, attr: str) -> Any:
    try:
        return getattr(fn, attr, None)
    except RuntimeError:  # freed by backward(): the plain reading says so
        return None


def _held_by_hook(raw: Any) -> Any:
    """What a saved-tensor hook's pack function kept, read without unpacking: the tensor it holds
    (an identity hook's own tensor, `save_on_cpu`'s copy), else PACKED (checkpointing keeps none)."""
    if getattr(raw, "unpack_hook", None) is None:
        return raw.data
    kept = raw.data
    if isinstance(kept, torch.Tensor):
        return kept
    if isinstance(kept, (tuple, list)):
        return next((t for t in kept if isinstance(t, torch.Tensor)), PACKED)
    return PACKED


def _hooked(raw: Any) -> tuple[bool, ...]:
    """(True,) for a SavedVariable packed by a saved-tensor hook, one flag per item of a list of them; () if none."""
    if raw is None:
        return ()
    items = raw if isinstance(raw, (list, tuple)) else (raw,)
    flags = tuple(getattr(r, "unpack_hook", None) is not None for r in items)
    return flags if any(flags) else ()


def _unreadable(error: RuntimeError) -> object:
    # torch says "...has been modified by an inplace operation..." for a saved
    # tensor changed in place, and "Trying to backward through the graph a
    # second time..." for one backward() released.
    return MODIFIED if "modified by an inplace operation" in str(error) else FREED


_INT64_SIGN = 1 << 63


def _signed(value: Any) -> Any:
    # torch returns negative int64 attributes as their uint64 bit pattern:
    # x.sum(-1).grad_fn._saved_dim == (18446744073709551615,); show -1.
    if type(value) is int and value >= _INT64_SIGN:
        return value - (_INT64_SIGN << 1)
    if type(value) is tuple and any(type(v) is int and v >= _INT64_SIGN for v in value):
        return tuple(_signed(v) for v in value)
    return value


def output_sizes(fn: Any) -> tuple[int, ...] | None:
    """The bytes of each forward output `fn` differentiates, by output number (None when unknown)."""
    try:
        meta = fn._input_metadata
        return tuple(_numel(m.shape) * m.dtype.itemsize for m in meta)
    except (AttributeError, TypeError, RuntimeError):  # nested tensors have no plain shape
        return None


def _numel(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def output_metadata(fn: Any) -> tuple[tuple[int, ...], torch.dtype, torch.device] | None:
    """Shape, dtype and device of the first forward output `fn` differentiates."""
    try:
        meta = fn._input_metadata
    except AttributeError:
        return None
    if not meta:
        return None
    first = meta[0]
    try:
        return tuple(first.shape), first.dtype, first.device
    except (TypeError, RuntimeError):  # nested tensors have no plain shape
        return None


# What `graphviz_app.record` writes into `grad_fn.metadata` (a public, per-node
# dict). The keys are namespaced so they never clash with the user's own tags.
MODULE_KEY = "graphviz_app.module"
MODULE_TYPE_KEY = "graphviz_app.module_type"
SOURCE_KEY = "graphviz_app.source"  # present on every node the recorder saw

# torch's stubs for torch._C._functions list no AccumulateGrad, though the class is there.
_ACCUMULATE_GRAD = torch._C._functions.AccumulateGrad  # type: ignore[attr-defined]

RecordedTags = tuple[str | None, str | None, str | None]
_NO_TAGS: RecordedTags = (None, None, None)


# Set once `tag_untagged` has written a tag: until then no node of this
# process carries one, and a walk need not read `fn.metadata` (which makes a
# dict on every node it is read from).
_tagged = False


def tags_written() -> bool:
    """Whether any node of this process may carry tags written by `tag_untagged`."""
    return _tagged


def recorded_tags(fn: Any) -> RecordedTags:
    """(module, module type, source) that `record()` wrote on node `fn`, None where absent."""
    try:
        meta = fn.metadata
    except (AttributeError, RuntimeError):
        return _NO_TAGS
    if not meta:
        return _NO_TAGS
    return meta.get(MODULE_KEY), meta.get(MODULE_TYPE_KEY), meta.get(SOURCE_KEY)


_peek_sequence_nr = getattr(torch.autograd, "_get_sequence_nr", None)


def next_sequence_nr() -> int:
    """The autograd sequence number the next node made on this thread will get.

    Sequence numbers are per thread and increase with every node created, so
    a node numbered at least this was made after this call.
    """
    if _peek_sequence_nr is not None:
        return _peek_sequence_nr()
    # Without torch's private peek: make and drop a one-element probe node.
    with torch_function_disabled(), torch.inference_mode(False), torch.enable_grad():
        probe = torch.zeros((), requires_grad=True).clone()
    assert probe.grad_fn is not None, "a clone of a tensor that requires grad has a grad_fn"
    return probe.grad_fn._sequence_nr() + 1


def tag_untagged(
    fn: Any, first: int, tags: Callable[[int], Mapping[str, Any]], *, seen_key: str = SOURCE_KEY
) -> None:
    """Tag `fn` and every node behind it not yet seen by the recorder.

    The walk stops at nodes already tagged (holding `seen_key`), at leaves
    (AccumulateGrad, whose sequence number is the maximum) and at nodes
    numbered below `first`, so a tensor computed before recording began is
    never claimed. `tags(n)` gives what to write on a node numbered `n`; it
    must include `seen_key`.
    """
    global _tagged
    _tagged = True  # before the first write: a walk on another thread then reads tags
    todo = [fn]
    while todo:
        node = todo.pop()
        if type(node) is _ACCUMULATE_GRAD:
            continue
        meta = node.metadata
        if seen_key in meta:
            continue
        seq = node._sequence_nr()
        if seq < first:
            continue
        meta.update(tags(seq))
        for child, _ in node.next_functions:
            if child is not None:
                todo.append(child)


def view_base(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor `t` is a view of, or None when `t` owns its memory."""
    return t._base if t._is_view() else None


def version_counter(t: torch.Tensor) -> int:
    """How many times `t`'s memory has been written in place (torch bumps it on every in-place op)."""
    return t._version


def storage_identity(storage: torch.UntypedStorage) -> int:
    """A number naming `storage` for as long as it lives, also when it has no data pointer (meta)."""
    return storage._cdata


def torch_function_disabled() -> Any:
    """A context in which torch-function modes and subclass overrides are off."""
    return torch._C.DisableTorchFunction()


def replace_children(module: torch.nn.Module, children: Mapping[str, torch.nn.Module]) -> None:
    """Make `children` the module's only submodules, whatever their names.

    `add_module` refuses names that are attributes of nn.Module (`eval`, `forward`),
    which a program's variables may be called; the child table takes any name.
    """
    module._modules.clear()
    module._modules.update(children)


# An autograd node's sequence number: per thread, increasing with every node the
# forward creates (AccumulateGrad's is the largest integer). torch names it privately.
sequence_nr: Callable[[Any], int] = operator.methodcaller("_sequence_nr")


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


def is_leaf_node(fn: Any) -> bool:
    """Whether autograd node `fn` is a leaf's AccumulateGrad (it makes no node when it runs)."""
    return type(fn) is _ACCUMULATE_GRAD


def fused_attention_ops() -> tuple[Any, Any, Any]:
    """The fused attention kernels `F.scaled_dot_product_attention` dispatches to on CPU and CUDA: CPU's
    flash attention, CUDA's flash attention and CUDA's memory-efficient attention (a forecast on meta,
    where torch takes the math path, calls them itself)."""
    return (torch.ops.aten._scaled_dot_product_flash_attention_for_cpu,
            torch.ops.aten._scaled_dot_product_flash_attention,
            torch.ops.aten._scaled_dot_product_efficient_attention)


def fake_tensor_api() -> tuple[Any, Any, Any, Callable[[], Any]]:
    """FakeTensor, FakeTensorMode, `unset_fake_temporarily` (a block where fake mode is off) and
    `active_fake_mode()` (the fake mode in force, or None): the tensors a fake-cluster forecast runs on."""
    from torch._guards import active_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

    return FakeTensor, FakeTensorMode, unset_fake_temporarily, active_fake_mode


def fake_store() -> Any:
    """The store of torch's fake process group (`init_process_group("fake", store=fake_store())`)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    return FakeStore()


def wait_tensor_op() -> Any:
    """`torch.ops._c10d_functional.wait_tensor.default`: a functional collective's wait."""
    return torch.ops._c10d_functional.wait_tensor.default


def ddp_bucket_sizes(ddp: Any) -> str:
    """DDP's gradient bucket sizes in bytes, as its logging data writes them ("1024, 2048"): DDP has no public
    API for its buckets."""
    return str(ddp._get_ddp_logging_data().get("bucket_sizes", ""))


def root_mesh(mesh: Any) -> Any:
    """The whole mesh a DeviceMesh slice (`mesh["tp"]`) was cut from; the mesh itself when it is whole."""
    get = getattr(mesh, "_get_root_mesh", None)
    return get() if get is not None else mesh


def memory_trackers() -> tuple[Any, Any]:
    """PyTorch's FSDPMemTracker and MemTracker (`torch.distributed._tools`): what a rank is checked against."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    return FSDPMemTracker, MemTracker


def fake_mode_and_converter() -> tuple[Any, Callable[[Any, torch.Tensor, torch.device], torch.Tensor]]:
    """A new `FakeTensorMode` (constants from outside allowed) and its converter from a meta tensor to a fake
    tensor of a device (`torch._subclasses.fake_tensor`, private: read here only)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    return mode, mode.fake_tensor_converter.from_meta_and_device


def grouped_mm_op() -> Any:
    """The grouped matmul op of mixture-of-experts layers (`aten::_grouped_mm`, private), or None in a torch
    without it."""
    packet = getattr(torch.ops.aten, "_grouped_mm", None)
    return getattr(packet, "default", None) if packet is not None else None


def fsdp_unsharded_params() -> dict[int, tuple[Any, Any, str | None]]:
    """FSDP2's unsharded parameters alive now: id(unsharded) -> (unsharded, sharded DTensor, its name).

    FSDP2 swaps each module's sharded parameter for an unsharded one, all-gathered,
    while the module runs: the autograd graph's leaves are those, known to FSDP's
    per-parameter state only (`FSDPParam._unsharded_param`, `._param_fqn`), reached
    through the composable API's module-to-state table.
    """
    import sys
    import weakref

    state_module = sys.modules.get("torch.distributed._composable_state")
    if state_module is None or "torch.distributed.fsdp" not in sys.modules:
        return {}
    found: dict[int, tuple[Any, Any, str | None]] = {}
    for held in list(state_module._module_state_mapping.values()):
        state = held() if isinstance(held, weakref.ref) else held  # torch keeps each state by weak reference
        group = getattr(state, "_fsdp_param_group", None)
        for fsdp_param in getattr(group, "fsdp_params", ()) or ():
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            if unsharded is not None:
                found[id(unsharded)] = (unsharded, fsdp_param.sharded_param, getattr(fsdp_param, "_param_fqn", None))
    return found



def dtensor_shape_propagator() -> type:
    """DTensor's `ShardingPropagator`, whose `_propagate_tensor_meta_non_cached` runs each op once on global-shape
    fake tensors to learn its output's metadata (its cache of that is per thread), under the fake mode in force."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    return ShardingPropagator


def fsdp_units(
        model: torch.nn.Module) -> list[tuple[str, tuple[str, ...], tuple[int, ...], int, int, int, int, bool]]:
    """FSDP2's units of `model`, from each unit's parameter group: (module name, its parameters' names, each
    one's unsharded bytes, the unsharded parameters' bytes, the all-gather output's bytes, the local gradient
    shards' bytes, the reduce-scatter input's bytes, whether it reshards after forward).
    Empty for a model without FSDP2.

    The sizes live in FSDP's per-parameter state only (`FSDPParam.padded_sharded_param_size`, `param_dtype`,
    `reduce_dtype`, `_orig_size`) and the group's `post_forward_mesh_info` (None: kept after forward).
    """
    import sys

    fsdp = sys.modules.get("torch.distributed.fsdp")
    module_type = getattr(fsdp, "FSDPModule", None)
    if module_type is None:
        return []
    names = {id(m): name for name, m in model.named_modules()}
    units = []
    for name, module in model.named_modules():
        if not isinstance(module, module_type):
            continue
        group = getattr(module._get_fsdp_state(), "_fsdp_param_group", None)
        if group is None:
            continue
        params, sizes, gathered, sharded, reduced = [], [], 0, 0, 0
        for fp in group.fsdp_params:
            info = fp._module_info
            owner = names.get(id(info.module), "")
            params.append(f"{owner}.{info.param_name}" if owner else info.param_name)
            world = fp.mesh_info.shard_mesh_size
            padded = _numel(fp.padded_sharded_param_size)
            policy = fp.mp_policy  # FSDP sets param_dtype and reduce_dtype at its lazy init (the first forward)
            orig = fp.sharded_param.dtype
            dtype = getattr(fp, "param_dtype", policy.param_dtype) or orig
            # `_orig_size`: what is all-gathered (a TP shard's local size under FSDP+TP). The unsharded parameter
            # itself is not touched: under FSDP+TP reading it changes how FSDP frees it (measured, torch 2.13).
            sizes.append(_numel(fp._orig_size) * dtype.itemsize)
            gathered += padded * world * dtype.itemsize
            shard = fp.sharded_param.to_local()
            sharded += shard.numel() * orig.itemsize
            reduced += padded * world * (getattr(fp, "reduce_dtype", policy.reduce_dtype) or dtype).itemsize
        units.append((name, tuple(params), tuple(sizes), sum(sizes), gathered, sharded, reduced,
                      group.post_forward_mesh_info is not None))
    return units

Pack = tuple[int, int, tuple[int, ...], torch.dtype, tuple[tuple[tuple[int, ...], torch.dtype], ...]]


def checkpoint_packs(fn: Any) -> dict[str, Pack]:
    """Saved name -> (block, pack index, shape, dtype, block inputs) for each of the node's saved tensors
    that non-reentrant `torch.utils.checkpoint` packed, read from the checkpoint's frame without unpacking.

    `block` is the frame's id (one per checkpointed call); the shape and dtype are those the frame
    recorded when the tensor was saved (`x_metadatas`, in pack order); the block's inputs as (shape,
    dtype) pairs, in order (the recompute re-saves an input without copying it). Names as `saved_values` gives
    them (`name`, `name[i]` for a list, `saved_tensors[i]` for a custom Function). A value packed by
    another hook, or a frame that recorded no metadata (`determinism_check="none"`), is left out.
    """
    out: dict[str, Pack] = {}
    for name, raw in _raw_saved(fn):
        found_pack = _checkpoint_pack(raw)
        if found_pack is not None:
            out[name] = found_pack
    return out


def checkpoint_inputs(fn: Any) -> tuple[int, tuple[torch.Tensor, ...]] | None:
    """(block, the tensors it keeps as its inputs) for the first of the node's saved tensors that non-reentrant
    `torch.utils.checkpoint` packed (the checkpoint keeps its inputs until the block's backward is done);
    None when it packed none."""
    for _, raw in _raw_saved(fn):
        frame = _checkpoint_frame(raw)
        if frame is not None:
            try:
                args = frame.get_inputs()
            except (AttributeError, RuntimeError, TypeError):
                return None
            return (id(frame), tuple(a for a in args if isinstance(a, torch.Tensor)))
    return None


def _raw_saved(fn: Any) -> list[tuple[str, Any]]:
    """(name, raw SavedVariable) of each of a node's saved tensors, named as `saved_values` names them."""
    cls = type(fn)
    spec = _spec_by_type.get(cls, _UNKNOWN)
    if spec is _UNKNOWN:
        spec = _spec(cls)
    raws: list[tuple[str, Any]] = []
    if spec is None:
        found = _raw(fn, "_raw_saved_tensors")
        raws = [(f"saved_tensors[{i}]", r) for i, r in enumerate(found or ())]
    else:
        for _, name in spec:
            raw = _raw(fn, _RAW_PREFIX + name)
            if isinstance(raw, (list, tuple)):
                raws.extend((f"{name}[{i}]", r) for i, r in enumerate(raw))
            elif raw is not None:
                raws.append((name, raw))
    return raws


def _checkpoint_frame(raw: Any) -> Any:
    hook = getattr(raw, "unpack_hook", None)
    if hook is None:
        return None
    frame = _closure_value(hook, "frame")
    return frame if frame is not None and hasattr(frame, "weak_holders") else None


def _checkpoint_pack(raw: Any) -> Pack | None:
    frame = _checkpoint_frame(raw)
    if frame is None:
        return None
    try:
        holder = raw.data
    except RuntimeError:
        return None
    metas = getattr(frame, "x_metadatas", None) or []
    for i, ref in enumerate(frame.weak_holders):
        if ref() is holder:
            if i >= len(metas) or not isinstance(metas[i], Mapping):
                return None
            meta = metas[i]
            return (id(frame), i, tuple(int(d) for d in meta["shape"]), meta["dtype"], _frame_inputs(frame))
    return None


def _frame_inputs(frame: Any) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
    try:
        args = frame.get_inputs()
    except (AttributeError, RuntimeError, TypeError):
        return ()
    return tuple((tuple(a.shape), a.dtype) for a in args if isinstance(a, torch.Tensor))


def _closure_value(function: Any, name: str) -> Any:
    """The value of free variable `name` in `function`'s closure (following one wrapper closure), or None."""
    seen = 0
    while function is not None and seen < 3:
        code = getattr(function, "__code__", None)
        cells = getattr(function, "__closure__", None) or ()
        if code is None:
            return None
        free = dict(zip(code.co_freevars, cells, strict=False))
        if name in free:
            return free[name].cell_contents
        inner = free.get("unpack_hook")
        function = inner.cell_contents if inner is not None else None
        seen += 1
    return None
