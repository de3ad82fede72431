"""Numba kernels of weighted node-wise neighbor sampling over a CSC graph.

Frontier node ``i`` draws among the CSC positions ``starts[i]:starts[i] + degrees[i]``, each
edge ``e`` in proportion to ``weights[e]`` (float64, finite, ``>= 0``; edges of weight 0 are
never drawn). With replacement every draw is independent: inverse transform over the
node's running sums ``cumulative``, found by binary search. Without replacement the draws
follow successive sampling, each proportional to weight among the edges not yet drawn,
which is the law of ``torch.multinomial(w, k, replacement=False)``. Two exact ways:

* rejection: draw as with replacement and redraw an edge already taken (given the edges
  taken, an accepted draw is proportional to weight among the others): ``O(k log d)``,
  cheap while the taken edges hold little of the weight;
* exponential clocks: every candidate gets a clock of rate ``w_e`` and the ``k`` earliest
  ring (Efraimidis and Spirakis, IPL 2006): ``O(d log k)``, whatever the weights.

A node with at least ``2 k`` candidates and ``k <= REJECTION_MAX_FANOUT`` starts by rejection
and, after ``4 k + 8`` draws without finishing, draws the rest by clocks among the edges not
yet taken (successive sampling
has no memory of the order of the edges taken, so the switch keeps the law exact); a node
with fewer (where rejection would redraw often) uses clocks from the start. Draws come from
the counter-based streams of :mod:`samplers._kernels.random`, so a batch does not depend on
the threads.
"""

import math

import numpy as np
from numba import njit, prange

from samplers._kernels.prefetch import prefetch
from samplers._kernels.random import GOLDEN, mix64, stream_state

PREFETCH_DISTANCE = 16
_UNIT = 1.0 / 9007199254740992.0  # 2**-53
# Above this fanout the duplicate checks of rejection cost more than the clocks.
REJECTION_MAX_FANOUT = 32
# Up to this many draws a node's edges are put in order by insertion sort.
INSERTION_SORT_MAX = 32


@njit(inline="always")
def _unit(state):
    """A float64 uniform on ``[0, 1)`` and the advanced state (53 random bits)."""
    state += GOLDEN
    return np.float64(mix64(state) >> np.uint64(11)) * _UNIT, state


@njit(nogil=True, cache=True)
def overflow_scale(largest):
    """The power of two (float64) that brings ``largest`` (a finite weight ``> 0``) into
    ``[0.5, 1)``. Weights summed in these units stay finite (at most their count) where
    their plain sum passes float64's range; the scaling is exact, so the draws keep the
    weights' proportions."""
    return math.ldexp(1.0, -math.frexp(largest)[1])


@njit(parallel=True, nogil=True, cache=True)
def running_sums(indptr, weights):
    """Each node's running sums of its in-edges' weights, restarting at every node: float64
    ``[num_edges]``, ``out[e]`` the sum over the node's edges up to ``e`` inclusive.
    Restarting per node keeps the rounding of a node's sums to its own weights. A node whose
    sum overflows (weights near float64's largest) gets its sums in :func:`overflow_scale`'s
    units instead: the draws divide by the node's total, so only the proportions matter."""
    out = np.empty(weights.shape[0], dtype=np.float64)
    for v in prange(indptr.shape[0] - 1):
        total = 0.0
        for e in range(indptr[v], indptr[v + 1]):
            total += weights[e]
            out[e] = total
        if not np.isfinite(total):
            largest = 0.0
            for e in range(indptr[v], indptr[v + 1]):
                largest = max(largest, weights[e])
            scale = overflow_scale(largest)
            total = 0.0
            for e in range(indptr[v], indptr[v + 1]):
                total += weights[e] * scale
                out[e] = total
    return out


@njit(inline="always")
def first_passing(cumulative, lo, last, target):
    """The first position of ``cumulative[lo:last + 1]`` (running sums, ascending) that
    passes ``target``, by binary search; ``last`` when none does. Weighted draws of edges and
    of negative nodes both invert their running sums through it."""
    while lo < last:
        mid = (lo + last) >> 1
        if cumulative[mid] > target:
            last = mid
        else:
            lo = mid + 1
    return lo


@njit(inline="always")
def _draw_one(weights, cumulative, before, total, first, degree, state):
    """One edge of ``first:first + degree``, edge ``e`` with probability ``w_e / total``
    (``cumulative[e] - before`` the range's running sums), and the advanced state."""
    u, state = _unit(state)
    a = first_passing(cumulative, first, first + degree - 1, before + u * total)
    while weights[a] <= 0.0 and a > first:  # a target rounded up onto the range's end
        a -= 1
    return a, state


