"""Eager against `torch.compile`, side by side: the eager backward ops, and the compiled region that replaces them.

Traces the same model's backward eagerly and compiled (`backend="aot_eager"`, no C++ compiler needed)
and writes both in synced panes. The compiled pane shows the region as a box that opens on the
backward graph AOT autograd made (`aten.mm.default`, ...); the eager ops it replaces show as removed.

Run: python examples/compare_eager_compiled.py [--out DIR]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import diff, save, trace


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = torch.randn(8, 16, requires_grad=True)
    eager = trace(model(x).sum(), model)
    compiled = trace(torch.compile(model, backend="aot_eager")(x).sum(), model)
    found = diff(eager, compiled)
    print(str(found).splitlines()[0])
    print("regions:", ", ".join(f"{r.name} ({len(r.nodes)} ops inside)" for r in compiled.regions))
    path = save((eager, compiled), out / "compare_eager_compiled.html", labels=("eager", "compiled"))
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder to write the HTML file in")
    main(Path(parser.parse_args().out))
