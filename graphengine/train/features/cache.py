"""A host cache of the feature rows that most training batches read (``feature_cache``): the
highest in-degree rows of a memory-mapped store, or the row cache of a store read from disk."""

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


def disk_store(dataset: GraphDataset, size: int | str | None) -> FeatureStore:
    """``dataset``'s feature store for a dataset whose rows are read from disk
    (:meth:`GraphDataset.reads_from_disk`), its row cache ``size`` (rows, a share of the nodes
    or bytes, as :func:`cached_store`'s) or, for ``None``, as large as the memory this process
    may use allows."""
    if size is not None:
        row_bytes = dataset.x.shape[1] * dataset.x.dtype.itemsize
        rows = cache_rows(size, row_bytes, dataset.num_nodes, "feature_cache")
        options = dataset.disk_options()
        dataset.read_from_disk(
            cache_bytes=rows * row_bytes,
            policy=options["policy"],
            engine=options["engine"],
            direct=options["direct"],
        )
    return dataset.feature_store()


#: Running totals of a store read from disk that an epoch's metrics give as the epoch's share.
DISK_COUNTS = ("rows_read", "reads", "bytes_read", "read_s", "evicted")


class CacheCounter:
    """The cache's hits and lookups per epoch, from the store's running totals; for a store
    read from disk, also the rows, reads and bytes read from disk and the seconds gathers
    waited for them."""

    def __init__(self, store: FeatureStore, row_bytes: int, policy: str = "in-degree"):
        self.store = store
        self.row_bytes = row_bytes
        self.policy = policy
        self._last: dict = {}
        self.epoch_metrics()  # counts from here: not the reads that seeded the cache

    def epoch_metrics(self) -> dict:
        """The cache's rows and bytes, and this epoch's lookups, hits and hit rate (and, read
        from disk, the counts of :data:`DISK_COUNTS`)."""
        stats = self.store.cache_stats("x")
        counted = [key for key in ("hits", "lookups", *DISK_COUNTS) if key in stats]
        epoch = {key: stats[key] - self._last.get(key, 0) for key in counted}
        self._last = {key: stats[key] for key in counted}
        lookups = epoch["lookups"]
        return {
            "rows": stats["rows"],
            "bytes": stats["rows"] * self.row_bytes,
            "policy": self.policy,
            **epoch,
            "hit_rate": epoch["hits"] / lookups if lookups else 0.0,
        }
