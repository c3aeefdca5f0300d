"""`Graph.rank` in the graph's JSON: kept exactly by both forms, refused with the field named when malformed,
absent from (and not needed by) older files."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from graphviz_app.errors import SchemaError
from graphviz_app.model import Graph, Node, NodeKind, RankInfo, to_compact
from graphviz_app.model.ranks import CollectiveEvent, FsdpUnit

HOSTILE = "<img src=x onerror=alert(1)>"


def _graph(info: RankInfo | None) -> Graph:
    return Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MmBackward0", module=HOSTILE)),
                 (), rank=info)


INFO = RankInfo(1, 2, "FSDP2",
                (CollectiveEvent("_allgather_base_", 4096, "forward", 8192),
                 CollectiveEvent(HOSTILE, 2048, "backward", 9000, "n1")),
                (FsdpUnit(HOSTILE, (f"{HOSTILE}.weight", "b"), (1024, 8), 1032, 1040, 516, 1040, True),))


def test_a_rank_is_kept_exactly_by_json_the_compact_form_and_pickle() -> None:
    g = _graph(INFO)
    assert Graph.from_json(g.to_json()) == g
    assert Graph.from_dict(json.loads(json.dumps(to_compact(g)))) == g
    assert pickle.loads(pickle.dumps(g)) == g
    assert json.loads(g.to_json())["rank"]["collectives"][1]["op"] == HOSTILE  # text, as given


def test_a_graph_without_a_rank_writes_none_and_older_files_still_load() -> None:
    g = _graph(None)
    assert "rank" not in g.to_dict() and "rank" not in to_compact(g)
    assert Graph.from_dict({"schema": 1, "nodes": [{"id": "n0", "kind": "output", "name": "output"}],
                            "edges": []}).rank is None


def _broken(change: Any) -> dict[str, Any]:
    data = _graph(INFO).to_dict()
    change(data["rank"])
    return data


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r.update(extra=1), r"rank has unknown field\(s\) extra"),
    (lambda r: r.pop("strategy"), r"rank lacks the field\(s\) strategy"),
    (lambda r: r["collectives"][1].update(node="n9"), r"rank\.collectives\[1\]\.node: no node has the id 'n9'"),
    (lambda r: r["collectives"][0].update(phase="later"), r"rank\.collectives\[0\]\.phase .*expected one of forward"),
    (lambda r: r["collectives"][0].update(bytes=-1), r"rank\.collectives\[0\]\.bytes .*a whole number >= 0"),
    (lambda r: r["units"][0].update(param_bytes=[1]), r"rank\.units\[0\]\.param_bytes: 1 sizes for 2 parameters"),
    (lambda r: r["units"][0].update(params="w"), r"rank\.units\[0\]\.params .*expected a list of text"),
    (lambda r: r.update(units={}), r"rank\.units must be a list of objects"),
    (lambda r: r.update(rank=2), r"rank\.rank: rank 2 is not below world_size 2"),
    (lambda r: r.update(world_size=0), r"rank\.world_size .*a whole number >= 1"),
    (lambda r: r.update(grads_in_buckets="no"), r"rank\.grads_in_buckets .*true or false"),
])
def test_a_malformed_rank_is_refused_naming_the_field(change: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        Graph.from_dict(_broken(change))


def test_a_rank_that_is_not_an_object_is_refused() -> None:
    data = _graph(None).to_dict()
    data["rank"] = [1, 2]
    with pytest.raises(SchemaError, match="rank must be an object, found list"):
        Graph.from_dict(data)
