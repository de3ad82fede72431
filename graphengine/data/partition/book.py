"""The range partition book: which part owns a node, and the maps between new and original ids.

After renumbering, part ``p`` owns the new ids ``[bounds[p], bounds[p + 1])`` (DistDGL's range
partition book), so a node's owner is one ``searchsorted`` over ``K + 1`` numbers and no
per-node ownership array is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PartitionBook:
    """The bounds of K parts and the id maps.

    Attributes:
        bounds: int64 ``[num_parts + 1]``, non-decreasing, ``bounds[0] = 0``,
            ``bounds[-1] = num_nodes``.
        new_to_orig: int64 ``[num_nodes]``, the original id of each new id (may be a
            read-only memmap).
        orig_to_new: int64 ``[num_nodes]``, its inverse.
        manifest: the partition's top-level manifest (``{}`` when built in memory).
    """

    bounds: np.ndarray
    new_to_orig: np.ndarray
    orig_to_new: np.ndarray
    manifest: dict = field(default_factory=dict)

    def __post_init__(self):
        bounds = np.asarray(self.bounds)
        if bounds.ndim != 1 or bounds.size < 2 or bounds.dtype != np.int64:
            raise ValueError(
                f"'bounds' must be a 1-D int64 array of num_parts + 1 >= 2 entries "
                f"(got {bounds.dtype} {bounds.shape})"
            )
        n = self.new_to_orig.shape[0]
        if bounds[0] != 0 or bounds[-1] != n or bool((np.diff(bounds) < 0).any()):
            raise ValueError(f"'bounds' must rise from 0 to num_nodes={n} (got {bounds.tolist()})")
        if self.orig_to_new.shape != (n,):
            raise ValueError(f"'orig_to_new' must have shape [{n}] (got {self.orig_to_new.shape})")
        self.bounds = bounds

    @property
    def num_parts(self) -> int:
        return int(self.bounds.shape[0]) - 1

    @property
    def num_nodes(self) -> int:
        return int(self.bounds[-1])

    def part_range(self, part: int) -> tuple[int, int]:
        """``(start, stop)``: the new ids part ``part`` owns."""
        if not 0 <= part < self.num_parts:
            raise ValueError(f"'part' must be in [0, {self.num_parts}) (got {part})")
        return int(self.bounds[part]), int(self.bounds[part + 1])

    def owner(self, new_ids) -> np.ndarray:
        """The part owning each new id (integer ids in ``[0, num_nodes)``): int64, the shape
        of ``new_ids``."""
        ids = node_ids(new_ids, self.num_nodes, "new_ids")
        return np.searchsorted(self.bounds, ids, side="right").astype(np.int64) - 1

    def to_orig(self, new_ids) -> np.ndarray:
        """Original ids of new ids (integer ids in ``[0, num_nodes)``): int64, the shape of
        ``new_ids``."""
        return np.asarray(self.new_to_orig)[node_ids(new_ids, self.num_nodes, "new_ids")]

    def to_new(self, orig_ids) -> np.ndarray:
        """New ids of original ids (integer ids in ``[0, num_nodes)``): int64, the shape of
        ``orig_ids``."""
        return np.asarray(self.orig_to_new)[node_ids(orig_ids, self.num_nodes, "orig_ids")]


def node_ids(ids, num_nodes: int, name: str) -> np.ndarray:
    """``ids`` as int64, any shape; ``TypeError`` for non-integers (a cast would truncate
    them), ``ValueError`` naming an id outside ``[0, num_nodes)`` (NumPy would wrap a
    negative one around)."""
    array = np.asarray(ids)
    if array.size == 0:
        return array.astype(np.int64)
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"'{name}' must be integer ids (got {array.dtype}: {array.ravel()[:5]})")
    low, high = array.min(), array.max()
    if low < 0 or high >= num_nodes:
        bad = int(low) if low < 0 else int(high)
        raise ValueError(f"'{name}' must be in [0, {num_nodes}) (got {bad})")
    return array.astype(np.int64, copy=False)
