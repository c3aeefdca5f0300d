"""What a compiled region (torch.compile's `CompiledFunctionBackward` node) does inside: plain records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import Edge, ModuleInfo, Node
from .schema import edge_from_list, edge_to_list, node_from_dict, node_to_dict

__all__ = ["CompiledRegion", "region_to_dict", "region_from_dict", "REGION_TYPE"]

# The type a compiled region's box and cluster are labelled with.
REGION_TYPE = "compiled backward"


@dataclass(frozen=True, slots=True)
class CompiledRegion:
    """The inside of one `CompiledFunctionBackward` node, from AOT autograd's backward graph.

    `node` is the id of the region's node in the graph and `name` the module-like
    name its box opens under (`"[compiled region 1]"`, inside the region node's own
    module when it has one). `nodes` are the backward graph's ops (ids `n3/0`,
    `n3/1`, ... for region node `n3`), each with the module path of the forward
    code it differentiates under `name`; `edges` join them in the graph's
    direction (backward flows from `dst` to `src`) and join the region's saved
    tensors (saved nodes of the graph itself) to the ops that read them.
    `inputs` pairs each input slot of the region node with the op computing its
    gradient, `outputs` each output of the region with the ops reading the
    gradient that comes in for it. `modules` names the modules the ops came from
    (for cluster labels); `notes` say what could not be recovered.
    """

    node: str
    name: str
    nodes: tuple[Node, ...] = ()
    edges: tuple[Edge, ...] = ()
    inputs: tuple[tuple[int, str], ...] = ()
    outputs: tuple[tuple[int, str], ...] = ()
    modules: tuple[ModuleInfo, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def opened(self) -> bool:
        """Whether the backward graph was recovered (False: only `notes` say why not)."""
        return bool(self.nodes)


def region_to_dict(r: CompiledRegion) -> dict[str, Any]:
    """A JSON-ready dict of a region; `region_from_dict` reads it back exactly."""
    return {
        "node": r.node,
        "name": r.name,
        "nodes": [node_to_dict(n) for n in r.nodes],
        "edges": [edge_to_list(e) for e in r.edges],
        "inputs": [list(p) for p in r.inputs],
        "outputs": [list(p) for p in r.outputs],
        "modules": [[m.name, m.type] for m in r.modules],
        "notes": list(r.notes),
    }


def region_from_dict(d: dict[str, Any]) -> CompiledRegion:
    """Read a region written by `region_to_dict`.

    >>> r = CompiledRegion("n1", "[compiled region 1]", notes=("not opened",))
    >>> region_from_dict(region_to_dict(r)) == r
    True
    """
    return CompiledRegion(
        node=d["node"],
        name=d["name"],
        nodes=tuple(node_from_dict(n) for n in d.get("nodes", ())),
        edges=tuple(edge_from_list(e) for e in d.get("edges", ())),
        inputs=tuple((i, n) for i, n in d.get("inputs", ())),  # types checked by model.validation
        outputs=tuple((i, n) for i, n in d.get("outputs", ())),
        modules=tuple(ModuleInfo(name, kind) for name, kind in d.get("modules", ())),
        notes=tuple(d.get("notes", ())),
    )
