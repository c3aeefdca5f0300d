"""The page's layout budget under Streamlit's AppTest: a big program shows part of its graph and says so."""

from __future__ import annotations

import pytest
from web_support import new_app, page_text, shown_svg

# 1,000 iterations of 10 ops: 10,000 ops (15,000 nodes with saved tensors), all traced at the node limit 20,000.
TEN_THOUSAND_OPS = (
    "h = torch.ones(3, requires_grad=True)\n"
    "for i in range(1000):\n"
    "    h = ((((h * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4\n"
    "h.sum()\n"
)


@pytest.mark.slow  # 10,000 ops run, traced and cut down
def test_a_10000_op_program_shows_the_part_nearest_the_output_with_a_note_not_a_timeout() -> None:
    at = new_app({"program": TEN_THOUSAND_OPS, "max_nodes": "20000"})
    assert not at.exception
    assert not at.error  # no "took over N s" layout timeout
    text = page_text(at)
    assert "Showing the 1,500 nodes nearest the output of 15,003: 13,503 farther back are hidden" in text
    assert "lower the node limit" in text
    svg = shown_svg(at)
    assert svg is not None and svg.count('class="node"') <= 1501  # the drawn part, and the legend
    assert "SumBackward0" in svg  # the output end is the part shown


def test_a_module_box_opened_by_link_shows_its_ops_and_its_close_button_closes_it(monkeypatch) -> None:  # noqa: ANN001
    """The page's module path with a made graph and the real collapse.

    tests/web/test_web_viewer.py clicks a real one.
    """
    from dataclasses import replace

    from test_web_view import layered_chain

    from graphviz_app.web import service
    from graphviz_app.web.worker import drawing

    graph = layered_chain(6)  # 481 nodes; 12 leaf modules of 40 ops each
    real = service.analyze

    def with_modules(runner, program, options):  # noqa: ANN001, ANN202
        found = real(runner, program, options)
        return replace(found, graph_json=graph.to_json(), drawn=drawing.draw(graph, rankdir=options.rankdir))

    def draw_here(runner, graph_json, rankdir, expanded, **view):  # noqa: ANN001, ANN003, ANN202
        return drawing.draw(graph, rankdir=rankdir, expanded=frozenset(expanded), **view)

    monkeypatch.setattr(service, "analyze", with_modules)
    monkeypatch.setattr(service, "draw", draw_here)
    program = "m = torch.ones(2, requires_grad=True)\n(m * 3).sum()  # module path probe"
    closed = new_app({"program": program})
    assert "Module view, level 2: click a 3-D box to open it." in page_text(closed)
    assert shown_svg(closed).count('class="node"') == 13 + 1  # 12 boxes, the output, the legend
    opened = new_app({"program": program, "expand": "layers.2.attn"})
    assert not opened.exception and not opened.error
    assert shown_svg(opened).count('class="node"') == 13 - 1 + 40 + 1
    assert dict(opened.query_params)["expand"] in ("layers.2.attn", ["layers.2.attn"])
    opened.button(key="close-layers.2.attn").click().run()
    assert shown_svg(opened).count('class="node"') == 13 + 1
    assert "expand" not in dict(opened.query_params)
