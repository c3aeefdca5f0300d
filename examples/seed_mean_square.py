"""The seeds' running example: y = mean((x + 2)^2 + 3) at x = [0, 1, 2].

By hand, with the chain rule: dy/dx_i = (1/3) * 2 * (x_i + 2) = 2 (x_i + 2) / 3,
so at x = [0, 1, 2] the gradient is [4/3, 2, 8/3]. Autograd must agree.

Run: python examples/seed_mean_square.py [--out DIR]
"""

import argparse
from pathlib import Path

import torch

from graphviz_app import save, trace


def build() -> tuple[torch.Tensor, torch.Tensor]:
    """The seed graph: returns (y, x)."""
    x = torch.arange(3.0, requires_grad=True)
    y = ((x + 2) ** 2 + 3).mean()
    return y, x


def main(out: Path) -> None:
    y, x = build()
    graph = trace(y, {"x": x})  # before backward(), while saved tensors still exist
    y.backward()
    by_hand = 2 * (x.detach() + 2) / 3
    print(f"y            = {y.item():.4f}")
    print(f"autograd     = {x.grad.tolist()}")
    print(f"by hand      = {by_hand.tolist()}   (2 * (x + 2) / 3)")
    print(f"agree        = {torch.allclose(x.grad, by_hand)}")
    print(f"graph        : {graph.summary()}")
    out.mkdir(parents=True, exist_ok=True)
    for suffix in (".svg", ".png", ".json"):
        print(f"wrote {save(graph, out / f'seed_mean_square{suffix}')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for the pictures")
    main(parser.parse_args().out)
