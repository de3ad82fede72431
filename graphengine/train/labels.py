"""Seed labels read from the dataset's table, instead of gathered for every node of a batch.

A node-classification loss or accuracy reads the labels of a batch's seeds only (its first
``batch_size`` nodes), while a loader gathers ``y`` for all of the batch's nodes: hundreds
of random reads for every seed with three hops of fanouts. The training batches and the
Evaluator's CPU batches are loaded from :func:`without_labels` and read the seeds' labels
with :func:`seed_labels`.
"""

from __future__ import annotations

import torch

from graphengine.data.feature_store import FeatureStore
from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset


def without_labels(
    dataset: GraphDataset, store: FeatureStore | None = None
) -> tuple[FeatureStore, Graph]:
    """``dataset``'s graph and ``store`` (by default ``dataset.feature_store()``) with its ``y``
    table removed, for a loader whose batches then carry no ``y``."""
    store = dataset.feature_store() if store is None else store
    del store["y"]
    return store, dataset.graph


def seed_labels(seeds, labels: torch.Tensor | None) -> torch.Tensor:
    """The labels (int64 ``[batch_size]``) of the first ``batch_size`` nodes of ``seeds`` (a
    batch, or its target type's store): its ``y``, or for a batch without one, the rows of
    ``labels`` (the dataset's ``[num_nodes]`` table) at the batch's ``n_id``."""
    y = getattr(seeds, "y", None)
    if y is not None:
        return y[: seeds.batch_size].long()
    if labels is None:
        raise ValueError(
            "the batch has no 'y' and no label table was given: gather 'y' into the batch, "
            "or pass the dataset's labels"
        )
    return labels[seeds.n_id[: seeds.batch_size]].long()
