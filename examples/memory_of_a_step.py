"""The seeds' memory questions, answered in bytes: a loss kept without .item(), inference under no_grad, .half().

For each, the bytes are predicted from the graph (`memory_timeline`) and measured
as the step runs (every storage an op allocates, while it lives), side by side.

Run: python examples/memory_of_a_step.py [--out DIR] [--steps N]
"""

import argparse
from pathlib import Path

import torch
from torch import nn

from graphviz_app import memory_timeline, save, trace
from graphviz_app.memory import measure
from graphviz_app.tracing.memory.counting import LiveStorages


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1))


def kept_per_step(steps: int) -> None:
    """total = total + loss chains every step's graph: what it keeps when backward starts."""
    model = make_model()
    print("1. a loss accumulated without .item(): bytes alive when total.backward() starts")
    print(f"{'steps':>5}  {'total += loss':>14}  {'total += loss.item()':>20}")
    kept = []
    for n in range(1, steps + 1):
        total = torch.zeros(())
        for _ in range(n):
            total = total + model(torch.randn(32, 64)).pow(2).mean()
        kept.append(memory_timeline(trace(total, model)).forward_bytes)
        print(f"{n:>5}  {kept[-1]:>12} B  {'0 B (a float)':>20}")
    per_step = {b - a for a, b in zip(kept, kept[1:], strict=False)}
    print(f"each step keeps {' / '.join(str(b) for b in sorted(per_step))} B more: its input batch, "
          "both ReLU outputs and the last layer's input, saved for a backward that only comes at the end")


def inference_under_no_grad() -> None:
    """Under no_grad no op saves anything: only the forward's temporaries, freed as it goes."""
    model = make_model()
    x = torch.randn(32, 64)
    counter = LiveStorages()
    with counter, torch.no_grad():
        y = model(x)
    step = measure(model, x)
    print("\n2. inference under torch.no_grad()")
    print(f"   no_grad forward: peak {counter.peak} B while it runs, {counter.live} B alive after it "
          f"(the output, {y.numel() * y.element_size()} B): nothing saved, y.grad_fn is {y.grad_fn}")
    print(f"   training step:   {step.predicted.forward_bytes} B saved for backward (predicted; measured "
          f"{step.measured.forward_bytes} B), peak {step.predicted.peak_bytes} B (measured "
          f"{step.measured.peak_bytes} B)")


class SpeechHead(nn.Module):
    """Frames to letters, trained with the CTC loss (speech recognition's)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 8)

    def forward(self, frames: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logp = self.proj(frames).log_softmax(-1)
        lengths = torch.full((frames.shape[1],), frames.shape[0], dtype=torch.long, device=frames.device)
        target_lengths = torch.full((targets.shape[0],), targets.shape[1], dtype=torch.long, device=frames.device)
        return nn.functional.ctc_loss(logp, targets, lengths, target_lengths)


def half_precision(out: Path) -> None:
    """.half() halves what a step saves; on CPU a few ops have no Half kernel at all."""
    model = make_model()
    x = torch.randn(32, 64)
    full = measure(model, x)
    half = measure(make_model().half(), x.half())
    print("\n3. .half()")
    print(f"   saved for backward: float32 {full.predicted.forward_bytes} B, half {half.predicted.forward_bytes} B "
          f"(measured {full.measured.forward_bytes} B and {half.measured.forward_bytes} B)")
    print(f"   peak of the step:   float32 {full.predicted.peak_bytes} B, half {half.predicted.peak_bytes} B "
          f"(measured {full.measured.peak_bytes} B and {half.measured.peak_bytes} B)")
    speech, frames, targets = SpeechHead(), torch.randn(20, 2, 16), torch.randint(1, 8, (2, 5))
    try:
        speech.half()(frames.half(), targets).backward()
        print("   ctc_loss in half ran on this CPU")
    except (NotImplementedError, RuntimeError) as e:
        print(f"   where a CPU kernel is missing: ctc_loss -> {str(e).splitlines()[0]}")
    speech32 = measure(SpeechHead(), frames, targets)
    print(f"   in float32 the CTC step runs: peak {speech32.measured.peak_bytes} B measured, "
          f"{speech32.predicted.peak_bytes} B predicted")
    out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {save(half.graph, out / 'memory_half.svg')}")


def main(out: Path, steps: int) -> None:
    kept_per_step(steps)
    inference_under_no_grad()
    half_precision(out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for the pictures")
    parser.add_argument("--steps", type=int, default=4, help="training steps to accumulate")
    args = parser.parse_args()
    main(args.out, args.steps)
