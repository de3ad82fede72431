"""A host cache of the feature rows that most training batches read (``feature_cache``)."""

from __future__ import annotations

from graphengine.data.feature_store import FeatureStore
from graphengine.datasets.dataset import GraphDataset
from graphengine.distributed.features import cache_rows


def cached_store(dataset: GraphDataset, size: int | str) -> FeatureStore:
    """``dataset``'s feature store with the ``x`` rows of its highest in-degree nodes cached
    in memory: ``size`` rows, a share of the nodes (``"5%"``) or bytes (``"2GiB"``). From a
    memory-mapped store larger than memory, the rows that most batches read stay in memory
    whatever the page cache evicts."""
    x = dataset.x
    row_bytes = x.shape[1] * x.dtype.itemsize
    rows = cache_rows(size, row_bytes, dataset.num_nodes, "feature_cache")
    store = dataset.feature_store()
    store.enable_cache("x", rows * row_bytes, dataset.graph.in_degree(), "cpu")
    return store


class CacheCounter:
    """The cache's hits and lookups per epoch, from the store's running totals."""

    def __init__(self, store: FeatureStore, row_bytes: int):
        self.store = store
        self.row_bytes = row_bytes
        self._hits = self._lookups = 0

    def epoch_metrics(self) -> dict:
        """The cache's rows and bytes, and this epoch's lookups, hits and hit rate."""
        stats = self.store.cache_stats("x")
        hits = stats["hits"] - self._hits
        lookups = stats["lookups"] - self._lookups
        self._hits, self._lookups = stats["hits"], stats["lookups"]
        return {
            "rows": stats["rows"],
            "bytes": stats["rows"] * self.row_bytes,
            "policy": "in-degree",
            "lookups": lookups,
            "hits": hits,
            "hit_rate": hits / lookups if lookups else 0.0,
        }
