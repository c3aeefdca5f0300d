"""float32 against bfloat16 autocast, side by side: which activations halved, and which casts autocast added.

Traces one small model's step twice (float32, then under `torch.autocast("cpu", dtype=torch.bfloat16)`)
and writes both graphs in synced panes (`save((a, b), "x.html", labels=...)`): opening a box or
selecting a node in one pane does the same in the other; the casts autocast adds show as added, and
"Δ saved bytes" colours what each op saves less.

Run: python examples/compare_autocast_bf16.py [--out DIR]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import diff, record, save, trace


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))
    x = torch.randn(32, 64)
    with record(model):
        fp32 = trace(model(x).sum(), model)
    with record(model), torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = trace(model(x).float().sum(), model)
    found = diff(fp32, bf16)
    print(str(found).splitlines()[0])
    print(found.module_table())
    path = save((fp32, bf16), out / "compare_autocast_bf16.html", labels=("float32", "bfloat16 autocast"))
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder to write the HTML file in")
    main(Path(parser.parse_args().out))