@njit(inline="always")
def _range_sums(cumulative, range_start, first, degree):
    """``(before, total)``: the running sum before ``first`` and the weight of the range."""
    before = cumulative[first - 1] if first > range_start else 0.0
    return before, cumulative[first + degree - 1] - before


@njit(inline="always")
def _taken(out, lo, chosen, e):
    """Whether edge ``e`` is among ``out[lo:lo + chosen]``."""
    j = lo
    while j < lo + chosen and out[j] != e:
        j += 1
    return j < lo + chosen


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
def _clocks(weights, first, degree, state, out, clocks, lo, chosen, count):
    """Fill ``out[lo + chosen:lo + count]`` with the positive-weight edges of
    ``first:first + degree`` not in ``out[lo:lo + chosen]`` whose exponential clocks (rate
    ``w_e``) ring first. ``clocks`` (float64, like ``out``) is the heap's scratch."""
    need = count - chosen
    keys = clocks[lo + chosen : lo + count]
    slots = out[lo + chosen : lo + count]
    size = 0
    for e in range(first, first + degree):
        w = weights[e]
        if w <= 0.0 or _taken(out, lo, chosen, e):
            continue
        u, state = _unit(state)
        clock = -np.log1p(-u) / w
        if size < need:
            keys[size] = clock
            slots[size] = e
            size += 1
            if size == need:
                for root in range(need // 2 - 1, -1, -1):
                    _sift_down(keys, slots, need, root)
        elif clock < keys[0]:
            keys[0] = clock
            slots[0] = e
            _sift_down(keys, slots, need, 0)


@njit(inline="always")
def _sort_small(out, lo, count):
    """Sort ``out[lo:lo + count]`` in place: insertion sort for a fanout's few entries."""
    if count > INSERTION_SORT_MAX:
        out[lo : lo + count].sort()
        return
    for j in range(lo + 1, lo + count):
        value = out[j]
        k = j - 1
        while k >= lo and out[k] > value:
            out[k + 1] = out[k]
            k -= 1
        out[k + 1] = value


@njit(parallel=True, nogil=True, cache=True)
def hop_sample_weighted(
    indices,
    weights,
    cumulative,
    range_starts,
    starts,
    degrees,
    positive,
    offsets,
    replace,
    key,
    stream_ids,
    out_nbr,
    out_edge,
    clocks,
):
    """Weighted draws for every frontier node (see the module docstring).

    Node ``i`` gets the slots ``offsets[i]:offsets[i + 1]`` of ``out_nbr`` (neighbor ids as
    ``indices`` holds them, int64) and ``out_edge`` (CSC positions, int64, ascending within a
    node without replacement); its candidates are ``starts[i]:starts[i] + degrees[i]``
    within its CSC range that begins at ``range_starts[i]``, ``positive[i]`` of them of
    positive weight. ``weights`` and ``cumulative`` (:func:`running_sums`) are float64
    ``[num_edges]``. Its draws come from the stream ``stream_ids[i]`` (int64) under ``key``
    (uint64). A node whose slots are as many as its positive-weight candidates takes all of
    those. ``clocks`` (float64, the shape of ``out_edge``) is scratch.
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
        if not replace and count == positive[i]:
            j = lo
            for e in range(first, first + degree):
                if weights[e] > 0.0:
                    out_edge[j] = e
                    j += 1
            continue
        if replace or (count <= REJECTION_MAX_FANOUT and 2 * count <= positive[i]):
            before, total = _range_sums(cumulative, range_starts[i], first, degree)
            chosen = 0
            tries = 0
            limit = count if replace else 4 * count + 8
            while chosen < count and tries < limit:
                e, state = _draw_one(weights, cumulative, before, total, first, degree, state)
                tries += 1
                if replace or not _taken(out_edge, lo, chosen, e):
                    out_edge[lo + chosen] = e
                    chosen += 1
        else:
            chosen = 0
        if not replace:
            if chosen < count:
                _clocks(weights, first, degree, state, out_edge, clocks, lo, chosen, count)
            _sort_small(out_edge, lo, count)
    num_edges = out_edge.shape[0]
    for e in prange(num_edges):
        if e + PREFETCH_DISTANCE < num_edges:
            prefetch(indices, out_edge[e + PREFETCH_DISTANCE])
        out_nbr[e] = indices[out_edge[e]]
