"""What a compiled region cannot show is said, for every way torch can keep its backward graph out of reach."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from graphviz_app.analysis.regions import show_regions
from graphviz_app.model import Edge, Graph, Node, NodeKind
from graphviz_app.tracing import torch_internals
from graphviz_app.tracing.compiled import COMPILED_NODE, add_regions


def _graph_module() -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    t = g.placeholder("tangents_1")
    g.output((g.call_function(torch.ops.aten.neg.default, (t,)),))
    return torch.fx.GraphModule({}, g)


def _node(**forward_cls: Any) -> Any:
    """A stand-in for a CompiledFunctionBackward node whose `_forward_cls` has the given attributes."""
    return SimpleNamespace(_forward_cls=type("CompiledFunction", (), forward_cls))


def _load_fails() -> Any:
    raise OSError("cache entry truncated")


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (SimpleNamespace(), r"SimpleNamespace has no _forward_cls in torch .*: cannot reach its graph"),
        (_node(), r"no _lazy_backward_info in torch .*keeps the backward graph elsewhere "
                  r"\(graphviz_app\.tracing\.torch_internals needs updating\)"),
        (_node(_lazy_backward_info=None), r"without keeping its graph .*enable_autograd_cache = False"),
        (_node(_lazy_backward_info=SimpleNamespace(bw_module=None, bw_module_fn=_load_fails)),
         r"the cached backward graph did not load: OSError: cache entry truncated"),
        (_node(_lazy_backward_info=SimpleNamespace(bw_module="compiled code")),
         r"_lazy_backward_info holds no bw_module GraphModule in torch .* \(found str\)"),
    ],
    ids=["no forward class", "moved", "not kept", "cache load fails", "not a graph"],
)
def test_each_unreachable_graph_is_refused_with_its_reason_and_the_box_says_it(fn: Any, reason: str) -> None:
    module, why = torch_internals.compiled_backward_graph(fn)
    assert module is None and why is not None
    assert re.search(reason, why), why
    graph = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, COMPILED_NODE)), (Edge("n1", "n0"),))
    (region,) = add_regions(graph, {"n1": fn}).regions
    assert not region.opened and region.notes == (f"[compiled region 1] could not be opened: {why}",)
    box = show_regions(add_regions(graph, {"n1": fn}), expanded={region.name}).node("n1")
    assert box.kind is NodeKind.MODULE and dict(box.attrs)["not opened"] == region.notes[0]  # on the closed box


def test_a_graph_loaded_from_the_compile_cache_is_opened() -> None:
    module = _graph_module()
    fn = _node(_lazy_backward_info=SimpleNamespace(bw_module=None, bw_module_fn=lambda: module))
    assert torch_internals.compiled_backward_graph(fn) == (module, None)
    graph = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, COMPILED_NODE)), (Edge("n1", "n0"),))
    (region,) = add_regions(graph, {"n1": fn}).regions
    assert region.opened and [n.name for n in region.nodes] == ["aten.neg.default"]
