"""The strategy contract: what the training loop asks of whoever splits the work."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch


class Strategy(ABC):
    """How a training step is split across workers.

    Attributes:
        rank: this worker's number in ``[0, world_size)``.
        world_size: how many workers share the step.
        device: where this worker's model runs.
    """

    rank: int = 0
    world_size: int = 1
    device: torch.device

    @property
    def is_writer(self) -> bool:
        """Whether this worker writes logs, metrics and checkpoints (rank 0)."""
        return self.rank == 0

    @abstractmethod
    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        """The module the loop calls for training steps (e.g. DDP around ``module``)."""

    @abstractmethod
    def sum(self, values: Sequence[float]) -> list[float]:
        """Each of ``values`` summed over all workers (every worker must call it)."""

    @abstractmethod
    def gather_objects(self, value) -> list:
        """``value`` of every worker, by rank (every worker must call it)."""


class SingleProcess(Strategy):
    """One worker does everything: nothing to wrap or reduce."""

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = torch.device(device)

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        return module

    def sum(self, values: Sequence[float]) -> list[float]:
        return [float(v) for v in values]

    def gather_objects(self, value) -> list:
        return [value]
