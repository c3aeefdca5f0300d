"""Checkpoint plans and levers on the memory zoo: predicted before running against measured on the real step.

Run: .venv/bin/python benchmarks/bench_memory_levers.py [--models gpt2,t5]

For every model of `tests/support/mem_zoo.py` at its largest batch, on CPU, `advise_checkpoints` with a
budget leaving 60% of the measured peak, `verify=True`:

- plan: the drop of the peak the graph's replay predicted, the drop forecast on fake tensors with and
  without the modules checkpointed (what `CheckpointPlan.predicted_peak_before/after` now are), and the
  measured drop on the real step;
- levers, where the plan does not reach its budget, on top of the plan's modules: each lever's predicted
  peak / measured peak (KiB), the chunked loss applied by --verify where its head is an nn.Linear whose logits
  only reach F.cross_entropy (else predicted only: "bound"), and the best combination ("together", its parts).

Nothing here is a pass/fail test; tests/memory/test_memory_zoo_plans.py asserts the 10%.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from mem_zoo import ZOO  # noqa: E402

from graphviz_app.analysis.memory.levers import Lever, LeverKind  # noqa: E402
from graphviz_app.memory import advise_checkpoints, forecast, measure, total_bytes  # noqa: E402

_SHORT = {LeverKind.FREE_GRADS: "free .grad", LeverKind.AUTOCAST: "bf16", LeverKind.MICRO_BATCH: "micro",
          LeverKind.CHUNKED_LOSS: "chunked loss", LeverKind.COMBINED: "together"}


def _kib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**10:.0f}"


def _name(lever: Lever) -> str:
    if lever.kind is LeverKind.COMBINED:
        return f"together ({' + '.join(_SHORT[k] for k in lever.parts)})"
    if lever.kind is LeverKind.CHUNKED_LOSS and lever.head is None:
        return "chunked loss (bound)"
    return _SHORT[lever.kind]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    torch.set_num_threads(1)
    wanted = {n for n in args.models.split(",") if n}
    print("| model | batch | modules | drop: replay / forecast / measured (KiB) | levers: predicted / measured (KiB) |")
    print("|---|---|---|---|---|")
    for model in ZOO:
        if wanted and model.name not in wanted:
            continue
        batch, spec = max(model.batches), model.spec
        torch.manual_seed(0)
        net = spec.prepare(spec.build())
        inputs, kwargs = spec.inputs(batch)
        measured = measure(net, *inputs, loss=spec.loss, autocast=spec.autocast, **kwargs).measured.peak_bytes
        rest = total_bytes(forecast(net, *inputs, loss=spec.loss, policy="cpu", **kwargs)) - measured
        plan = advise_checkpoints(net, *inputs, budget_bytes=rest + int(0.6 * measured), verify=True,
                                  loss=spec.loss, **kwargs)
        drop = "no plan"
        if plan.modules and plan.measured_peak_before is not None and plan.measured_peak_after is not None:
            replay = plan.replay_peaks[0] - plan.replay_peaks[1] if plan.replay_peaks else None
            drop = (f"{_kib(replay)} / {_kib(plan.predicted_peak_before - plan.predicted_peak_after)} / "
                    f"{_kib(plan.measured_peak_before - plan.measured_peak_after)}")
        levers = "; ".join(f"{_name(lv)} {_kib(lv.predicted_peak)} / {_kib(lv.measured_peak)}"
                           for lv in plan.levers if lv.predicted_peak is not None)
        if plan.levers_baseline is not None:
            on = f"plan {_kib(plan.levers_baseline)}" if plan.levers_on else f"as is {_kib(plan.levers_baseline)}"
            levers = f"{on}: {levers}"
        print(f"| {model.name} | {batch} | {len(plan.modules)} | {drop} | {levers} |", flush=True)


if __name__ == "__main__":
    main()
