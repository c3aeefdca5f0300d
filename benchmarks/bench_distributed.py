"""A 1B-parameter GPT-shaped model, FSDP2 per block, forecast per rank at world sizes 8, 64 and 512 on a fake cluster;
side by side with PyTorch's FSDPMemTracker under the same FakeTensorMode and fake process group (CPU seconds).

`--overhead`: on 2 real gloo ranks, a plain FSDP2 step of examples/distributed_fsdp.py:fsdp against the same step
counted (`RankStorages`) and followed by FSDPMemTracker (best of 5, CPU seconds of rank 0).

`--ddp`: the same model under DDP (default 25 MiB buckets) forecast at the same world sizes, beside MemTracker
following the same fake step after the same warm-up (CPU seconds, bytes).

`--replay`: the same model inside a fake rank: `graphviz_app.memory.measure` (trace, count, replay of the rank's
graph with its FSDP units) against FSDPMemTracker following the same forward and backward (CPU seconds, bytes).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from graphviz_app.model import human_bytes
from graphviz_app.tracing.distributed.fake_cluster import fake_cluster, forecast_world
from graphviz_app.tracing.torch_internals import memory_trackers

# GPT-2-XL-like widths at 1.0B parameters: 20 layers of d=2048 (12 d^2 each) and a 50,304-token vocabulary.
LAYERS, D, HEADS, VOCAB = 20, 2048, 16, 50304
BATCH, SEQ = 1, 1024


class GPTBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.up, self.down = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, D)
        self.blocks = torch.nn.ModuleList(GPTBlock() for _ in range(LAYERS))
        self.head = torch.nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return torch.nn.functional.cross_entropy(self.head(x).flatten(0, 1), idx.flatten())


def build(mesh: Any = None) -> Any:
    model = GPT()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.randint(0, VOCAB, (BATCH, SEQ)), torch.optim.AdamW(model.parameters())


def gpt_1b() -> Any:
    """The FUNC: FSDP2 over every rank of the world."""
    return build(init_device_mesh("cpu", (dist.get_world_size(),)))


def tracker_total(world_size: int) -> int:
    fsdp_tracker, _ = memory_trackers()
    with fake_cluster(world_size):
        model, idx, opt = gpt_1b()
        tracker = fsdp_tracker(model, opt)
        tracker.track_inputs((idx,))
        with tracker:
            for i in range(2):
                model(idx).backward()
                opt.step()
                opt.zero_grad()
                if i == 0:
                    tracker.reset_mod_stats()
        (per_device,) = tracker.get_tracker_snapshot("peak").values()
        return int(per_device["Total"])


def gpt_1b_ddp() -> Any:
    """The FUNC under DDP: the whole model on every rank, its gradients all-reduced in DDP's default buckets."""
    model = torch.nn.parallel.DistributedDataParallel(GPT())
    return model, torch.randint(0, VOCAB, (BATCH, SEQ)), torch.optim.AdamW(model.parameters())


def ddp_tracker_total(world_size: int) -> int:
    """MemTracker on rank 0's third step of `gpt_1b_ddp` in the same fake cluster (the first two: AdamW's state,
    and DDP's rebuild of its buckets in gradient-ready order)."""
    _, mem_tracker = memory_trackers()
    with fake_cluster(world_size):
        model, idx, opt = gpt_1b_ddp()

        def step() -> None:
            model(idx).backward()
            opt.step()
            opt.zero_grad()

        step()
        step()
        tracker = mem_tracker()
        tracker.track_external(model, opt, idx)
        with tracker:
            step()
        (per_device,) = tracker.get_tracker_snapshot("peak").values()
        return int(per_device["Total"])


def ddp(world_sizes: list[int]) -> None:
    print("| world size | ours: total per rank | buckets | CPU s | MemTracker total | CPU s | ours / tracker |")
    print("|---|---|---|---|---|---|---|")
    for n in world_sizes:
        t = time.process_time()
        ours = forecast_world(gpt_1b_ddp, world_size=n)
        ours_s = time.process_time() - t
        t = time.process_time()
        theirs = ddp_tracker_total(n)
        theirs_s = time.process_time() - t
        buckets = int(next(e for e in ours.notes if e.startswith("DDP:")).split()[1])  # "DDP: N gradient bucket(s)"
        print(f"| {n} | {human_bytes(ours.total_bytes)} ({ours.total_bytes}) | {buckets} | {ours_s:.1f} | "
              f"{human_bytes(theirs)} ({theirs}) | {theirs_s:.1f} | {ours.total_bytes / theirs:.4f} |", flush=True)


