"""The feature store: row tables (features, labels, masks) keyed by ``(group, name)``.

A key is ``(group, name)``: ``group`` is ``None`` for a homogeneous graph (or a node or
edge type), ``name`` the attribute (``"x"``); a plain string ``"x"`` means ``(None, "x")``.
All tables of one group have one row per node (or edge) of that group. Tables live in
memory, memory-mapped from ``.npy`` files, or in shared memory; row reads go through the
C++ extension (:mod:`graphengine.ops`), optionally through a device row cache
(:mod:`graphengine.data.cache`) and from pinned memory (:mod:`graphengine.data.pinning`), or,
for a memory-mapped table larger than memory, from disk through a host row cache
(:mod:`graphengine.data.disk_table`).

The store is a ``torch_geometric.data.FeatureStore`` too: ``get_tensor(group_name=None,
attr_name="x", index=ids)``, ``multi_get_tensor``, ``put_tensor``, ``remove_tensor``,
``get_tensor_size`` and ``get_all_tensor_attrs`` work on the same tables. Indexing keeps
this store's meaning: ``store["x"]`` and ``store[None, "x"]`` are the whole table (PyG would
give a view); other keys (a :class:`TensorAttr`, ``store[group, name, index]``, a group
name alone) go to PyG's indexing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore as PyGFeatureStore
from torch_geometric.data import TensorAttr

from graphengine import ops
from graphengine.data import pinning
from graphengine.data.arrays import as_tensor, memmap_source, open_memmap_source
from graphengine.data.cache import RowCache
from graphengine.data.disk_table import DiskTable
from graphengine.data.files import check_regular_file

Group = str | tuple[str, str, str] | None
Key = str | tuple[Group, str]

__all__ = ["FeatureStore", "RowCache"]


class FeatureStore(PyGFeatureStore):
    """Row tables keyed by ``(group, name)`` (a plain ``name`` is ``(None, name)``).

    Args:
        tables: key -> tensor or numpy array (``np.memmap`` included) of shape
            ``[num_rows]`` or ``[num_rows, num_cols]``; every table of one group has as
            many rows. ``None`` or ``{}`` starts empty (add tables with :meth:`update` or
            PyG's ``put_tensor``).

    Memory-mapped tables stay file-backed: :meth:`share_memory_` leaves them alone and a
    pickle names their file instead of copying them. Caches, disk reads
    (:meth:`read_from_disk_`) and pinning are not pickled.
    """

    def __init__(self, tables: Mapping[Key, torch.Tensor | np.ndarray] | None = None):
        super().__init__()
        self._tables: dict[tuple[Group, str], torch.Tensor] = {}
        self._caches: dict[tuple[Group, str], RowCache] = {}
        self._mapped: dict[tuple[Group, str], np.memmap] = {}
        self._prefetched: set[tuple[Group, str]] = set()
        self._disk: dict[tuple[Group, str], DiskTable] = {}
        if tables is not None and not isinstance(tables, Mapping):
            raise TypeError(f"'tables' must be a mapping of key -> table (got {_kind(tables)})")
        for key, value in (tables or {}).items():
            self._put(_key(key), value)

    __hash__ = object.__hash__  # PyG's base compares by identity but drops hashing

    @classmethod
    def from_npy(cls, paths: Mapping[Key, str | Path], mmap: bool = True) -> FeatureStore:
        """Tables from ``.npy`` files, memory-mapped (read-only) unless ``mmap=False``."""
        tables = {}
        for key, path in paths.items():
            check_regular_file(Path(path), f"table file for {_name(_key(key))}:")
            try:
                tables[key] = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
            except (ValueError, OSError, EOFError) as error:
                raise ValueError(f"corrupt or truncated table file '{path}': {error}") from None
        return cls(tables)

    # -- what the store holds ---------------------------------------------------------------

    def keys(self) -> list[Key]:
        """The tables' keys: ``name`` for group ``None``, ``(group, name)`` otherwise."""
        return [name if group is None else (group, name) for group, name in self._tables]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._tables)

    def __contains__(self, key) -> bool:
        return _maybe_key(key) in self._tables

    def num_rows(self, group: Group = None) -> int:
        """The row count shared by the tables of ``group``."""
        for (table_group, _), table in self._tables.items():
            if table_group == group:
                return int(table.shape[0])
        raise KeyError(f"no table in group {group!r} (tables: {self.keys()})")

    @property
    def num_nodes(self) -> int:
        """Rows of the homogeneous tables (group ``None``), or of the only group there is."""
        groups = {group for group, _ in self._tables}
        if None in groups or len(groups) != 1:
            if not groups:
                raise ValueError("'num_nodes' of an empty FeatureStore is undefined")
            if None not in groups:
                raise ValueError(
                    f"'num_nodes' is ambiguous for groups {sorted(map(str, groups))}; "
                    "use num_rows(group)"
                )
            return self.num_rows(None)
        return self.num_rows(groups.pop())

    def size(self, key: Key) -> torch.Size:
        """The shape of one row of table ``key``, without the row count (as GraphBolt's
        ``Feature.size()``): ``torch.Size([])`` for a 1-D table, ``[num_cols]`` for 2-D.
        PyG's ``get_tensor_size`` gives the full shape, row count first."""
        return self._table(_key(key)).shape[1:]

    def __repr__(self) -> str:
        shapes = ", ".join(f"{_label(k)}={list(v.shape)}" for k, v in self._tables.items())
        return f"FeatureStore({shapes})"

    # -- reading -----------------------------------------------------------------------------

    def __getitem__(self, key):
        """``store["x"]`` / ``store[group, "x"]``: the whole table; other keys as PyG's."""
        normal = _maybe_key(key)
        if normal in self._tables:
            return self._tables[normal]
        if isinstance(key, str) and key not in {group for group, _ in self._tables}:
            raise KeyError(f"no table '{key}' (tables: {self.keys()})")
        return super().__getitem__(key)

    def read(self, key: Key, ids=None) -> torch.Tensor:
        """Table ``key`` (``ids=None``: the table itself, not a copy) or its rows ``ids``.

        Args:
            ids: int32 or int64 ``[n]`` (tensor or numpy array), or a boolean mask
                ``[num_rows]``; with a cache on a device, pass them there.

        Returns:
            ``[n]`` or ``[n, num_cols]`` with the table's dtype (on the cache's device when
            the table has a cache).
        """
        normal = _key(key)
        if ids is None:
            return self._table(normal)
        return self._gather(normal, _ids(ids, self._table(normal).shape[0]), None)

    def gather(self, key: Key, ids, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``ids`` of table ``key``: ``[n]`` or ``[n, num_cols]``, written into ``out``
        when given (of that shape and the table's dtype).

        Args:
            ids: as :meth:`read`: int32 or int64 ``[n]`` (tensor or numpy array), or a
                boolean mask ``[num_rows]``; with a cache on a device, pass them there (the
                result is there too).

        Raises ``IndexError`` naming the first id outside ``[0, num_rows)``.
        """
        normal = _key(key)
        return self._gather(normal, _ids(ids, self._table(normal).shape[0]), out)

    def multi_read(self, keys: Sequence[Key], ids) -> list[torch.Tensor]:
        """Rows of several tables in one call: ``[read(k, ids) for k in keys]``, the ids
        converted once.

        Args:
            keys: table keys.
            ids: one id tensor or array for every table (as :meth:`read`), or a sequence
                of them, one per key.
        """
        keys = [_key(key) for key in keys]
        if isinstance(ids, (list, tuple)):
            if len(ids) != len(keys):
                raise ValueError(
                    f"'ids' as a sequence must hold one entry per key ({len(keys)}) "
                    f"(got {len(ids)})"
                )
            pairs = zip(keys, ids, strict=True)
            return [
                self._gather(key, _ids(each, self._table(key).shape[0]), None)
                for key, each in pairs
            ]
        rows = {self._table(key).shape[0] for key in keys}
        if len(rows) > 1 and getattr(ids, "dtype", None) in (torch.bool, np.bool_):
            raise ValueError(
                f"'ids' as a mask must have one entry per row of every table, but the tables "
                f"have {sorted(rows)} rows; pass one mask per key"
            )
        shared = _ids(ids, rows.pop() if rows else 0)
        return [self._gather(key, shared, None) for key in keys]

    def _gather(self, key, ids: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        table = self._table(key)
        two_d = table if table.dim() == 2 else table.view(-1, 1)
        out_2d = out if out is None or out.dim() == 2 else out.view(-1, 1)
        if two_d.shape[1] > 1 and two_d.stride(1) != 1:
            raise ValueError(f"table {_name(key)} rows are not contiguous; store a contiguous copy")
        disk = self._disk.get(key)
        if disk is not None:
            result = disk.gather(ids, out_2d)
            return result if table.dim() == 2 else result.view(-1)
        cached = self._caches.get(key)
        if key in self._prefetched:
            on_cpu = cached is not None and cached.slot_of.device.type == "cpu"
            ops.prefetch_rows(two_d, ids, cached.slot_of if on_cpu else None)
        if cached is None:
            result = ops.gather_rows(two_d, ids, out_2d)
        else:
            result = cached.gather(two_d, ids, out_2d)
        return result if table.dim() == 2 else result.view(-1)

    def _table(self, key) -> torch.Tensor:
        table = self._tables.get(key)
        if table is None:
            raise KeyError(f"no table {_name(key)} (tables: {self.keys()})")
        return table

    # -- writing -----------------------------------------------------------------------------

    def update(self, key: Key, value, ids=None) -> None:
        """Set table ``key`` (``ids=None``: add it, or replace it whole) or its rows ``ids``.

        Args:
            value: ``ids=None``: a tensor or numpy array ``[num_rows(, num_cols)]`` (rows
                must match the other tables of its group); else ``[len(ids)(, num_cols)]``
                of the table's dtype.
            ids: int32 or int64 row ids (or a boolean mask). Cached copies of those rows
                are rewritten too. Read-only tables (read-only memory maps) refuse.
        """
        normal = _key(key)
        if ids is None:
            self._put(normal, value)
            return
        table = self._table(normal)
        mapped = self._mapped.get(normal)
        if mapped is not None and not mapped.flags.writeable:
            raise ValueError(
                f"table {_name(normal)} is a read-only memory map; 'update' with 'ids' "
                "needs a writable table (open it with mmap=False)"
            )
        if not isinstance(value, (torch.Tensor, np.ndarray)):
            raise TypeError(f"'value' must be a tensor or numpy array (got {_kind(value)})")
        rows = torch.as_tensor(value)
        index = _ids(ids, table.shape[0]).long()
        if rows.dtype != table.dtype:
            raise TypeError(
                f"'value' must have table {_name(normal)}'s dtype {table.dtype} (got {rows.dtype})"
            )
        expected = (index.shape[0], *table.shape[1:])
        if tuple(rows.shape) != expected:
            raise ValueError(f"'value' must have shape {expected} (got {tuple(rows.shape)})")
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= table.shape[0]):
            bad = int(index.min()) if int(index.min()) < 0 else int(index.max())
            raise IndexError(f"'ids' holds id {bad}, outside [0, {table.shape[0]})")
        table[index] = rows.to(table.device)
        cached = self._caches.get(normal)
        if cached is not None:
            cached.update(index, rows if rows.dim() == 2 else rows.view(-1, 1))

    def __setitem__(self, key, value) -> None:
        """``store["x"] = table`` / ``store[group, "x"] = table``; other keys as PyG's."""
        if _maybe_key(key) is not None:
            self.update(key, value)
        else:
            super().__setitem__(key, value)

    def remove(self, key: Key) -> bool:
        """Drop table ``key`` (unpinning it and dropping its cache); whether it existed."""
        normal = _key(key)
        table = self._tables.pop(normal, None)
        if table is None:
            return False
        pinning.unpin(table)
        self._caches.pop(normal, None)
        self._mapped.pop(normal, None)
        self._prefetched.discard(normal)
        self._disk.pop(normal, None)
        return True

    def __delitem__(self, key) -> None:
        if _maybe_key(key) is not None:
            if not self.remove(key):
                raise KeyError(f"no table {_name(_key(key))} (tables: {self.keys()})")
        else:
            super().__delitem__(key)

    def _put(self, key, value) -> None:
        if not isinstance(value, (torch.Tensor, np.ndarray)):
            raise TypeError(
                f"table {_name(key)} must be a tensor or numpy array (got {_kind(value)})"
            )
        tensor = as_tensor(value)
        if tensor.numel() == 0:
            # NumPy may give an empty array any strides (0 included), which the row gather
            # would refuse as rows that are not contiguous: no data, so a fresh one.
            tensor = torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
        if tensor.dim() not in (1, 2):
            raise ValueError(
                f"table {_name(key)} must be 1-D or 2-D (got shape {tuple(tensor.shape)})"
            )
        for (group, name), other in self._tables.items():
            if group == key[0] and name != key[1] and other.shape[0] != tensor.shape[0]:
                raise ValueError(
                    f"table {_name(key)} has {tensor.shape[0]} rows, the others {other.shape[0]}"
                )
        old = self._tables.get(key)
        if old is not None:  # replaced in place: the key keeps its position
            pinning.unpin(old)
            self._caches.pop(key, None)
            self._mapped.pop(key, None)
            self._prefetched.discard(key)
            self._disk.pop(key, None)
        self._tables[key] = tensor
        if isinstance(value, np.memmap):
            self._mapped[key] = value

    # -- PyG's FeatureStore interface -------------------------------------------------------

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        index = attr.index
        if isinstance(index, slice) and index == slice(None):
            index = None
        self.update((attr.group_name, attr.attr_name), tensor, index)
        return True

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        key = (attr.group_name, attr.attr_name)
        index = attr.index
        if index is None or isinstance(index, (int, slice)):
            table = self.read(key)
            return table if index is None else table[index]
        return self.read(key, index)

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[torch.Tensor]:
        first = attrs[0].index if attrs else None
        if isinstance(first, (torch.Tensor, np.ndarray)) and all(a.index is first for a in attrs):
            return self.multi_read([(a.group_name, a.attr_name) for a in attrs], first)
        return [self._get_tensor(attr) for attr in attrs]

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self.remove((attr.group_name, attr.attr_name))

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        table = self._tables.get(_key((attr.group_name, attr.attr_name)))
        return None if table is None else tuple(table.shape)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(group_name=group, attr_name=name) for group, name in self._tables]

    # -- memory ------------------------------------------------------------------------------

    def share_memory_(self) -> FeatureStore:
        """Move in-memory tables into shared memory; memory-mapped ones stay as they are
        (the page cache shares them already). Call before :meth:`pin_memory_`."""
        for key, tensor in self._tables.items():
            if key in self._mapped or tensor.is_shared():
                continue
            if pinning.is_registered(tensor):
                raise ValueError(
                    f"table {_name(key)} is pinned; call share_memory_() before pin_memory_()"
                )
            tensor.share_memory_()
        return self

    def pin_memory_(self) -> FeatureStore:
        """Page-lock every table in place (``cudaHostRegister``) for zero-copy GPU reads.

        Memory-mapped tables are registered read-only (``cudaHostRegisterReadOnly``). A
        table stays registered until it is removed or replaced, or the store is
        garbage-collected; calling this twice is harmless. Needs CUDA (``RuntimeError``).
        """
        for key, tensor in list(self._tables.items()):
            self._tables[key] = pinning.pin(tensor, key in self._mapped, f"table {_name(key)}")
        return self

    def prefetch_(self, key: Key) -> bool:
        """Before each gather from memory-mapped table ``key``, ask the kernel to read the
        gathered rows' pages at once (:func:`graphengine.ops.prefetch_rows`; rows in a cache
        on the CPU skipped): for a table on disk read at random, with read-ahead off
        (``madvise(MADV_RANDOM)``, ``GraphDataset.advise``), the reads then queue
        together instead of one per fault. Returns ``False`` (nothing changed) for a table
        that is not memory-mapped."""
        normal = _key(key)
        self._table(normal)
        if normal not in self._mapped:
            return False
        self._prefetched.add(normal)
        return True

    def read_from_disk_(self, key: Key, table: DiskTable) -> None:
        """Gather the rows of memory-mapped table ``key`` from disk through ``table`` (a
        :class:`~graphengine.data.disk_table.DiskTable` of the same file, which may serve
        several stores), with many reads in flight and a host row cache, instead of through
        page faults on the memory map. ``store[key]`` stays the memory map. Replaces a device
        cache and :meth:`prefetch_` of ``key``.

        Raises:
            ValueError: ``key`` is not memory-mapped, or ``table`` reads another file or
                shape.
        """
        normal = _key(key)
        mapped = self._mapped.get(normal)
        self._table(normal)
        source = None if mapped is None else memmap_source(mapped)
        if source is None:
            raise ValueError(
                f"table {_name(normal)} is not a memory-mapped file; only such a table can "
                "be read from disk"
            )
        shape = tuple(mapped.shape) if mapped.ndim == 2 else (mapped.shape[0], 1)
        same_file = Path(source[0]).resolve() == table.path.resolve()
        if not same_file or shape != tuple(table.shape):
            raise ValueError(
                f"table {_name(normal)} maps '{source[0]}' {list(shape)}, but the disk table "
                f"reads '{table.path}' {list(table.shape)}"
            )
        self._caches.pop(normal, None)
        self._prefetched.discard(normal)
        self._disk[normal] = table

    def reads_from_disk(self, key: Key) -> bool:
        """Whether table ``key``'s rows are read from disk (:meth:`read_from_disk_`)."""
        return _key(key) in self._disk

    def enable_cache(
        self,
        key: Key,
        capacity: int | float,
        ranking: np.ndarray | torch.Tensor,
        device: str | torch.device = "cuda",
    ) -> int:
        """Cache the highest-ranked rows of table ``key`` on ``device``; returns the row count.

        Args:
            capacity: bytes (int), or a fraction of the table's rows (float in ``(0, 1]``).
            ranking: ``[num_rows]`` scores, e.g. in-degree (``Graph.in_degree()``) or how
                often pre-sampling touched each node; ties keep the lower id first.
            device: where the cache lives (the GPU; ``'cpu'`` works too, for tests). A GPU
                cache reads the rows it misses from the host table by zero-copy, so the
                table must be pinned first (:meth:`pin_memory_`).

        Raises:
            ValueError: ``device`` is a GPU and the table is not pinned.
        """
        normal = _key(key)
        table = self._table(normal)
        if torch.device(device).type == "cuda" and not table.is_pinned():
            raise ValueError(
                f"table {_name(normal)} is not pinned: a cache on {device} reads its misses "
                "from host memory by zero-copy; call pin_memory_() before enable_cache()"
            )
        if normal in self._disk:
            raise ValueError(
                f"table {_name(normal)} is read from disk through a host row cache already; "
                "size that cache instead"
            )
        two_d = table if table.dim() == 2 else table.view(-1, 1)
        self._caches[normal] = RowCache.build(two_d, capacity, ranking, device)
        return self._caches[normal].rows

    def cache_device(self, key: Key) -> torch.device | None:
        """The device of table ``key``'s row cache, or ``None`` when it has none."""
        cached = self._caches.get(_key(key))
        return None if cached is None else cached.cache.device

    def cache_stats(self, key: Key) -> dict:
        """``rows``, ``hits``, ``lookups`` and ``hit_rate`` of table ``key``'s cache; for a
        table read from disk, its host row cache's and the disk's counts
        (:meth:`DiskTable.stats <graphengine.data.disk_table.DiskTable.stats>`)."""
        normal = _key(key)
        if normal in self._disk:
            return self._disk[normal].stats()
        if normal not in self._caches:
            raise KeyError(f"table {_name(normal)} has no cache")
        return self._caches[normal].stats()

    # -- pickling ----------------------------------------------------------------------------

    def __reduce__(self):
        """Memory-mapped tables pickle as their file, offset, dtype and shape; others whole."""
        entries = []
        for key, table in self._tables.items():
            mapped = self._mapped.get(key)
            source = None
            if mapped is not None and table.data_ptr() == mapped.ctypes.data:
                source = memmap_source(mapped)
            entries.append((key, source, table if source is None else None))
        return (_restore, (entries,))


def _restore(entries) -> FeatureStore:
    """Unpickle a :class:`FeatureStore` (see ``FeatureStore.__reduce__``)."""
    return FeatureStore(
        {
            key: table if source is None else open_memmap_source(source)
            for key, source, table in entries
        }
    )


def _key(key) -> tuple[Group, str]:
    """``"x"`` -> ``(None, "x")``; a ``(group, name)`` pair as it is; else ``TypeError``."""
    if isinstance(key, str):
        return (None, key)
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str):
        group = key[0]
        if (
            group is None
            or isinstance(group, str)
            or (isinstance(group, tuple) and all(isinstance(part, str) for part in group))
        ):
            return (group, key[1])
    raise TypeError(f"'key' must be a table name or a (group, name) pair (got {key!r})")


