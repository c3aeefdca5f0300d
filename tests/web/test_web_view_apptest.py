"""The page's layout budget under Streamlit's AppTest: a big program shows part of its graph and says so."""

from __future__ import annotations

from web_support import new_app, page_text, shown_svg

# 1,000 iterations of 10 ops: 10,000 ops, 7,500 traced nodes at the node limit of 5,000 ops.
TEN_THOUSAND_OPS = (
    "h = torch.ones(3, requires_grad=True)\n"
    "for i in range(1000):\n"
    "    h = ((((h * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4) * 1.0001 + 1e-4\n"
    "h.sum()\n"
)


def test_a_10000_op_program_shows_the_part_nearest_the_output_with_a_note_not_a_timeout() -> None:
    at = new_app({"program": TEN_THOUSAND_OPS, "max_nodes": "5000"})
    assert not at.exception
    assert not at.error  # no "took over N s" layout timeout
    text = page_text(at)
    assert "Showing the 1,500 nodes nearest the output of 7,500: 6,000 farther back are hidden" in text
    assert "lower the node limit" in text
    svg = shown_svg(at)
    assert svg is not None and svg.count('class="node"') <= 1501  # the drawn part, and the legend
    assert "SumBackward0" in svg  # the output end is the part shown
