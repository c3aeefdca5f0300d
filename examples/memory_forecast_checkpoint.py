"""Will it fit? Forecast a GPT-style model's training step on `meta` (nothing allocated), then checkpoint.

Forecasts the step's peak at several batch sizes under bfloat16 autocast, finds the
largest batch that fits a budget with Adam's state, and asks which blocks to wrap in
`torch.utils.checkpoint` to fit a smaller one: predicted, then applied and measured.

Run: python examples/memory_forecast_checkpoint.py [--layers N]
"""

import argparse

import torch
from torch import nn

from graphviz_app.memory import advise_checkpoints, forecast, largest_batch_for, total_bytes
from graphviz_app.model import human_bytes


class Block(nn.Module):
    """A GPT-2 block: attention and an MLP, each after a LayerNorm, each added back."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False, is_causal=True,
                          attn_mask=nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device))[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers: int, d: int = 128, heads: int = 4, vocab: int = 1000, context: int = 64) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2's

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        logits = self.head(self.ln(self.blocks(self.tok(idx) + self.pos(positions))))
        return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), idx[:, 1:].flatten())


def main(layers: int) -> None:
    torch.manual_seed(0)
    model, idx = GPT(layers), torch.randint(0, 1000, (4, 64))
    print(f"GPT with {layers} blocks, {sum(p.numel() for p in model.parameters()):,} parameters, context 64")
    for batch in (1, 8, 32):
        step = forecast(model, idx, batch=batch, dtype=torch.bfloat16)
        print(f"  batch {batch:>2}: bfloat16 autocast step peaks at {human_bytes(step.peak_bytes)} "
              f"(forecast on meta)")
    budget = 64 * 1024**2
    fits = largest_batch_for(model, idx, budget_bytes=budget, optimizer="adam", dtype=torch.bfloat16)
    print(f"  largest batch within {human_bytes(budget)} with Adam's state: {fits}")
    step = forecast(model, idx, policy="cpu")
    # a budget is the whole step on the device: here what exists anyway plus 60% of today's peak
    budget = total_bytes(step) - step.peak_bytes + int(step.peak_bytes * 0.6)
    plan = advise_checkpoints(model, idx, budget_bytes=budget, verify=True)
    print(plan)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4, help="transformer blocks")
    parser.add_argument("--out", default=None, help="unused (every example takes it)")
    main(parser.parse_args().layers)
