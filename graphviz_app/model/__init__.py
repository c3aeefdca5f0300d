"""The plain model of an autograd graph: frozen records and the Graph, no torch; the bottom layer.

Everything else reads or builds these records: the tracer (`graphviz_app.tracing`) makes them from
live torch objects, the analyses (`graphviz_app.analysis`) and the drawing (`graphviz_app.drawing`)
read them. Loading the model loads nothing above it (`graphviz_app.errors` alone): the methods of
`Graph` that are computed higher up import their implementation when called (see `graph`).
"""

from __future__ import annotations

from .annotations import ANNOTATION_ATTRS, FORWARD_PEAK_ATTR, MODIFIED_IN_PLACE, PACKED_BY_HOOK, STATE_ATTR
from .compact import COMPACT_SCHEMA, compact_fields, node_positions, to_compact
from .graph import Graph
from .ranks import RankInfo
from .records import (
    Edge,
    EdgeKind,
    GradInfo,
    ModuleInfo,
    Node,
    NodeKind,
    Scalar,
    TensorInfo,
)
from .regions import REGION_TYPE, CompiledRegion
from .schema import READABLE_SCHEMAS, SCHEMA_VERSION
from .summaries import ModuleRow, ModuleSummary, Summary
from .units import human_bytes

__all__ = [
    "SCHEMA_VERSION",
    "READABLE_SCHEMAS",
    "COMPACT_SCHEMA",
    "to_compact",
    "compact_fields",
    "node_positions",
    "NodeKind",
    "EdgeKind",
    "TensorInfo",
    "GradInfo",
    "ModuleInfo",
    "Node",
    "Edge",
    "Graph",
    "CompiledRegion",
    "RankInfo",
    "REGION_TYPE",
    "Summary",
    "ModuleRow",
    "ModuleSummary",
    "Scalar",
    "human_bytes",
    "STATE_ATTR",
    "MODIFIED_IN_PLACE",
    "PACKED_BY_HOOK",
    "FORWARD_PEAK_ATTR",
    "ANNOTATION_ATTRS",
]
