"""check_model's options, records and guarantees: budget, patterns, progress, JSON, state, modes, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from mc_models import (
    ConvNet,
    ExpFlatSecond,
    ExpWrongJvp,
    IntegerOnly,
    MissingTerm,
    Through,
    TiedLM,
    TinyTransformer,
    Twice,
    Unseeded,
    WrongFactor,
    WrongTranspose,
    def_line,
)
from torch import nn

from graphviz_app.analysis.model_check import ModelCheck, Status
from graphviz_app.errors import ModelCheckError
from graphviz_app.tracing.model_check import check_model


@pytest.mark.parametrize("fn, make_inputs", [
    (WrongFactor, lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),)),
    (MissingTerm, lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),)),
    (WrongTranspose, lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),
                              torch.randn(4, 4, dtype=torch.float64, requires_grad=True))),
])
def test_torch_gradcheck_agrees_with_the_culprit_and_with_its_clean_surroundings(
        fn: type[torch.autograd.Function], make_inputs: Any) -> None:
    torch.manual_seed(0)
    assert not torch.autograd.gradcheck(fn.apply, make_inputs(), raise_exception=False)
    model = TinyTransformer().double()
    result = check_model(model, torch.randn(2, 5, 8, dtype=torch.float64))
    assert result.passed
    for path in ("blocks.1.attn.q", "blocks.1.ln1", "blocks.1.mix"):
        module = model.get_submodule(path)
        x = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t, m=module: m(t), (x,))


def test_units_that_cannot_be_checked_say_why_and_the_check_goes_on() -> None:
    torch.manual_seed(0)

    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.codes, self.noise, self.lin = IntegerOnly(), Unseeded(13), nn.Linear(13, 2)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            return self.lin(self.noise(self.codes(tokens)))

    result = check_model(Mixed(), torch.randint(0, 13, (3, 4)))
    by_path = {v.path: v for v in result.verdicts}
    assert by_path["codes"].status == Status.NOT_CHECKABLE
    assert by_path["codes"].reason is not None and by_path["codes"].reason.startswith("nothing to differentiate")
    assert by_path["noise"].status == Status.NOT_CHECKABLE
    assert "gave different outputs" in (by_path["noise"].reason or "")
    assert by_path["lin"].status == Status.PASSED
    assert result.passed
    assert "noise (Unseeded.forward, " in str(result)


def test_the_model_its_buffers_and_the_random_state_are_left_as_they_were() -> None:
    torch.manual_seed(0)
    model = ConvNet().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    methods = (torch.Tensor.detach, torch.Tensor.register_hook, torch.autograd.Function.__dict__["apply"])
    x = torch.randn(3, 2, 8, 8)
    rng = torch.get_rng_state()
    check_model(model, x)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng)
    assert (torch.Tensor.detach, torch.Tensor.register_hook, torch.autograd.Function.__dict__["apply"]) == methods


def test_each_call_of_a_module_called_twice_is_checked_at_its_own_inputs() -> None:
    torch.manual_seed(0)
    result = check_model(Twice(4), torch.randn(3, 4, requires_grad=True))
    calls = [v for v in result.verdicts if v.path == "lin"]
    assert [(v.call, v.calls, v.status) for v in sorted(calls, key=lambda v: v.call)] == [
        (0, 2, Status.PASSED), (1, 2, Status.PASSED)]
    assert {v.label for v in calls} == {"lin (call 1 of 2)", "lin (call 2 of 2)"}


def test_tied_parameters_are_checked_through_both_uses() -> None:
    torch.manual_seed(0)
    model = TiedLM()
    result = check_model(model, torch.randint(0, 13, (2, 5)))
    root = next(v for v in result.verdicts if v.path == "")
    assert root.status == Status.PASSED
    head = next(v for v in result.verdicts if v.path == "head")
    assert head.status == Status.PASSED and model.head.weight is model.emb.weight


def test_inputs_that_do_not_require_grad_are_not_differentiated_and_said_so() -> None:
    torch.manual_seed(0)
    result = check_model(nn.Sequential(nn.Linear(3, 3)), torch.randn(2, 3))
    first = next(v for v in result.verdicts if v.path == "0")
    assert first.status == Status.PASSED
    assert "input(s) input did not require grad in the step: not differentiated" in first.notes


def test_bfloat16_models_are_checked_in_float64_copies() -> None:
    torch.manual_seed(0)
    model = TinyTransformer(softmax=WrongFactor).to(torch.bfloat16)
    result = check_model(model, torch.randn(2, 5, 8, dtype=torch.bfloat16))
    (culprit,) = result.culprits
    assert culprit.path == "blocks.1.attn" and culprit.ratio == pytest.approx(1.02, rel=1e-6)
    assert "checked in float64 copies (the step ran in bfloat16)" in culprit.notes


def test_the_budget_stops_the_check_and_says_so() -> None:
    torch.manual_seed(0)
    result = check_model(TinyTransformer(), torch.randn(2, 5, 8), max_evaluations=60)
    assert result.budget_spent and result.evaluations >= 60
    assert result.counts()[Status.NOT_CHECKED] > 0
    assert {v.reason for v in result.verdicts if v.status == Status.NOT_CHECKED} == {"the budget ran out"}
    assert "the budget ran out" in str(result)


def test_include_and_skip_patterns_choose_the_units() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    result = check_model(TinyTransformer(softmax=WrongFactor), x, include=["blocks.1*"], skip=["*.mlp*"])
    checked = {v.path for v in result.verdicts if v.status != Status.NOT_CHECKED}
    assert checked and all(p.startswith("blocks.1") and ".mlp" not in p for p in checked)
    assert [v.path for v in result.culprits] == ["blocks.1.attn"]


def test_progress_is_reported_after_each_unit_children_before_parents() -> None:
    torch.manual_seed(0)
    seen: list[tuple[int, int, str]] = []
    result = check_model(TinyTransformer(), torch.randn(2, 5, 8), progress=lambda *a: seen.append(a))
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1))
    assert seen[-1][:2] == (len(result.verdicts), len(result.verdicts)) and seen[-1][2] == "(model)"
    depths = [v.depth for v in result.verdicts]
    assert depths == sorted(depths, reverse=True)
    assert all(v.parent is None or v.parent > k for k, v in enumerate(result.verdicts))


def test_the_json_holds_every_verdict_and_the_first_line() -> None:
    torch.manual_seed(0)
    result = check_model(TinyTransformer(softmax=WrongFactor), torch.randn(2, 5, 8))
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["passed"] is False and data["schema_version"] == 1
    assert data["first_line"] == str(result).splitlines()[0]
    assert len(data["verdicts"]) == len(result.verdicts)
    culprit = next(v for v in data["verdicts"] if v["culprit"])
    assert (culprit["path"], culprit["kind"], culprit["input"]) == ("blocks.1.attn", "function", "x input")
    assert isinstance(result, ModelCheck) and "FAILED" in repr(result)


def test_forward_mode_finds_a_wrong_jvp_the_backward_check_passes() -> None:
    torch.manual_seed(0)
    model, x = Through(4, ExpWrongJvp), torch.randn(3, 4, requires_grad=True)
    assert check_model(model, x).passed
    result = check_model(model, x, modes=("rev", "fwd"))
    (culprit,) = result.culprits
    assert (culprit.path, culprit.name, culprit.failed_check) == ("", "ExpWrongJvp.backward", "fwd")
    assert culprit.source is not None and culprit.source.endswith(f"mc_models.py:{def_line(ExpWrongJvp.backward)}")
    assert "forward mode (jvp) is 1.5 x finite differences" in str(result).splitlines()[0]


def test_second_order_finds_a_backward_that_is_not_differentiable() -> None:
    torch.manual_seed(0)
    model, x = Through(4, ExpFlatSecond), torch.randn(3, 4, requires_grad=True)
    assert check_model(model, x).passed
    result = check_model(model, x, order=2)
    (culprit,) = result.culprits
    assert (culprit.name, culprit.failed_check, culprit.checks) == ("ExpFlatSecond.backward", "rev2", ("rev", "rev2"))
    assert str(result).splitlines()[0].startswith("(model) (ExpFlatSecond.backward, ")
    assert "double backward" in str(result).splitlines()[0]


_not_a_module: Any = lambda x: x  # noqa: E731 - a function where a module belongs


@pytest.mark.parametrize("call, message", [
    (lambda: check_model(_not_a_module, torch.ones(1)), "expects an nn.Module first, got a function"),
    (lambda: check_model(nn.Linear(2, 2), torch.ones(1, 2), strategy="fast"), "strategy must be one of all, bisect"),
    (lambda: check_model(nn.Linear(2, 2), torch.ones(1, 2), kinks="ignore"), "kinks must be one of pass, warn"),
    (lambda: check_model(nn.Linear(2, 2), torch.ones(1, 2), modes=("fwd",)), "modes must be"),
    (lambda: check_model(nn.Linear(2, 2), torch.ones(1, 2), order=3), "order must be 1 or 2"),
    (lambda: check_model(nn.Linear(2, 2), torch.ones(1, 2), probes=1), "probes must be an integer of at least 2"),
    (lambda: check_model(nn.Linear(2, 2), torch.ones(1, 2), max_evaluations=0), "max_evaluations must be at least"),
    (lambda: check_model(nn.Linear(2, 2), torch.ones(1, 3)), "the model's forward raised RuntimeError"),
])
def test_bad_calls_say_what_is_wrong(call: Any, message: str) -> None:
    with pytest.raises(ModelCheckError, match=message):
        call()


def test_an_in_place_change_autograd_sees_fails_the_module_with_the_error() -> None:
    class SavedThenChanged(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.sigmoid(x)
            y.mul_(2)  # sigmoid saved y for its backward
            return y

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), SavedThenChanged())
    result = check_model(model, torch.randn(2, 3))
    (culprit,) = result.culprits
    assert culprit.path == "1" and culprit.reason is not None
    assert "backward raised RuntimeError: one of the variables needed for gradient computation" in culprit.reason
    assert str(result).startswith("1 (SavedThenChanged.forward, ")
    assert culprit.source is not None and "test_model_check_api.py:" in culprit.source


@pytest.mark.parametrize("kinks, passed", [("pass", True), ("fail", False)])
def test_max_pool_ties_after_a_relu_pass_only_under_the_kink_policy(kinks: str, passed: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2))
    result = check_model(model, torch.randn(2, 3, 8, 8, requires_grad=True), kinks=kinks)
    pool = next(v for v in result.verdicts if v.path == "1")
    assert pool.status == (Status.PASSED if passed else Status.FAILED)
    assert any("crossed a kink" in n or "cross kinks" in n for n in pool.notes)


def test_kinks_warn_warns_once_for_the_units_that_passed_at_kinks() -> None:
    from gradcheck.errors import GradcheckWarning

    torch.manual_seed(0)
    with pytest.warns(GradcheckWarning, match="passed only at verified kinks"):
        result = check_model(nn.Sequential(nn.ReLU(), nn.MaxPool2d(2)),
                             torch.randn(2, 3, 8, 8, requires_grad=True), kinks="warn")
    assert result.passed


def test_bisect_looks_inside_a_model_it_cannot_check() -> None:
    class NoisyTop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = TinyTransformer(softmax=WrongFactor)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x) + __import__("random").random()

    torch.manual_seed(0)
    result = check_model(NoisyTop(), torch.randn(2, 5, 8), strategy="bisect")
    top = next(v for v in result.verdicts if v.path == "")
    assert top.status == Status.NOT_CHECKABLE
    assert [(v.path, v.name) for v in result.culprits] == [("inner.blocks.1.attn", "WrongFactor.backward")]


@pytest.mark.cuda
def test_on_a_gpu_dropout_draws_the_same_masks_and_the_planted_bug_is_found() -> None:
    torch.manual_seed(0)
    clean = check_model(TinyTransformer().cuda().train(), torch.randn(2, 5, 8, device="cuda"))
    assert clean.passed and clean.counts()[Status.NOT_CHECKABLE] == 0
    planted = check_model(TinyTransformer(softmax=WrongFactor).cuda(), torch.randn(2, 5, 8, device="cuda"))
    assert [v.path for v in planted.culprits] == ["blocks.1.attn"]


def test_tensors_are_found_and_replaced_in_the_same_order_in_nested_containers() -> None:
    from dataclasses import dataclass

    from graphviz_app.tracing.model_check.capture import map_tensors, tensors_in

    @dataclass
    class Out:
        a: torch.Tensor
        rest: Any

    t = [torch.tensor(float(k)) for k in range(6)]
    value = (t[0], {"x": t[1], "y": [t[2], Out(t[3], (t[4], None))]}, "text", t[5])
    assert [float(x) for x in tensors_in(value)] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    counter = iter(range(10, 16))
    mapped = map_tensors(value, lambda _: torch.tensor(float(next(counter))))
    assert [float(x) for x in tensors_in(mapped)] == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert isinstance(mapped[1]["y"][1], Out) and mapped[2] == "text"


def test_a_function_with_setup_context_names_its_inputs_from_forward() -> None:
    class ScaleByW(torch.autograd.Function):
        @staticmethod
        def forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return x * w

        @staticmethod
        def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            x, w = ctx.saved_tensors
            return g * w, 3 * g * x  # the gradient for w is 3 x too large

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return ScaleByW.apply(x, self.w)

    torch.manual_seed(0)
    (culprit,) = check_model(Net(), torch.randn(3, 4, requires_grad=True)).culprits
    assert (culprit.name, culprit.input) == ("ScaleByW.backward", "w input")
    assert culprit.ratio == pytest.approx(3.0, rel=1e-6)
