"""The batch of P3-style hybrid parallelism: one worker's batch with its columns of every
worker's first-layer inputs (built by :class:`graphengine.loader.HybridNeighborLoader`, run
by :class:`graphengine.parallel.HybridParallel`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch_geometric.data import Data

from graphengine.batch.blocks import Block


@dataclass
class HybridBatch:
    """One worker's batch with its columns of every worker's first-layer inputs.

    Attributes:
        batch: this worker's batch without features: ``y``, local ``edge_index`` sorted by
            destination, ``n_id``, ``batch_size``, ``num_sampled_nodes``, ``num_sampled_edges``.
        inputs: per worker ``j`` (by rank), float ``[num_src_j, stop - start]``: this
            worker's columns of the first layer's source rows of worker ``j``'s batch.
        blocks: per worker ``j``, the first layer's :class:`Block` of its batch.
        rank: this worker's rank (``blocks[rank]`` is its own batch's first layer).
        feature_bytes: bytes of feature rows gathered for this batch.
    """

    batch: Data
    inputs: list[torch.Tensor]
    blocks: list[Block]
    rank: int
    feature_bytes: int = field(default=0)

    @property
    def y(self) -> torch.Tensor:
        return self.batch.y

    @property
    def batch_size(self) -> int:
        return self.batch.batch_size

    def to(self, device: torch.device | str, non_blocking: bool = False) -> HybridBatch:
        """This batch with every tensor on ``device``."""
        return HybridBatch(
            self.batch.to(device, non_blocking=non_blocking),
            [x.to(device, non_blocking=non_blocking) for x in self.inputs],
            [b.to(device, non_blocking) for b in self.blocks],
            self.rank,
            self.feature_bytes,
        )
