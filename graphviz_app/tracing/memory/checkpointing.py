"""Apply a checkpoint plan to a model (non-reentrant `torch.utils.checkpoint`) and measure what it changes."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Collection, Iterator
from typing import Any

import torch
import torch.utils.checkpoint

from ...analysis.memory.checkpoint import CheckpointPlan
from ...errors import TraceError
from .autocast import recompute_autocast
from .levers import shadow_peak
from .step import Step, run_step

__all__ = ["checkpointed", "checkpoint_modules", "verify_plan", "runnable_modules", "forecast_plan"]


def _checkpoint(forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, context_fn=recompute_autocast,
                                             **kwargs)


@contextlib.contextmanager
def checkpointed(model: torch.nn.Module, modules: Collection[str]) -> Iterator[torch.nn.Module]:
    """Inside the block, each named submodule's forward runs under non-reentrant checkpointing.

    The modules are put back as they were on the way out.

    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    >>> with checkpointed(net, ["0"]):
    ...     net(torch.ones(1, 2, requires_grad=True)).sum().backward()
    >>> "forward" in vars(net[0])
    False
    """
    wrapped: list[torch.nn.Module] = []
    try:
        for name in modules:
            wrapped.append(_wrap(model, name))
        yield model
    finally:
        for module in wrapped:
            del module.forward


def checkpoint_modules(model: torch.nn.Module, modules: Collection[str]) -> torch.nn.Module:
    """`model` with each named submodule's forward run under non-reentrant checkpointing from now on, as
    `--verify` applies a plan (`advise_checkpoints(...).modules`); `del model.get_submodule(name).forward`
    undoes one. Validated before anything is wrapped.

    Raises:
        TraceError: a name `model` has no submodule for, a `ModuleList`/`ModuleDict` (whose forward never runs),
            or a module already wrapped.

    >>> net = checkpoint_modules(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()), ["0"])
    >>> net(torch.ones(1, 2, requires_grad=True)).sum().backward()
    >>> net[0].weight.grad.shape
    torch.Size([2, 2])
    """
    if isinstance(modules, str):
        raise TraceError(f"modules: expected a list of module names (plan.modules), got the string {modules!r}; "
                         f"pass [{modules!r}]")
    for name in modules:
        if "forward" in vars(_module(model, name)):
            raise TraceError(f"{name!r} already has a forward of its own (checkpointed already?): "
                             f"del model.get_submodule({name!r}).forward first")
    for name in modules:
        _wrap(model, name)
    return model


def _module(model: torch.nn.Module, name: str) -> torch.nn.Module:
    try:
        module = model.get_submodule(name)
    except AttributeError as e:
        raise TraceError(f"the plan names module {name!r}, which {type(model).__name__} does not have") from e
    if isinstance(module, (torch.nn.ModuleList, torch.nn.ModuleDict)):
        raise TraceError(f"the plan names {name!r}, a {type(module).__name__} whose forward never runs: "
                         "name its members instead")
    return module


def _wrap(model: torch.nn.Module, name: str) -> torch.nn.Module:
    module = _module(model, name)
    module.forward = functools.partial(_checkpoint, module.forward)
    return module


def runnable_modules(model: torch.nn.Module) -> frozenset[str]:
    """The names of `model`'s submodules that can be checkpointed: those with a `forward` of their own
    (not `ModuleList`/`ModuleDict` containers, whose members run instead).

    >>> sorted(runnable_modules(torch.nn.Sequential(torch.nn.ModuleList([torch.nn.ReLU()]))))
    ['0.0']
    """
    return frozenset(name for name, m in model.named_modules()
                     if name and not isinstance(m, (torch.nn.ModuleList, torch.nn.ModuleDict)))


def verify_plan(step: Step, plan: CheckpointPlan, *, retain_graph: bool = False) -> CheckpointPlan:
    """Measure the step as it is and with the plan applied; the plan with `measured_peak_before/after` filled."""
    before = run_step(step, retain_graph=retain_graph).measured
    with checkpointed(step.model, plan.modules):
        # Reading a checkpointed op's saved tensors would run the module again: trace without them.
        after = run_step(step, retain_graph=retain_graph, trace_saved=False).measured
    assert before is not None and after is not None  # run_step measures by default
    return dataclasses.replace(plan, measured_peak_before=before.peak_bytes, measured_peak_after=after.peak_bytes)


def forecast_plan(step: Step, plan: CheckpointPlan) -> CheckpointPlan:
    """`plan` with its peaks before and after forecast by running the step on fake tensors (or meta) as it is and
    with the modules checkpointed, counted as `measure` counts; the replay's figures kept in `replay_peaks`.

    The replay chooses the modules (fast, one graph); the forecast counts what it does not model: the
    forward's own peak, the recompute's temporaries, a saved tensor shared by several ops. Where the step
    cannot run on fake tensors the replay's figures stay.
    """
    if not plan.modules:
        return plan
    try:
        before = shadow_peak(step)[0]
        after = shadow_peak(step, wrap=lambda model: checkpointed(model, plan.modules))[0]
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return plan  # a step that only runs for real (a value read): the replay's prediction stands
    return dataclasses.replace(plan, predicted_peak_before=before, predicted_peak_after=after,
                               replay_peaks=(plan.predicted_peak_before, plan.predicted_peak_after))
