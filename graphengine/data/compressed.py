"""Checks of the compressed sparse arrays (CSR or CSC: a pointer array and an index array)
that readers take from files, before anything indexes with them: scipy densifies such
arrays unchecked, writing past its array on a bad index, and the samplers trust them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def check_compressed(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_rows: int,
    num_cols: int,
    name: Callable[[str], str],
    index: str = "index",
) -> None:
    """Check that ``indptr`` (``[num_rows + 1]``) and ``indices`` are 1-D integer arrays,
    ``indptr`` starts at 0, ends at ``len(indices)`` and never decreases, and every index lies
    in ``[0, num_cols)``; one pass over each.

    Args:
        name: ``"indptr"`` or ``"indices"`` -> how the error names that array (its key and
            file, say).
        index: what an index is, for the error (``"column"`` of a CSR, ``"source"`` of a
            CSC).

    Raises:
        ValueError: naming the array, the bad value and what was expected.
    """
    for key, array in (("indptr", indptr), ("indices", indices)):
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"{name(key)} must be a 1-D integer array (got {array.dtype} {array.shape})"
            )
    if indptr.shape[0] != num_rows + 1:
        raise ValueError(
            f"{name('indptr')} must have {num_rows + 1} entries, one more than its {num_rows} "
            f"rows (got {indptr.shape[0]})"
        )
    if indptr[0] != 0 or indptr[-1] != indices.shape[0]:
        raise ValueError(
            f"{name('indptr')} must start at 0 and end at {indices.shape[0]}, the length of "
            f"{name('indices')} (got {indptr[0]} and {indptr[-1]})"
        )
    falls = np.flatnonzero(indptr[1:] < indptr[:-1])
    if falls.size:
        at = int(falls[0]) + 1
        raise ValueError(
            f"{name('indptr')} must not decrease "
            f"(got {indptr[at - 1]} then {indptr[at]} at position {at})"
        )
    if indices.size:
        low, high = indices.min(), indices.max()
        if low < 0 or high >= num_cols:
            raise ValueError(
                f"{name('indices')} holds {index} {low if low < 0 else high}, outside "
                f"[0, {num_cols})"
            )
