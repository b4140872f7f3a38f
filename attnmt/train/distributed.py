"""Several processes training one model with torch.distributed (started by torchrun).

Each rank reads its own share of every step's batches and DistributedDataParallel averages the
gradients; rank 0 alone logs, validates and writes checkpoints, and shares what the others must
know (dev BLEU, whether to stop). With one process (no torchrun) all of this is a no-op.
Backends: nccl on CUDA, gloo on CPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from attnmt.runtime import pick_device


@dataclass(frozen=True)
class Ranks:
    """This process's place among the training processes."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0: the one that logs, validates and writes."""
        return self.rank == 0


def start(device_name: str) -> tuple[Ranks, torch.device]:
    """Join the process group torchrun describes in the environment (if any); pick the device."""
    device = pick_device(device_name, "trainer.device")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Ranks(), device
    ranks = Ranks(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        device = torch.device("cuda", ranks.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return ranks, device


def stop() -> None:
    """Leave the process group (at the end of training), all ranks together: a rank that
    tears its connections down while another still uses them can abort the other."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def total(value: float, device: torch.device) -> float:
    """The sum of `value` over all ranks."""
    if not dist.is_initialized():
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return float(tensor.item())


def from_main(value: float, device: torch.device) -> float:
    """Rank 0's `value`, on every rank."""
    if not dist.is_initialized():
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(tensor, src=0)
    return float(tensor.item())


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()
