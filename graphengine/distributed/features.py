"""Node rows across the parts of a partition: own rows read locally, others fetched from their
owners in one exchange per batch, or served from a cache of remote rows.

The cache holds the remote rows a worker reads most often, counted over a few pre-sampled
epochs (the policy of SALIENT++ and GNNLab: sampling is cheap to rehearse and its access
frequencies predict the training epochs' well). Rows are gathered by their owner with the
gather extension.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from graphengine.data.feature_store import FeatureStore
from graphengine.data.partition import Part
from graphengine.data.sizes import BYTE_UNITS, parse_size
from graphengine.distributed.exchange import Exchange


@dataclass
class FetchStats:
    """What a :class:`DistFeatures` read since its stats were last reset.

    Attributes:
        local_rows: rows of this worker's own nodes.
        remote_rows: rows of other workers' nodes (cache hits included).
        cache_hits: remote rows the cache served.
        fetched_rows: remote rows fetched from their owners (``remote_rows - cache_hits``).
        served_rows: rows this worker gathered for other workers.
    """

    local_rows: int = 0
    remote_rows: int = 0
    cache_hits: int = 0
    fetched_rows: int = 0
    served_rows: int = 0

    @property
    def hit_rate(self) -> float:
        """Share of remote rows the cache served (0 when none were read)."""
        return self.cache_hits / self.remote_rows if self.remote_rows else 0.0

    def as_dict(self) -> dict:
        return {**vars(self), "hit_rate": round(self.hit_rate, 4)}


@dataclass
class RemoteRowCache:
    """Rows of remote nodes kept by one worker.

    Attributes:
        ids: int64 ``[capacity]``, global new ids, ascending.
        x: ``[capacity, num_features]``, their features.
        y: int64 ``[capacity]``, their labels.
    """

    ids: np.ndarray
    x: torch.Tensor
    y: torch.Tensor

    @property
    def num_rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        return self.x.nbytes + self.y.nbytes + self.ids.nbytes

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Each id's row in the cache, ``-1`` when not cached: int64, the shape of ``ids``."""
        if self.num_rows == 0:
            return np.full(ids.shape, -1, dtype=np.int64)
        slots = np.searchsorted(self.ids, ids)
        slots[slots == self.num_rows] = 0
        return np.where(self.ids[slots] == ids, slots, -1)


