"""Memory of a training step: the timeline's speed, the meta forecast's speed, prediction error, MemTracker.

Run: .venv/bin/python benchmarks/bench_memory.py [--repeat 5] [--quick]

- timeline: `memory_timeline` on a GPT-style graph of more than 10,000 nodes
  (traced on meta), best CPU time of `--repeat` (goal: under 0.2 s);
- forecast: a 12-layer GPT-2-shaped model (d=768, 12 heads, vocabulary 50,257,
  context 1,024, tied embedding; built from nn modules on meta, so nothing is
  allocated) forecast under bfloat16 autocast at 4 batch sizes, one after the
  other, total CPU time (goal: under 3 s);
- error: on every benchmark model, the predicted peak against the measured one
  (every storage ops allocate, counted while alive), on CPU, and the forecast on
  `meta` (same batch, float32, CPU's choice of attention kernel) against the same
  measurement;
- MemTracker: PyTorch's `torch.distributed._tools.mem_tracker.MemTracker` on the
  same step, its time and its peak (parameters and buffers taken out, as in our
  definition), beside ours: the prediction (trace + timeline) and our measurement.

CPU time (`time.process_time`) of this single-threaded process; torch runs one
thread. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import best_cpu, cpu_seconds  # noqa: E402

from graphviz_app import memory_timeline  # noqa: E402
from graphviz_app.tracing.memory.forecast import predict, step_variant  # noqa: E402
from graphviz_app.tracing.memory.step import Step, run_step  # noqa: E402

torch.set_num_threads(1)


class Block(nn.Module):
    """A GPT-2 block: causal attention and an MLP, each after a LayerNorm, each added back."""

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
    def __init__(self, layers: int, d: int, heads: int, vocab: int, context: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        logits = self.head(self.ln(self.blocks(self.tok(idx) + self.pos(positions))))
        return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), idx[:, 1:].flatten())


class CNN(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
        )


class LSTMClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(64, 256, num_layers=2, batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.lstm(x)[1][0][-1])


def _models() -> dict[str, Callable[[], Step]]:
    return {
        "MLP 784-1024-1024-10, batch 64": lambda: Step(
            nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)),
            (torch.randn(64, 784),)),
        "CNN with BatchNorm, 32x32, batch 32": lambda: Step(CNN(), (torch.randn(32, 3, 32, 32),)),
        "transformer encoder 4x256, seq 64, batch 16": lambda: Step(
            nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True), 4,
                                  enable_nested_tensor=False), (torch.randn(16, 64, 256),)),
        "LSTM 2x256, seq 50, batch 32": lambda: Step(LSTMClassifier(), (torch.randn(32, 50, 64),)),
        "GPT 4x256, tied, context 128, batch 8": lambda: Step(
            GPT(4, 256, 8, 5000, 128), (torch.randint(0, 5000, (8, 128)),)),
    }


def bench_timeline(repeat: int) -> None:
    torch.manual_seed(0)
    with torch.device("meta"):
        model = GPT(130, 64, 4, 1000, 64)  # over 10,000 nodes (attention as the fused kernel on meta)
    prediction = predict(Step(model, (torch.empty(4, 64, dtype=torch.long, device="meta"),)))
    graph = prediction.graph
    seconds, timeline = best_cpu(lambda: memory_timeline(graph, roots=prediction.roots), repeat)
    print(f"timeline: {len(graph.nodes):,} nodes, {len(timeline.steps) - 1:,} backward steps: "
          f"{seconds:.3f} s (best of {repeat})")


def bench_forecast(repeat: int) -> None:
    with torch.device("meta"):
        model = GPT(12, 768, 12, 50257, 1024)
    idx = torch.empty(1, 1024, dtype=torch.long, device="meta")
    batches = (1, 4, 8, 16)

    def forecast_all() -> list[int]:
        step = Step(model, (idx,))
        return [predict(step_variant(step, batch=b, device="meta", dtype=torch.bfloat16)).peak_bytes
                for b in batches]

    seconds, peaks = best_cpu(forecast_all, repeat)
    shown = ", ".join(f"batch {b}: {p / 2**30:.2f} GiB" for b, p in zip(batches, peaks, strict=True))
    print(f"forecast: GPT-2 124M, context 1024, bfloat16 autocast (CUDA lists), 4 batch sizes: {seconds:.2f} s "
          f"(best of {repeat}); {shown}")
    bench_forecast_against_fake(model, idx, batches)


def bench_forecast_against_fake(meta_model: nn.Module, idx: torch.Tensor, batches: tuple[int, ...]) -> None:
    """The same GPT in float32 (CPU's kernels): our meta forecast against MemTracker under FakeTensorMode."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    ours_s, ours = cpu_seconds(lambda: [
        predict(step_variant(Step(meta_model, (idx,)), batch=b, device="meta", policy="cpu")).peak_bytes
        for b in batches])
    fake, fake_s = [], 0.0
    for b in batches:
        with FakeTensorMode():
            torch.manual_seed(0)
            model = GPT(12, 768, 12, 50257, 1024)
            seconds, peak = _memtracker(Step(model, (torch.zeros(b, 1024, dtype=torch.long),)))
        fake.append(peak)
        fake_s += seconds
    rows = ", ".join(f"batch {b}: {o / 2**30:.3f} / {f / 2**30:.3f} GiB" for b, o, f in zip(batches, ours, fake,
                                                                                           strict=True))
    print(f"forecast float32 (CPU kernels), ours / MemTracker+FakeTensorMode: {ours_s:.2f} s / {fake_s:.2f} s; "
          f"{rows}")


