"""The graph record: nodes in walk order, the edges between them, and what tracing noted.

The model imports nothing above it when it loads. Three conveniences of `Graph` are computed
higher up: `summary()` (`graphviz_app.analysis.summary`), `module_summary()`
(`graphviz_app.analysis.module_summary`) and the notebook display (`graphviz_app.drawing.notebook`).
Each imports its implementation inside the method, on first call: the model's doors up, one per
method, each marked `# door up` (the architecture tests allow an upward import there and nowhere else).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import SchemaError
from .checks import Verdict, verdict_from_dict, verdict_to_dict
from .compact import COMPACT_SCHEMA, compact_fields
from .ranks import RankInfo, rank_from_dict, rank_to_dict
from .records import Edge, EdgeKind, ModuleInfo, Node, NodeKind
from .regions import CompiledRegion, region_from_dict, region_to_dict
from .schema import (
    SCHEMA_VERSION,
    check_schema,
    edge_from_list,
    edge_to_list,
    json_items,
    loads_strict,
    node_from_dict,
    node_to_dict,
    read_items,
)
from .validation import check_graph

if TYPE_CHECKING:
    from .summaries import ModuleSummary, Summary

__all__ = ["Graph"]


@dataclass(frozen=True, slots=True)
class Graph:
    """An autograd graph: nodes in walk order and the edges between them.

    `notes` are remarks from tracing a person should see (ignored
    non-tensor outputs, truncation by `max_nodes`, freed saved tensors).
    `modules` lists the modules seen while recording, in `named_modules()`
    order; `nonfinite_origin` is the id of the node where the gradient first
    became NaN or Inf in backward, when traced with gradients. `regions` holds
    the inside of each compiled region (`CompiledFunctionBackward` node). `checks` holds a
    model check's verdicts (`graphviz_app.check_model`, put on the graph by `with_check`), so a
    saved graph shows them in the viewer, the summaries and the drawing. `rank` says which rank of a
    distributed job (torchrun, a fake cluster) the graph was traced in, with its collectives and FSDP units,
    so a saved rank's graph shows them in the viewer.
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    notes: tuple[str, ...] = ()
    truncated: bool = False
    modules: tuple[ModuleInfo, ...] = ()
    nonfinite_origin: str | None = None
    regions: tuple[CompiledRegion, ...] = ()
    checks: tuple[Verdict, ...] = ()
    rank: RankInfo | None = None
    # id -> node, built on the first `node()` call: not a field a person sets, compares, hashes or pickles.
    _index: dict[str, Node] | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __reduce__(self) -> tuple[type[Graph], tuple[Any, ...]]:
        """Pickle the fields alone: the lookup index is rebuilt on demand."""
        return (type(self), (self.nodes, self.edges, self.notes, self.truncated, self.modules,
                             self.nonfinite_origin, self.regions, self.checks, self.rank))

    def __repr__(self) -> str:
        """One line of counts (the dataclass repr of a ResNet's graph is 100,000+ characters).

        >>> Graph((Node("n0", NodeKind.OUTPUT, "output"),), ())  # doctest: +NORMALIZE_WHITESPACE
        <Graph: 1 nodes (1 output), 0 edges; .summary() for memory, .nodes and .edges for the records,
        save(graph, "graph.svg") to draw it>
        """
        kinds = Counter(n.kind.value for n in self.nodes)
        parts = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
        extra = (", truncated" if self.truncated else "") + (
            f", {len(self.notes)} note(s) in .notes" if self.notes else ""
        )
        return (
            f"<Graph: {len(self.nodes)} nodes ({parts or 'none'}), {len(self.edges)} edges{extra}; "
            '.summary() for memory, .nodes and .edges for the records, save(graph, "graph.svg") '
            "to draw it>"
        )

    def node(self, node_id: str) -> Node:
        """The node with this id, found in constant time. Raises KeyError naming the id if absent.

        The first call builds an id -> node index (one pass over `nodes`), kept with the graph;
        later calls are one dict lookup, so a loop over a timeline's steps stays linear.

        >>> g = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0")), ())
        >>> g.node("n1").name
        'MulBackward0'
        >>> g.node("n7")
        Traceback (most recent call last):
        ...
        KeyError: "no node 'n7' in this graph"
        """
        index = self._index
        if index is None:
            index = {}
            for n in self.nodes:
                index.setdefault(n.id, n)  # a repeated id finds its first node, as a scan would
            object.__setattr__(self, "_index", index)  # a cache: frozen means the fields, which it does not change
        try:
            return index[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in this graph") from None

    def of_kind(self, kind: NodeKind) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind is kind)

    def cross_device_ops(self) -> frozenset[str]:
        """Ids of op nodes whose inputs live on another device than their output."""
        found: set[str] = set()
        for e in self.edges:
            if e.kind is not EdgeKind.DATA:
                continue
            dst = self.node(e.dst)
            src_dev, dst_dev = self.node(e.src).device, dst.device
            if dst.kind is NodeKind.OP and src_dev and dst_dev and src_dev != dst_dev:
                found.add(dst.id)
        return frozenset(found)

    def summary(self, *, saved_traced: bool | None = None) -> Summary:
        """Node and edge counts per kind, devices, dtypes, and memory per device.

        Pass `saved_traced=False` for a graph traced with `show_saved=False`
        so its activation memory reads "not traced", not "0 B" (see `Summary`).
        Computed by `graphviz_app.analysis.summary.summarize`, imported on the first call.
        """
        from ..analysis.summary import summarize  # door up: an analysis of the model

        return summarize(self, saved_traced=saved_traced)

    def module_summary(self) -> ModuleSummary:
        """One row per module (ops, saved bytes, params), in `named_modules()` order; prints as a table.

        Computed by `graphviz_app.analysis.module_summary.module_summary`, imported on the first call.
        """
        from ..analysis.module_summary import module_summary  # door up: an analysis of the model

        return module_summary(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `Graph.from_dict` reads it back exactly."""
        data: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "nodes": [node_to_dict(n) for n in self.nodes],
            "edges": [edge_to_list(e) for e in self.edges],
        }
        data.update(self._tail_dict())
        return data

    def _tail_dict(self) -> dict[str, Any]:
        """What `to_dict` holds after the nodes and edges, in its order."""
        data: dict[str, Any] = {"notes": list(self.notes), "truncated": self.truncated}
        if self.modules:
            data["modules"] = [[m.name, m.type, m.params, m.param_bytes] for m in self.modules]
        if self.nonfinite_origin is not None:
            data["nonfinite_origin"] = self.nonfinite_origin
        if self.regions:
            data["regions"] = [region_to_dict(r) for r in self.regions]
        if self.checks:
            data["checks"] = [verdict_to_dict(v) for v in self.checks]
        if self.rank is not None:
            data["rank"] = rank_to_dict(self.rank)
        return data

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialize to JSON text (schema version 2, see the README)."""
        if indent is not None:
            return json.dumps(self.to_dict(), indent=indent)
        # The text of json.dumps(self.to_dict()), written a few thousand
        # records at a time: the dict tree of a million-node graph would take
        # several times the memory of its text.
        tail = json.dumps(self._tail_dict())
        return "".join([
            f'{{"schema": {SCHEMA_VERSION}, "nodes": [', *json_items(self.nodes, node_to_dict),
            '], "edges": [', *json_items(self.edges, edge_to_list), "], ", tail[1:],
        ])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Graph:
        """Read a graph from `to_dict`'s form (schema 1, 2, or the compact 3), checked field by field.

        Raises:
            SchemaError: it is not one; the message names the field (see `model.validation`).
        """
        check_schema(data)
        if data["schema"] == COMPACT_SCHEMA:
            graph = cls(**compact_fields(data))
        else:
            for field in ("nodes", "edges"):
                if field not in data:
                    raise SchemaError(f"the graph has no {field!r} field: a saved graph lists its nodes and edges")
            graph = cls(
                nodes=read_items(data["nodes"], "nodes", node_from_dict, dict),
                edges=read_items(data["edges"], "edges", edge_from_list, list),
                notes=read_items(data.get("notes", []), "notes", lambda n: n, str),
                truncated=data.get("truncated", False),  # checked, not converted: "no" is not false
                modules=read_items(data.get("modules", []), "modules", lambda m: ModuleInfo(*m), list),
                nonfinite_origin=data.get("nonfinite_origin"),
                regions=read_items(data.get("regions", []), "regions", region_from_dict, dict),
                checks=read_items(data.get("checks", []), "checks", verdict_from_dict, dict),
                rank=rank_from_dict(data["rank"]) if "rank" in data else None,
            )
        check_graph(graph)
        return graph

    @classmethod
    def from_json(cls, text: str) -> Graph:
        """Read a graph written by `to_json`: strict JSON (no NaN, no key twice), checked field by field.

        Raises:
            SchemaError: it is not one; the message says what and where.
        """
        return cls.from_dict(loads_strict(text))

    # Notebook display (IPython calls these): made by graphviz_app.drawing.notebook, imported on the first call.
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from ..drawing.notebook import mimebundle  # door up: the drawing of the model

        return mimebundle(self)

    def _repr_html_(self) -> str:
        """The interactive viewer (carrying its script), or without its bundle the static picture with a note."""
        from ..drawing.notebook import mimebundle  # door up: the drawing of the model

        return mimebundle(self, standalone=True)["text/html"]

    def _repr_svg_(self) -> str | None:
        """The static picture; None (IPython shows another form) when none could be drawn."""
        from ..drawing.notebook import mimebundle  # door up: the drawing of the model

        return mimebundle(self, standalone=True).get("image/svg+xml")