class DistFeatures:
    """Features ``x`` and labels ``y`` of any nodes (global new ids) of a partitioned graph.

    :meth:`fetch` is a collective over ``exchange``: every worker calls it for each batch, in
    the same order (with no ids if it has none), because each one also serves the rows the
    others ask it for.

    Args:
        part: this worker's part; ``part.part`` is its rank in ``exchange``.
        exchange: the exchange with the other parts' workers (its own process group, not
            the sampler's, so that sampling and fetching can overlap).
    """

    def __init__(self, part: Part, exchange: Exchange):
        if exchange.world_size != part.book.num_parts or exchange.rank != part.part:
            raise ValueError(
                f"part {part.part} of {part.book.num_parts} needs worker {part.part} of "
                f"{part.book.num_parts} (got worker {exchange.rank} of {exchange.world_size})"
            )
        self.part = part
        self.exchange = exchange
        self.store = FeatureStore({"x": part.x, "y": part.y})
        self.cache = RemoteRowCache(
            np.empty(0, dtype=np.int64),
            torch.empty((0, *part.x.shape[1:]), dtype=self.store["x"].dtype),
            torch.empty(0, dtype=torch.int64),
        )
        self.stats = FetchStats()

    @property
    def num_features(self) -> int:
        return int(self.part.x.shape[1])

    @property
    def num_remote_nodes(self) -> int:
        """Nodes other workers own."""
        return self.part.book.num_nodes - self.part.num_nodes

    def reset_stats(self) -> FetchStats:
        """The stats so far; starts counting anew."""
        stats, self.stats = self.stats, FetchStats()
        return stats

    def fetch(self, ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of ``ids`` (int64 ``[n]``, global new ids): ``x`` ``[n, num_features]`` and
        ``y`` int64 ``[n]``, in the order of ``ids``."""
        ids = np.asarray(ids, dtype=np.int64)
        book = self.part.book
        owners = book.owner(ids)
        x = torch.empty((ids.shape[0], self.num_features), dtype=self.store["x"].dtype)
        y = torch.empty(ids.shape[0], dtype=torch.int64)

        mine = np.flatnonzero(owners == self.part.part)
        self._place(x, y, mine, self._gather(ids[mine] - self.part.start))
        remote = np.flatnonzero(owners != self.part.part)
        slots = self.cache.lookup(ids[remote])
        hit = slots >= 0
        cached = torch.from_numpy(slots[hit])
        self._place(x, y, remote[hit], (self.cache.x[cached], self.cache.y[cached]))
        missing = remote[~hit]

        order = np.argsort(owners[missing], kind="stable")
        missing = missing[order]
        counts = np.bincount(owners[missing], minlength=book.num_parts)
        requests = self.exchange.all_to_all_numpy(np.split(ids[missing], np.cumsum(counts)[:-1]))
        asked = np.concatenate(requests)
        rows, labels = self._gather(asked - self.part.start)
        sizes = [r.shape[0] for r in requests]
        rows_back = self.exchange.all_to_all(list(torch.split(rows, sizes)))
        labels_back = self.exchange.all_to_all(list(torch.split(labels, sizes)))
        self._place(x, y, missing, (torch.cat(rows_back), torch.cat(labels_back)))

        self.stats.local_rows += mine.shape[0]
        self.stats.remote_rows += remote.shape[0]
        self.stats.cache_hits += int(hit.sum())
        self.stats.fetched_rows += missing.shape[0]
        self.stats.served_rows += asked.shape[0]
        return x, y

    def fill_cache(self, ids: np.ndarray) -> RemoteRowCache:
        """Fetch the rows of ``ids`` (other workers' nodes) into the cache, replacing what it
        held. A collective, like :meth:`fetch`."""
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        if ids.size and bool((self.part.book.owner(ids) == self.part.part).any()):
            raise ValueError("the remote-row cache takes other workers' nodes only")
        self.cache = RemoteRowCache(np.empty(0, dtype=np.int64), self.cache.x[:0], self.cache.y[:0])
        saved = self.stats
        x, y = self.fetch(ids)
        self.stats = saved
        self.cache = RemoteRowCache(ids, x, y)
        return self.cache

    def _gather(self, local: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.from_numpy(local)
        return self.store.gather("x", index), self.store.gather("y", index)

    @staticmethod
    def _place(
        x: torch.Tensor, y: torch.Tensor, where: np.ndarray, rows: tuple[torch.Tensor, torch.Tensor]
    ) -> None:
        if where.size:
            index = torch.from_numpy(where)
            x.index_copy_(0, index, rows[0])
            y.index_copy_(0, index, rows[1])


def cache_rows(
    size: int | float | str | None,
    row_bytes: int,
    num_remote_nodes: int,
    name: str = "remote_cache",
) -> int:
    """How many remote rows a cache of ``size`` holds (``name``: the option, for errors).

    ``size`` is a number of rows (int), a share of the remote nodes (``"5%"``), or bytes
    (``"64MB"``, ``"1GiB"``, ``"4096B"``); ``None`` or 0 is no cache. Never more than the
    remote nodes.

    Raises:
        ValueError: a negative size, or a string of none of these forms.
    """
    if size is None:
        return 0
    if isinstance(size, bool):
        raise ValueError(f"'{name}' must be rows, a share ('5%') or bytes (got {size!r})")
    if isinstance(size, (int, np.integer)):
        rows = int(size)
    else:
        parsed = parse_size(size)
        if parsed is None:
            raise ValueError(
                f"'{name}' must be rows (1000), a share of the nodes ('5%') or "
                f"bytes ('64MB', '1GiB') (got {size!r})"
            )
        value, unit = parsed
        if unit == "%":
            rows = int(num_remote_nodes * value / 100)
        elif unit:
            rows = int(value * BYTE_UNITS[unit]) // max(row_bytes, 1)
        else:
            rows = int(value)
    if rows < 0:
        raise ValueError(f"'{name}' must not be negative (got {size!r})")
    return min(rows, num_remote_nodes)


class AccessCounter:
    """Counts how often each node id is read, over many batches, in memory proportional to the
    distinct ids seen (not to the graph): batches are buffered and merged now and then."""

    def __init__(self, merge_every: int = 1 << 23):
        self.values = np.empty(0, dtype=np.int64)
        self.counts = np.empty(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._pending_size = 0
        self._merge_every = merge_every

    def add(self, ids: np.ndarray) -> None:
        """Count one read of each of ``ids`` (int64)."""
        self._pending.append(np.asarray(ids, dtype=np.int64))
        self._pending_size += ids.shape[0]
        if self._pending_size >= self._merge_every:
            self._merge()

    def ranked(self) -> np.ndarray:
        """Every id counted, the most read first (ties to the smaller id)."""
        self._merge()
        return self.values[np.lexsort((self.values, -self.counts))]

    def most_frequent(self, capacity: int) -> np.ndarray:
        """The ``capacity`` most read ids (ties to the smaller id), ascending."""
        return np.sort(self.ranked()[: max(capacity, 0)])

    def _merge(self) -> None:
        if not self._pending:
            return
        ids = np.concatenate([self.values, *self._pending])
        weights = np.concatenate([self.counts, np.ones(self._pending_size, dtype=np.int64)])
        self.values, inverse = np.unique(ids, return_inverse=True)
        self.counts = np.bincount(inverse, weights=weights).astype(np.int64)
        self._pending, self._pending_size = [], 0
