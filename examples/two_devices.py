"""A model split across two devices: the copy between them is highlighted.

With two GPUs the layers sit on cuda:0 and cuda:1, with one on cpu and cuda:0.
With none, both halves stay on the CPU and a dtype change (float32 -> float64)
stands in for the move, so the example still runs; the graph then shows
ToCopyBackward0 where the device copy would be.

Run: python examples/two_devices.py [--out DIR]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import save, trace


def pick_devices() -> tuple[torch.device, torch.device]:
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count >= 2:
        return torch.device("cuda:0"), torch.device("cuda:1")
    if count == 1:
        return torch.device("cpu"), torch.device("cuda:0")
    return torch.device("cpu"), torch.device("cpu")


def build() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    first, second = pick_devices()
    torch.manual_seed(0)
    encoder = nn.Linear(3, 4).to(first)
    head = nn.Linear(4, 1).to(second)
    x = torch.randn(2, 3, device=first)
    hidden = torch.tanh(encoder(x))
    if first == second:  # one device only: a dtype copy shows the same ToCopyBackward0
        head = head.double()
        moved = hidden.double()
    else:
        moved = hidden.to(second)  # the seeds' fix for "Expected all tensors to be on the same device"
    y = head(moved).sum()
    params = {f"encoder.{k}": v for k, v in encoder.named_parameters()}
    params.update({f"head.{k}": v for k, v in head.named_parameters()})
    return y, params


def main(out: Path) -> None:
    first, second = pick_devices()
    print(f"devices: {first} -> {second}")
    y, params = build()
    graph = trace(y, params)
    crossing = [graph.node(i).name for i in sorted(graph.cross_device_ops())]
    print(f"graph: {graph.summary()}")
    print(f"ops crossing devices (highlighted in red): {crossing or 'none, only one device here'}")
    out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {save(graph, out / 'two_devices.svg')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for the pictures")
    main(parser.parse_args().out)
