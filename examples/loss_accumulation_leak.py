"""The seeds' silent leak: `total_loss += loss` keeps every step's graph alive.

Accumulating the loss tensor chains each step's graph onto the last, so the
graph (and the memory it holds) grows with every step; `loss.item()` adds a
plain number and the graph stays one step long.

Run: python examples/loss_accumulation_leak.py [--out DIR] [--steps N]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import save, trace
from graphviz_app.analysis.repeats import find_repeats


def train(steps: int, *, use_item: bool) -> list[str]:
    """What the accumulated loss keeps alive after each step: nodes and saved bytes."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    total_loss: torch.Tensor | float = 0.0
    sizes = []
    for _ in range(steps):
        loss = model(torch.randn(4, 3)).pow(2).mean()
        total_loss += loss.item() if use_item else loss
        if isinstance(total_loss, torch.Tensor):
            summary = trace(total_loss).summary()
            sizes.append(f"{summary.nodes} nodes, {summary.activations_total} B of activations held")
        else:
            sizes.append("0 nodes (a plain float)")
    return sizes


def main(out: Path, steps: int) -> None:
    leaking = train(steps, use_item=False)
    fixed = train(steps, use_item=True)
    print("graph kept alive by total_loss after each step")
    print(f"{'step':>4}  {'total_loss += loss':<28}  total_loss += loss.item()")
    for step, (a, b) in enumerate(zip(leaking, fixed, strict=True), start=1):
        print(f"{step:>4}  {a:<28}  {b}")
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    total = sum(model(torch.randn(4, 3)).pow(2).mean() for _ in range(steps))
    graph = trace(total, model.named_parameters())
    # Read from the graph alone, not from this program's text.
    print(f"from the graph: {find_repeats(graph) or 'no repeated block'}")
    out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {save(graph, out / 'loss_accumulation_leak.svg')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for the pictures")
    parser.add_argument("--steps", type=int, default=5, help="training steps to run")
    args = parser.parse_args()
    main(args.out, args.steps)
