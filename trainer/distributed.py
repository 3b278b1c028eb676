"""Training on several processes with DistributedDataParallel, launched by torchrun.

    torchrun --standalone --nproc-per-node 2 -m trainer fit DATA --run-dir RUN ...          # one box
    torchrun --nnodes 2 --nproc-per-node 4 --node-rank 0 --rdzv-backend c10d \\
             --rdzv-endpoint HOST:29500 -m trainer fit DATA --run-dir /shared/RUN ...       # several boxes

torchrun sets RANK, LOCAL_RANK, WORLD_SIZE (and the rendezvous); without them this is one process and
nothing here does anything. Backend: NCCL on GPUs (one per local rank), gloo on CPUs. What each
process does is in train.py: its own shard of every batch (the effective batch is train.batch_size
across all of them), its own randomness seeded by (seed, step, rank), gradients all-reduced once per
step (no_sync on every micro-batch but the last), the EMA kept on the unwrapped module, and only rank
0 writing checkpoints, logs, samples and exports, with a barrier after each save.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist


@dataclass
class Dist:
    rank: int = 0
    local_rank: int = 0
    world: int = 1
    local_world: int = 1

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> Dist:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        return cls(rank=int(os.environ.get("RANK", "0")), local_rank=int(os.environ.get("LOCAL_RANK", "0")),
                   world=world, local_world=int(os.environ.get("LOCAL_WORLD_SIZE", str(world))))

    def start(self, device: torch.device) -> torch.device:
        """Join the process group (NCCL for CUDA, gloo otherwise); returns this rank's device."""
        if not self.enabled:
            return device
        if device.type == "cuda":
            device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        return device

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()

    def shard(self, flat: np.ndarray, micro: int) -> list[np.ndarray]:
        """This rank's slice of a step's whole batch of clip indices, cut into micro-batches."""
        per = len(flat) // self.world
        mine = flat[self.rank * per:(self.rank + 1) * per]
        return [mine[i:i + micro] for i in range(0, per, micro)]

    def any(self, flag: bool) -> bool:
        """True on every rank if it is True on any (e.g. a stop signal seen by one process)."""
        if not self.enabled:
            return flag
        t = torch.tensor([1 if flag else 0], dtype=torch.int32)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def weight_hashes(self, module: torch.nn.Module) -> list[str]:
        """Every rank's sha256 of its module's parameters (all equal when DDP works)."""
        h = hashlib.sha256()
        for name, p in sorted(module.state_dict().items()):
            h.update(name.encode())
            h.update(p.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
        mine = h.hexdigest()
        if not self.enabled:
            return [mine]
        out: list[str] = [""] * self.world
        dist.all_gather_object(out, mine)
        return out


def per_rank_batch(batch_size: int, micro_batch: int, world: int) -> tuple[int, int]:
    """(per-rank batch, per-rank micro-batch) that keep the effective batch; ValueError if it cannot split."""
    if batch_size % world:
        raise ValueError(f"train.batch_size {batch_size} cannot be split evenly over {world} processes; "
                         f"set it to a multiple of {world} (--set train.batch_size=...)")
    per = batch_size // world
    micro = min(micro_batch, per)
    while per % micro:
        micro -= 1
    return per, micro
