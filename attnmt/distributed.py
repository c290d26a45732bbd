"""Multi-process training on the existing engine: torchrun + DistributedDataParallel.

`torchrun --nproc_per_node N -m attnmt train CONFIG` starts N processes with RANK,
WORLD_SIZE, LOCAL_RANK and MASTER_ADDR/PORT set; each joins one process group (nccl on
GPUs, gloo on the CPU). Without torchrun this is a single process and changes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Context:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def setup(device_type: str) -> Context:
    """Join the process group when started by torchrun; a no-op otherwise."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return Context()
    context = Context(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    return context


def device_for(context: Context, device: str) -> torch.device:
    """Each process on a GPU machine takes its own GPU (cuda:LOCAL_RANK)."""
    if device == "cuda" and context.active:
        torch.cuda.set_device(context.local_rank)
        return torch.device("cuda", context.local_rank)
    return torch.device(device)


def wrap(model: torch.nn.Module, context: Context, device: torch.device) -> torch.nn.Module:
    if not context.active:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def barrier(context: Context) -> None:
    if context.active:
        dist.barrier()


def any_flag(context: Context, flag: bool, device: torch.device) -> bool:
    """True on every process if it is True on any (stop decisions must be unanimous)."""
    if not context.active:
        return flag
    value = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def broadcast(context: Context, values: list) -> list:
    """The main process's picklable values, on every process (validation outcomes, say)."""
    if not context.active:
        return values
    payload = list(values)
    dist.broadcast_object_list(payload, src=0)
    return payload


def teardown(context: Context) -> None:
    if context.active and dist.is_initialized():
        dist.destroy_process_group()