def _maybe_key(key) -> tuple[Group, str] | None:
    """:func:`_key`, or ``None`` for what is not a key of this store (e.g. a TensorAttr)."""
    try:
        return _key(key)
    except TypeError:
        return None


def _ids(ids, num_rows: int) -> torch.Tensor:
    """Row ids as a contiguous int32 or int64 ``[n]`` tensor; a boolean mask, which must be
    ``[num_rows]``, becomes its positions. Strided ids (``ids[::2]``, a reversed array), which
    the loaders accept, are copied contiguous: the gather kernel reads the ids as one run."""
    if isinstance(ids, np.ndarray):
        # torch.from_numpy refuses negative strides; a copy only when not contiguous already.
        ids = as_tensor(np.ascontiguousarray(ids))
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"'ids' must be a tensor or numpy array (got {_kind(ids)})")
    if ids.dtype == torch.bool:
        if ids.dim() != 1:
            raise ValueError(f"'ids' as a mask must be 1-D (got shape {tuple(ids.shape)})")
        if ids.shape[0] != num_rows:
            raise ValueError(f"'ids' as a mask must have {num_rows} entries (got {ids.shape[0]})")
        ids = ids.nonzero().view(-1)
    if ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"'ids' must be int32 or int64 (got {ids.dtype})")
    if ids.dim() != 1:
        raise ValueError(f"'ids' must be 1-D (got shape {tuple(ids.shape)})")
    return ids.contiguous()


def _label(key) -> str:
    group, name = key
    return name if group is None else f"{group}.{name}"


def _name(key) -> str:
    group, name = key
    return f"'{name}'" if group is None else f"'{name}' of group {group!r}"


def _kind(value: Any) -> str:
    return type(value).__name__
