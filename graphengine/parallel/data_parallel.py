"""Data parallelism: every worker holds the whole model, takes its share of each step's seeds,
and gradients are all-reduced by ``DistributedDataParallel``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from graphengine.parallel.base import Strategy


def collective_device(backend: str, device: torch.device) -> torch.device:
    """Where tensors handed to a collective of ``backend`` must live: NCCL takes CUDA
    tensors only, gloo takes CPU tensors (and CUDA ones through a copy)."""
    return device if backend == "nccl" else torch.device("cpu")


class DataParallel(Strategy):
    """A replica of the model per worker of the joined process group.

    Args:
        device: this worker's device (``cuda:LOCAL_RANK`` with NCCL).
    """

    def __init__(self, device: str | torch.device = "cpu"):
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("DataParallel needs a joined torch.distributed process group")
        self.device = torch.device(device)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.backend = str(dist.get_backend())
        if self.backend == "nccl" and self.device.type != "cuda":
            raise ValueError(f"the NCCL backend needs a CUDA 'device' (got {self.device})")
        self.collective_device = collective_device(self.backend, self.device)
        self.gradient_bytes = 0

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        return self.replicate(module)

    def replicate(self, module: torch.nn.Module) -> DistributedDataParallel:
        """``DistributedDataParallel`` around ``module``, counting the gradient bytes it
        all-reduces (its buckets, as DDP's own all-reduce sends them)."""
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        replicated = DistributedDataParallel(module, device_ids=device_ids)
        replicated.register_comm_hook(None, self._counted_allreduce)
        return replicated

    def reset_stats(self) -> dict:
        stats = {"gradient_bytes": self.gradient_bytes}
        self.gradient_bytes = 0
        return stats

    def _counted_allreduce(self, group, bucket):
        buffer = bucket.buffer()
        self.gradient_bytes += buffer.numel() * buffer.element_size()
        return allreduce_hook(group, bucket)

    def sum(self, values: Sequence[float]) -> list[float]:
        totals = torch.tensor(list(values), dtype=torch.float64, device=self.collective_device)
        dist.all_reduce(totals)
        return totals.tolist()

    def gather_objects(self, value) -> list:
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered
