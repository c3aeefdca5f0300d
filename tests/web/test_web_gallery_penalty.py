"""The gallery's gradient penalty: the page draws its gradient of a gradient with both orders, coloured by order."""

from __future__ import annotations

import base64
import gzip
import json

from graphviz_app.jobs.page import analysis_job, check_job
from graphviz_app.model import Graph, NodeKind
from graphviz_app.web.gallery import example
from graphviz_app.web.results import Analysis, GradientCheck
from graphviz_app.web.urlstate import Options

TOL = (1e-6, 1e-5, 1e-3)


def test_the_page_draws_both_orders_and_offers_them_as_a_colouring() -> None:
    result = analysis_job(example("penalty").program, Options())
    assert isinstance(result, Analysis), result
    data = json.loads(gzip.decompress(base64.b64decode(result.viewer)))
    graph = Graph.from_dict(data["graph"])
    ops = {i: n for i, n in enumerate(graph.nodes) if n.kind is NodeKind.OP}
    by_order: dict[int, set[str]] = {}
    for n in ops.values():
        by_order.setdefault(n.order or 0, set()).add(n.name)
    assert sorted(by_order) == [0, 1, 2]
    assert "TanhBackwardBackward0" in by_order[1] and "TanhBackwardBackward0" in by_order[2]
    colouring = next(o for o in data["overlays"] if o["key"] == "order")
    assert all(colouring["node"][i] == (n.order or 0) for i, n in ops.items())  # each op coloured by its order


def test_the_hint_is_the_third_derivative() -> None:
    ex = example("penalty")
    right = check_job(ex.program, Options(), ex.wrt, ex.hint, TOL)
    assert isinstance(right, GradientCheck) and right.passed
    wrong = check_job(ex.program, Options(), ex.wrt, ex.hint.replace("14", "13"), TOL)
    assert isinstance(wrong, GradientCheck) and not wrong.passed


def test_the_pages_downloads_colour_the_penalty_by_order() -> None:
    from graphviz_app.drawing.order_style import ORDER_FILLS
    from graphviz_app.jobs.pictures import svg_job
    from graphviz_app.web.service import dot

    result = analysis_job(example("penalty").program, Options())
    assert isinstance(result, Analysis), result
    svg = svg_job(result.graph_json, "TB")
    assert isinstance(svg, bytes), svg
    text = svg.decode()
    assert "order of derivative" in text and "order 2 of" in text
    assert ORDER_FILLS[0] in text and ORDER_FILLS[1] in text  # the first backward's fill and the second's
    assert "order 2 of" in dot(result.graph_json, "TB")
