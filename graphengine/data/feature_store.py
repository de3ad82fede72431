"""The feature store: node-level tables (features, labels, masks) gathered by row.

Tables live in memory, memory-mapped from ``.npy`` files, or in shared memory; row
gathers go through the C++ extension (:mod:`graphengine.ops`). A table can keep its
hottest rows in a cache on the GPU (or any device): rows chosen by a ranking such as
in-degree or counts from pre-sampling (GNNLab's policy), the other rows read from
pinned host memory by zero-copy, all in one kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from graphengine import ops
from graphengine.data.arrays import as_tensor

_HOST_REGISTER_READ_ONLY = 8


@dataclass
class RowCache:
    """The cached rows of one table: ``cache[slot_of[id]]`` is row ``id`` when ``slot_of[id] >= 0``.

    Attributes:
        cache: ``[slots, num_cols]`` on the cache's device.
        slot_of: int32 ``[num_rows]`` on the cache's device, ``-1`` for uncached rows.
        hits, lookups: running counts (tensors on the cache's device, read without a sync).
    """

    cache: torch.Tensor
    slot_of: torch.Tensor
    hits: torch.Tensor
    lookups: torch.Tensor


class FeatureStore:
    """Named node-level tables with one row per node.

    Args:
        tables: name -> tensor or numpy array (``np.memmap`` included) of shape
            ``[num_nodes]`` or ``[num_nodes, num_cols]``.
    """

    def __init__(self, tables: Mapping[str, torch.Tensor | np.ndarray]):
        if not tables:
            raise ValueError("'tables' must name at least one table")
        self._tables: dict[str, torch.Tensor] = {}
        self._caches: dict[str, RowCache] = {}
        self._file_backed = {name for name, value in tables.items() if isinstance(value, np.memmap)}
        num_rows = None
        for name, value in tables.items():
            tensor = as_tensor(value)
            if tensor.dim() not in (1, 2):
                raise ValueError(
                    f"table '{name}' must be 1-D or 2-D (got shape {tuple(tensor.shape)})"
                )
            if num_rows is None:
                num_rows = tensor.shape[0]
            elif tensor.shape[0] != num_rows:
                raise ValueError(
                    f"table '{name}' has {tensor.shape[0]} rows, the others {num_rows}"
                )
            self._tables[name] = tensor
        self.num_nodes = int(num_rows)

    @classmethod
    def from_npy(cls, paths: Mapping[str, str | Path], mmap: bool = True) -> FeatureStore:
        """Tables from ``.npy`` files, memory-mapped (read-only) unless ``mmap=False``."""
        tables = {}
        for name, path in paths.items():
            if not Path(path).is_file():
                raise FileNotFoundError(f"missing table file '{path}' for '{name}'")
            try:
                tables[name] = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
            except (ValueError, OSError, EOFError) as error:
                raise ValueError(f"corrupt or truncated table file '{path}': {error}") from None
        return cls(tables)

    def keys(self) -> list[str]:
        return list(self._tables)

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self._tables:
            raise KeyError(f"no table '{name}' (tables: {self.keys()})")
        return self._tables[name]

    def __contains__(self, name: str) -> bool:
        return name in self._tables

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={list(v.shape)}" for k, v in self._tables.items())
        return f"FeatureStore({shapes})"

    def gather(self, name: str, ids: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``ids`` (int32 or int64) of table ``name``: ``[len(ids)]`` or ``[len(ids), cols]``.

        With a cache on a device, ``ids`` should be on that device and so is the result.
        Raises ``IndexError`` naming the first id outside ``[0, num_nodes)``.
        """
        table = self[name]
        two_d = table if table.dim() == 2 else table.view(-1, 1)
        out_2d = out if out is None or out.dim() == 2 else out.view(-1, 1)
        if two_d.shape[1] > 1 and two_d.stride(1) != 1:
            raise ValueError(f"table '{name}' rows are not contiguous; store a contiguous copy")
        cached = self._caches.get(name)
        if cached is None:
            result = ops.gather_rows(two_d, ids, out_2d)
        else:
            ids = ids.to(cached.cache.device)
            result = ops.cached_gather(two_d, ids, cached.cache, cached.slot_of, out_2d)
            cached.hits += (cached.slot_of[ids.long()] >= 0).sum()
            cached.lookups += ids.numel()
        return result if table.dim() == 2 else result.view(-1)

    def share_memory_(self) -> FeatureStore:
        """Move in-memory tables into shared memory (memory-mapped ones are shared already)."""
        for name, tensor in self._tables.items():
            if name not in self._file_backed:
                self._tables[name] = tensor.share_memory_()
        return self

    def pin_memory_(self) -> FeatureStore:
        """Page-lock every table in place (``cudaHostRegister``) for zero-copy GPU reads.

        Memory-mapped tables are registered read-only (``cudaHostRegisterReadOnly``).
        """
        if not torch.cuda.is_available():
            raise RuntimeError("pin_memory_() needs CUDA, and torch.cuda.is_available() is False")
        cudart = torch.cuda.cudart()
        for name, tensor in self._tables.items():
            if tensor.is_pinned():
                continue
            tensor = tensor.contiguous()
            flags = _HOST_REGISTER_READ_ONLY if name in self._file_backed else 0
            size = tensor.numel() * tensor.element_size()
            code = cudart.cudaHostRegister(tensor.data_ptr(), size, flags)
            if int(code) != 0:
                raise RuntimeError(
                    f"cudaHostRegister failed for table '{name}' (error {int(code)})"
                )
            self._tables[name] = tensor
        return self

    def enable_cache(
        self,
        name: str,
        capacity: int | float,
        ranking: np.ndarray | torch.Tensor,
        device: str | torch.device = "cuda",
    ) -> int:
        """Cache the highest-ranked rows of table ``name`` on ``device``; returns the row count.

        Args:
            capacity: bytes (int), or a fraction of the table's rows (float in ``(0, 1]``).
            ranking: ``[num_nodes]`` scores, e.g. in-degree (``Graph.in_degree()``) or how
                often pre-sampling touched each node; ties keep the lower id first.
            device: where the cache lives (the GPU; ``'cpu'`` works too, for tests).
        """
        table = self[name]
        two_d = table if table.dim() == 2 else table.view(-1, 1)
        row_bytes = two_d.shape[1] * two_d.element_size()
        if isinstance(capacity, float):
            if not 0.0 < capacity <= 1.0:
                raise ValueError(f"'capacity' as a fraction must be in (0, 1] (got {capacity})")
            rows = int(capacity * self.num_nodes)
        elif isinstance(capacity, int) and capacity >= 0:
            rows = min(self.num_nodes, capacity // max(row_bytes, 1))
        else:
            raise ValueError(
                f"'capacity' must be bytes (int >= 0) or a fraction (got {capacity!r})"
            )
        scores = torch.as_tensor(np.asarray(ranking))
        if scores.shape != (self.num_nodes,):
            raise ValueError(
                f"'ranking' must have shape ({self.num_nodes},) (got {tuple(scores.shape)})"
            )
        hottest = torch.sort(scores, descending=True, stable=True).indices[:rows]
        slot_of = torch.full((self.num_nodes,), -1, dtype=torch.int32)
        slot_of[hottest] = torch.arange(rows, dtype=torch.int32)
        device = torch.device(device)
        self._caches[name] = RowCache(
            cache=ops.gather_rows(two_d, hottest).to(device),
            slot_of=slot_of.to(device),
            hits=torch.zeros((), dtype=torch.int64, device=device),
            lookups=torch.zeros((), dtype=torch.int64, device=device),
        )
        return rows

    def cache_stats(self, name: str) -> dict:
        """``rows``, ``hits``, ``lookups`` and ``hit_rate`` of table ``name``'s cache."""
        if name not in self._caches:
            raise KeyError(f"table '{name}' has no cache")
        cached = self._caches[name]
        hits, lookups = int(cached.hits), int(cached.lookups)
        return {
            "rows": int(cached.cache.shape[0]),
            "hits": hits,
            "lookups": lookups,
            "hit_rate": hits / lookups if lookups else 0.0,
        }
