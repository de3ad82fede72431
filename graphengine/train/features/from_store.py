"""Batches without ``x``, whose first layer reads the rows from the feature table itself
(``aggregate_from_store``)."""

from __future__ import annotations

import logging

import torch

from graphengine.data.arrays import as_tensor
from graphengine.data.feature_store import FeatureStore
from graphengine.datasets.dataset import GraphDataset
from graphengine.nn.forward import SeedLogits
from graphengine.ops.backend import uses_kernel
from graphengine.train.features.first_layer import fuses_sage_on_blocks

log = logging.getLogger(__name__)


def store_without_x(
    dataset: GraphDataset, store: FeatureStore | None, seed_logits: SeedLogits, precision: str
) -> FeatureStore | None:
    """``store`` (by default ``dataset``'s) with ``x`` removed, its table handed to
    ``seed_logits`` to read rows from by the batch's ``n_id``; ``None`` (nothing changed)
    unless the first layer is GraphSAGE's fused mean layer on blocks, reading a table in
    memory (not ``access='random'``, not read from disk) in the dtype it computes in (float32,
    or bfloat16)."""
    larger_than_memory = dataset.access == "random" or dataset.reads_from_disk()
    if larger_than_memory or not fuses_sage_on_blocks(seed_logits):
        return None
    store = dataset.feature_store() if store is None else store
    table = as_tensor(store["x"])
    # A float16 table (a compact store) is neither: the loader hands its rows over as float32.
    computes_in = torch.bfloat16 if precision == "bf16" else torch.float32
    if not uses_kernel(table) or table.dtype != computes_in:
        return None  # the layer would cast the rows: gathering them costs nothing more
    del store["x"]
    seed_logits.features = table
    log.info("aggregate from store: the first layer reads x's rows from the feature table")
    return store
