"""Node-wise neighbor sampling on a CUDA GPU: the graph where the GPU reads it
(:class:`DeviceGraph`) and the hops of one batch (:func:`sample_on_device`), the GPU's
counterpart of :meth:`samplers.MultiHopSampler._sample` over the kernels of
:mod:`samplers._kernels.neighbor_cuda`. :class:`samplers.NeighborSampler` runs it for
``device="cuda"``; its batches equal the CPU's, bit for bit.

The host reads back one number per hop (its edge count, to size the next arrays) and one per
relabelling (the new nodes); everything else stays on the GPU.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from samplers._kernels import cuda_target
from samplers._kernels import neighbor_cuda as kernels
from samplers._kernels.cuda_target import (
    THREADS,
    DeviceMemory,
    Stream,
    blocks,
    cuda,
    exclusive_sum,
    filled,
)
from samplers.base import SamplerOutput
from samplers.hop import REPEAT_SHIFT, check_hop_size, tag_repeats

log = logging.getLogger(__name__)

PLACEMENTS = ("auto", "device", "mapped")
# "auto" puts the graph in GPU memory when it takes at most this share of the free memory,
# leaving the rest to features, caches and the model; else the GPU reads it from host memory.
DEVICE_SHARE = 0.5
# The hash table of a batch's nodes is at most half full (linear probing stays short).
MAX_TABLE_LOAD = 0.5
MIN_TABLE_BITS = 10


def cuda_index(device) -> int | None:
    """The GPU index ``device`` names (``"cuda"``, ``"cuda:1"``, a ``torch.device``), or
    ``None`` for the CPU (``None``, ``"cpu"``).

    Raises:
        ValueError: any other device.
    """
    if device is None:
        return None
    kind = getattr(device, "type", None)
    if kind is not None:  # a torch.device, read without importing torch
        index = device.index
    else:
        kind, _, number = str(device).partition(":")
        index = int(number) if number.isdigit() else None
        if number and index is None:
            kind = str(device)
    if kind == "cpu":
        return None
    if kind != "cuda":
        raise ValueError(f"'device' must be 'cpu', 'cuda' or 'cuda:N' (got {device!r})")
    return index or 0


class DeviceGraph:
    """A CSC graph where GPU ``device`` reads it.

    Args:
        indptr: int64 ``[num_nodes + 1]``.
        indices: int32 or int64 ``[num_edges]`` (in the sampler's CSC order).
        times: optional int64 ``[num_edges]``, each edge's time, ascending within each node.
        order: optional int64 ``[num_edges]``, the sampler's CSC positions -> the graph's.
        device: the GPU's index.
        placement: ``"device"`` (copies in GPU memory), ``"mapped"`` (page-locked host
            memory that the GPU reads over the bus, by unified virtual addressing, as DGL's
            and Quiver's UVA samplers do: for graphs larger than GPU memory) or ``"auto"``
            (``"device"`` when the arrays take at most ``DEVICE_SHARE`` of the GPU's free
            memory).
        memory: where sampling calls get their stream and memory (Numba's by default; see
            :class:`samplers._kernels.cuda_target.DeviceMemory`).
    """

    def __init__(
        self,
        indptr: np.ndarray,
        indices: np.ndarray,
        times: np.ndarray | None = None,
        order: np.ndarray | None = None,
        device: int = 0,
        placement: str = "auto",
        memory: DeviceMemory | None = None,
    ):
        cuda_target.require()
        if placement not in PLACEMENTS:
            raise ValueError(f"'placement' must be one of {PLACEMENTS} (got {placement!r})")
        self.device = device
        self.memory = memory if memory is not None else DeviceMemory()
        host = [a for a in (indptr, indices, times, order) if a is not None]
        nbytes = sum(a.nbytes for a in host)
        with Stream(device, self.memory) as stream:
            if placement == "auto":
                placement = "device" if nbytes <= DEVICE_SHARE * _free_memory() else "mapped"
            self.placement = placement
            place = stream.to_device if placement == "device" else _mapped
            self.indptr = place(indptr)
            self.indices = place(indices)
            self.times = place(times) if times is not None else stream.empty(0, np.int64)
            self.order = place(order) if order is not None else stream.empty(0, np.int64)
            stream.synchronize()
        self.nbytes = nbytes


def _free_memory() -> int:
    """Free memory of Numba's current GPU, in bytes."""
    if cuda_target.SIMULATOR:
        return 1 << 40
    free, _ = cuda.current_context().get_memory_info()
    return free


def _mapped(array: np.ndarray):
    """``array`` (1-D, contiguous) page-locked and mapped into the GPU's address space: a
    device array over the same host memory, kept pinned while the device array lives."""
    array = np.ascontiguousarray(array)
    if cuda_target.SIMULATOR:
        return _mapped_copy(array)
    if array.nbytes == 0:  # nothing to map (a graph without edges)
        return cuda.device_array(array.shape, dtype=array.dtype)
    from numba.cuda.cudadrv.driver import CudaAPIError

    try:
        pinned = cuda.current_context().mempin(array, array.ctypes.data, array.nbytes, mapped=True)
    except CudaAPIError as error:
        # Numba registers memory without CU_MEMHOSTREGISTER_READ_ONLY, which a read-only
        # memory map (a store opened from disk) needs.
        log.warning(
            "could not map a %.1f MiB graph array in place (%s): the GPU reads a mapped copy",
            array.nbytes / (1 << 20),
            error,
        )
        return _mapped_copy(array)
    return cuda.devicearray.from_array_like(array, gpu_data=pinned)


def _mapped_copy(array: np.ndarray):
    """A copy of ``array`` in page-locked host memory of its own, mapped into the GPU's."""
    out = cuda.mapped_array(array.shape, dtype=array.dtype)
    out[:] = array
    return out


class _BatchTable:
    """A batch's nodes (int64 keys) and their map to local ids, on the GPU: an open-addressing
    hash table of at most ``MAX_TABLE_LOAD`` load, rebuilt larger as the batch grows."""

    def __init__(self, stream: Stream, bits: int):
        self.stream = stream
        self.bits = bits
        capacity = 1 << bits
        self.keys = filled(stream, capacity, kernels.EMPTY)
        self.ids = filled(stream, capacity, kernels.UNSET)
        self.first_edge = filled(stream, capacity, kernels.UNSET)

    @classmethod
    def holding(cls, stream: Stream, nodes, count: int, room: int) -> _BatchTable:
        """A table with ``nodes[:count]`` in it (node ``i`` local id ``i``, a repeat its
        first), with room for ``room`` nodes in all."""
        bits = MIN_TABLE_BITS
        while room > MAX_TABLE_LOAD * (1 << bits):
            bits += 1
        table = cls(stream, bits)
        if count:
            kernels.insert_nodes[blocks(count), THREADS, stream.numba](
                nodes, count, table.keys, table.ids, 64 - bits
            )
        return table

    def has_room(self, room: int) -> bool:
        return room <= MAX_TABLE_LOAD * (1 << self.bits)

    def relabel(self, rows, nodes, count: int) -> int:
        """Maps ``rows`` (int64 keys) to local ids in place, appending the keys new to the
        batch to ``nodes`` from ``count`` on in order of first appearance; returns how many."""
        stream = self.stream
        num_edges = rows.shape[0]
        if num_edges == 0:
            return 0
        grid = (blocks(num_edges), THREADS, stream.numba)
        slots = stream.empty(num_edges, np.int64)
        flags = stream.empty(num_edges, np.int64)
        kernels.claim_rows[grid](rows, self.keys, self.ids, self.first_edge, slots, 64 - self.bits)
        kernels.mark_first[grid](slots, self.ids, self.first_edge, flags)
        new_offsets, new = exclusive_sum(stream, flags)
        kernels.number_new[grid](rows, slots, new_offsets, count, self.ids, nodes)
        kernels.rows_to_local[grid](slots, self.ids, rows)
        return new


@dataclass
class _Hop:
    rows: object
    cols: object
    edges: object


def sample_on_device(
    graph: DeviceGraph,
    fanouts: tuple[int, ...],
    replace: bool,
    keep_last: bool,
    seeds: np.ndarray,
    seed_time: np.ndarray | None,
    disjoint: bool,
    hop_keys: list[np.uint64],
    input_id: np.ndarray,
    input_time: np.ndarray | None,
) -> SamplerOutput:
    """One batch's hops on the GPU, as :meth:`samplers.MultiHopSampler._sample` runs them on
    the CPU (directional edges).

    Args:
        graph: the graph on the GPU.
        fanouts: neighbors per node for each hop, ``-1`` for all.
        replace: draw with replacement (as the CPU kernels take it for these options).
        keep_last: temporal sampling takes the most recent candidates.
        seeds: int64 ``[batch_size]``, checked.
        seed_time: int64 ``[batch_size]``, each seed's time, or ``None`` (no time limits).
        disjoint: each seed its own tree.
        hop_keys: each hop's stream key (uint64).
        input_id, input_time: the output's ``input_id`` and ``seed_time``, as given.

    Returns:
        a :class:`SamplerOutput` whose ``node``, ``row``, ``col``, ``edge`` and ``batch`` are
        device arrays (``__cuda_array_interface__``; :meth:`SamplerOutput.to_host`).
    """
    batch_size = seeds.shape[0]
    keys = seeds
    if disjoint:
        keys = seeds | (np.arange(batch_size, dtype=np.int64) << REPEAT_SHIFT)
    with Stream(graph.device, graph.memory) as stream:
        capacity = max(2 * batch_size, 1024)
        nodes = stream.empty(capacity, np.int64)
        if batch_size:
            nodes[:batch_size].copy_to_device(keys, stream=stream.numba)
        count = batch_size
        table = _BatchTable.holding(stream, nodes, count, count)
        limits = stream.to_device(seed_time if seed_time is not None else np.empty(0, np.int64))
        hops: list[_Hop] = []
        num_sampled_nodes = [batch_size]
        frontier_start = 0
        for hop, fanout in enumerate(fanouts):
            frontier = nodes[frontier_start:count]
            width = count - frontier_start
            check_hop_size(width, fanout, replace)
            streams = frontier
            if hop == 0 and not disjoint:  # only the seeds can repeat
                tagged = tag_repeats(seeds)
                if tagged is not seeds:
                    streams = stream.to_device(tagged)
            starts, degrees, counts = (stream.empty(width, np.int64) for _ in range(3))
            if width:
                kernels.hop_ranges[blocks(width), THREADS, stream.numba](
                    graph.indptr,
                    frontier,
                    graph.times,
                    limits,
                    keep_last,
                    fanout,
                    replace,
                    starts,
                    degrees,
                    counts,
                )
            offsets, num_edges = exclusive_sum(stream, counts)
            hop_edges = _Hop(*(stream.empty(num_edges, np.int64) for _ in range(3)))
            if num_edges:
                kernels.hop_draw[blocks(width), THREADS, stream.numba](
                    starts,
                    degrees,
                    offsets,
                    fanout,
                    replace,
                    hop_keys[hop],
                    streams,
                    frontier_start,
                    hop_edges.edges,
                    hop_edges.cols,
                )
                kernels.hop_neighbors[blocks(num_edges), THREADS, stream.numba](
                    graph.indices,
                    nodes,
                    graph.order,
                    hop_edges.edges,
                    hop_edges.cols,
                    hop_edges.rows,
                )
            room = count + num_edges
            if room > nodes.shape[0]:
                grown = stream.empty(max(room, nodes.shape[0] * 3 // 2), np.int64)
                grown[:count].copy_to_device(nodes[:count], stream=stream.numba)
                nodes = grown
            if not table.has_room(room):
                table = _BatchTable.holding(stream, nodes, count, room)
            new = table.relabel(hop_edges.rows, nodes, count)
            hops.append(hop_edges)
            num_sampled_nodes.append(new)
            frontier_start = count
            count += new
        output = _output(stream, hops, nodes[:count], disjoint)
        stream.synchronize()
    node, row, col, edge, batch = output
    return SamplerOutput(
        node=node,
        row=row,
        col=col,
        edge=edge,
        num_sampled_nodes=tuple(num_sampled_nodes),
        num_sampled_edges=tuple(h.edges.shape[0] for h in hops),
        batch_size=batch_size,
        input_id=np.asarray(input_id, dtype=np.int64),
        batch=batch,
        seed_time=input_time,
    )


def _output(stream: Stream, hops: list[_Hop], keys, disjoint: bool):
    """The batch's ``node``, ``row``, ``col``, ``edge`` and ``batch`` (``None`` unless
    disjoint): the hops' edges one after the other, ``row`` and ``col`` the two rows of one
    int64 ``[2, num_edges]`` device array."""
    num_edges = sum(h.edges.shape[0] for h in hops)
    pair = stream.empty(2 * num_edges, np.int64).reshape(2, num_edges)
    edge = stream.empty(num_edges, np.int64)
    at = 0
    for h in hops:
        end = at + h.edges.shape[0]
        if end > at:
            pair[0, at:end].copy_to_device(h.rows, stream=stream.numba)
            pair[1, at:end].copy_to_device(h.cols, stream=stream.numba)
            edge[at:end].copy_to_device(h.edges, stream=stream.numba)
        at = end
    count = keys.shape[0]
    if not disjoint:
        return keys, pair[0], pair[1], edge, None
    node = stream.empty(count, np.int64)
    batch = stream.empty(count, np.int64)
    if count:
        kernels.split_keys[blocks(count), THREADS, stream.numba](keys, node, batch)
    return node, pair[0], pair[1], edge, batch
