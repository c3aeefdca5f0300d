"""The attributes graphviz-app itself writes on nodes (annotations), apart from torch's saved attributes.

A node's `attrs` mix two things: what torch saved on the backward function (`exponent`, `dim`,
`alpha`, sizes: the op itself) and what this project noted about the node (a measured step's bytes,
a checkpoint's block, why a saved tensor is not held). Each annotation's name is defined here, once,
and `ANNOTATION_ATTRS` lists them all, so that comparing two graphs (`graphviz_app.analysis.diff`)
can tell "the op changed" from "one trace was measured and the other not".
"""

from __future__ import annotations

__all__ = [
    "STATE_ATTR",
    "MODIFIED_IN_PLACE",
    "PACKED_BY_HOOK",
    "FORWARD_PEAK_ATTR",
    "OUTSIDE_ATTR",
    "RECOMPUTE_BLOCK_ATTR",
    "RECOMPUTED_BYTES_ATTR",
    "CHECKPOINT_KEPT_ATTR",
    "TEMPORARIES_ATTR",
    "TEMPORARIES_FOUND_ATTR",
    "NESTED_GRADS_ATTR",
    "NESTED_LEAF_GRADS_ATTR",
    "GRADIENT_COPIED_ATTR",
    "REENTRANT_KEEPS_ATTR",
    "REENTRANT_ATTR",
    "MADE_BY_ATTR",
    "FORWARD_MODULE_ATTR",
    "REGION_SEQ_ATTR",
    "REGION_FOR_ATTR",
    "REGION_OUTPUTS_ATTR",
    "ANNOTATION_ATTRS",
]

# On a saved node whose tensor torch would not hand out (TensorInfo.freed): why, as (STATE_ATTR, reason);
# without it backward() freed it.
STATE_ATTR = "state"
MODIFIED_IN_PLACE = "modified in place"
PACKED_BY_HOOK = "not held: packed by a saved-tensor hook"  # torch.utils.checkpoint recomputes it
# On an output node backward starts from, when the step was run (measured, or forecast on meta): the forward's
# own peak in bytes, as whole-number text; it travels with the graph through save and load.
FORWARD_PEAK_ATTR = "forward peak bytes"
# On an op a recorded backward made (double backward): the node it differentiates, when the traced graph does
# not reach it (e.g. the forward's last op, when only the gradient is traced); `Node.differentiates` can only
# name a node id.
OUTSIDE_ATTR = "differentiates"
# On a saved tensor non-reentrant checkpointing packed: its checkpointed block (a number) and the bytes the
# block's recompute makes for it (0: a parameter or block input, saved again uncopied).
RECOMPUTE_BLOCK_ATTR = "checkpoint block"
RECOMPUTED_BYTES_ATTR = "recomputed bytes"
# On one packed saved tensor of a block: the bytes of the block's inputs only its checkpoint keeps (until the
# block's backward is done).
CHECKPOINT_KEPT_ATTR = "checkpoint keeps"
# On an op: the most bytes its backward had alive at once beyond what it left alive when it returned (the
# temporaries it made and freed inside: a pow in PowBackward0, a cast under autocast, a reentrant checkpoint's
# recompute and nested backward), counted as the step ran (`measure`, or `forecast` on meta).
TEMPORARIES_ATTR = "backward temporaries"
# On every output node of a graph whose ops' backward temporaries were looked for without a run (`trace_model`:
# each op's backward run once on meta): how they were found. With it, an op with no `TEMPORARIES_ATTR` made none,
# so the timeline does not say they are missing; it travels with the graph through save and load.
TEMPORARIES_FOUND_ATTR = "backward temporaries found"
# On a reentrant checkpoint's node (CheckpointFunctionBackward): the bytes its nested backward left alive
# beyond the gradients the node returns (the `.grad` of the block's parameters, not in the outer graph).
NESTED_GRADS_ATTR = "nested backward .grad"
# On a reentrant checkpoint's node: of those bytes, the `.grad` its nested backward made for leaves of the outer
# graph too (a parameter used inside the block and outside it), as "leaf id=bytes" separated by spaces. That
# `.grad` exists when the leaf's own AccumulateGrad runs in the outer graph, which then sums into it in place.
NESTED_LEAF_GRADS_ATTR = "nested backward .grad of graph leaves"
# On an op whose backward makes views of the gradient it gets (`rules.VIEWS`) but copied it instead, as the step
# ran: the bytes of the copy (a reshape's backward given a gradient it cannot view: a transposed one).
GRADIENT_COPIED_ATTR = "backward copied the gradient"
# On a reentrant checkpoint's node: the bytes of tensors its block took inside other arguments (a tuple of
# rotary cos and sin) that the checkpoint keeps as they are (not saved tensors) and nothing else in the graph
# describes; alive for the whole step (the node keeps them until the graph is freed).
REENTRANT_KEEPS_ATTR = "checkpoint keeps"
# On a reentrant checkpoint's node: a note that the block's forward runs again inside it.
REENTRANT_ATTR = "checkpoint"
# On a compiled region's saved tensor: the forward op (and its seq_nr) that made it, and that op's module.
MADE_BY_ATTR = "made by"
FORWARD_MODULE_ATTR = "forward module"
# On an op inside a compiled region (read from its FX node's meta): its seq_nr, the forward op it is the
# backward of, and how many outputs it has.
REGION_SEQ_ATTR = "seq_nr"
REGION_FOR_ATTR = "for"
REGION_OUTPUTS_ATTR = "outputs"

# Every attribute name above: what the project noted about a node, never torch's own attributes of an op.
ANNOTATION_ATTRS: frozenset[str] = frozenset({
    STATE_ATTR, FORWARD_PEAK_ATTR, OUTSIDE_ATTR, RECOMPUTE_BLOCK_ATTR, RECOMPUTED_BYTES_ATTR, CHECKPOINT_KEPT_ATTR,
    TEMPORARIES_ATTR, TEMPORARIES_FOUND_ATTR, NESTED_GRADS_ATTR, NESTED_LEAF_GRADS_ATTR, GRADIENT_COPIED_ATTR,
    REENTRANT_KEEPS_ATTR,
    REENTRANT_ATTR, MADE_BY_ATTR,
    FORWARD_MODULE_ATTR,
    REGION_SEQ_ATTR, REGION_FOR_ATTR, REGION_OUTPUTS_ATTR,
})
