"""record(): source lines, nesting, and nothing left behind (hooks, modes, tensors)."""

from __future__ import annotations

import gc
import importlib.util
import inspect
import textwrap
import threading
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.modules import module as nn_module

from graphviz_app import record, trace
from graphviz_app.errors import TraceError
from graphviz_app.model import Graph, NodeKind

MODEL_SOURCE = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            h = self.fc(x)
            return torch.tanh(h) * 3
    """
)


def _import_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hooks_and_modes() -> tuple[int, int, int, int]:
    return (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_forward_hooks),
        len(nn_module._global_forward_hooks_always_called),
        torch._C._len_torch_function_stack(),
    )


def test_ops_carry_the_file_and_line_of_the_user_call(tmp_path: Path) -> None:
    path = tmp_path / "user_model.py"
    path.write_text(MODEL_SOURCE, encoding="utf-8")
    model = _import_file(path).Net()
    with record(model):
        out = model(torch.randn(4, 3)).sum()
    ops = {n.name: n for n in trace(out, model).of_kind(NodeKind.OP)}
    # F.linear's internal TBackward0 gets the line of the call too. The file is in no package and
    # under no sys.path folder, so its full path is what tells it apart.
    assert ops["AddmmBackward0"].source == f"{path}:11 in forward"
    assert ops["TBackward0"].source == f"{path}:11 in forward"
    assert ops["AddmmBackward0"].module == "fc"
    assert ops["TanhBackward0"].source == f"{path}:12 in forward"
    assert ops["MulBackward0"].source == f"{path}:12 in forward"
    assert ops["MulBackward0"].module == ""
    assert ops["SumBackward0"].source.startswith(f"{Path(__file__).name}:")
    assert ops["SumBackward0"].module is None  # made outside any module's forward


def test_record_leaves_no_hook_or_mode_behind() -> None:
    before = _hooks_and_modes()
    model = nn.Linear(2, 2)
    with record(model):
        assert _hooks_and_modes() != before
        model(torch.randn(1, 2))
    assert _hooks_and_modes() == before
    after = (model(torch.randn(1, 2)) * 2).grad_fn
    assert after.metadata == {}  # nodes made after the block are not tagged


class _Fails(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.fc(x)
        raise ValueError("forward failed on purpose")


def test_record_restores_everything_when_forward_raises() -> None:
    before = _hooks_and_modes()
    model = _Fails()
    with pytest.raises(ValueError, match="forward failed on purpose"), record(model):
        model(torch.randn(1, 2))
    assert _hooks_and_modes() == before


def test_a_caught_error_inside_the_block_leaves_the_module_stack_right() -> None:
    model = nn.ModuleDict({"bad": _Fails(), "good": nn.Linear(2, 2)})
    with record(model):
        with pytest.raises(ValueError, match="on purpose"):
            model["bad"](torch.randn(1, 2))
        out = (model["good"](torch.randn(1, 2)) * 2).sum()
    ops = {n.name: n.module for n in trace(out, model).of_kind(NodeKind.OP)}
    assert ops == {"SumBackward0": None, "MulBackward0": None, "AddmmBackward0": "good", "TBackward0": "good"}


def test_nested_record_names_by_the_innermost_model_and_keeps_recording() -> None:
    inner = nn.Sequential(nn.Linear(2, 2))
    outer = nn.Sequential(inner, nn.ReLU())
    before = _hooks_and_modes()
    with record(outer):
        with record(inner):
            h = outer[0](torch.randn(1, 2))
        assert _hooks_and_modes() != before  # the outer block still records
        out = outer[1](h).sum()
    assert _hooks_and_modes() == before
    ops = {n.name: n.module for n in trace(out, outer).of_kind(NodeKind.OP)}
    assert ops == {"SumBackward0": None, "ReluBackward0": "1", "AddmmBackward0": "0", "TBackward0": "0"}


def test_other_threads_are_not_recorded() -> None:
    model = nn.Linear(2, 2)
    seen: list[dict[str, Any]] = []

    def elsewhere() -> None:
        seen.append(dict(model(torch.randn(1, 2)).grad_fn.metadata))

    with record(model):
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    assert seen == [{}]


def test_graph_holds_no_tensor_and_tags_hold_no_module() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    with record(model):
        out = model(torch.randn(2, 3)).sum()
    graph = trace(out, model)
    out_ref, model_ref = weakref.ref(out), weakref.ref(model)
    del out, model
    gc.collect()
    assert out_ref() is None and model_ref() is None
    assert Graph.from_json(graph.to_json()) == graph  # module and source survive JSON
    assert {n.module for n in graph.of_kind(NodeKind.OP)} == {None, "0", "1"}


def test_record_refuses_what_is_not_a_module() -> None:
    with pytest.raises(TraceError, match=r"record\(\) expects the model, an nn.Module, got a dict"):
        record({"w": torch.ones(1)})  # type: ignore[arg-type]


def test_backward_inside_record_recomputes_checkpoints_and_keeps_recording() -> None:
    from torch.utils.checkpoint import checkpoint

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
            self.last = nn.Linear(4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.last(checkpoint(self.inner, x, use_reentrant=False)).sum()

    model = Net()
    with record(model):
        model(torch.randn(3, 4)).backward()  # recomputes inner's forward under the hooks
        out = model(torch.randn(3, 4))
    assert model.inner[0].weight.grad is not None
    ops = sorted((n.module, n.name) for n in trace(out, model).of_kind(NodeKind.OP) if n.module)
    assert ops == [
        ("inner.0", "AddmmBackward0"), ("inner.0", "TBackward0"), ("inner.1", "TanhBackward0"),
        ("last", "AddmmBackward0"), ("last", "TBackward0"),
    ]  # fmt: skip


def test_ops_returning_named_tuples_get_their_own_line() -> None:
    x = torch.randn(3, 4, requires_grad=True)
    here = inspect.currentframe()
    assert here is not None
    with record():
        line = here.f_lineno + 1
        values = x.max(-1).values  # torch.return_types.max, a tuple subclass
        out = values.exp()
    where = f"{Path(__file__).name}:{{}} in {here.f_code.co_name}"
    assert values.grad_fn.metadata["graphviz_app.source"] == where.format(line)
    assert out.grad_fn.metadata["graphviz_app.source"] == where.format(line + 1)


def test_record_works_where_torch_has_no_sequence_number_peek(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphviz_app.tracing.torch_internals import nodes_and_tensors as _autograd

    monkeypatch.setattr(_autograd, "_peek_sequence_nr", None)  # a torch without _get_sequence_nr
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    before = (torch.randn(1, 2, requires_grad=True) * 2).exp()  # must stay unclaimed
    with record(model):
        out = model(before).sum()
    ops = sorted((n.name, n.module or "-") for n in trace(out, model).of_kind(NodeKind.OP))
    assert ops == [
        ("AddmmBackward0", "0"), ("ExpBackward0", "-"), ("MulBackward0", "-"),
        ("SumBackward0", "-"), ("TBackward0", "0"), ("TanhBackward0", "1"),
    ]  # fmt: skip