def _overhead_rank(rank: int, port: int) -> None:
    import os
    import runpy
    from pathlib import Path

    from graphviz_app.tracing.distributed.counting import RankStorages
    from graphviz_app.tracing.distributed.rank_step import rank_step, train_step
    from graphviz_app.tracing.distributed.torch_trackers import torch_tracker

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    example = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "distributed_fsdp.py"))
    step = rank_step(example["fsdp"]())
    train_step(step)

    def best(run: Any) -> float:
        times = []
        for _ in range(5):
            dist.barrier()
            t = time.process_time()
            run()
            times.append(time.process_time() - t)
        return min(times)

    def counted() -> None:
        with RankStorages() as c:
            train_step(step, c)

    def tracked() -> None:
        with torch_tracker(step.model, step.optimizer, list(step.args)):
            train_step(step)

    plain, ours, theirs = best(lambda: train_step(step)), best(counted), best(tracked)
    if rank == 0:
        print("| plain FSDP2 step | counted (RankStorages) | FSDPMemTracker |")
        print("|---|---|---|")
        print(f"| {plain:.3f} s | {ours:.3f} s ({ours / plain:.2f}x) | {theirs:.3f} s ({theirs / plain:.2f}x) |")
    dist.destroy_process_group()


def overhead() -> None:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_overhead_rank, args=(port,), nprocs=2)


def replay(world_size: int) -> None:
    from graphviz_app.memory import measure
    from graphviz_app.tracing.distributed.shards import local_storage_bytes

    fsdp_tracker, _ = memory_trackers()
    with fake_cluster(world_size):
        model, idx, _ = gpt_1b()
        model(idx).backward()  # FSDP's lazy init, as a training loop's first step
        for p in model.parameters():
            p.grad = None
        held = local_storage_bytes([*model.parameters(), *model.buffers(), idx])
        t = time.process_time()
        m = measure(model, idx)
        ours_s = time.process_time() - t
        tracker = fsdp_tracker(model)
        tracker.track_inputs((idx,))
        t = time.process_time()
        with tracker:
            out = model(idx)
            out.backward()
            del out
        theirs_s = time.process_time() - t
        (per_device,) = tracker.get_tracker_snapshot("peak").values()
    theirs = int(per_device["Total"])
    print("| world size | measure(): counted | replayed | CPU s | FSDPMemTracker | CPU s | replayed / tracker |")
    print("|---|---|---|---|---|---|---|")
    counted, replayed = m.measured.peak_bytes + held, m.predicted.peak_bytes + held
    print(f"| {world_size} | {human_bytes(counted)} ({counted}) | {human_bytes(replayed)} ({replayed}) | "
          f"{ours_s:.1f} | {human_bytes(theirs)} ({theirs}) | {theirs_s:.1f} | {replayed / theirs:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--world-sizes", default="8,64,512")
    parser.add_argument("--no-tracker", action="store_true", help="skip FSDPMemTracker")
    parser.add_argument("--overhead", action="store_true", help="time a counted step on 2 real gloo ranks instead")
    parser.add_argument("--ddp", action="store_true", help="the model under DDP instead, beside MemTracker")
    parser.add_argument("--replay", action="store_true", help="measure() and its replay in a fake rank of the first "
                        "world size, against FSDPMemTracker")
    args = parser.parse_args()
    if args.overhead:
        overhead()
        return
    if args.replay:
        replay(int(args.world_sizes.split(",")[0]))
        return
    if args.ddp:
        ddp([int(n) for n in args.world_sizes.split(",")])
        return
    with torch.device("meta"):
        params = sum(p.numel() for p in GPT().parameters())
    print(f"GPT: {LAYERS} layers, d={D}, vocab {VOCAB}: {params / 1e9:.3f} B parameters; batch {BATCH} x {SEQ}")
    print("| world size | ours: total per rank | CPU s | FSDPMemTracker total | CPU s | ours / tracker |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.world_sizes.split(",")):
        t = time.process_time()
        ours = forecast_world(gpt_1b, world_size=n)
        ours_s = time.process_time() - t
        if args.no_tracker:
            print(f"| {n} | {human_bytes(ours.total_bytes)} | {ours_s:.1f} | | | |")
            continue
        t = time.process_time()
        theirs = tracker_total(n)
        theirs_s = time.process_time() - t
        print(f"| {n} | {human_bytes(ours.total_bytes)} ({ours.total_bytes}) | {ours_s:.1f} | "
              f"{human_bytes(theirs)} ({theirs}) | {theirs_s:.1f} | {ours.total_bytes / theirs:.4f} |", flush=True)


if __name__ == "__main__":
    main()
