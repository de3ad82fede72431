"""CUDA kernels of node-wise neighbor sampling over a CSC graph: the GPU's counterpart of
:mod:`samplers._kernels.neighbor` and :mod:`samplers._kernels.ranges`, drawing the same edges.

Frontier node ``i`` is sampled by thread ``i`` with the CPU kernels' own draw function
(``draw_positions``: ``@njit``, which the CUDA target compiles as a device function), from the
stream of its id under the hop's key, so that a batch drawn on the GPU equals the CPU's bit for
bit. Arrays only, device
arrays all; callers validate. Batch nodes are keys: the node's id, with its disjoint tree in
the bits above ``REPEAT_SHIFT``.

Relabelling to batch-local ids (first appearance, as the CPU's sequential pass) runs in
four kernels over a hash table of keys: ``claim_rows`` inserts each edge's source and keeps,
for a node new to the batch, its first edge (``atomic.min``); ``mark_first`` flags those
first edges; their exclusive sum numbers the new nodes in edge order (``number_new``);
``rows_to_local`` writes every edge's local id.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from samplers._kernels.cuda_target import cuda
from samplers._kernels.neighbor import _slot, draw_positions, stream_id_state
from samplers._kernels.ranges import first_after
from samplers.hop import REPEAT_MASK, REPEAT_SHIFT

EMPTY = -1
# A table entry's local id before its node is numbered, and the first-edge of no edge.
UNSET = np.iinfo(np.int64).max
TREE_BITS = ~REPEAT_MASK

if cuda is not None:

    @cuda.jit(cache=True)
    def hop_ranges(
        indptr, keys, times, tree_limits, keep_last, fanout, replace, starts, degrees, counts
    ):
        """Each frontier node's candidate edges and how many it draws.

        ``keys`` (int64 ``[n]``) are the frontier. Node ``i``'s candidates are CSC positions
        ``starts[i]:starts[i] + degrees[i]`` (int64 outputs): all its in-edges, or, when
        ``times`` (int64 ``[num_edges]``, ascending within each node) is not empty, those no
        later than its tree's limit ``tree_limits[key >> REPEAT_SHIFT]``, the last ``fanout``
        of them with ``keep_last``. ``counts[i]`` (int64) is how many it draws: ``min(degree,
        fanout)``, ``fanout`` with replacement when it has a candidate, all for ``-1``.
        """
        i = cuda.grid(1)
        if i >= keys.shape[0]:
            return
        v = keys[i] & REPEAT_MASK
        start = indptr[v]
        degree = indptr[v + 1] - start
        if times.shape[0] > 0:
            limit = tree_limits[keys[i] >> REPEAT_SHIFT]
            degree = first_after(times, start, start + degree, limit) - start
            if keep_last and fanout >= 0 and degree > fanout:
                start += degree - fanout
                degree = fanout
        starts[i] = start
        degrees[i] = degree
        if fanout < 0:
            counts[i] = degree
        elif replace:
            counts[i] = fanout if degree > 0 else 0
        else:
            counts[i] = min(degree, fanout)

    @cuda.jit(cache=True)
    def hop_draw(starts, degrees, offsets, fanout, replace, key, streams, first_local, edges, cols):
        """Frontier node ``i`` draws its ``offsets[i + 1] - offsets[i]`` edges among its
        candidates (``hop_ranges``) from stream ``streams[i]`` under ``key`` (uint64), as
        :func:`samplers._kernels.neighbor.hop_sample` does: CSC positions into ``edges`` and
        its batch-local id ``first_local + i`` into ``cols`` (int64, its slots of each)."""
        i = cuda.grid(1)
        if i >= starts.shape[0]:
            return
        start = starts[i]
        lo = offsets[i]
        count = offsets[i + 1] - lo
        state = stream_id_state(key, streams[i])
        draw_positions(state, degrees[i], count, fanout, replace, edges, lo)
        for j in range(lo, lo + count):
            edges[j] += start
            cols[j] = first_local + i

    @cuda.jit(cache=True)
    def hop_neighbors(indices, keys, order, edges, cols, rows):
        """Each sampled edge's source key into ``rows`` (int64): ``indices`` at its CSC
        position, in the tree of the node it was sampled for (``keys[cols[e]]``); and, when
        ``order`` (int64, the sampler's CSC positions -> the graph's) is not empty, its
        position in the graph's CSC into ``edges``. One thread per edge, so that neighboring
        threads read neighboring positions."""
        e = cuda.grid(1)
        if e >= edges.shape[0]:
            return
        position = edges[e]
        rows[e] = np.int64(indices[position]) | (keys[cols[e]] & TREE_BITS)
        if order.shape[0] > 0:
            edges[e] = order[position]

    # A generic function, which the CUDA target compiles as a device function where a kernel
    # calls it (a CUDA device function would need a GPU to be compiled, even to PTX).
    @njit(inline="always")
    def _claim(table_keys, node, shift):
        """The slot of ``node`` in the hash table ``table_keys``, inserted if absent."""
        mask = table_keys.shape[0] - 1
        s = _slot(node, shift)
        while True:
            old = cuda.atomic.cas(table_keys, s, EMPTY, node)
            if old == EMPTY:  # claimed
                return s
            if old == node:  # already there
                return s
            s = (s + 1) & mask

    @cuda.jit(cache=True)
    def insert_nodes(keys, count, table_keys, table_ids, shift):
        """Puts ``keys[:count]`` into the table, key ``i`` with local id ``i``; a repeated key
        keeps its first (``table_ids`` starts at ``UNSET``)."""
        i = cuda.grid(1)
        if i < count:
            cuda.atomic.min(table_ids, _claim(table_keys, keys[i], shift), np.int64(i))

    @cuda.jit(cache=True)
    def claim_rows(rows, table_keys, table_ids, first_edge, slots, shift):
        """Inserts each edge's source key (``rows``) and notes its slot in ``slots``; for a key
        new to the batch, keeps its first edge in ``first_edge`` (starting at ``UNSET``)."""
        e = cuda.grid(1)
        if e >= rows.shape[0]:
            return
        s = _claim(table_keys, rows[e], shift)
        slots[e] = s
        if table_ids[s] == UNSET:
            cuda.atomic.min(first_edge, s, np.int64(e))

    @cuda.jit(cache=True)
    def mark_first(slots, table_ids, first_edge, flags):
        """``flags[e] = 1`` (int64) where edge ``e`` is the first of a key new to the batch."""
        e = cuda.grid(1)
        if e < slots.shape[0]:
            s = slots[e]
            flags[e] = 1 if table_ids[s] == UNSET and first_edge[s] == e else 0

    @cuda.jit(cache=True)
    def number_new(rows, slots, new_offsets, count, table_ids, keys):
        """Gives each new key its local id, ``count`` plus its rank among the new keys in edge
        order (``new_offsets``, the exclusive sum of ``mark_first``'s flags), and appends it
        to ``keys`` there."""
        e = cuda.grid(1)
        if e < rows.shape[0] and new_offsets[e + 1] != new_offsets[e]:
            local = count + new_offsets[e]
            table_ids[slots[e]] = local
            keys[local] = rows[e]

    @cuda.jit(cache=True)
    def rows_to_local(slots, table_ids, rows):
        """Each edge's source as its batch-local id."""
        e = cuda.grid(1)
        if e < rows.shape[0]:
            rows[e] = table_ids[slots[e]]

    @cuda.jit(cache=True)
    def split_keys(keys, nodes, trees):
        """The batch's keys as node ids (``nodes``) and, when ``trees`` is not empty, each
        node's disjoint tree (int64 each)."""
        i = cuda.grid(1)
        if i < keys.shape[0]:
            nodes[i] = keys[i] & REPEAT_MASK
            if trees.shape[0] > 0:
                trees[i] = keys[i] >> REPEAT_SHIFT
