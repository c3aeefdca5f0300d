"""Planted wrong backwards in otherwise correct models are named, module and line, and nothing else is blamed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from mc_models import (
    Block,
    ConvBlock,
    ConvNet,
    Gate,
    MissingTerm,
    Tagger,
    TiedLM,
    TinyTransformer,
    WrongFactor,
    WrongTranspose,
    bug_line,
    def_line,
)

from graphviz_app.analysis.model_check import Status, UnitKind
from graphviz_app.tracing.model_check import check_model


def _tokens(vocab: int) -> Callable[[], tuple[torch.Tensor]]:
    return lambda: (torch.randint(0, vocab, (2, 6)),)


def _floats(*shape: int) -> Callable[[], tuple[torch.Tensor]]:
    return lambda: (torch.randn(*shape),)


@dataclass(frozen=True)
class Planted:
    model: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple[Any, ...]]
    path: str
    kind: str
    name: str
    line: Callable[[], int]
    input: str | None = None


PLANTED = {
    "transformer, Function 1.02 x": Planted(lambda: TinyTransformer(softmax=WrongFactor), _floats(2, 5, 8),
                                            "blocks.1.attn", UnitKind.FUNCTION, "WrongFactor.backward",
                                            lambda: def_line(WrongFactor.backward), "x input"),
    "transformer, Function missing a term": Planted(lambda: TinyTransformer(softmax=MissingTerm), _floats(2, 5, 8),
                                                    "blocks.1.attn", UnitKind.FUNCTION, "MissingTerm.backward",
                                                    lambda: def_line(MissingTerm.backward), "x input"),
    "transformer, Function with a wrong transpose": Planted(
        lambda: TinyTransformer(wrong_mixer=True), _floats(2, 5, 8), "blocks.1.mix", UnitKind.FUNCTION,
        "WrongTranspose.backward", lambda: def_line(WrongTranspose.backward), "x input"),
    "CNN with BatchNorm and dropout, a hook doubling a gradient": Planted(
        lambda: ConvNet(hook=True), _floats(3, 2, 8, 8), "features.2", UnitKind.HOOK,
        "hook ConvBlock.forward.<locals>.<lambda>", lambda: bug_line(ConvBlock.forward)),
    "LSTM tagger, an in-place change of a saved tensor through .data": Planted(
        lambda: Tagger(corrupt=True), _tokens(11), "gate", UnitKind.DATA, ".data", lambda: bug_line(Gate.forward)),
    "tied embeddings, Function 1.02 x": Planted(lambda: TiedLM(softmax=WrongFactor), _tokens(13), "block.attn",
                                                UnitKind.FUNCTION, "WrongFactor.backward",
                                                lambda: def_line(WrongFactor.backward), "x input"),
}


@pytest.mark.parametrize("case", list(PLANTED.values()), ids=list(PLANTED))
def test_the_planted_bug_is_named_and_nothing_else_is_blamed(case: Planted) -> None:
    torch.manual_seed(0)
    result = check_model(case.model(), *case.inputs())
    assert not result.passed
    (culprit,) = result.culprits
    assert (culprit.path, culprit.kind, culprit.name) == (case.path, case.kind, case.name)
    assert culprit.source is not None and culprit.source.endswith(f"mc_models.py:{case.line()}")
    assert str(result).splitlines()[0] == culprit.headline()
    assert str(result).startswith(f"{case.path} ({case.name}, {culprit.source}): ")
    if case.input is not None:
        assert culprit.input == case.input
    failed = [v for v in result.verdicts if v.status == Status.FAILED]
    assert all(v.culprit or v.explained_by is not None for v in failed)
    # every other failing unit encloses the culprit: a module whose path is a prefix of it
    assert all(case.path.startswith(v.path) for v in failed)


def test_a_detach_on_the_residual_path_is_named_as_a_cut_gradient_not_as_a_wrong_backward() -> None:
    torch.manual_seed(0)
    result = check_model(TinyTransformer(detach=True), torch.randn(2, 5, 8))
    (cut,) = result.detached
    assert (cut.path, cut.kind, cut.name, cut.status) == ("blocks.1", UnitKind.DETACH, ".detach()", Status.DETACHED)
    assert cut.source is not None and cut.source.endswith(f"mc_models.py:{bug_line(Block.forward)}")
    assert result.first_line() == cut.headline()
    assert "detached (no gradient path): this .detach() cuts the gradient" in result.first_line()
    assert result.passed and not result.culprits  # no backward is wrong
    around = [v for v in result.verdicts if v.status == Status.DETACHED and v is not cut]
    assert {v.path for v in around} == {"blocks.1", ""}
    assert all(v.explained_by == "blocks.1 (.detach())" for v in around)
    assert not any(v.status == Status.FAILED for v in result.verdicts)


class _StopGradient(torch.nn.Module):
    """A target computed under no_grad, on purpose (as in a bootstrapped loss)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            target = x * 2  # the line the verdict names
        return self.lin(x) - target


