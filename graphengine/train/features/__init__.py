"""The feature store a GraphDataset's training batches are gathered from, on the CPU.

Each choice is one module: a host cache of the hottest rows, or of the rows of a store read
from disk (:mod:`.cache`), a bfloat16
copy of ``x`` (:mod:`.bf16`), no ``x`` at all for a first layer that reads the table itself
(:mod:`.from_store`), and no ``y``, the seeds' labels read from the dataset's table instead
(:mod:`graphengine.train.labels`). :func:`training_features` applies them in that order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graphengine.data.arrays import as_tensor
from graphengine.data.feature_store import FeatureStore
from graphengine.datasets.dataset import GraphDataset
from graphengine.nn.forward import SeedLogits
from graphengine.train.config import TrainConfig
from graphengine.train.features.bf16 import bf16_store
from graphengine.train.features.cache import CacheCounter, cached_store, disk_store
from graphengine.train.features.first_layer import casts_x_to_bf16
from graphengine.train.features.from_store import store_without_x
from graphengine.train.labels import without_labels


@dataclass
class TrainingFeatures:
    """Where the training batches' rows come from.

    Attributes:
        store: the batches' own feature store (no ``y``; maybe a cache, a bfloat16 ``x`` or
            no ``x``), ``None`` for the dataset's stores as they are.
        labels: the dataset's labels (``[num_nodes]``) the seeds' are read from when the
            batches carry no ``y``, else ``None``.
        cache: counts the feature cache's hits per epoch, ``None`` without a cache.
    """

    store: FeatureStore | None = None
    labels: torch.Tensor | None = None
    cache: CacheCounter | None = None

    def source(self, dataset: GraphDataset):
        """What a loader reads: ``dataset``, or its graph with :attr:`store`."""
        return dataset if self.store is None else (self.store, dataset.graph)


def training_features(
    dataset: GraphDataset, config: TrainConfig, seed_logits: SeedLogits
) -> TrainingFeatures:
    """The training batches' features of ``dataset`` as ``config`` asks, for the model
    ``seed_logits`` runs; on a GPU, the dataset's stores as they are."""
    if config.device.type != "cpu":
        return TrainingFeatures()
    store = None
    cache = None
    row_bytes = dataset.x.shape[1] * dataset.x.dtype.itemsize
    if dataset.reads_from_disk():
        store = disk_store(dataset, config.feature_cache)
        cache = CacheCounter(store, row_bytes, dataset.disk_options()["policy"])
    elif config.feature_cache is not None:
        store = cached_store(dataset, config.feature_cache)
        cache = CacheCounter(store, row_bytes)
    elif config.bf16_features and config.precision == "bf16" and casts_x_to_bf16(seed_logits):
        store = bf16_store(dataset)
    if config.aggregate_from_store and config.feature_cache is None:
        store = store_without_x(dataset, store, seed_logits, config.precision) or store
    store, _ = without_labels(dataset, store)
    return TrainingFeatures(store, as_tensor(dataset.y), cache)
