"""Numba kernel that groups items by an integer key, stably: the counting sort behind CSR and
CSC arrays. Arrays only; callers validate."""

from numba import njit


@njit(nogil=True, cache=True)
def group_by_key(keys, indptr, out):
    """Fill ``out`` (int64 ``[len(keys)]``) with the positions of ``keys`` (int64, in
    ``[0, len(indptr) - 1)``) grouped by key, ascending, each group in its original order;
    ``indptr`` (int64) holds where each key's group starts (the key counts' running sums)."""
    cursor = indptr[:-1].copy()
    for i in range(keys.shape[0]):
        k = keys[i]
        out[cursor[k]] = i
        cursor[k] += 1