class _FunctionalDetach(torch.nn.Module):
    """torch.detach(x), which no patch sees: the autograd graph itself has no path from x."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.detach(x))


@pytest.mark.parametrize(("module", "kind", "name", "how"), [
    (_StopGradient, UnitKind.DETACH, "torch.no_grad()", "this torch.no_grad() block cuts the gradient of the x input"),
    (_FunctionalDetach, UnitKind.MODULE, "_FunctionalDetach.forward",
     "the autograd graph cuts the gradient of the x input"),
])
def test_a_gradient_cut_on_purpose_reads_detached_and_skip_still_leaves_it_out(module: type, kind: str, name: str,
                                                                               how: str) -> None:
    torch.manual_seed(0)
    model, x = torch.nn.Sequential(module(), torch.nn.Tanh()), torch.randn(3, 4, requires_grad=True)
    result = check_model(model, x)
    (cut,) = result.detached
    assert (cut.path, cut.kind, cut.name) == ("0", kind, name)
    assert f"detached (no gradient path): {how}" in result.first_line() and result.passed
    oracle = torch.autograd.gradcheck(copy.deepcopy(model[0]).double(), x.detach().double().requires_grad_(),
                                      raise_exception=False)
    assert not oracle  # torch's gradcheck calls it a failure; the graph says why
    skipped = check_model(model, x, skip=["0", ""])
    assert not skipped.detached and skipped.passed


def test_a_constant_factor_is_reported_as_that_factor_with_an_element() -> None:
    torch.manual_seed(0)
    result = check_model(TinyTransformer(softmax=WrongFactor), torch.randn(2, 5, 8))
    (culprit,) = result.culprits
    assert culprit.ratio == pytest.approx(1.02, rel=1e-6)
    assert "backward is 1.02 x finite differences for the x input" in str(result).splitlines()[0]
    assert culprit.element is not None and culprit.element.startswith("element (")


CLEAN = {
    "transformer with dropout and ReLU": (TinyTransformer, _floats(2, 5, 8)),
    "CNN with BatchNorm, dropout, ReLU and max-pool": (ConvNet, _floats(3, 2, 8, 8)),
    "LSTM tagger": (Tagger, _tokens(11)),
    "tied embeddings": (TiedLM, _tokens(13)),
}


@pytest.mark.parametrize("make, inputs", list(CLEAN.values()), ids=list(CLEAN))
def test_clean_models_pass_with_kinks_and_dropout(make: Callable[[], torch.nn.Module],
                                                  inputs: Callable[[], tuple[Any, ...]]) -> None:
    torch.manual_seed(0)
    model = make()
    model.train()
    result = check_model(model, *inputs())
    assert result.passed, str(result)
    counts = result.counts()
    assert counts[Status.PASSED] == len(result.verdicts) > 2
    assert result.first_line().startswith(f"{type(model).__name__}: every checked backward agrees")


def test_bisect_finds_the_same_culprit_with_fewer_evaluations() -> None:
    torch.manual_seed(0)
    model, x = TinyTransformer(softmax=WrongFactor), torch.randn(2, 5, 8)
    full = check_model(model, x)
    quick = check_model(model, x, strategy="bisect")
    assert [(v.path, v.name) for v in quick.culprits] == [(v.path, v.name) for v in full.culprits]
    assert quick.evaluations < full.evaluations
    assert any(v.reason == "the module around it passed (bisect)" for v in quick.verdicts)
