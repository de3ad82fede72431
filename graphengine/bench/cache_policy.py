"""``graphengine bench cache``: how often a host row cache of each policy and size holds the
feature rows that batches gather.

The node ids each batch gathers (``n_id``, distinct within a batch) come from graphengine's
:class:`~graphengine.NeighborLoader` over the training seeds, shuffled each epoch. Every batch
is replayed, as it arrives, against each (policy, size): a lookup of its ids, then the
admission of the rows it missed, as a loader reading from disk would do. Policies:

* ``static``: the rows of the highest in-degree nodes, never changed
  (:class:`~graphengine.data.host_row_cache.HostRowCache` policy ``"static"``);
* ``sieve-degree``: SIEVE seeded with those rows (``HostRowCache``, ``fill`` then ``admit``);
* ``sieve-cold``: SIEVE starting empty;
* ``lru``: least recently used, a reference in NumPy (a batch's ids count as used in their
  order, its misses are admitted after it; of more misses than fit, the last ones).

The caches hold one-byte rows: only which ids they hold matters here, not the copies.
"""

from __future__ import annotations

import numpy as np
import torch

from graphengine.bench.report import print_report
from graphengine.data.host_row_cache import HostRowCache
from graphengine.datasets import load_dataset
from graphengine.distributed.features import cache_rows
from graphengine.loader import NeighborLoader

POLICIES = ("static", "sieve-degree", "sieve-cold", "lru")


class BatchLru:
    """LRU that admits a batch's misses after the batch: ``cached`` bool ``[num_rows]``,
    ``last`` int64 ``[num_rows]`` when each row was last used (a batch uses its ids in their
    order)."""

    def __init__(self, num_rows: int, capacity: int):
        self.capacity = capacity
        self.cached = np.zeros(num_rows, dtype=bool)
        self.last = np.full(num_rows, -1, dtype=np.int64)
        self.held = 0
        self.clock = 0

    def lookup_and_admit(self, ids: np.ndarray) -> int:
        """Replay one batch of distinct ``ids``; returns how many of them missed."""
        hit = self.cached[ids]
        self.last[ids] = self.clock + np.arange(ids.shape[0])
        self.clock += ids.shape[0]
        missed = ids[~hit]
        if self.capacity:
            admitted = missed[-self.capacity :]
            evict = self.held + admitted.shape[0] - self.capacity
            if evict > 0:
                held = np.flatnonzero(self.cached)
                oldest = np.argpartition(self.last[held], evict - 1)[:evict]
                self.cached[held[oldest]] = False
                self.held -= evict
            self.cached[admitted] = True
            self.held += admitted.shape[0]
        return int(missed.shape[0])


def run(
    dataset_name: str,
    root: str | None,
    fanouts: list[int],
    batch_size: int,
    batches: int,
    sizes: list[int | str],
    seed: int = 0,
) -> dict:
    """Replay ``batches`` batches against every policy at every size (rows, a share of the
    nodes such as ``"5%"``, or bytes of the dataset's feature rows); print a table of hit
    rates and missed rows per batch, then one JSON line."""
    dataset = load_dataset(dataset_name, root=root)
    num_rows = dataset.num_nodes
    row_bytes = dataset.num_features * np.dtype(dataset.x.dtype).itemsize
    capacities = {str(size): cache_rows(size, row_bytes, num_rows, "--sizes") for size in sizes}
    # Hottest first; ties keep the lower id first, as RowCache ranks them.
    in_degree = torch.from_numpy(np.asarray(dataset.graph.in_degree()))
    hottest = torch.sort(in_degree, descending=True, stable=True).indices

    caches = {}
    for size, capacity in capacities.items():
        for policy in POLICIES:
            if policy == "lru":
                cache = BatchLru(num_rows, capacity)
            else:
                cache = HostRowCache(
                    num_rows,
                    capacity,
                    1,
                    torch.uint8,
                    policy="static" if policy == "static" else "sieve",
                )
                if policy != "sieve-cold":
                    seeded = hottest[:capacity]
                    cache.fill(seeded, torch.zeros(capacity, 1, dtype=torch.uint8))
            caches[policy, size] = cache
    missed = {key: np.zeros(batches, dtype=np.int64) for key in caches}
    looked_up = np.zeros(batches, dtype=np.int64)

    loader = NeighborLoader(
        dataset,
        fanouts,
        batch_size=batch_size,
        input_nodes=dataset.train_idx,
        shuffle=True,
        seed=seed,
    )
    batch = 0
    while batch < batches:
        for data in loader:
            ids = data.n_id.to(torch.int64)
            looked_up[batch] = ids.numel()
            for key, cache in caches.items():
                missed[key][batch] = _replay(cache, ids)
            batch += 1
            if batch == batches:
                break

    warm = slice(batches // 2, batches)
    results = []
    for (policy, size), misses in missed.items():
        results.append(
            {
                "policy": policy,
                "size": size,
                "rows": capacities[size],
                "hit_rate": 1 - misses.sum() / looked_up.sum(),
                "warm_hit_rate": 1 - misses[warm].sum() / looked_up[warm].sum(),
                "missed_rows_per_batch": float(misses.mean()),
            }
        )
    results.sort(key=lambda r: (capacities[r["size"]], POLICIES.index(r["policy"])))
    epochs = batches / len(loader)
    headers = ["size", "rows", "policy", "hit rate", "hit rate (2nd half)", "missed rows/batch"]
    rows = [
        [
            r["size"],
            r["rows"],
            r["policy"],
            r["hit_rate"],
            r["warm_hit_rate"],
            r["missed_rows_per_batch"],
        ]
        for r in results
    ]
    summary = {
        "bench": "cache",
        "dataset": dataset_name,
        "num_rows": num_rows,
        "fanouts": fanouts,
        "batch_size": batch_size,
        "batches": batches,
        "epochs": round(epochs, 2),
        "rows_per_batch": float(looked_up.mean()),
        "results": results,
    }
    print_report(headers, rows, summary)
    return summary


def _replay(cache: HostRowCache | BatchLru, ids: torch.Tensor) -> int:
    """One batch's lookup then admission of its misses; returns the rows it missed."""
    if isinstance(cache, BatchLru):
        return cache.lookup_and_admit(ids.numpy())
    missing = cache.lookup(ids, torch.empty(ids.numel(), 1, dtype=torch.uint8))
    fresh = ids[missing]
    cache.admit(fresh, torch.zeros(fresh.numel(), 1, dtype=torch.uint8))
    return int(missing.numel())
