"""Training on heterogeneous graphs: how a model runs on a ``HeteroData`` batch, and what of
the homogeneous loop does not apply (and is refused with the alternative)."""

from __future__ import annotations

import torch
from torch_geometric.data import HeteroData

HETERO_FORWARDS = ("auto", "whole")


class HeteroSeedLogits(torch.nn.Module):
    """``model``'s logits for a heterogeneous batch's seeds: ``model(batch.x_dict,
    batch.edge_index_dict)[target][: batch[target].batch_size]``, float32
    ``[batch_size, num_classes]``. A module, as :class:`~graphengine.nn.SeedLogits`.

    ``forward``: ``'whole'`` or ``'auto'`` (the same): the model runs on the whole batch;
    blocks and trimming are for homogeneous PyG ``BasicGNN`` models.
    """

    def __init__(self, model: torch.nn.Module, target: str, forward: str = "auto"):
        super().__init__()
        if forward not in HETERO_FORWARDS:
            raise ValueError(
                f"'forward' {forward!r} is not available for a heterogeneous graph: its model "
                "runs on the whole batch ('whole' or 'auto')"
            )
        self.model = model
        self.target = target
        self.mode = "whole"

    def forward(self, batch: HeteroData) -> torch.Tensor:
        out = self.model(batch.x_dict, batch.edge_index_dict)
        if not isinstance(out, dict) or self.target not in out:
            raise ValueError(
                f"a heterogeneous model must return a dict of logits per node type with "
                f"{self.target!r} in it (got {type(out).__name__})"
            )
        return out[self.target][: batch[self.target].batch_size]


def hetero_eval_mode(mode: str) -> str:
    """The evaluation mode of a heterogeneous graph: ``'sampled'`` (``'auto'`` too);
    ``'full'`` and ``'layerwise'`` are refused with the alternative."""
    if mode in ("full", "layerwise"):
        raise ValueError(
            f"'eval_mode' {mode!r} is not available for a heterogeneous graph yet; "
            "use 'sampled' (or 'auto'), mini-batches with the training fanouts"
        )
    return "sampled"


def check_hetero_strategy(strategy) -> None:
    """Heterogeneous graphs train in one process: refuse several workers (data-parallel,
    hybrid), naming what to drop."""
    if strategy.world_size > 1:
        raise ValueError(
            f"a heterogeneous graph trains in a single process for now (got "
            f"{type(strategy).__name__} with {strategy.world_size} workers): run one worker "
            "(no --nproc, --parallel or --partitions)"
        )


def seed_store(batch, target: str | None):
    """Where a batch's ``batch_size`` and ``y`` are: the ``target`` node type's store of a
    ``HeteroData`` batch, else the batch itself."""
    return batch if target is None else batch[target]


def feature_bytes(batch) -> int:
    """Bytes of feature rows gathered into a ``HeteroData`` batch, all node types."""
    return sum(x.numel() * x.element_size() for x in batch.x_dict.values())
