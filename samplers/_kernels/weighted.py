"""Numba kernels of weighted node-wise neighbor sampling over a CSC graph.

Frontier node ``i`` draws among the CSC positions ``starts[i]:starts[i] + degrees[i]``, each
edge ``e`` in proportion to ``weights[e]`` (float64, finite, ``>= 0``; edges of weight 0 are
never drawn). With replacement every draw is independent (inverse transform over the
range's running sums ``cumulative``); without replacement the draws follow successive
sampling, each proportional to weight among the edges not yet drawn, which is the
distribution of ``torch.multinomial(w, k, replacement=False)``: every candidate gets an
exponential clock of rate ``w_e`` and the ``k`` earliest are kept (Efraimidis and Spirakis,
IPL 2006). Draws come from the counter-based streams of :mod:`samplers._kernels.random`,
so a batch does not depend on the threads.
"""

import numpy as np
from numba import njit, prange

from samplers._kernels.prefetch import prefetch
from samplers._kernels.random import GOLDEN, mix64, stream_state

PREFETCH_DISTANCE = 16
_UNIT = 1.0 / 9007199254740992.0  # 2**-53


@njit(inline="always")
def _unit(state):
    """A float64 uniform on ``[0, 1)`` and the advanced state (53 random bits)."""
    state += GOLDEN
    return np.float64(mix64(state) >> np.uint64(11)) * _UNIT, state


@njit(parallel=True, nogil=True, cache=True)
def running_sums(indptr, weights):
    """Each node's running sums of its in-edges' weights, restarting at every node: float64
    ``[num_edges]``, ``out[e]`` the sum over the node's edges up to ``e`` inclusive.
    Restarting per node keeps the rounding of a node's sums to its own weights."""
    out = np.empty(weights.shape[0], dtype=np.float64)
    for v in prange(indptr.shape[0] - 1):
        total = 0.0
        for e in range(indptr[v], indptr[v + 1]):
            total += weights[e]
            out[e] = total
    return out


@njit(inline="always")
def _draw_with_replacement(weights, cumulative, range_start, first, degree, count, state, out, lo):
    """``count`` independent draws among ``first:first + degree``, each edge ``e`` with
    probability ``w_e / total``; ``cumulative`` restarts at ``range_start`` (the node's first
    CSC position), so the range's sums are ``cumulative[e] - before``."""
    before = cumulative[first - 1] if first > range_start else 0.0
    total = cumulative[first + degree - 1] - before
    for j in range(count):
        u, state = _unit(state)
        target = before + u * total
        a = first
        b = first + degree - 1
        while a < b:  # the first position whose running sum passes the target
            mid = (a + b) >> 1
            if cumulative[mid] > target:
                b = mid
            else:
                a = mid + 1
        while weights[a] <= 0.0 and a > first:  # a target rounded up onto the range's end
            a -= 1
        out[lo + j] = a


@njit(inline="always")
def _sift_down(keys, slots, size, root):
    """Restore the max-heap order of ``keys[:size]`` (with ``slots`` alongside) below ``root``."""
    while True:
        child = 2 * root + 1
        if child >= size:
            return
        if child + 1 < size and keys[child + 1] > keys[child]:
            child += 1
        if keys[root] >= keys[child]:
            return
        keys[root], keys[child] = keys[child], keys[root]
        slots[root], slots[child] = slots[child], slots[root]
        root = child


@njit(inline="always")
def _draw_without_replacement(weights, first, degree, count, state, out, lo):
    """The ``count`` edges of ``first:first + degree`` whose exponential clocks (rate
    ``w_e``) ring first, in CSC order; edges of weight 0 never ring."""
    keys = np.empty(count, dtype=np.float64)
    slots = np.empty(count, dtype=np.int64)
    size = 0
    for e in range(first, first + degree):
        w = weights[e]
        if w <= 0.0:
            continue
        u, state = _unit(state)
        clock = -np.log1p(-u) / w
        if size < count:
            keys[size] = clock
            slots[size] = e
            size += 1
            if size == count:
                for root in range(count // 2 - 1, -1, -1):
                    _sift_down(keys, slots, count, root)
        elif clock < keys[0]:
            keys[0] = clock
            slots[0] = e
            _sift_down(keys, slots, count, 0)
    chosen = np.sort(slots[:size])
    for j in range(size):
        out[lo + j] = chosen[j]


@njit(parallel=True, nogil=True, cache=True)
def hop_sample_weighted(
    indices,
    weights,
    cumulative,
    range_starts,
    starts,
    degrees,
    offsets,
    replace,
    key,
    stream_ids,
    out_nbr,
    out_edge,
):
    """Weighted draws for every frontier node (see the module docstring).

    Node ``i`` gets the slots ``offsets[i]:offsets[i + 1]`` of ``out_nbr`` (neighbor ids as
    ``indices`` holds them, int64) and ``out_edge`` (CSC positions, int64); its candidates
    are ``starts[i]:starts[i] + degrees[i]`` within its CSC range that begins at
    ``range_starts[i]``. ``weights`` and ``cumulative`` (:func:`running_sums`) are float64
    ``[num_edges]``; ``cumulative`` is read only with replacement. Its draws come from the
    stream ``stream_ids[i]`` (int64) under ``key`` (uint64). A node whose slots are as many
    as its positive-weight candidates takes all of those.
    """
    n = starts.shape[0]
    for i in prange(n):
        lo = offsets[i]
        count = offsets[i + 1] - lo
        if count == 0:
            continue
        first = starts[i]
        degree = degrees[i]
        state = stream_state(key, np.uint64(stream_ids[i]) + GOLDEN)
        if replace:
            _draw_with_replacement(
                weights, cumulative, range_starts[i], first, degree, count, state, out_edge, lo
            )
        else:
            _draw_without_replacement(weights, first, degree, count, state, out_edge, lo)
    num_edges = out_edge.shape[0]
    for e in prange(num_edges):
        if e + PREFETCH_DISTANCE < num_edges:
            prefetch(indices, out_edge[e + PREFETCH_DISTANCE])
        out_nbr[e] = indices[out_edge[e]]
