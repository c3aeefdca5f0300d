"""A gradient penalty (WGAN-GP style): the gradient of a gradient, drawn with both orders.

loss = D(x).mean() + 10 * (|dD/dx| - 1)^2 needs dD/dx as a differentiable tensor
(torch.autograd.grad with create_graph=True: the first backward, whose nodes are order 1),
and then loss.backward() differentiates through it (its nodes would be order 2).
Here the gradient of the loss is itself taken with create_graph=True, so both orders appear.

Run: python examples/gradient_penalty.py [--out DIR]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import record_orders, save, trace
from graphviz_app.analysis.orders import order_counts


def build() -> tuple[torch.Tensor, torch.Tensor, nn.Module]:
    """(loss with the penalty, the gradient of the loss with respect to x, the critic)."""
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(4, 2, requires_grad=True)
    with record_orders():
        score = critic(x).mean()
        (dx,) = torch.autograd.grad(score, x, create_graph=True)  # order 1
        loss = score + 10 * ((dx.norm(dim=1) - 1) ** 2).mean()
        (dloss,) = torch.autograd.grad(loss, x, create_graph=True)  # order 2 (and order 1 again)
    return loss, dloss, critic


def main(out: Path) -> None:
    loss, dloss, critic = build()
    penalty = trace(loss, critic)
    second = trace(dloss.sum(), critic)
    print(f"penalty graph : ops per order {order_counts(penalty)}")
    print(f"its gradient  : ops per order {order_counts(second)}")
    out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {save(penalty, out / 'gradient_penalty.svg', color_by='order')}")
    print(f"wrote {save(second, out / 'gradient_penalty_grad.svg', color_by='order')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for the pictures")
    main(parser.parse_args().out)
