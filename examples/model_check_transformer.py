"""Find a wrong backward inside a small transformer, module by module, and draw where it is.

The model is correct except for one custom `autograd.Function`: a fused "scaled softmax" in
the second block's attention, whose hand-written backward forgets to divide by the scale.
Training would run and the loss would go down, just not as it should. `check_model` re-runs
every module call at the inputs it received, compares its backward with finite differences,
and names the Function and its line; the drawing colours the culprit red.

Run: python examples/model_check_transformer.py [--out DIR]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import check_model, trace_model
from graphviz_app.drawing.check_style import save_check


class ScaledSoftmax(torch.autograd.Function):
    """softmax(x / scale) in one step, as a fused kernel would do it."""

    @staticmethod
    def forward(ctx, x, scale):  # type: ignore[no-untyped-def]
        y = (x / scale).softmax(-1)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True)), None  # the planted bug: no "/ ctx.scale"


class Attention(nn.Module):
    def __init__(self, d: int, fused: bool) -> None:
        super().__init__()
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fused = fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores, scale = q @ k.transpose(-1, -2), x.shape[-1] ** 0.5
        weights = ScaledSoftmax.apply(scores, scale) if self.fused else (scores / scale).softmax(-1)
        return self.proj(weights @ v)


class Block(nn.Module):
    def __init__(self, d: int, fused: bool) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, fused)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 16, layers: int = 3) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*(Block(d, fused=(i == 1)) for i in range(layers)))
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.emb(tokens)))


def main(out: Path) -> None:
    torch.manual_seed(0)
    model, tokens = TinyLM().train(), torch.randint(0, 50, (2, 12))
    result = check_model(model, tokens)
    print(result)
    culprit = result.culprits[0]
    print(f"culprit: {culprit.path} {culprit.name} at {culprit.source}")
    graph = trace_model(model, tokens)
    out.mkdir(parents=True, exist_ok=True)
    for suffix in (".html", ".dot"):
        path = save_check(graph, result, out / f"model_check_transformer{suffix}")
        print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for the drawings")
    main(parser.parse_args().out)
