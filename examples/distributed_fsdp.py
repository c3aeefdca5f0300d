"""Will this FSDP2 job fit on 8, 64 or 512 GPUs? Forecast it on a pretend cluster, compare setups, then run 2 ranks.

Each FUNC below is what a training script does on every rank: read the world size
from torch.distributed, make the mesh, build the model, wrap it (`fully_shard`,
`parallelize_module`), and return it with a batch and the optimizer.

Run: python examples/distributed_fsdp.py [--world-sizes 8,64,512] [--what-if 8] [--real]
(or: graphviz-app memory examples/distributed_fsdp.py:fsdp --world-size 8,64,512 --device meta)
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils.checkpoint import checkpoint

from graphviz_app.analysis.distributed import format_ranks, format_what_ifs
from graphviz_app.tracing.distributed.fake_cluster import forecast_worlds
from graphviz_app.tracing.distributed.ranks import run_ranks
from graphviz_app.tracing.distributed.what_if import what_if

D, LAYERS, BATCH, SEQ = 256, 4, 8, 128


class Block(nn.Module):
    """A transformer-shaped MLP block with a residual."""

    def __init__(self, checkpointed: bool = False) -> None:
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.checkpointed = checkpointed

    def inner(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpointed:
            return x + checkpoint(self.inner, x, use_reentrant=False)
        return x + self.inner(x)


def _model(checkpointed: bool = False) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[Block(checkpointed) for _ in range(LAYERS)])


def _fsdp(*, reshard: bool = True, bf16: bool = False, checkpointed: bool = False) -> Any:
    model = _model(checkpointed)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 \
        else MixedPrecisionPolicy()
    for block in model:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return model, torch.randn(BATCH, SEQ, D), torch.optim.AdamW(model.parameters())


def fsdp() -> Any:
    """FSDP2 on every block and the root, resharding after forward (the default)."""
    return _fsdp()


def fsdp_keep() -> Any:
    return _fsdp(reshard=False)


def fsdp_bf16() -> Any:
    return _fsdp(bf16=True)


def fsdp_checkpointed() -> Any:
    return _fsdp(checkpointed=True)


def fsdp_tp() -> Any:
    """FSDP2 over `dp` and tensor parallelism (colwise up, rowwise down) over `tp` = 2 of a 2-D mesh."""
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    model = _model()
    for block in model:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model, torch.randn(BATCH, SEQ, D), torch.optim.AdamW(model.parameters())


def ddp() -> Any:
    model = nn.parallel.DistributedDataParallel(_model(), bucket_cap_mb=25)
    return model, torch.randn(BATCH, SEQ, D), torch.optim.AdamW(model.parameters())


SETUPS = {
    "FSDP2": fsdp,
    "FSDP2, reshard_after_forward=False": fsdp_keep,
    "FSDP2, bf16 parameters": fsdp_bf16,
    "FSDP2, checkpointed blocks": fsdp_checkpointed,
    "FSDP2 + TP (tp=2)": fsdp_tp,
    "DDP": ddp,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--world-sizes", default="8,64,512")
    parser.add_argument("--what-if", type=int, default=8, metavar="N", help="compare the setups at N ranks")
    parser.add_argument("--real", action="store_true", help="also run 2 real gloo ranks and measure them")
    parser.add_argument("--out", help="(unused: every example takes it)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.world_sizes.split(",")]
    print(f"1. FSDP2, forecast per rank on a fake cluster (nothing allocated), world sizes {sizes}")
    print(format_ranks(forecast_worlds(fsdp, sizes)))
    print(f"\n2. the same step, other setups, at {args.what_if} ranks")
    print(format_what_ifs(what_if(SETUPS, world_size=args.what_if)))
    if args.real:
        print("\n3. two real gloo ranks, measured, beside PyTorch's FSDPMemTracker on the same step")
        table = run_ranks(f"{__file__}:fsdp", nprocs=2, with_torch_tracker=True)
        print(table)
        for r in table.ranks:
            print(f"rank {r.rank}: ours {r.total_bytes} bytes, {r.tracker} {r.tracker_bytes} bytes")


if __name__ == "__main__":
    main()