def _memtracker(step: Step) -> tuple[float, int]:
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    tracker.track_external(step.model)
    for p in step.model.parameters():
        p.grad = None

    def tracked_step() -> None:
        with tracker:
            out = step.model(*step.args)
            (out if out.dim() == 0 else out.sum()).backward()

    seconds, _ = cpu_seconds(tracked_step)
    snapshot = next(iter(tracker.get_tracker_snapshot("peak").values()))
    kinds = {getattr(k, "value", k): v for k, v in snapshot.items()}
    for p in step.model.parameters():
        p.grad = None
    return seconds, kinds["Total"] - kinds.get("Parameter", 0) - kinds.get("Buffer", 0)


def bench_error(quick: bool) -> None:
    print(f"\n{'model':<46} {'predicted':>11} {'measured':>11} {'error':>7} {'on meta':>11} {'error':>7} "
          f"{'MemTracker':>11} {'predict s':>9} {'measure s':>9} {'MemTracker s':>12}")
    for name, make in _models().items():
        torch.manual_seed(0)
        step = make()
        predict_s, predicted = cpu_seconds(lambda: predict(step).timeline.peak_bytes)  # noqa: B023 - called at once
        measure_s, measured = cpu_seconds(lambda: run_step(step).measured)  # noqa: B023 - called at once
        assert measured is not None
        tracker_s, tracker_peak = _memtracker(step)
        on_meta = predict(step_variant(step, device="meta", policy="cpu")).peak_bytes
        error = (predicted - measured.peak_bytes) / measured.peak_bytes
        meta_error = (on_meta - measured.peak_bytes) / measured.peak_bytes
        print(f"{name:<46} {predicted / 2**20:>9.2f}Mi {measured.peak_bytes / 2**20:>9.2f}Mi {error:>+7.1%} "
              f"{on_meta / 2**20:>9.2f}Mi {meta_error:>+7.1%} "
              f"{tracker_peak / 2**20:>9.2f}Mi {predict_s:>9.2f} {measure_s:>9.2f} {tracker_s:>12.2f}")
        if quick:
            break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one model in the error table")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, 1 thread")
    bench_timeline(args.repeat)
    bench_forecast(max(1, args.repeat // 2))
    bench_error(args.quick)


if __name__ == "__main__":
    main()
