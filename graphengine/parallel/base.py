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
    #: Whether workers train different parameters (a share of a layer each), so that each
    #: keeps an optimizer state of its own.
    parameters_per_worker: bool = False

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

    def reset_stats(self) -> dict:
        """What this worker sent to the others since the last call (e.g.
        ``gradient_bytes``), and starts counting anew."""
        return {}

    def assemble_model(self, module: torch.nn.Module) -> None:
        """Make the user's model whole from the workers' shares of it (``module`` is what
        :meth:`wrap` returned); every worker must call it. Nothing to do when every worker
        holds the whole model."""
        return None

    def reshard_model(self, module: torch.nn.Module) -> None:
        """Take this worker's share from the user's model again (after loading it)."""
        return None


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
