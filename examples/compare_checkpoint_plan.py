"""Before and after a checkpoint plan, side by side: the saved activations the plan lets go.

Asks `advise_checkpoints` which blocks to checkpoint to fit a budget, applies the plan
(non-reentrant `torch.utils.checkpoint` on those modules) and writes the step's graph before and after
in synced panes: the same ops, the planned blocks' saved tensors changed to "not held" ("Δ saved
bytes" colours how much each op no longer keeps).

Run: python examples/compare_checkpoint_plan.py [--out DIR] [--blocks N]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import diff, save, trace_model
from graphviz_app.memory import advise_checkpoints, forecast, total_bytes
from graphviz_app.model import human_bytes
from graphviz_app.tracing.memory.checkpointing import checkpointed


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


def main(out: Path, blocks: int) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(64) for _ in range(blocks)], nn.Linear(64, 10))
    x = torch.randn(128, 64)
    step = forecast(model, x, policy="cpu")
    budget = total_bytes(step) - step.peak_bytes + int(step.peak_bytes * 0.6)  # 60% of today's peak
    plan = advise_checkpoints(model, x, budget_bytes=budget)
    print(f"plan: checkpoint {', '.join(plan.modules)}; predicted peak {human_bytes(plan.predicted_peak_before)} "
          f"-> {human_bytes(plan.predicted_peak_after)}")
    before = trace_model(model, x)
    with checkpointed(model, plan.modules):
        after = trace_model(model, x)
    found = diff(before, after)
    print(str(found).splitlines()[0])
    print(found.module_table())
    path = save((before, after), out / "compare_checkpoint_plan.html", labels=("as it is", "checkpoint plan"))
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder to write the HTML file in")
    parser.add_argument("--blocks", type=int, default=4, help="residual blocks")
    args = parser.parse_args()
    main(Path(args.out), args.blocks)
