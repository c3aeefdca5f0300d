"""A rank's step in the viewer: its collectives marked on the memory chart and in the details of the node that
issued them, DTensor layouts in the details, DDP's buckets written under the chart; names as text.

A graph traced inside a rank carries the rank (`Graph.rank`), so `save(graph, "rank0.html")` from inside a real
gloo rank, and its `.json` rendered later, mark that rank's collectives with nothing more passed."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import dist_jobs
import pytest
import torch
from viewer_support import HOSTILE, open_viewer

from graphviz_app import save
from graphviz_app.analysis.distributed import CollectiveEvent, RankMemory
from graphviz_app.cli.commands import main
from graphviz_app.distributed import rank_timeline
from graphviz_app.memory import measure
from graphviz_app.model import Graph, NodeKind, RankInfo, human_bytes
from graphviz_app.tracing.distributed.fake_cluster import fake_cluster
from graphviz_app.tracing.distributed.rank_graph import RankGraph, trace_rank_step
from graphviz_app.tracing.distributed.rank_step import rank_step
from graphviz_app.tracing.distributed.ranks import call_ranks
from graphviz_app.viewer.html import viewer_html
from graphviz_app.viewer.memory import rank_lines
from graphviz_app.viewer.payload import payload

JOBS = str(Path(dist_jobs.__file__))


@pytest.fixture(scope="module")
def fsdp_rank() -> RankGraph:
    with fake_cluster(4):
        return trace_rank_step(rank_step(dist_jobs.job("fsdp")()), rank=0, world_size=4)


@pytest.fixture(scope="module")
def gloo_ranks() -> list[dict[str, Any]]:
    """Two real gloo ranks of an FSDP2 job (a block named `HOSTILE_BLOCK`), each saving its own viewer and JSON."""
    return call_ranks(f"{JOBS}:fsdp_hostile", per_rank="dist_jobs:saved_rank_viewer", nprocs=2, timeout_s=400)


def _payload_of(html: str) -> dict[str, Any]:
    found = re.search(r'id="gv-payload">([^<]*)<', html)
    assert found is not None, "no payload in the page"
    return json.loads(gzip.decompress(base64.b64decode(found[1])))


def _check_marks(live: dict[str, Any], collectives: list[tuple[str, int, str, str | None]],
                 index: dict[str, int]) -> None:
    """Every collective marked once, in order; a backward one at the step and node that issued it."""
    assert [(e["op"], e["bytes"], e["phase"]) for e in live["events"]] == [c[:3] for c in collectives]
    for e, (_, _, phase, node) in zip(live["events"], collectives, strict=True):
        if node is not None and phase == "backward":
            assert e["node"] == index[node] and live["node_step"][e["node"]] == e["step"]


def test_the_payload_marks_every_collective_at_the_step_of_the_node_that_issued_it(fsdp_rank: RankGraph) -> None:
    data = payload(fsdp_rank.graph, rank=fsdp_rank.memory, units=fsdp_rank.units)
    live = data["series"][0]
    events = live["events"]
    index = {n.id: i for i, n in enumerate(fsdp_rank.graph.nodes)}
    assert [(e["op"], e["bytes"], e["phase"]) for e in events] == [
        (c.op, c.bytes, c.phase) for c in fsdp_rank.memory.collectives]
    scatters = [e for e in events if e["op"] == "_reduce_scatter_base_"]
    assert len(scatters) == 3
    for e, c in zip(events, fsdp_rank.memory.collectives, strict=True):
        if c.node is not None:  # at the step its node ran
            assert e["node"] == index[c.node] and live["node_step"][e["node"]] == e["step"]
        else:
            assert e["step"] == 0 and "node" not in e
    assert live["notes"][0].startswith("rank 0 of 4 (FSDP2): total ")
    assert "3 _reduce_scatter_base_" in live["notes"][0]
    assert "sharding" in data["graph"]["tensors"]


def test_a_rank_s_graph_carries_its_collectives_and_units_through_json_into_the_viewer(fsdp_rank: RankGraph) -> None:
    graph = fsdp_rank.graph
    assert graph.rank is not None and (graph.rank.rank, graph.rank.world_size, graph.rank.strategy) == (0, 4, "FSDP2")
    assert graph.rank.collectives == fsdp_rank.memory.collectives and graph.rank.units == fsdp_rank.units
    loaded = Graph.from_json(graph.to_json())
    assert loaded == graph  # kept exactly
    told = payload(graph, rank=fsdp_rank.memory, units=fsdp_rank.units)["series"][0]
    carried = payload(loaded)["series"][0]  # nothing passed but the graph
    assert carried["events"] == told["events"] and carried["values"] == told["values"]
    assert carried["notes"][0].startswith("rank 0 of 4 (FSDP2): collectives: ")
    assert "3 _reduce_scatter_base_" in carried["notes"][0]


@pytest.mark.slow  # two fresh processes that import torch
def test_save_inside_each_real_gloo_rank_marks_that_rank_s_collectives(gloo_ranks: list[dict[str, Any]],
                                                                       tmp_path: Path) -> None:
    assert [r["rank"] for r in gloo_ranks] == [0, 1]
    for r, saved in enumerate(gloo_ranks):
        graph = Graph.from_json(saved["json"])
        index = {n.id: i for i, n in enumerate(graph.nodes)}
        ops = [c[0] for c in saved["collectives"]]
        assert ops.count("_reduce_scatter_base_") == 3 and "_allgather_base_" in ops, ops
        ops_bytes = saved["collectives"][0][1]
        live = _payload_of(saved["html"])["series"][0]
        _check_marks(live, saved["collectives"], index)
        assert live["notes"][0].startswith(f"rank {r} of 2 (FSDP2): collectives: ")
        # the JSON, rendered later by the CLI, marks the same
        (tmp_path / f"rank{r}.json").write_text(saved["json"], encoding="utf-8")
        out = tmp_path / f"later{r}.html"
        assert main(["render", str(tmp_path / f"rank{r}.json"), "-o", str(out)]) == 0
        assert _payload_of(out.read_text(encoding="utf-8"))["series"][0]["events"] == live["events"]
        # trace_model's graph in the rank: the forward's all-gathers, one per unit with parameters
        traced = _payload_of(saved["traced_html"])["series"][0]
        assert [c[:3] for c in saved["traced_collectives"]] == [("_allgather_base_", ops_bytes, "forward")] * 3
        _check_marks(traced, saved["traced_collectives"], {})
        assert traced["notes"][0] == f"rank {r} of 2 (FSDP2): collectives: 3 _allgather_base_"
        # the module name stays text: kept verbatim in the graph and in its FSDP unit
        assert graph.rank is not None and dist_jobs.HOSTILE_BLOCK in {u.name for u in graph.rank.units}
        assert any(n.module == f"{dist_jobs.HOSTILE_BLOCK}.up" for n in graph.nodes)


@pytest.mark.slow
@pytest.mark.browser
def test_a_real_rank_s_saved_viewer_shows_its_marks_and_its_hostile_module_name_as_text(
        page, gloo_ranks: list[dict[str, Any]], tmp_path: Path) -> None:  # noqa: ANN001
    saved = gloo_ranks[1]
    path = tmp_path / "rank1.html"
    path.write_text(saved["html"], encoding="utf-8")
    open_viewer(page, path)
    assert page.get_by_test_id("viewer-chart-collective").count() == len(saved["collectives"])
    assert "rank 1 of 2 (FSDP2)" in page.get_by_test_id("viewer-chart").inner_text()
    assert dist_jobs.HOSTILE_BLOCK in page.locator("body").inner_text()  # the block's name, drawn as text
    assert page.dialogs == [] and page.errors == [] and page.evaluate("window.__pwned") is None


def test_a_ddp_rank_s_graph_with_bucket_views_is_replayed_so_in_the_viewer() -> None:
    m = measure(dist_jobs.plain_model(1), torch.randn(dist_jobs.BATCH, dist_jobs.SEQ, dist_jobs.D))
    graph = dataclasses.replace(m.graph, rank=RankInfo(1, 2, "DDP", grads_in_buckets=True))
    live = payload(graph)["series"][0]
    expected = rank_timeline(graph, grads_in_buckets=True)  # gradients dropped once copied into their bucket
    assert live["values"] == [s.peak for s in expected.steps]
    assert live["values"] != [s.peak for s in rank_timeline(graph).steps]
    assert live["notes"][0] == "rank 1 of 2 (DDP): collectives: none"
    assert any("gradient_as_bucket_view" in n for n in live["notes"])


def test_ddp_buckets_get_a_line_under_the_chart() -> None:
    ddp = RankMemory(1, 2, "DDP", 1000, 2048, 2048, 0, 0, 64, buckets_bytes=2048,
                     collectives=(CollectiveEvent("allreduce_", 2048, "backward", 3000, None),),
                     notes=("DDP: 1 gradient bucket(s) of 2048 bytes (bucket_cap_mb=25); "
                            "gradient_as_bucket_view=False",))
    lines = rank_lines(ddp)
    assert lines[0] == (f"rank 1 of 2 (DDP): total {human_bytes(ddp.total_bytes)} (step peak 1000 B, parameters "
                        "2.0 KiB); collectives: 1 allreduce_")
    assert lines[1] == f"DDP gradient buckets: {human_bytes(2048)}" and lines[2].startswith("DDP: 1 gradient bucket")


@pytest.mark.browser
def test_the_chart_marks_collectives_and_a_node_s_details_list_those_it_issued(page, fsdp_rank: RankGraph,  # noqa: ANN001
                                                                               tmp_path: Path) -> None:
    path = tmp_path / "rank0.html"
    # a hostile op name: it must arrive as text in the mark's title and in the details
    events = tuple(dataclasses.replace(e, op=HOSTILE[1]) if i == 1 else e
                   for i, e in enumerate(fsdp_rank.memory.collectives))
    memory = dataclasses.replace(fsdp_rank.memory, collectives=events)
    path.write_text(viewer_html(fsdp_rank.graph, rank=memory, units=fsdp_rank.units), encoding="utf-8")
    open_viewer(page, path)
    marks = page.get_by_test_id("viewer-chart-collective")
    assert marks.count() == len(events)
    assert page.get_by_test_id("viewer-chart-collectives").inner_text().startswith(f"{len(events)} collective(s)")
    titles = page.eval_on_selector_all("[data-testid=viewer-chart-collective] title",
                                       "els => els.map(e => e.textContent)")
    kib = f"{events[0].bytes / 1024:.1f}"[:-1]  # the viewer rounds halves up, Python to even: the rest
    assert any(re.fullmatch(rf"_allgather_base_ {kib}\d KiB \(forward\) at step 0", t) for t in titles), titles
    issued = next(i for i, e in enumerate(events) if e.node is not None and e.op == "_reduce_scatter_base_")
    marks.nth(issued).dispatch_event("click")
    details = page.get_by_test_id("viewer-details").inner_text()
    assert re.search(r"collective issued\t_reduce_scatter_base_ [\d.]+ KiB \(backward\)", details), details
    assert any(t.startswith(HOSTILE[1]) for t in titles)  # the op's name, as text
    assert "rank 0 of 4 (FSDP2)" in page.get_by_test_id("viewer-chart").inner_text()
    assert page.dialogs == [] and page.errors == [] and page.evaluate("window.__pwned") is None


@pytest.mark.browser
def test_collectives_issued_while_one_node_runs_are_each_visible_and_hoverable(page, fsdp_rank: RankGraph,  # noqa: ANN001
                                                                               tmp_path: Path) -> None:
    path = save(fsdp_rank.graph, tmp_path / "rank0.html")  # the graph's own rank: nothing else passed
    events = payload(fsdp_rank.graph)["series"][0]["events"]
    shared = {step: n for step, n in Counter(e["step"] for e in events).items() if n > 1}
    # FSDP2: the forward's all-gathers at step 0, and a backward node issuing a reduce-scatter and an all-gather
    assert shared.get(0, 0) >= 3 and any(step > 0 for step in shared), shared
    open_viewer(page, path)
    for step, count in shared.items():
        marks = page.locator(f"[data-testid=viewer-chart-collective][data-step='{step}']")
        assert marks.count() == count
        boxes = [marks.nth(j).locator("rect").bounding_box() for j in range(count)]
        for j, a in enumerate(boxes):
            assert a is not None and a["width"] >= 6 and a["height"] >= 6
            for b in boxes[j + 1:]:  # no two share a pixel
                assert b is not None
                assert (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"] or
                        a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"]), (step, a, b)
        for j, box in enumerate(boxes):
            assert box is not None
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            mark = marks.nth(j)
            on_top = page.evaluate("([x, y]) => document.elementFromPoint(x, y)?.closest('[data-mark]')"
                                   "?.getAttribute('data-mark')", [x, y])
            assert on_top == mark.get_attribute("data-mark"), (step, j)  # nothing covers it
            page.mouse.move(x, y)
            title = mark.locator("title").text_content()
            assert title is not None and title in page.get_by_test_id("viewer-chart-hover").inner_text()
    assert page.errors == []


@pytest.mark.browser
def test_a_dtensor_parameter_s_details_show_its_layout(page, tmp_path: Path) -> None:  # noqa: ANN001
    with fake_cluster(2):
        traced = trace_rank_step(rank_step(dist_jobs.job("tp")()), rank=0, world_size=2)
    path = tmp_path / "tp.html"
    path.write_text(viewer_html(traced.graph, rank=traced.memory), encoding="utf-8")
    leaf = next(n for n in traced.graph.nodes if n.kind is NodeKind.LEAF and n.tensor and n.tensor.sharding)
    assert leaf.tensor is not None
    open_viewer(page, path, f"#sel={leaf.id}")
    details = page.get_by_test_id("viewer-details").inner_text()
    assert f"sharding\t{leaf.tensor.sharding}" in details, details
    assert page.errors == []
