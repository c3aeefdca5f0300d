"""A two-layer MLP: leaves carry the names from model.named_parameters().

Run: python examples/mlp_named_parameters.py [--out DIR]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import save, trace


def build() -> tuple[torch.Tensor, nn.Module]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    inputs = torch.randn(5, 4)
    targets = torch.randint(0, 2, (5,))
    loss = nn.functional.cross_entropy(model(inputs), targets)
    return loss, model


def main(out: Path) -> None:
    loss, model = build()
    graph = trace(loss, model.named_parameters())
    leaves = [n.name for n in graph.nodes if n.kind.value == "leaf"]
    print(f"loss = {loss.item():.4f}")
    print(f"named leaves: {leaves}")
    print(f"graph: {graph.summary()}")
    out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {save(graph, out / 'mlp_named_parameters.svg', rankdir='LR')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for the pictures")
    main(parser.parse_args().out)
