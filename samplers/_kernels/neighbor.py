"""Numba kernels of uniform node-wise neighbor sampling over a CSC graph.

Arrays only: ``indptr`` (int64, ``[num_nodes + 1]``), ``indices`` (int32 or int64,
``[num_edges]``), node ids as int64. Callers validate; the kernels trust their input.

One hop runs in three steps: ``hop_offsets`` (how many neighbors each frontier
node gets, parallel), ``hop_sample`` (which ones, parallel over frontier nodes,
each with its own random stream, numbered by the node's original id) and ``relabel``
(global to batch-local ids, sequential so that new nodes are numbered in order of first
appearance, as PyG does). The id map is an open-addressing hash table whose size follows the
batch (``insert_nodes``, ``relabel``) or, on graphs small enough, an array over all the
graph's nodes (``insert_nodes_dense``, ``relabel_dense``, ``clear_dense``).
"""

import numpy as np
from numba import njit, prange

from samplers._kernels.prefetch import prefetch
from samplers._kernels.random import GOLDEN, stream_state, uniform_below

# Below this fanout, Floyd's algorithm with a linear duplicate scan is cheapest;
# above it, selection sampling (Knuth's Algorithm S) costs one draw per neighbor.
FLOYD_MAX_FANOUT = 64
# How many frontier nodes (or edges) ahead the kernels prefetch the rows they will read.
PREFETCH_DISTANCE = 16
EMPTY = -1
# Linear probing stays short up to this load; the table grows before it passes it.
MAX_LOAD_PERCENT = 70


