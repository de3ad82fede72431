"""A host-memory row cache of fixed size in front of a feature table read from disk.

Unlike :class:`graphengine.data.cache.RowCache` (a static device copy of the hottest rows),
this cache changes as batches are read: each batch first looks its rows up
(:meth:`HostRowCache.lookup`), reads the rows it missed from disk, then admits them
(:meth:`HostRowCache.admit`), which evicts others by SIEVE (Zhang et al., NSDI '24: a FIFO
queue whose hand, moving from the oldest entry to the newest, spares the entries looked up
since it last passed and evicts the first one that was not). It is seeded with the rows of
the highest in-degree nodes (:meth:`HostRowCache.fill`), which policy ``"static"`` then keeps
for good.

Loader threads call ``lookup`` and ``admit`` at once: one lock guards the state, and a lookup
copies its rows out while holding it, so that no slot is overwritten while it is read.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
import torch

POLICIES = ("sieve", "static")

# Per slot: its owner (int64), its visited bit (uint8) and the queue's two links (int32).
_SLOT_BYTES = 8 + 1 + 4 + 4
# Per row of the table: slot_of (int32).
_ROW_BYTES = 4
# Slots are int32 (slot_of and the queue's links): no more rows than that can address.
_MAX_CAPACITY = 2**31 - 1

# The queue's ends, the hand, the slots in use and the evictions, in one array that the
# kernel updates in place.
_HEAD, _TAIL, _HAND, _USED, _EVICTED = range(5)


def capacity_for(budget_bytes: int, num_rows: int, num_cols: int, dtype: torch.dtype) -> int:
    """The most rows a :class:`HostRowCache` of ``num_rows`` x ``num_cols`` ``dtype`` rows
    holds within ``budget_bytes``: each row costs its bytes plus its slot's state, and a
    cache that holds any row also keeps ``slot_of``, 4 bytes for every row of the table.
    Never more than ``num_rows`` nor the ``2**31 - 1`` rows a cache's int32 slots address; 0
    when the budget does not cover ``slot_of`` and one row."""
    for name, value in (("budget_bytes", budget_bytes), ("num_rows", num_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"capacity_for: '{name}' must be an int >= 0 (got {value!r})")
    if isinstance(num_cols, bool) or not isinstance(num_cols, int) or num_cols < 1:
        raise ValueError(f"capacity_for: 'num_cols' must be an int >= 1 (got {num_cols!r})")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"capacity_for: 'dtype' must be a torch.dtype (got {dtype!r})")
    row_bytes = num_cols * torch.empty((), dtype=dtype).element_size()
    rows = (budget_bytes - _ROW_BYTES * num_rows) // (row_bytes + _SLOT_BYTES)
    return int(min(max(rows, 0), num_rows, _MAX_CAPACITY))


class HostRowCache:
    """Up to ``capacity`` rows of a ``[num_rows, num_cols]`` table of ``dtype``, in host memory.

    Attributes:
        num_rows, capacity, num_cols, dtype, policy: as given.
        nbytes: the memory the cache holds (rows, ``slot_of`` and per-slot state); 0 for
            capacity 0.
    """

    def __init__(
        self,
        num_rows: int,
        capacity: int,
        num_cols: int,
        dtype: torch.dtype,
        *,
        policy: str = "sieve",
    ):
        """``capacity`` in rows (0 allowed: caches nothing, holds nothing); ``policy``
        ``"sieve"`` (admits and evicts) or ``"static"`` (keeps what :meth:`fill` put)."""
        for name, value in (("num_rows", num_rows), ("capacity", capacity)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"HostRowCache: '{name}' must be an int >= 0 (got {value!r})")
        if capacity > _MAX_CAPACITY:
            raise ValueError(
                f"HostRowCache: 'capacity' {capacity} is more than the {_MAX_CAPACITY} rows "
                "its int32 slots can address"
            )
        if capacity > num_rows:
            raise ValueError(
                f"HostRowCache: 'capacity' {capacity} is more than the table's {num_rows} rows"
            )
        if isinstance(num_cols, bool) or not isinstance(num_cols, int) or num_cols < 1:
            raise ValueError(f"HostRowCache: 'num_cols' must be an int >= 1 (got {num_cols!r})")
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"HostRowCache: 'dtype' must be a torch.dtype (got {dtype!r})")
        if policy not in POLICIES:
            raise ValueError(
                f"HostRowCache: 'policy' must be one of {', '.join(POLICIES)} (got {policy!r})"
            )
        self.num_rows, self.capacity, self.num_cols = num_rows, capacity, num_cols
        self.dtype, self.policy = dtype, policy
        # A cache of no rows keeps no id map either: every lookup misses.
        self._slot_of = np.full(num_rows if capacity else 0, -1, dtype=np.int32)
        self._owner = np.full(capacity, -1, dtype=np.int64)
        self._visited = np.zeros(capacity, dtype=np.uint8)
        self._newer = np.full(capacity, -1, dtype=np.int32)
        self._older = np.full(capacity, -1, dtype=np.int32)
        self._queue = np.array([-1, -1, -1, 0, 0], dtype=np.int64)
        self._rows = torch.empty((capacity, num_cols), dtype=dtype)
        # Torch views of the same memory, for the per-batch index ops.
        self._slot_of_t = torch.from_numpy(self._slot_of)
        self._visited_t = torch.from_numpy(self._visited)
        self._lock = threading.Lock()
        self._hits = self._lookups = self._admitted = 0
        self.nbytes = (
            self._rows.nbytes
            + self._slot_of.nbytes
            + self._owner.nbytes
            + self._visited.nbytes
            + self._newer.nbytes
            + self._older.nbytes
        )

    def fill(self, ids: torch.Tensor, rows: torch.Tensor) -> int:
        """Seed the cache: admit rows ``ids`` (int64 ``[k]``, distinct, hottest first, e.g. by
        in-degree; ``rows`` ``[k, num_cols]``) while it has free slots, without evicting.
        Ids already cached are skipped. Returns the rows admitted.

        The hottest go nearest the queue's newest end, so that SIEVE's hand, which starts at
        the oldest, meets the coldest seeds first."""
        self._check_ids(ids, "fill", "ids")
        self._check_distinct(ids, "fill")
        self._check_rows(rows, ids.shape[0], "fill")
        if not self.capacity:
            return 0
        with self._lock:
            free = self.capacity - int(self._queue[_USED])
            fresh = (self._slot_of_t[ids] < 0).nonzero().squeeze(1)[:free]
            order = fresh.flip(0)
            slots = self._sieve_slots(ids[order])
            _copy_rows(rows, order, self._rows, slots.long())
            self._admitted += int(order.numel())
        return int(order.numel())

    def _sieve_slots(self, ids: torch.Tensor) -> torch.Tensor:
        """Insert ``ids`` (int64 ``[m]``) into the SIEVE queue under the caller's lock; returns
        each one's slot (int32 ``[m]``; -1 where it was already cached)."""
        return torch.from_numpy(
            _sieve_admit(
                ids.numpy(),
                self._slot_of,
                self._owner,
                self._visited,
                self._newer,
                self._older,
                self._queue,
            )
        )

    def lookup(self, ids: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Copy the cached rows among ``ids`` (int64 ``[n]``, repeats allowed) into ``out[i]``
        (``out`` ``[n, num_cols]`` of the cache's dtype; other rows of it are left as they
        are), mark them looked up (for SIEVE) and count hits and lookups.

        Returns the positions in ``ids`` whose rows were not cached: int64, ascending."""
        self._check_ids(ids, "lookup", "ids")
        self._check_rows(out, ids.shape[0], "lookup", name="out")
        if not self.capacity:
            with self._lock:
                self._lookups += int(ids.numel())
            return torch.arange(ids.numel(), dtype=torch.int64)
        with self._lock:
            slots = self._slot_of_t[ids]
            hit = slots >= 0
            found = hit.nonzero().squeeze(1)
            found_slots = slots[found].long()
            _copy_rows(self._rows, found_slots, out, found)
            if self.policy == "sieve":
                self._visited_t[found_slots] = 1
            self._hits += int(found.numel())
            self._lookups += int(ids.numel())
        return (~hit).nonzero().squeeze(1)

    def admit(self, ids: torch.Tensor, rows: torch.Tensor) -> None:
        """After a miss was read, insert rows ``ids`` (int64 ``[m]``, distinct; ``rows``
        ``[m, num_cols]``), each evicting one by SIEVE when the cache is full. Ids another
        thread admitted meanwhile are skipped; of more than ``capacity`` ids, the last ones
        admitted evict the first. Policy ``"static"``: nothing changes."""
        self._check_ids(ids, "admit", "ids")
        self._check_distinct(ids, "admit")
        self._check_rows(rows, ids.shape[0], "admit")
        if self.policy == "static" or not self.capacity or not ids.numel():
            return
        with self._lock:
            slots = self._sieve_slots(ids)
            # Rows whose slot a later id of this call took again are not copied.
            kept = ((slots >= 0) & (self._slot_of_t[ids] == slots)).nonzero().squeeze(1)
            _copy_rows(rows, kept, self._rows, slots[kept].long())
            self._admitted += int((slots >= 0).sum())

    def stats(self) -> dict:
        """``rows`` (held), ``capacity``, ``hits``, ``lookups``, ``hit_rate`` (0 before any
        lookup), ``admitted``, ``evicted`` and ``bytes`` (:attr:`nbytes`)."""
        with self._lock:
            hits, lookups = self._hits, self._lookups
            return {
                "rows": int(self._queue[_USED]),
                "capacity": self.capacity,
                "hits": hits,
                "lookups": lookups,
                "hit_rate": hits / lookups if lookups else 0.0,
                "admitted": self._admitted,
                "evicted": int(self._queue[_EVICTED]),
                "bytes": self.nbytes,
            }

    def cached_ids(self) -> torch.Tensor:
        """The ids held, int64, ascending (for tests and inspection)."""
        with self._lock:
            owners = self._owner[self._owner >= 0]
        return torch.from_numpy(np.sort(owners))

    def _check_ids(self, ids, method: str, name: str) -> None:
        if not isinstance(ids, torch.Tensor):
            raise TypeError(
                f"HostRowCache.{method}: '{name}' must be a tensor (got {type(ids).__name__})"
            )
        if ids.dtype != torch.int64 or ids.dim() != 1 or ids.device.type != "cpu":
            raise TypeError(
                f"HostRowCache.{method}: '{name}' must be a 1-D int64 CPU tensor (got "
                f"{ids.dtype} of shape {tuple(ids.shape)} on {ids.device})"
            )
        if ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= self.num_rows:
                bad = low if low < 0 else high
                raise IndexError(
                    f"HostRowCache.{method}: '{name}' holds id {bad}, outside the table's "
                    f"[0, {self.num_rows}) rows"
                )

    def _check_distinct(self, ids: torch.Tensor, method: str) -> None:
        if torch.unique(ids).numel() != ids.numel():
            raise ValueError(f"HostRowCache.{method}: 'ids' must be distinct (got repeats)")

    def _check_rows(self, rows, count: int, method: str, name: str = "rows") -> None:
        if not isinstance(rows, torch.Tensor):
            raise TypeError(
                f"HostRowCache.{method}: '{name}' must be a tensor (got {type(rows).__name__})"
            )
        expected = (count, self.num_cols)
        if tuple(rows.shape) != expected or rows.dtype != self.dtype or rows.device.type != "cpu":
            raise ValueError(
                f"HostRowCache.{method}: '{name}' must be a {self.dtype} CPU tensor of shape "
                f"{expected} (got {rows.dtype} of shape {tuple(rows.shape)} on {rows.device})"
            )


def _copy_rows(
    src: torch.Tensor, src_index: torch.Tensor, dst: torch.Tensor, dst_index: torch.Tensor
) -> None:
    """``dst[dst_index[i]] = src[src_index[i]]`` (int64 indices) without a temporary: copying
    into fresh memory costs more than the copy (its pages fault in)."""
    if not src_index.numel():
        return
    if not dst.is_contiguous():
        dst[dst_index] = src[src_index]
        return
    # Rows as words of the widest integer type that divides them: any dtype copies alike.
    row_bytes = dst.shape[1] * dst.element_size()
    word = next(
        w
        for w in (torch.int64, torch.int32, torch.int16, torch.uint8)
        if not row_bytes % w.itemsize
    )
    width = row_bytes // word.itemsize
    _copy_word_rows(
        src.contiguous().view(torch.uint8).view(word).numpy().reshape(src.shape[0], width),
        src_index.numpy(),
        dst.view(torch.uint8).view(word).numpy().reshape(dst.shape[0], width),
        dst_index.numpy(),
    )


@numba.njit(nogil=True, cache=True)
def _copy_word_rows(src, src_index, dst, dst_index):
    for i in range(src_index.shape[0]):
        to, of = dst_index[i], src_index[i]
        for k in range(dst.shape[1]):
            dst[to, k] = src[of, k]


@numba.njit(nogil=True, cache=True)
def _sieve_admit(ids, slot_of, owner, visited, newer, older, queue):
    """Insert ``ids`` in order at the queue's newest end; returns each one's slot (int32), or
    -1 for an id already cached. A full cache first evicts by SIEVE: from the hand (or the
    oldest entry), clear the visited bits met while moving toward the newest end, wrapping
    to the oldest, and evict the first entry not visited; the hand stays next to it."""
    capacity = owner.shape[0]
    slots = np.full(ids.shape[0], -1, dtype=np.int32)
    for i in range(ids.shape[0]):
        row = ids[i]
        if slot_of[row] >= 0:
            continue
        if queue[_USED] < capacity:
            slot = queue[_USED]
            queue[_USED] += 1
        else:
            slot = queue[_HAND] if queue[_HAND] >= 0 else queue[_TAIL]
            while visited[slot]:
                visited[slot] = 0
                slot = newer[slot] if newer[slot] >= 0 else queue[_TAIL]
            queue[_HAND] = newer[slot]
            if newer[slot] >= 0:
                older[newer[slot]] = older[slot]
            else:
                queue[_HEAD] = older[slot]
            if older[slot] >= 0:
                newer[older[slot]] = newer[slot]
            else:
                queue[_TAIL] = newer[slot]
            slot_of[owner[slot]] = -1
            queue[_EVICTED] += 1
        owner[slot] = row
        visited[slot] = 0
        slot_of[row] = slot
        newer[slot] = -1
        older[slot] = queue[_HEAD]
        if queue[_HEAD] >= 0:
            newer[queue[_HEAD]] = slot
        queue[_HEAD] = slot
        if queue[_TAIL] < 0:
            queue[_TAIL] = slot
        slots[i] = slot
    return slots
