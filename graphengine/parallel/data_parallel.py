"""Data parallelism: every worker holds the whole model, takes its share of each step's seeds,
and gradients are all-reduced by ``DistributedDataParallel``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from graphengine.parallel.base import SingleProcess, Strategy


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
        self._collective_device = collective_device(self.backend, self.device)

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(module, device_ids=device_ids)

    def sum(self, values: Sequence[float]) -> list[float]:
        totals = torch.tensor(list(values), dtype=torch.float64, device=self._collective_device)
        dist.all_reduce(totals)
        return totals.tolist()

    def gather_objects(self, value) -> list:
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered


def strategy_for(device: str | torch.device = "cpu") -> Strategy:
    """:class:`DataParallel` in a joined process group of several workers, else
    :class:`~graphengine.parallel.base.SingleProcess`."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return DataParallel(device)
    return SingleProcess(device)
