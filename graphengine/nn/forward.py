"""How a model runs on one sampled batch to give its seeds' logits: blocks, trimming or whole."""

from __future__ import annotations

import torch
from torch_geometric.nn.models.basic_gnn import BasicGNN

from graphengine.batch.blocks import to_blocks
from graphengine.nn.aggregation import IndexedRows
from graphengine.nn.blocks import block_forward, normalizes_by_degree, supports_blocks

#: How :class:`SeedLogits` runs a model on a batch: ``"blocks"`` (each layer only for the
#: nodes the next reads), ``"trim"`` (PyG's ``trim_to_layer``), ``"whole"`` (every layer on the
#: whole batch), ``"auto"`` (blocks where the model supports them).
FORWARDS = ("auto", "blocks", "trim", "whole")


class SeedLogits(torch.nn.Module):
    """``model``'s logits for a batch's seeds: ``[batch.batch_size, num_classes]``.

    ``forward``: ``'blocks'`` (:func:`~graphengine.nn.blocks.block_forward`), ``'trim'``
    (PyG's ``trim_to_layer``), ``'whole'`` (``model(x, edge_index)`` on the whole batch), or
    ``'auto'``: the first of these that gives ``model``'s results. A module, so that
    ``DistributedDataParallel`` can wrap it.

    A batch without ``x`` reads its nodes' rows of ``self.features`` (``[num_nodes, width]``,
    set by the owner) by ``batch.n_id``: a fused GraphSAGE first layer on blocks reads them
    where they lie (:class:`~graphengine.nn.aggregation.IndexedRows`), other forwards gather
    them.
    """

    def __init__(self, model: torch.nn.Module, num_hops: int, forward: str = "auto"):
        super().__init__()
        self.features: torch.Tensor | None = None
        if forward not in FORWARDS:
            raise ValueError(f"'forward' must be one of {FORWARDS} (got {forward!r})")
        self.model = model
        allowed = ["whole"]
        if isinstance(model, BasicGNN) and model.num_layers == num_hops:
            if not normalizes_by_degree(model):
                allowed.insert(0, "trim")
            if supports_blocks(model):
                allowed.insert(0, "blocks")
        if forward != "auto" and forward not in allowed:
            raise ValueError(
                f"'forward' {forward!r} does not give this model's results on {num_hops}-hop "
                f"batches; it allows {allowed}"
            )
        self.mode = allowed[0] if forward == "auto" else forward

    def forward(self, batch) -> torch.Tensor:
        x = batch.x
        if x is None and self.features is not None:
            x = IndexedRows(self.features, batch.n_id)
        if self.mode == "blocks":
            blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
            return block_forward(self.model, x, blocks)
        if isinstance(x, IndexedRows):
            x = x.gather()
        if self.mode == "trim":
            return self.model(
                x,
                batch.edge_index,
                num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                num_sampled_edges_per_hop=batch.num_sampled_edges,
            )[: batch.batch_size]
        return self.model(x, batch.edge_index)[: batch.batch_size]
