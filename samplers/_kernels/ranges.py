"""Numba kernels that narrow each frontier node's CSC range before its draws.

Arrays only; callers validate. A frontier node ``i``'s candidate edges are the CSC positions
``starts[i]:starts[i] + degrees[i]``; these kernels shrink ``degrees`` (temporal sampling:
only edges no later than a time) or move ``starts`` (the most recent ones), and count the
edges each node then gets.
"""

import numpy as np
from numba import njit, prange


@njit(inline="always")
def first_after(times, lo, hi, limit):
    """The first position of ``times[lo:hi]`` (ascending) whose time passes ``limit``, by
    binary search (``hi`` when none does). The CPU and the CUDA kernels both call it."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if times[mid] <= limit:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(parallel=True, nogil=True, cache=True)
def limit_to_time(times, starts, degrees, limits):
    """Shrink each range to its edges with ``times[e] <= limits[i]``.

    ``times`` (int64 ``[num_edges]``, CSC order) ascends within every node's range, so the
    edges that qualify are a prefix of it, found by binary search. ``limits`` is int64
    ``[len(starts)]``; ``degrees`` (int64) is updated in place.
    """
    for i in prange(starts.shape[0]):
        degrees[i] = first_after(times, starts[i], starts[i] + degrees[i], limits[i]) - starts[i]


@njit(parallel=True, nogil=True, cache=True)
def keep_latest(starts, degrees, fanout):
    """Keep only the last ``fanout`` edges of each range (the most recent, when a range
    ascends in time); ``fanout < 0`` keeps all. ``starts`` and ``degrees`` (int64) are
    updated in place."""
    if fanout < 0:
        return
    for i in prange(starts.shape[0]):
        if degrees[i] > fanout:
            starts[i] += degrees[i] - fanout
            degrees[i] = fanout


@njit(parallel=True, nogil=True, cache=True)
def counts_to_offsets(degrees, fanout, replace):
    """Where each node's sampled edges go, given its candidate count ``degrees[i]``: int64
    ``[len(degrees) + 1]``. A node gets ``min(degree, fanout)`` edges, ``fanout`` with
    replacement when it has any candidate, all of them for ``fanout < 0``."""
    n = degrees.shape[0]
    counts = np.empty(n + 1, dtype=np.int64)
    counts[0] = 0
    for i in prange(n):
        degree = degrees[i]
        if fanout < 0:
            counts[i + 1] = degree
        elif replace:
            counts[i + 1] = fanout if degree > 0 else 0
        else:
            counts[i + 1] = min(degree, fanout)
    return np.cumsum(counts)


@njit(parallel=True, nogil=True, cache=True)
def weighted_offsets(weights, starts, degrees, fanout, replace, positive):
    """As :func:`counts_to_offsets`, counting only the edges of positive weight (``weights``,
    float64 ``[num_edges]``, CSC order): an edge of weight 0 is never drawn. Also fills
    ``positive`` (int64 ``[len(starts)]``) with each node's count of them."""
    for i in prange(starts.shape[0]):
        count = 0
        for e in range(starts[i], starts[i] + degrees[i]):
            if weights[e] > 0.0:
                count += 1
        positive[i] = count
    return counts_to_offsets(positive, fanout, replace)
