"""The memory zoo against PyTorch's own tracker: one row per model and batch size, a markdown table.

Run: .venv/bin/python benchmarks/bench_memory_zoo.py [--models gpt2,t5] [--no-plans]

For every model of `tests/memory/zoo.py` (transformers and diffusers configs with random
weights, and plain torch models with tied weights, checkpointing, a forward peak) at
each of its batch sizes, on CPU:

- MemTracker: `torch.distributed._tools.mem_tracker.MemTracker` on the real step, the
  model's own tensors and the step's inputs taken out (our definition of the peak);
- measured / MemTracker: `graphviz_app.memory.measure`;
- replay / measured: the timeline replayed from the step's graph (`measure(...).predicted`);
- forecast / real: `graphviz_app.memory.forecast` on meta (forward and backward counted);
- MT+fake / real: MemTracker with the model and inputs built under FakeTensorMode;
- the CPU seconds of the two forecasts (ours, MemTracker+FakeTensorMode);
- with plans (default), at the largest batch: `advise_checkpoints` for a budget that leaves
  60% of the measured peak, verified: the predicted drop against the measured one.

Nothing here is a pass/fail test; the tolerances are asserted by tests/memory/test_memory_zoo.py.
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

from mem_oracle import compare  # noqa: E402
from mem_zoo import ZOO, ZooModel  # noqa: E402

from graphviz_app.errors import GraphvizAppError  # noqa: E402
from graphviz_app.memory import advise_checkpoints, total_bytes  # noqa: E402


def _ratio(x: int | None, of: int) -> str:
    return "-" if x is None or not of else f"{x / of:.3f}"


def _plan(model: ZooModel, batch: int, measured: int) -> str:
    torch.manual_seed(0)
    net = model.spec.prepare(model.spec.build())
    args, kwargs = model.spec.inputs(batch)
    try:
        from graphviz_app.memory import forecast
        rest = total_bytes(forecast(net, *args, loss=model.spec.loss, policy="cpu", **kwargs)) - measured
        plan = advise_checkpoints(net, *args, budget_bytes=rest + int(0.6 * measured), verify=True,
                                  loss=model.spec.loss, **kwargs)
    except (GraphvizAppError, RuntimeError, NotImplementedError) as e:
        return f"failed: {type(e).__name__}"
    if not plan.modules:
        return "no plan"
    drop = plan.predicted_peak_before - plan.predicted_peak_after
    if plan.measured_peak_after is None or plan.measured_peak_before is None:
        return f"{len(plan.modules)} modules, not verified"
    real = plan.measured_peak_before - plan.measured_peak_after
    return f"{len(plan.modules)} modules: drop {drop / 2**10:.0f} / {real / 2**10:.0f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--no-plans", action="store_true", help="skip the checkpoint plans")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    torch.set_num_threads(1)
    wanted = {n for n in args.models.split(",") if n}
    print("| model | batch | MemTracker | measured / MT | replay / measured | forecast / real | MT+fake / real "
          "| forecast s | MT+fake s | checkpoint plan: predicted / measured drop |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in ZOO:
        if wanted and model.name not in wanted:
            continue
        for batch in model.batches:
            r = compare(model.spec, batch)
            plan = "" if args.no_plans or batch != max(model.batches) else _plan(model, batch, r.measured)
            fake = _ratio(r.memtracker_fake, r.measured) if r.memtracker_fake is not None else "fails"
            fc = _ratio(r.forecast, r.measured) if r.forecast is not None else "fails"
            print(f"| {model.name} | {batch} | {r.memtracker / 2**10:.1f} KiB | {_ratio(r.measured, r.memtracker)} "
                  f"| {_ratio(r.replay, r.measured)} | {fc} | {fake} | {r.forecast_seconds:.2f} "
                  f"| {r.fake_seconds:.2f} | {plan} |", flush=True)


if __name__ == "__main__":
    main()
