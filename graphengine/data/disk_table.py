"""A feature table read from disk: its rows come from the ``.npy`` file with many reads in
flight (:class:`~graphengine.data.row_file.RowFile`), through a host row cache the process
manages (:class:`~graphengine.data.host_row_cache.HostRowCache`).

This is the path for a table larger than the memory a process may use. Read through a memory
map instead, every row a batch misses costs a page fault, one 4 KiB read at a time per
thread, and the page cache competes with the process for the same memory with no policy that
knows which rows batches come back to. Here the reads of a batch's missed rows are queued
together, with ``O_DIRECT`` where the filesystem allows it (the page cache then holds no
feature rows at all), and the memory goes to a cache of rows seeded with the
highest-ranked ones (in-degree) and kept by SIEVE eviction.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import torch

from graphengine import ops
from graphengine.data.host_row_cache import HostRowCache
from graphengine.data.row_file import RowFile

log = logging.getLogger("graphengine")

#: Rows read at a time while the cache is seeded: bounds the memory seeding takes beside it.
SEED_CHUNK_ROWS = 1 << 16


class DiskTable:
    """The rows of a 2-D ``.npy`` table, read from disk behind a host row cache.

    Args:
        path: the ``.npy`` file (2-D, C order).
        cache_rows: rows the cache holds (0: none).
        ranking: ``[num_rows]`` scores (e.g. in-degree); the highest-ranked rows are read
            into the cache before the first gather. ``None``: the cache starts empty.
        policy: the cache's policy, ``"static"`` (keeps the seeded rows) or ``"sieve"``
            (admits the rows it misses, evicting by SIEVE).
        engine, direct, queue_depth: how rows are read (:class:`RowFile`).

    Gathers may run in several threads at once. The file must not change while it is read: a
    short read (a file truncated or replaced) is an error naming the file and the row.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        cache_rows: int = 0,
        ranking: np.ndarray | torch.Tensor | None = None,
        policy: str = "static",
        engine: str = "auto",
        direct: str | bool = "auto",
        queue_depth: int = 64,
    ):
        self.file = RowFile(path, engine=engine, direct=direct, queue_depth=queue_depth)
        num_rows, num_cols = self.file.shape
        self.dtype = torch.from_numpy(np.empty(0, dtype=self.file.dtype)).dtype
        self.cache = HostRowCache(num_rows, cache_rows, num_cols, self.dtype, policy=policy)
        self._counting = threading.Lock()
        self._read_s = 0.0
        self._gathers = 0
        if ranking is not None and cache_rows > 0:
            self._seed(ranking)

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def shape(self) -> tuple[int, int]:
        return self.file.shape

    def gather(self, ids: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``ids`` (int32 or int64 ``[n]`` CPU tensor, any order, repeats allowed):
        ``[n, num_cols]`` of the table's dtype, written into ``out`` when given.

        Cached rows are copied from the cache; the others are read from disk, each distinct
        row once, and offered to the cache. Raises ``TypeError`` naming ``ids`` for anything
        but a 1-D int32/int64 CPU tensor (float ids are refused, not truncated), and
        ``IndexError`` naming the first id outside ``[0, num_rows)``, before anything is read.
        """
        num_rows, num_cols = self.file.shape
        _check_ids(ids)
        ops.check_index(ids, num_rows)
        if out is None:
            out = torch.empty((ids.shape[0], num_cols), dtype=self.dtype)
        ids = ids.long()
        missed = self.cache.lookup(ids, out)
        if missed.numel():
            distinct, position = torch.unique(ids[missed], return_inverse=True)
            start = time.perf_counter()
            rows = self.file.read(distinct)
            waited = time.perf_counter() - start
            out[missed] = rows[position]
            self.cache.admit(distinct, rows)
        else:
            waited = 0.0
        with self._counting:
            self._read_s += waited
            self._gathers += 1
        return out

    def stats(self) -> dict:
        """Running totals: ``gathers``; the disk's ``rows_read``, ``reads`` (requests),
        ``bytes_read`` and ``read_s`` (seconds gathers waited for them); the cache's ``rows``,
        ``capacity``, ``hits``, ``lookups``, ``hit_rate``, ``evicted`` and ``cache_bytes``;
        the ``engine`` and ``direct`` mode of the reads."""
        disk = self.file.counters()
        cache = self.cache.stats()
        with self._counting:
            read_s, gathers = self._read_s, self._gathers
        return {
            "gathers": gathers,
            "rows_read": disk["rows"],
            "reads": disk["reads"],
            "bytes_read": disk["bytes"],
            "read_s": read_s,
            "rows": cache["rows"],
            "capacity": cache["capacity"],
            "hits": cache["hits"],
            "lookups": cache["lookups"],
            "hit_rate": cache["hit_rate"],
            "evicted": cache["evicted"],
            "cache_bytes": self.cache.nbytes,
            "engine": self.file.engine,
            "direct": self.file.direct,
        }

    def close(self) -> None:
        self.file.close()

    def _seed(self, ranking) -> None:
        """Fill the cache with the highest-ranked rows, read in chunks of
        :data:`SEED_CHUNK_ROWS` in file order (neighboring rows merge into one read)."""
        scores = torch.as_tensor(np.asarray(ranking))
        if scores.shape != (self.file.shape[0],):
            raise ValueError(
                f"'ranking' must have shape ({self.file.shape[0]},) (got {tuple(scores.shape)})"
            )
        wanted = min(self.cache.capacity, self.file.shape[0])
        hottest = torch.sort(scores, descending=True, stable=True).indices[:wanted]
        start = time.perf_counter()
        for chunk in hottest.split(SEED_CHUNK_ROWS):
            in_file_order = chunk.sort().values
            self.cache.fill(in_file_order, self.file.read(in_file_order))
        log.info(
            "read the %d highest-ranked rows of %s into its cache in %.1f s",
            wanted,
            self.file.path,
            time.perf_counter() - start,
        )


def _check_ids(ids) -> None:
    """Refuse ids that ``long()`` would silently truncate (floats) or that no row is (2-D)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(
            f"DiskTable.gather: 'ids' must be a torch tensor (got {type(ids).__name__})"
        )
    if ids.dtype not in (torch.int32, torch.int64) or ids.dim() != 1 or ids.device.type != "cpu":
        raise TypeError(
            f"DiskTable.gather: 'ids' must be a 1-D int32 or int64 CPU tensor (got {ids.dtype} "
            f"of shape {tuple(ids.shape)} on {ids.device})"
        )
