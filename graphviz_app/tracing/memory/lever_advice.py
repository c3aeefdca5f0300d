"""The levers a plan that misses its budget gets: each predicted (on top of the plan's checkpointed modules), the
best combination of them, and with `--verify` each applied to the real step and measured.

Micro-batches with gradient accumulation and freeing each `.grad` once accumulated are never combined: a
`.grad` freed as soon as it is made cannot be accumulated over micro-batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from ...analysis.memory.checkpoint import CheckpointPlan
from ...analysis.memory.levers import CHUNKS, ChunkedLoss, Lever, LeverKind, chunked_loss_peak
from ...errors import ChunkedLossError
from ...model import human_bytes
from .changes import Changes, measure_changes, predict_changes
from .forecast import Prediction, predict, step_variant
from .levers import policy_of, step_batch
from .rnn import fused_lstm_dtypes
from .step import Step

__all__ = ["lever_forecasts", "verify_levers", "with_levers", "FREE_GRADS_CODE", "CHUNKED_LOSS_CODE"]

FREE_GRADS_CODE = (
    "optimizers = {p: torch.optim.AdamW([p]) for p in model.parameters() if p.requires_grad}; "
    "def step(p): optimizers[p].step(); optimizers[p].zero_grad(set_to_none=True); "
    "then p.register_post_accumulate_grad_hook(step) for each of them (and no optimizer.step() after backward)"
)
CHUNKED_LOSS_CODE = (
    "have the model return its last hidden states instead of the logits, and compute the loss with "
    f"graphviz_app.memory.chunked_cross_entropy(hidden.flatten(0, -2), head.weight, labels.flatten(), "
    f"bias=head.bias, chunks={CHUNKS}) (each chunk's head matmul and cross-entropy under non-reentrant "
    "checkpointing, made again in backward), or a fused linear cross-entropy kernel"
)
_MEASURE_IT = "measure it with --measure --dtype bfloat16 on the real device"
_LSTM_CUDA = ("not predicted for an LSTM on CUDA: under autocast torch runs cuDNN's fused LSTM, whose workspace and "
              f"reserve are not modelled (on meta the LSTM runs torch's step-by-step cell); {_MEASURE_IT}")
_LSTM_NO_BF16 = ("not predicted for an LSTM on this CPU: it has no oneDNN bfloat16 kernels (AVX-512 or AVX2-VNNI-2), "
                 "so under autocast torch runs the LSTM step by step, casting each step's matmuls, which the "
                 f"forecast on meta does not follow; {_MEASURE_IT}")
_LSTM_AND_CELLS = ("not predicted for a model with an LSTM and a {kinds}: the LSTM is forecast on meta (oneDNN's "
                   "layers, their workspaces sized), where the {kinds}'s step-by-step cell does not follow CPU "
                   f"autocast, which casts each step's matmuls; {_MEASURE_IT}")
_LSTM_PROJECTIONS = ("not predicted for an LSTM with projections (proj_size): oneDNN has no such layer, so under "
                     "autocast torch runs it step by step, casting each step's matmuls, which the forecast on meta "
                     f"does not follow; {_MEASURE_IT}")
_FREE_WHAT = "free each .grad as soon as it is accumulated (optimizer in backward, register_post_accumulate_grad_hook)"
_CHUNKED_WHAT = f"a loss computed in {CHUNKS} chunks over the tokens"


def _changes(lever: Lever) -> Changes:
    """What applying `lever` (one, or the combined one's parts) changes."""
    kinds = set(lever.parts or (lever.kind,))
    return Changes(free=LeverKind.FREE_GRADS in kinds, autocast=LeverKind.AUTOCAST in kinds,
                   head=lever.head if LeverKind.CHUNKED_LOSS in kinds else None,
                   micro=lever.micro_batches if LeverKind.MICRO_BATCH in kinds else None)


def _guarded(kind: LeverKind, what: str, predict_one: Callable[[], Lever]) -> Lever:
    """`predict_one()`, or where the changed step cannot run allocating nothing, the lever with the reason."""
    try:
        return predict_one()
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
        first = str(e).splitlines()[0][:160] if str(e) else ""
        return Lever(kind, what, None, reason=f"the changed step could not run on fake tensors or meta "
                     f"({type(e).__name__}: {first}): measure it on the real device")


def _micro_batch(step: Step, base: Changes, budget: int) -> Lever:
    what, batch = "a smaller micro-batch with gradient accumulation", step_batch(step)
    if batch is None or batch < 2:
        reason = ("the step has no batch dimension" if batch is None else
                  "the batch is already 1: shorten the sequence (--seq-len) instead")
        return Lever(LeverKind.MICRO_BATCH, what, None, reason=reason)
    best: Lever | None = None
    k = 2
    while k <= batch:
        micro = -(-batch // k)
        peak, how = predict_changes(step, base.with_(Changes(micro=(k, micro))))
        if best is not None and best.predicted_peak is not None and peak >= best.predicted_peak:
            break  # smaller micro-batches no longer lower it: every .grad held between them is the floor
        best = Lever(LeverKind.MICRO_BATCH, f"{k} micro-batches of {micro} with gradient accumulation", peak,
                     f"{how}; forecast allocating nothing", micro_batches=(k, micro))
        if peak <= budget or micro == 1:
            break
        k *= 2
    assert best is not None  # batch >= 2: k = 2 was tried
    return best


def _lstm_refusal(model: torch.nn.Module, policy: str) -> str | None:
    """Why the bfloat16 step of a model with an LSTM cannot be forecast here, or None where it can: on the CPU
    each LSTM runs as oneDNN layers in bfloat16, which the forecast on meta runs too (`rnn.fused_lstm`), its
    workspace sized from oneDNN's layout."""
    lstms = [m for m in model.modules() if isinstance(m, torch.nn.LSTM)]
    if not lstms:
        return None
    if policy != "cpu":
        return _LSTM_CUDA
    if torch.bfloat16 not in fused_lstm_dtypes():
        return _LSTM_NO_BF16
    if any(m.proj_size > 0 for m in lstms):
        return _LSTM_PROJECTIONS
    cells = sorted({type(m).__name__ for m in model.modules()
                    if isinstance(m, torch.nn.RNNBase) and not isinstance(m, torch.nn.LSTM)})
    return _LSTM_AND_CELLS.format(kinds=" and ".join(cells)) if cells else None


def _autocast(step: Step, base: Changes, policy: str) -> Lever:
    what = "autocast bfloat16"
    float32 = any(p.dtype == torch.float32 for p in step.model.parameters())
    lstm = _lstm_refusal(step.model, policy)
    if step.autocast is not None or not float32 or lstm:
        reason = ("the step already runs under autocast" if step.autocast is not None
                  else "the model's parameters are not float32" if not float32 else lstm)
        return Lever(LeverKind.AUTOCAST, what, None, reason=reason)

    def bf16() -> Lever:
        peak, _ = predict_changes(step, base.with_(Changes(autocast=True)))
        return Lever(LeverKind.AUTOCAST, what, peak, f"the forward under torch.autocast('{policy}', torch.bfloat16), "
                     f"{policy.upper()}'s cast lists; forecast allocating nothing")

    return _guarded(LeverKind.AUTOCAST, what, bf16)


def _chunked(step: Step, base: Changes, baseline: Prediction) -> Lever:
    """The chunked loss: applied to a copy of the step on fake tensors where its head is an nn.Linear whose logits
    only reach F.cross_entropy; elsewhere the replay's what-if, a lower bound, with the reason and what to write."""
    forward = baseline.measured.forward_peak_bytes if baseline.measured is not None else None
    whatif = chunked_loss_peak(baseline.graph, roots=baseline.roots, forward_peak=forward)
    if whatif is None or not whatif.cross_entropy:
        return Lever(LeverKind.CHUNKED_LOSS, _CHUNKED_WHAT, None,
                     reason="the loss is not a cross-entropy (no log-softmax near the loss)")
    if whatif.logits_bytes * 10 < baseline.peak_bytes:
        return Lever(LeverKind.CHUNKED_LOSS, _CHUNKED_WHAT, None,
                     reason=f"the logits ({human_bytes(whatif.logits_bytes)}) are under a tenth of the peak")
    shape = "x".join(map(str, whatif.logits_shape))
    logits = f"the logits ({shape}, {human_bytes(whatif.logits_bytes)})"
    head = whatif.head_module
    try:
        if head is None or not isinstance(step.model.get_submodule(head), torch.nn.Linear):
            made = "the model itself" if not head else f"{head} ({type(step.model.get_submodule(head)).__name__})"
            raise ChunkedLossError(f"{logits} are made by {made}, not an nn.Linear head")
        peak, _ = predict_changes(step, base.with_(Changes(head=head)))
    except (ChunkedLossError, RuntimeError, NotImplementedError, TypeError, ValueError) as e:
        return _bound(whatif, logits, str(e).splitlines()[0], bool(base.modules))
    return Lever(LeverKind.CHUNKED_LOSS, _CHUNKED_WHAT, peak,
                 f"F.cross_entropy over {head}'s logits ({shape}) computed chunk by chunk with "
                 "chunked_cross_entropy; forecast allocating nothing",
                 manual=f"to do it in training: {CHUNKED_LOSS_CODE}", head=head)


def _bound(whatif: ChunkedLoss, logits: str, why: str, on_plan: bool) -> Lever:
    return Lever(LeverKind.CHUNKED_LOSS, _CHUNKED_WHAT, whatif.peak,
                 f"{logits} and {len(whatif.nodes) - 1} tensor(s) made from them taken at one chunk's size in the "
                 "replay of the step" + (" as it is, without the plan's modules" if on_plan else "") +
                 ": a lower bound (each chunk's head-weight gradient and their sums are not in it)",
                 manual=f"not applied by --verify: it cannot be applied to this step automatically ({why}); by hand: "
                        f"{CHUNKED_LOSS_CODE}")


def _combined(step: Step, base: Changes, levers: list[Lever], budget: int, alone: int) -> Lever | None:
    """The best combination: levers added one by one, lowest predicted first, each kept where it lowers the peak
    further (one that does not lower it alone may with another: bfloat16 logits once the loss is chunked), until
    under the budget (never micro-batches with freed gradients). None: no two levers help together."""
    usable = sorted((lv for lv in levers if lv.predicted_peak is not None
                     and (lv.kind is not LeverKind.CHUNKED_LOSS or lv.head is not None)),
                    key=lambda lv: lv.predicted_peak or 0)
    chosen: list[Lever] = []
    changes, peak, how = base, alone, ""
    for lever in usable:
        kinds = {c.kind for c in chosen}
        if {lever.kind, *kinds} >= {LeverKind.FREE_GRADS, LeverKind.MICRO_BATCH}:
            continue
        trial = changes.with_(_changes(lever))
        try:
            trial_peak, trial_how = predict_changes(step, trial) if chosen else (lever.predicted_peak or 0, lever.how)
        except (ChunkedLossError, RuntimeError, NotImplementedError, TypeError, ValueError):
            continue
        if trial_peak < peak:
            chosen, changes, peak, how = [*chosen, lever], trial, trial_peak, trial_how
        if peak <= budget:
            break
    if len(chosen) < 2:
        return None
    what = " + ".join(lv.what for lv in chosen)
    return Lever(LeverKind.COMBINED, f"together: {what}", peak,
                 f"all applied to one step{'; ' + how if how else ''}; forecast allocating nothing",
                 micro_batches=changes.micro, head=changes.head, parts=tuple(lv.kind for lv in chosen))


def lever_forecasts(step: Step, budget: int, *, modules: tuple[str, ...] = (),
                    baseline: Prediction | None = None) -> tuple[int, tuple[Lever, ...]]:
    """The step's forecast peak as it is (with `modules` checkpointed, the plan's), each lever's predicted peak on
    top of it (`budget`: the peak's share of the budget; the micro-batch lever takes the fewest micro-batches,
    halving, that get under it), and, where two or more lower it further together, their best combination.

    `baseline`, the step's forecast on fake tensors or meta as it is, is made here when not given (the chunked
    loss's what-if and its head come from its graph). A lever whose changed step cannot run there says so in its
    `reason`.
    """
    policy = policy_of(step)
    if baseline is None:
        baseline = predict(step_variant(step, device="meta", policy=policy))
    base = Changes(modules=modules)
    alone = predict_changes(step, base)[0] if modules else baseline.peak_bytes

    def free() -> Lever:
        peak, how = predict_changes(step, base.with_(Changes(free=True)))
        return Lever(LeverKind.FREE_GRADS, _FREE_WHAT, peak, f"{how}; forecast allocating nothing",
                     manual=f"to do it in training: {FREE_GRADS_CODE}")

    levers = [_guarded(LeverKind.FREE_GRADS, _FREE_WHAT, free), _autocast(step, base, policy),
              _guarded(LeverKind.MICRO_BATCH, "a smaller micro-batch with gradient accumulation",
                       lambda: _micro_batch(step, base, budget)),
              _chunked(step, base, baseline)]
    combined = _combined(step, base, levers, budget, alone)
    return alone, tuple(levers + ([combined] if combined is not None else []))


def _applied(lever: Lever, modules: tuple[str, ...]) -> str:
    parts = list(lever.parts) or [lever.kind]
    words = {LeverKind.FREE_GRADS: "each .grad set to None by a post-accumulate-grad hook",
             LeverKind.AUTOCAST: "the forward under torch.autocast(torch.bfloat16)",
             LeverKind.MICRO_BATCH: (f"{lever.micro_batches[0]} micro-batches of {lever.micro_batches[1]} run one "
                                     "after another, .grad accumulated" if lever.micro_batches else ""),
             LeverKind.CHUNKED_LOSS: f"{lever.head}'s logits not made, F.cross_entropy over them computed in "
                                     f"{CHUNKS} chunks (chunked_cross_entropy)"}
    done = [words[k] for k in parts]
    if modules:
        done.insert(0, f"non-reentrant checkpointing of {', '.join(modules)}")
    return "; ".join(done)


def verify_levers(step: Step, levers: tuple[Lever, ...], *, modules: tuple[str, ...] = ()) -> tuple[Lever, ...]:
    """Each lever that was predicted by running the changed step, applied to the real step (with `modules`
    checkpointed) and measured; the others (a chunked loss --verify cannot apply) as they are, their `manual`
    saying why and what to write."""
    base = Changes(modules=modules)
    before = measure_changes(step, base)
    done = []
    for lever in levers:
        if lever.predicted_peak is None or (lever.kind is LeverKind.CHUNKED_LOSS and lever.head is None):
            done.append(lever)
            continue
        measured = measure_changes(step, base.with_(_changes(lever)))
        done.append(dataclasses.replace(lever, measured_peak=measured, measured_before=before,
                                        applied=_applied(lever, modules)))
    return tuple(done)


def with_levers(step: Step, plan: CheckpointPlan, *, verify: bool = False) -> CheckpointPlan:
    """`plan` with the levers predicted (and, with `verify`, applied and measured) when it does not reach its
    budget: what lowers a peak checkpointing cannot, on top of the plan's modules where the step could be forecast
    with them checkpointed (`forecast_plan` did: `replay_peaks` set)."""
    if plan.reached:
        return plan
    modules = plan.modules if plan.replay_peaks is not None else ()
    baseline, levers = lever_forecasts(step, plan.budget_bytes, modules=modules)
    if verify:
        levers = verify_levers(step, levers, modules=modules)
    return dataclasses.replace(plan, levers=levers, levers_baseline=baseline, levers_on=modules)