@njit(parallel=True, nogil=True, cache=True)
def hop_offsets(indptr, frontier, fanout, replace, starts, degrees):
    """Where each frontier node's sampled neighbors go: int64 ``[len(frontier) + 1]``.

    Also fills ``starts`` and ``degrees`` (int64 ``[len(frontier)]``) with each frontier
    node's CSC start and in-degree, so that the sampling pass reads no ``indptr``.
    """
    n = frontier.shape[0]
    counts = np.empty(n + 1, dtype=np.int64)
    counts[0] = 0
    for i in prange(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch(indptr, frontier[i + PREFETCH_DISTANCE])
        v = frontier[i]
        start = indptr[v]
        degree = indptr[v + 1] - start
        starts[i] = start
        degrees[i] = degree
        if fanout < 0:
            counts[i + 1] = degree
        elif replace:
            counts[i + 1] = fanout if degree > 0 else 0
        else:
            counts[i + 1] = min(degree, fanout)
    return np.cumsum(counts)


@njit(inline="always")
def _floyd(state, degree, count, out, start):
    """Floyd's algorithm: a uniform ``count``-subset of ``[0, degree)`` in ``out[start:]``."""
    for filled, j in enumerate(range(degree - count, degree)):
        t, state = uniform_below(state, np.uint64(j + 1))
        pick = np.int64(t)
        for q in range(filled):
            if out[start + q] == pick:
                pick = j
                break
        out[start + filled] = pick


@njit(inline="always")
def _selection(state, degree, count, out, start):
    """Knuth's Algorithm S: a uniform ``count``-subset of ``[0, degree)``, in order."""
    chosen = 0
    for p in range(degree):
        if chosen == count:
            break
        t, state = uniform_below(state, np.uint64(degree - p))
        if np.int64(t) < count - chosen:
            out[start + chosen] = p
            chosen += 1


@njit(inline="always")
def stream_id_state(key, stream_id):
    """The start state of a frontier node's draws: its stream ``stream_id`` (int64) under
    the hop's ``key`` (uint64)."""
    return stream_state(key, np.uint64(stream_id) + GOLDEN)


@njit(inline="always")
def draw_positions(state, degree, count, fanout, replace, out, lo):
    """One node's ``count`` positions among its ``degree`` candidates into
    ``out[lo:lo + count]`` (int64), from ``state``: ``fanout`` independent draws with
    replacement, all of them when ``count == degree``, else a uniform ``count``-subset (Floyd's
    algorithm up to ``FLOYD_MAX_FANOUT``, selection sampling above). The CPU and the CUDA
    kernels both draw through this, so that their batches are equal."""
    if replace and fanout >= 0:
        for j in range(count):
            t, state = uniform_below(state, np.uint64(degree))
            out[lo + j] = np.int64(t)
    elif count == degree:
        for j in range(count):
            out[lo + j] = j
    elif count <= FLOYD_MAX_FANOUT:
        _floyd(state, degree, count, out, lo)
    else:
        _selection(state, degree, count, out, lo)


@njit(parallel=True, nogil=True, cache=True)
def hop_sample(
    indices,
    starts,
    degrees,
    offsets,
    fanout,
    replace,
    key,
    stream_ids,
    first_local,
    out_nbr,
    out_edge,
    out_col,
):
    """Sample every frontier node's in-neighbors.

    Frontier node ``i`` (CSC range ``starts[i]`` and ``degrees[i]``) gets the slots
    ``offsets[i]:offsets[i + 1]`` of ``out_nbr`` (neighbor id as ``indices`` holds it,
    int64) and ``out_edge`` (CSC position of the edge, int64). Its draws come from the
    stream numbered ``stream_ids[i]`` (int64: the node's id in the original graph, tagged when
    a seed repeats, see ``samplers.hop.tag_repeats``) under
    ``key`` (uint64, one per batch and hop), so that a node gets the same neighbors wherever
    it sits in the frontier and whichever worker samples it. Unless ``out_col`` is empty,
    it also gets ``first_local + i`` (its batch-local id) in ``out_col``'s slots.

    Two passes: the draws (positions only, no reads of the graph), then one flat loop
    over the edges that reads ``indices`` with the reads ahead prefetched, so that the
    cache misses of a graph larger than the cache overlap.
    """
    n = starts.shape[0]
    with_col = out_col.shape[0] > 0
    for i in prange(n):
        start = starts[i]
        degree = degrees[i]
        lo = offsets[i]
        count = offsets[i + 1] - lo
        draw_positions(
            stream_id_state(key, stream_ids[i]), degree, count, fanout, replace, out_edge, lo
        )
        for j in range(lo, lo + count):
            out_edge[j] += start
        if with_col:
            for j in range(lo, lo + count):
                out_col[j] = first_local + i
    num_edges = out_edge.shape[0]
    for e in prange(num_edges):
        if e + PREFETCH_DISTANCE < num_edges:
            prefetch(indices, out_edge[e + PREFETCH_DISTANCE])
        out_nbr[e] = indices[out_edge[e]]


@njit(parallel=True, nogil=True, cache=True)
def edge_columns(offsets, first_local, out_col):
    """``out_col[offsets[i]:offsets[i + 1]] = first_local + i`` (int64): each sampled edge's
    destination as a batch-local id."""
    for i in prange(offsets.shape[0] - 1):
        for j in range(offsets[i], offsets[i + 1]):
            out_col[j] = first_local + i


@njit(inline="always")
def _slot(node, shift):
    return np.int64((np.uint64(node) * GOLDEN) >> np.uint64(shift))


@njit(nogil=True, cache=True)
def insert_nodes(nodes, count, table, shift):
    """Put ``nodes[:count]`` (int64) into an empty ``table``, node ``i`` with local id ``i``.

    A repeated node keeps its first local id. ``table`` is ``[2 * capacity]`` of
    (key, value) pairs, int32 when node ids fit (half the cache footprint) else int64,
    ``EMPTY`` keys free, ``capacity`` a power of two and ``shift = 64 - log2(capacity)``.
    """
    mask = table.shape[0] // 2 - 1
    for i in range(count):
        node = nodes[i]
        s = _slot(node, shift)
        while True:
            key = table[2 * s]
            if key == node:
                break
            if key == EMPTY:
                table[2 * s] = node
                table[2 * s + 1] = i
                break
            s = (s + 1) & mask


@njit(nogil=True, cache=True)
def relabel(nbr, begin, table, shift, n_id, num_nodes, out_row):
    """Map ``nbr[begin:]`` (global ids) to local ids in ``out_row``, adding new nodes.

    New nodes get the next local id and are appended to ``n_id``. Stops early,
    before the table gets more than ``MAX_LOAD_PERCENT`` full; returns
    ``(next edge, num_nodes)`` so that the caller can grow the table and resume.
    """
    capacity = table.shape[0] // 2
    mask = capacity - 1
    limit = capacity * MAX_LOAD_PERCENT // 100
    end = nbr.shape[0]
    for e in range(begin, end):
        if num_nodes >= limit:
            return e, num_nodes
        if e + PREFETCH_DISTANCE < end:
            prefetch(table, 2 * _slot(nbr[e + PREFETCH_DISTANCE], shift))
        node = nbr[e]
        s = _slot(node, shift)
        while True:
            key = table[2 * s]
            if key == node:
                out_row[e] = table[2 * s + 1]
                break
            if key == EMPTY:
                table[2 * s] = node
                table[2 * s + 1] = num_nodes
                n_id[num_nodes] = node
                out_row[e] = num_nodes
                num_nodes += 1
                break
            s = (s + 1) & mask
    return end, num_nodes


@njit(nogil=True, cache=True)
def insert_nodes_dense(nodes, count, local):
    """Give ``nodes[:count]`` (int64 ids) the local ids ``0..count - 1`` in ``local`` (int32
    ``[num_nodes]``, ``EMPTY`` for nodes outside the batch); a repeated node keeps its first."""
    for i in range(count):
        if local[nodes[i]] == EMPTY:
            local[nodes[i]] = i


@njit(nogil=True, cache=True)
def relabel_dense(nbr, local, n_id, num_nodes, out_row):
    """``relabel`` with the id map ``local`` (int32 ``[num_nodes]``, see
    ``insert_nodes_dense``): one read per edge where the hash table probes. Returns the new
    node count."""
    end = nbr.shape[0]
    for e in range(end):
        if e + PREFETCH_DISTANCE < end:
            prefetch(local, nbr[e + PREFETCH_DISTANCE])
        node = nbr[e]
        v = local[node]
        if v == EMPTY:
            v = num_nodes
            local[node] = v
            n_id[num_nodes] = node
            num_nodes += 1
        out_row[e] = v
    return num_nodes


@njit(nogil=True, cache=True)
def clear_dense(local, nodes, count):
    """Reset ``local`` to ``EMPTY`` at ``nodes[:count]`` (int64): the map is ready for the
    next batch without a pass over all the graph's nodes."""
    for i in range(count):
        local[nodes[i]] = EMPTY
