"""A bfloat16 copy of ``x`` for the training batches (``bf16_features``)."""

from __future__ import annotations

import logging

import torch

from graphengine.data.arrays import as_tensor
from graphengine.data.feature_store import FeatureStore
from graphengine.data.memory import available_memory
from graphengine.datasets.dataset import GraphDataset

log = logging.getLogger(__name__)


def bf16_store(dataset: GraphDataset) -> FeatureStore | None:
    """``dataset``'s feature store with ``x`` a bfloat16 copy in memory, or ``None`` when the
    copy would take more than a quarter of the memory available or ``x`` is read as a store
    larger than memory (``access='random'``, or its rows read from disk)."""
    copy_bytes = dataset.x.size * 2
    available = available_memory()
    larger_than_memory = dataset.access == "random" or dataset.reads_from_disk()
    if larger_than_memory or available is None or copy_bytes > available // 4:
        log.info(
            "bf16 features: x stays float32 (a %.2f GB copy; %s GB available, access %r)",
            copy_bytes / 1e9,
            "?" if available is None else f"{available / 1e9:.2f}",
            dataset.access,
        )
        return None
    store = dataset.feature_store()
    store["x"] = as_tensor(dataset.x).to(torch.bfloat16)
    return store
