"""The one place that reads torch's private internals, by topic in its modules.

torch exposes what a backward node saved only through generated private
attributes (`_saved_self`, `_saved_dim`, ...), the forward output's metadata
through `_input_metadata`, and a few other facts only privately: a view's base
(`_base`), a tensor's version counter (`_version`), a storage's identity
(`_cdata`), node sequence numbers (`_sequence_nr`), the dispatch-mode base class
(`torch.utils._python_dispatch.TorchDispatchMode`), switching torch-function
modes off (`torch._C.DisableTorchFunction`), a module's child table
(`_modules`), torch.compile's backward graph (`_forward_cls._lazy_backward_info`)
the function every backward call goes through (`torch.autograd._engine_run_backward`)
the fused attention kernels (`torch.ops.aten._scaled_dot_product_*`), oneDNN's bfloat16 check
(`torch.ops.mkldnn._is_mkldnn_bf16_supported`), and for a distributed
step fake tensors (`torch._subclasses`), the fake process group's store, the functional
collectives' `wait_tensor`, DDP's bucket sizes, a mesh slice's root mesh, FSDP2's unsharded
parameters, and PyTorch's memory trackers (`torch.distributed._tools`).
When a torch upgrade renames one of them, this package is the only one to change
(tests/test_architecture.py checks that no other module reads them).
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

from .checkpoint import (
    checkpoint_inputs,
    checkpoint_packs,
)
from .compiled import (
    COMPILED_BACKWARD_PATH,
    RunBackward,
    aot_role,
    compiled_backward_graph,
    wrap_run_backward,
)
from .fakes_and_ranks import (
    ddp_bucket_sizes,
    dtensor_shape_propagator,
    fake_mode_and_converter,
    fake_store,
    fake_tensor_api,
    fsdp_units,
    fsdp_unsharded_params,
    fused_attention_ops,
    grouped_mm_op,
    memory_trackers,
    mkldnn_bf16_supported,
    root_mesh,
    wait_tensor_op,
)
from .nodes_and_tensors import (
    MODULE_KEY,
    MODULE_TYPE_KEY,
    SOURCE_KEY,
    RecordedTags,
    is_leaf_node,
    next_sequence_nr,
    recorded_tags,
    replace_children,
    sequence_nr,
    storage_identity,
    tag_untagged,
    tags_written,
    torch_function_disabled,
    version_counter,
    view_base,
)
from .saved import (
    FREED,
    MODIFIED,
    PACKED,
    NodeType,
    SavedValue,
    gradient_metadata,
    is_custom_function,
    node_type,
    output_metadata,
    output_sizes,
    saved_values,
)

__all__ = ["checkpoint_packs", "fsdp_units", "dtensor_shape_propagator", "checkpoint_inputs", "TorchDispatchMode",
           "view_base", "version_counter", "storage_identity", "torch_function_disabled", "replace_children",
           "sequence_nr", "SavedValue", "saved_values", "gradient_metadata", "output_metadata", "output_sizes",
           "is_custom_function",
           "node_type", "NodeType", "FREED", "MODIFIED", "PACKED", "MODULE_KEY", "MODULE_TYPE_KEY", "SOURCE_KEY",
           "RecordedTags", "recorded_tags", "next_sequence_nr", "tag_untagged", "tags_written",
           "COMPILED_BACKWARD_PATH", "compiled_backward_graph", "aot_role", "RunBackward", "wrap_run_backward",
           "is_leaf_node", "fused_attention_ops", "fake_mode_and_converter", "grouped_mm_op", "fake_tensor_api",
           "fake_store", "wait_tensor_op", "ddp_bucket_sizes", "root_mesh", "memory_trackers", "fsdp_unsharded_params",
           "mkldnn_bf16_supported"]
