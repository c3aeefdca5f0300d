"""Levers for a peak checkpointing cannot lower, predicted by running the changed step on fake tensors (nothing
allocated) and verified by running it for real, both counted as `measure` counts (`changes`: what is applied,
predicted and measured; `lever_advice`: which levers a plan gets).

- free each `.grad` once accumulated (optimizer in backward): a `register_post_accumulate_grad_hook` on every
  trainable parameter sets its `.grad` to None, as `optimizer.step(); optimizer.zero_grad(set_to_none=True)`
  in the hook would (the optimizer's own temporaries are not counted);
- autocast bfloat16: the forward under `torch.autocast(dtype=torch.bfloat16)`;
- a smaller micro-batch with gradient accumulation: k micro-batches, `.grad` kept between them. Predicted as
  the larger of the first micro-step's peak and, for the next ones, every `.grad` plus the micro-step's peak
  with each incoming gradient freed once added (torch adds it into `.grad` in place); verified by running the
  k micro-steps for real under one counter;
- a loss in chunks over the tokens, and the modules of a checkpoint plan: `changes.changed`.
"""

from __future__ import annotations

import contextlib
import typing
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..module_trace import given_tensors
from .counting import LiveCuda, LiveStorages
from .forecast import fake_step, step_variant
from .step import Step, run_step, step_outputs

__all__ = ["free_grads", "accumulated_peak", "step_batch", "shadow_step", "shadow_peak", "step_peak", "policy_of"]


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


def policy_of(step: Step) -> str:
    """The device whose kernels and autocast lists a forecast follows: the model's, or for a meta model the step's."""
    device = next((p.device for p in step.model.parameters()), torch.device("cpu"))
    return step.autocast_policy if device.type == "meta" else "cuda" if device.type == "cuda" else "cpu"


def shadow_step(step: Step) -> Step:
    """The step with nothing allocated: on fake CPU tensors for a CPU step (torch's CPU kernel choices), else meta
    (the model copied: the person's stays as it is)."""
    policy = policy_of(step)
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
        tries.append(step_variant(step, device="meta", policy=policy_of(step)))
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

    An LSTM on meta runs the CPU's fused kernel with its workspace sized there (`rnn.meta_lstm`): counted as
    the CPU holds it, from the layer's forward to its backward.
    """
    with warnings.catch_warnings():  # the walker reads fake storages' addresses: expected
        warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
        hooks: contextlib.AbstractContextManager[dict[int, int]] = (
            free_grads(step.model) if free else contextlib.nullcontext({}))
        with hooks as sizes:
            run = run_step(step, trace_saved=False)
    assert run.measured is not None  # run_step measures by default
    return run.measured.peak_bytes, sum(sizes.values())


def step_batch(step: Step) -> int | None:
    """The step's batch size: the first dimension of its first tensor input (None: no tensor input has one)."""
    tensors = [t for t in given_tensors(step.model, step.args, step.kwargs) if t.dim()]
    params = {id(p) for p in step.model.parameters()} | {id(b) for b in step.model.buffers()}
    inputs = [t for t in tensors if id(t) not in params]
    return inputs[0].shape[0] if inputs else None


def accumulated_peak(step: Step, micro_steps: int, *,
                     wrap: Callable[[torch.nn.Module], contextlib.AbstractContextManager[Any]] | None = None) -> int:
    """Run `micro_steps` forward and backward passes of `step` for real, `.grad` accumulated between them (none at
    the start, as after `zero_grad()`), under `measure`'s counter, with `wrap(model)` around them when given: the
    peak (parameters, buffers, inputs left out). The parameters' own `.grad` are put back afterwards."""
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
        with typing.cast(contextlib.AbstractContextManager[Any], counter), \
                wrap(step.model) if wrap is not None else contextlib.nullcontext():
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
