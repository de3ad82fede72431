"""Numba kernels of induced subgraphs: every edge of the graph between a batch's nodes.

Arrays only; callers validate. The batch's nodes are the keys of the relabelling hash table
of :mod:`samplers._kernels.neighbor` (a node id, with its tree in the bits above the node
bits in disjoint sampling); the kernels only read the table, so they run in parallel.
"""

import numpy as np
from numba import njit, prange

from samplers._kernels.neighbor import EMPTY, _slot


@njit(inline="always")
def _local_id(table, shift, key):
    """The local id of ``key`` in the hash table, or -1 when it is not there."""
    mask = table.shape[0] // 2 - 1
    s = _slot(key, shift)
    while True:
        found = table[2 * s]
        if found == key:
            return np.int64(table[2 * s + 1])
        if found == EMPTY:
            return np.int64(-1)
        s = (s + 1) & mask


@njit(parallel=True, nogil=True, cache=True)
def induced_offsets(indptr, indices, keys, node_mask, table, shift):
    """Where each batch node's induced in-edges go: int64 ``[len(keys) + 1]``.

    Batch node ``i`` is graph node ``keys[i] & node_mask`` (int64 each); an in-edge from
    ``u`` counts when ``u`` (in the same tree: ``keys[i]``'s bits outside ``node_mask``) is
    in ``table``."""
    n = keys.shape[0]
    counts = np.zeros(n + 1, dtype=np.int64)
    for i in prange(n):
        v = keys[i] & node_mask
        tree = keys[i] & ~node_mask
        count = 0
        for e in range(indptr[v], indptr[v + 1]):
            if _local_id(table, shift, np.int64(indices[e]) | tree) >= 0:
                count += 1
        counts[i + 1] = count
    return np.cumsum(counts)


@njit(parallel=True, nogil=True, cache=True)
def induced_fill(indptr, indices, keys, node_mask, table, shift, offsets, row, col, edge):
    """Write the induced edges :func:`induced_offsets` counted: batch node ``i``'s in-edges,
    in CSC order, at ``offsets[i]:offsets[i + 1]`` of ``row`` (local source), ``col``
    (``i``) and ``edge`` (CSC position), int64 each."""
    for i in prange(keys.shape[0]):
        v = keys[i] & node_mask
        tree = keys[i] & ~node_mask
        j = offsets[i]
        for e in range(indptr[v], indptr[v + 1]):
            local = _local_id(table, shift, np.int64(indices[e]) | tree)
            if local >= 0:
                row[j] = local
                col[j] = i
                edge[j] = e
                j += 1
