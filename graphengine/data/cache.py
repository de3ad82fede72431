"""A device-side row cache for one table: its hottest rows copied to the GPU (or any device).

Rows are chosen by a ranking such as in-degree or counts from pre-sampling (GNNLab's
policy); a read takes cached rows from the device and the others from (pinned) host memory
by zero-copy, all in one kernel (:func:`graphengine.ops.cached_gather`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from graphengine import ops


@dataclass
class RowCache:
    """The cached rows of one table: ``cache[slot_of[id]]`` is row ``id`` when ``slot_of[id] >= 0``.

    Attributes:
        cache: ``[slots, num_cols]`` on the cache's device.
        slot_of: int32 ``[num_rows]`` on the cache's device, ``-1`` for uncached rows.
        hits, lookups: running counts (int64 scalars on the cache's device, read without a
            sync).
    """

    cache: torch.Tensor
    slot_of: torch.Tensor
    hits: torch.Tensor
    lookups: torch.Tensor
    _counting: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def build(
        cls,
        table: torch.Tensor,
        capacity: int | float,
        ranking: np.ndarray | torch.Tensor,
        device: str | torch.device,
    ) -> RowCache:
        """Cache the highest-ranked rows of a 2-D ``table`` ``[num_rows, num_cols]``.

        Args:
            capacity: bytes (int), or a fraction of the table's rows (float in ``(0, 1]``).
            ranking: ``[num_rows]`` scores; ties keep the lower id first.
            device: where the cache lives.
        """
        num_rows = table.shape[0]
        row_bytes = table.shape[1] * table.element_size()
        if isinstance(capacity, float):
            if not 0.0 < capacity <= 1.0:
                raise ValueError(f"'capacity' as a fraction must be in (0, 1] (got {capacity})")
            rows = int(capacity * num_rows)
        elif isinstance(capacity, int) and capacity >= 0:
            rows = min(num_rows, capacity // max(row_bytes, 1))
        else:
            raise ValueError(
                f"'capacity' must be bytes (int >= 0) or a fraction (got {capacity!r})"
            )
        scores = torch.as_tensor(np.asarray(ranking))
        if scores.shape != (num_rows,):
            raise ValueError(f"'ranking' must have shape ({num_rows},) (got {tuple(scores.shape)})")
        hottest = torch.sort(scores, descending=True, stable=True).indices[:rows]
        # In file order, the reads queued at once: a memory-mapped table may be on disk.
        hottest = hottest.sort().values
        ops.prefetch_rows(table, hottest)
        slot_of = torch.full((num_rows,), -1, dtype=torch.int32)
        slot_of[hottest] = torch.arange(rows, dtype=torch.int32)
        device = torch.device(device)
        return cls(
            cache=ops.gather_rows(table, hottest).to(device),
            slot_of=slot_of.to(device),
            hits=torch.zeros((), dtype=torch.int64, device=device),
            lookups=torch.zeros((), dtype=torch.int64, device=device),
        )

    @property
    def rows(self) -> int:
        return int(self.cache.shape[0])

    def gather(
        self, table: torch.Tensor, ids: torch.Tensor, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Rows ``ids`` of the 2-D host ``table``: ``[len(ids), num_cols]``, on the cache's
        device. Ids on another device than the cache's are checked there before the copy, so
        that a bad id is an ``IndexError`` rather than the CUDA kernel's device-side assertion."""
        if ids.device != self.cache.device:
            ops.check_index(ids, table.shape[0])
            ids = ids.to(self.cache.device)
        result = ops.cached_gather(table, ids, self.cache, self.slot_of, out)
        hits = (self.slot_of[ids.long()] >= 0).sum()
        with self._counting:  # gathers run in several loader threads
            self.hits += hits
            self.lookups += ids.numel()
        return result

    def update(self, ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Rewrite the cached copies of rows ``ids`` (int64 ``[n]``) with ``rows`` ``[n, cols]``."""
        ids = ids.to(self.cache.device)
        slots = self.slot_of[ids].long()
        hit = slots >= 0
        self.cache[slots[hit]] = rows.to(self.cache.device, self.cache.dtype)[hit]

    def stats(self) -> dict:
        """``rows``, ``hits``, ``lookups`` and ``hit_rate`` (hits / lookups, 0 before any)."""
        hits, lookups = int(self.hits), int(self.lookups)
        return {
            "rows": self.rows,
            "hits": hits,
            "lookups": lookups,
            "hit_rate": hits / lookups if lookups else 0.0,
        }
