"""Levers for a peak checkpointing cannot lower, predicted by running the changed step on fake tensors (nothing
allocated) and verified by running it for real, both counted as `measure` counts.

- free each `.grad` once accumulated (optimizer in backward): a `register_post_accumulate_grad_hook` on every
  trainable parameter sets its `.grad` to None, as `optimizer.step(); optimizer.zero_grad(set_to_none=True)`
  in the hook would (the optimizer's own temporaries are not counted);
- autocast bfloat16: the forward under `torch.autocast(dtype=torch.bfloat16)`;
- a smaller micro-batch with gradient accumulation: k micro-batches, `.grad` kept between them. Predicted as
  the larger of the first micro-step's peak and, for the next ones, every `.grad` plus the micro-step's peak
  with each incoming gradient freed once added (torch adds it into `.grad` in place); verified by running the
  k micro-steps for real under one counter;
- a loss in chunks over the vocabulary: the person's loss code changes, so it is a what-if of the replay
  (`analysis.memory.levers.chunked_loss_peak`) and never applied here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...analysis.memory.checkpoint import CheckpointPlan
from ...analysis.memory.levers import CHUNKS, Lever, LeverKind, chunked_loss_peak
from ...model import human_bytes
from ..module_trace import given_tensors
from .counting import LiveCuda, LiveStorages
from .forecast import Prediction, fake_step, predict, step_variant, with_lstm_workspaces
from .rnn import WORKSPACE_NAME
from .step import Step, run_step, step_outputs

__all__ = ["free_grads", "lever_forecasts", "verify_levers", "with_levers", "accumulated_peak", "step_batch",
           "shadow_step", "shadow_peak", "step_peak",
           "FREE_GRADS_CODE", "CHUNKED_LOSS_CODE"]

FREE_GRADS_CODE = (
    "optimizers = {p: torch.optim.AdamW([p]) for p in model.parameters() if p.requires_grad}; "
    "def step(p): optimizers[p].step(); optimizers[p].zero_grad(set_to_none=True); "
    "then p.register_post_accumulate_grad_hook(step) for each of them (and no optimizer.step() after backward)"
)
CHUNKED_LOSS_CODE = (
    "it changes your loss code, which --verify cannot rewrite: compute the head and the loss chunk by chunk, "
    "each chunk under non-reentrant checkpointing so its logits are made again in backward, e.g. "
    "loss = sum(torch.utils.checkpoint.checkpoint(lambda h, y: F.cross_entropy(head(h), y, reduction='sum'), h, y, "
    f"use_reentrant=False) for h, y in zip(hidden.chunk({CHUNKS}), labels.chunk({CHUNKS}))) / labels.numel() "
    "(or a fused linear cross-entropy kernel); the model must return its last hidden states, not the logits"
)


@contextlib.contextmanager
def free_grads(model: torch.nn.Module) -> Iterator[dict[int, int]]:
    """Inside the block, each trainable parameter's `.grad` is set to None as soon as it is accumulated; the dict
    yielded maps each parameter (by id) to the bytes of the `.grad` it got. The hooks are removed on the way out.

    >>> net = torch.nn.Linear(2, 2)
    >>> with free_grads(net) as sizes:
    ...     net(torch.ones(1, 2)).sum().backward()
    >>> net.weight.grad is None, sorted(sizes.values())
    (True, [8, 16])
    """
    sizes: dict[int, int] = {}

    def hook(p: torch.Tensor) -> None:
        if p.grad is not None:
            sizes[id(p)] = p.grad.untyped_storage().nbytes()
        p.grad = None

    handles = [p.register_post_accumulate_grad_hook(hook) for p in dict.fromkeys(model.parameters())
               if p.requires_grad]
    try:
        yield sizes
    finally:
        for h in handles:
            h.remove()


def _policy(step: Step) -> str:
    """The device whose kernels and autocast lists a forecast follows: the model's, or for a meta model the step's."""
    device = next((p.device for p in step.model.parameters()), torch.device("cpu"))
    return step.autocast_policy if device.type == "meta" else "cuda" if device.type == "cuda" else "cpu"


def shadow_step(step: Step) -> Step:
    """The step with nothing allocated: on fake CPU tensors for a CPU step (torch's CPU kernel choices), else meta
    (the model copied: the person's stays as it is)."""
    policy = _policy(step)
    meta = step_variant(step, device="meta", policy=policy)
    if policy == "cpu" and not any(isinstance(m, torch.nn.LSTM) for m in step.model.modules()):
        return fake_step(meta)
    return meta


def shadow_peak(step: Step, *, free: bool = False,
                wrap: Callable[[torch.nn.Module], contextlib.AbstractContextManager[Any]] | None = None,
                ) -> tuple[int, int]:
    """`step_peak` of the step with nothing allocated (`shadow_step`), with `wrap(model)` around the run when given
    (checkpointing modules); where the step cannot run on fake CPU tensors (a target the loss captures stays on
    meta, a value read), on meta, as `forecast` falls back."""
    first = shadow_step(step)
    tries = [first]
    if first.mode is not None:  # fake tensors: meta is the fallback
        tries.append(step_variant(step, device="meta", policy=_policy(step)))
    for i, shadow in enumerate(tries):
        try:
            with wrap(shadow.model) if wrap is not None else contextlib.nullcontext():
                return step_peak(shadow, free=free)
        except Exception:  # noqa: BLE001 - any failure on fake tensors: meta next, as forecast() does
            if i == len(tries) - 1:
                raise
    raise AssertionError("unreachable: the last try returns or raises")


def step_peak(step: Step, *, free: bool = False) -> tuple[int, int]:
    """The step's measured peak (on fake tensors or meta nothing is allocated), and with `free` the bytes of
    the `.grad` the step made (each freed as soon as accumulated).

    An LSTM on meta runs the CPU's fused kernel, whose workspace has no size there: each layer's workspace,
    sized from oneDNN's layout as the forecast sizes it, is added (alive from the forward to its layer's backward,
    so at the peak of a step whose peak is in backward or at the end of the forward).
    """
    lstm = any(isinstance(m, torch.nn.LSTM) for m in step.model.modules()) and any(
        t.device.type == "meta" for t in given_tensors(step.model, step.args, step.kwargs))
    with warnings.catch_warnings():  # the walker reads fake storages' addresses: expected
        warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
        hooks: contextlib.AbstractContextManager[dict[int, int]] = (
            free_grads(step.model) if free else contextlib.nullcontext({}))
        with hooks as sizes:
            run = run_step(step, trace_saved=lstm)
    assert run.measured is not None  # run_step measures by default
    workspaces = sum(n.tensor.bytes for n in with_lstm_workspaces(run.graph).nodes
                     if n.name == WORKSPACE_NAME and n.tensor is not None) if lstm else 0
    return run.measured.peak_bytes + workspaces, sum(sizes.values())


def step_batch(step: Step) -> int | None:
    """The step's batch size: the first dimension of its first tensor input (None: no tensor input has one)."""
    tensors = [t for t in given_tensors(step.model, step.args, step.kwargs) if t.dim()]
    params = {id(p) for p in step.model.parameters()} | {id(b) for b in step.model.buffers()}
    inputs = [t for t in tensors if id(t) not in params]
    return inputs[0].shape[0] if inputs else None


def accumulated_peak(step: Step, micro_steps: int) -> int:
    """Run `micro_steps` forward and backward passes of `step` for real, `.grad` accumulated between them (none at
    the start, as after `zero_grad()`), under `measure`'s counter: the peak (parameters, buffers, inputs left out).
    The parameters' own `.grad` are put back afterwards."""
    params = list(step.model.parameters())
    kept = [p.grad for p in params]
    for p in params:
        p.grad = None
    cuda = [t.device for t in given_tensors(step.model, step.args, step.kwargs) if t.device.type == "cuda"]
    counter: LiveStorages | LiveCuda = LiveCuda(cuda[0]) if cuda else LiveStorages()
    device = cuda[0].type if cuda else "cpu"
    autocast = (torch.autocast(device, dtype=step.autocast) if step.autocast is not None
                else contextlib.nullcontext())
    try:
        with typing.cast(contextlib.AbstractContextManager[Any], counter):  # both counters are context managers
            for _ in range(micro_steps):
                with autocast, torch.enable_grad():
                    outputs = step.model(*step.args, **step.kwargs)
                    loss = step.loss(outputs) if step.loss is not None else None
                named, roots = step_outputs(loss if loss is not None else outputs)
                tensors = [t for path, t in named if path in roots]
                grads = [torch.ones((), dtype=t.dtype, device=t.device).expand(t.shape) for t in tensors]
                torch.autograd.backward(tensors, grads)
                del outputs, loss, named, tensors, grads  # the next micro-batch starts from .grad alone
        return counter.peak
    finally:
        for p, grad in zip(params, kept, strict=True):
            p.grad = grad


def _micro_batch(step: Step, batch: int | None, budget: int) -> Lever:
    what = "a smaller micro-batch with gradient accumulation"
    if batch is None or batch < 2:
        reason = ("the step has no batch dimension" if batch is None else
                  "the batch is already 1: shorten the sequence (--seq-len) instead")
        return Lever(LeverKind.MICRO_BATCH, what, None, reason=reason)
    best: Lever | None = None
    k = 2
    while k <= batch:
        micro = -(-batch // k)
        micro_step = step_variant(step, batch=micro)
        first, _ = shadow_peak(micro_step)
        rest, grads = shadow_peak(micro_step, free=True)
        peak = max(first, grads + rest)
        if best is not None and best.predicted_peak is not None and peak >= best.predicted_peak:
            break  # smaller micro-batches no longer lower it: every .grad held between them is the floor
        how = (f"{k} micro-batches of {micro}: the larger of the first one's peak {human_bytes(first)} and, for "
               f"the next, every .grad {human_bytes(grads)} + {human_bytes(rest)}; forecast allocating nothing")
        best = Lever(LeverKind.MICRO_BATCH, f"{k} micro-batches of {micro} with gradient accumulation", peak, how,
                     micro_batches=(k, micro))
        if peak <= budget or micro == 1:
            break
        k *= 2
    assert best is not None  # batch >= 2: k = 2 was tried
    return best


def _guarded(kind: LeverKind, what: str, predict_one: Callable[[], Lever]) -> Lever:
    """`predict_one()`, or where the changed step cannot run allocating nothing, the lever with the reason."""
    try:
        return predict_one()
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
        first = str(e).splitlines()[0][:160] if str(e) else ""
        return Lever(kind, what, None, reason=f"the changed step could not run on fake tensors or meta "
                     f"({type(e).__name__}: {first}): measure it on the real device")


def lever_forecasts(step: Step, budget: int, *, baseline: Prediction | None = None) -> tuple[int, tuple[Lever, ...]]:
    """The step's forecast peak as it is, and each lever's predicted peak (`budget`: the peak's share of the
    budget; the micro-batch lever takes the fewest micro-batches, halving, that get under it).

    `baseline`, the step's forecast on fake tensors or meta, is made here when not given. A lever whose changed
    step cannot run there says so in its `reason`.
    """
    policy = _policy(step)
    if baseline is None:
        baseline = predict(step_variant(step, device="meta", policy=policy))
    free_what = ("free each .grad as soon as it is accumulated (optimizer in backward, "
                 "register_post_accumulate_grad_hook)")

    def free() -> Lever:
        peak, grads = shadow_peak(step, free=True)
        return Lever(LeverKind.FREE_GRADS, free_what, peak,
                     f"{human_bytes(grads)} of .grad, each dropped once accumulated; forecast allocating nothing",
                     manual=f"to do it in training: {FREE_GRADS_CODE}")

    levers = [_guarded(LeverKind.FREE_GRADS, free_what, free)]
    float32 = any(p.dtype == torch.float32 for p in step.model.parameters())
    lstm = any(isinstance(m, torch.nn.LSTM) for m in step.model.modules())
    if step.autocast is not None or not float32 or lstm:
        reason = ("the step already runs under autocast" if step.autocast is not None
                  else "the model's parameters are not float32" if not float32 else
                  "not predicted for an LSTM: its fused kernel's workspace under bfloat16 autocast has no modelled "
                  "size (on lstm-lm the meta count was 0.62 of the real step); measure it with --measure --dtype "
                  "bfloat16 on the real device")
        levers.append(Lever(LeverKind.AUTOCAST, "autocast bfloat16", None, reason=reason))
    else:
        def bf16() -> Lever:
            peak, _ = shadow_peak(dataclasses.replace(step, autocast=torch.bfloat16, autocast_policy=policy))
            return Lever(LeverKind.AUTOCAST, "autocast bfloat16", peak,
                         f"the forward under torch.autocast('{policy}', torch.bfloat16), {policy.upper()}'s cast "
                         "lists; forecast allocating nothing")

        levers.append(_guarded(LeverKind.AUTOCAST, "autocast bfloat16", bf16))
    micro_what = "a smaller micro-batch with gradient accumulation"
    levers.append(_guarded(LeverKind.MICRO_BATCH, micro_what, lambda: _micro_batch(step, step_batch(step), budget)))
    forward = baseline.measured.forward_peak_bytes if baseline.measured is not None else None
    chunked = chunked_loss_peak(baseline.graph, roots=baseline.roots, forward_peak=forward)
    what = f"a loss computed in {CHUNKS} chunks over the vocabulary"
    if chunked is None or not chunked.cross_entropy:
        levers.append(Lever(LeverKind.CHUNKED_LOSS, what, None,
                            reason="the loss is not a cross-entropy (no log-softmax near the loss)"))
    elif chunked.logits_bytes * 10 < baseline.peak_bytes:
        levers.append(Lever(LeverKind.CHUNKED_LOSS, what, None,
                            reason=f"the logits ({human_bytes(chunked.logits_bytes)}) are under a tenth of the peak"))
    else:
        shape = "x".join(map(str, chunked.logits_shape))
        levers.append(Lever(LeverKind.CHUNKED_LOSS, what, chunked.peak,
                            f"the logits ({shape}, {human_bytes(chunked.logits_bytes)}) and {len(chunked.nodes) - 1} "
                            "tensor(s) made from them taken at one chunk's size in the replay; a lower bound: "
                            "0.66-0.98 of losses written in chunks",
                            manual=CHUNKED_LOSS_CODE))
    return baseline.peak_bytes, tuple(levers)


def verify_levers(step: Step, levers: tuple[Lever, ...]) -> tuple[Lever, ...]:
    """Each lever that can be applied without the person's code, applied to the real step and measured; the others
    (the chunked loss) as they are, their `manual` saying why."""
    before = step_peak(step)[0]
    done = []
    for lever in levers:
        measured: int | None = None
        if lever.predicted_peak is None or lever.kind is LeverKind.CHUNKED_LOSS:
            done.append(lever)
            continue
        if lever.kind is LeverKind.FREE_GRADS:
            measured = step_peak(step, free=True)[0]
        elif lever.kind is LeverKind.AUTOCAST:
            measured = step_peak(dataclasses.replace(step, autocast=torch.bfloat16))[0]
        elif lever.kind is LeverKind.MICRO_BATCH and lever.micro_batches is not None:
            k, micro = lever.micro_batches
            measured = accumulated_peak(step_variant(step, batch=micro), k)
        done.append(dataclasses.replace(lever, measured_peak=measured, measured_before=before))
    return tuple(done)



def with_levers(step: Step, plan: CheckpointPlan, *, verify: bool = False) -> CheckpointPlan:
    """`plan` with the levers predicted (and, with `verify`, applied and measured) when it does not reach its
    budget: what lowers a peak checkpointing cannot."""
    if plan.reached:
        return plan
    baseline, levers = lever_forecasts(step, plan.budget_bytes)
    if verify:
        levers = verify_levers(step, levers)
    return dataclasses.replace(plan, levers=levers, levers_baseline=baseline)
