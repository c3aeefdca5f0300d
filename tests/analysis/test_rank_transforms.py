"""A rank's collectives stay at nodes the graph has after a transformation: folded into a box, or an opened region.

Otherwise the JSON written from the folded graph is refused when read back (a collective naming no node).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from graphviz_app import trace_model
from graphviz_app.analysis.collapse import collapse
from graphviz_app.analysis.regions import show_regions
from graphviz_app.model import CompiledRegion, Edge, Graph, Node, NodeKind
from graphviz_app.model.ranks import CollectiveEvent, RankInfo


def _rank_graph() -> tuple[Graph, Node]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    graph = trace_model(model, torch.randn(2, 4))
    op = next(n for n in graph.nodes if n.kind is NodeKind.OP and n.module == "2")
    events = (CollectiveEvent("all_reduce", 64, "backward", 100, op.id), CollectiveEvent("broadcast", 8, "forward", 0))
    return dataclasses.replace(graph, rank=RankInfo(0, 2, "DDP", events)), op


def test_a_collective_at_a_folded_node_moves_to_its_box_and_the_json_reads_back() -> None:
    graph, op = _rank_graph()
    folded = collapse(graph, depth=0)
    box = next(n for n in folded.nodes if n.kind is NodeKind.MODULE and n.module == "2")
    assert op.id not in {n.id for n in folded.nodes}
    assert folded.rank is not None
    assert [c.node for c in folded.rank.collectives] == [box.id, None]
    again = Graph.from_json(folded.to_json())
    assert again.rank == folded.rank


def test_a_transformation_that_folds_nothing_keeps_the_rank_as_it_was() -> None:
    graph, _ = _rank_graph()
    assert collapse(graph, depth=5).rank == graph.rank


def test_a_collective_at_an_opened_region_moves_to_the_op_that_receives_its_gradient() -> None:
    region = CompiledRegion("n1", "[compiled region 1]",
                            (Node("n1/0", NodeKind.OP, "aten.mul.Tensor", module="[compiled region 1]"),),
                            outputs=((0, "n1/0"),))
    graph = Graph((Node("n0", NodeKind.OUTPUT, "out"), Node("n1", NodeKind.OP, "CompiledFunctionBackward")),
                  (Edge("n1", "n0"),), regions=(region,),
                  rank=RankInfo(1, 2, "FSDP2", (CollectiveEvent("_allgather_base_", 32, "backward", 64, "n1"),)))
    opened = show_regions(graph, expanded={"[compiled region 1]"})
    assert opened.rank is not None and opened.rank.collectives[0].node == "n1/0"
    assert Graph.from_json(opened.to_json()).rank == opened.rank
    closed = show_regions(graph)
    assert closed.rank == graph.rank  # the region's node is still drawn
