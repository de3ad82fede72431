"""The sampler-to-loader contract: what a sampler takes, what it returns, what it implements.

Every sampler (neighbor, weighted, temporal, heterogeneous, distributed, subgraph) derives
from :class:`BaseSampler` and takes :class:`SamplerInput` (seed nodes) or
:class:`EdgeSamplerInput` (seed edges, for link prediction); loaders call nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class SamplerInput:
    """One mini-batch of seed nodes.

    Attributes:
        node: int64 ``[batch_size]``, global ids of the seeds, in batch order.
        input_id: int64 ``[batch_size]``, each seed's ``input_id``: its position in the
            loader's list of input nodes, its node id when the seeds came as a mask, or the
            user's ``input_id``.
        seed: the random seed of this batch (any Python int); the same seed gives
            the same sample whatever the number of threads.
        time: optional int64 ``[batch_size]``, each seed's timestamp (temporal sampling:
            only neighbors no later than it).
        input_type: the seeds' node type (heterogeneous graphs), ``None`` when homogeneous.
    """

    node: np.ndarray
    input_id: np.ndarray
    seed: int
    time: np.ndarray | None = None
    input_type: str | None = None


@dataclass(frozen=True)
class EdgeSamplerInput:
    """One mini-batch of seed edges (link prediction): sample around both endpoints.

    Attributes:
        row: int64 ``[batch_size]``, source node of each seed edge.
        col: int64 ``[batch_size]``, destination node of each seed edge.
        input_id: int64 ``[batch_size]``, each edge's position in the loader's seed edges.
        seed: the random seed of this batch.
        label: optional ``[batch_size]`` edge labels.
        time: optional int64 ``[batch_size]``, each edge's timestamp.
        input_type: the edges' ``(src, relation, dst)`` type, ``None`` when homogeneous.
    """

    row: np.ndarray
    col: np.ndarray
    input_id: np.ndarray
    seed: int
    label: np.ndarray | None = None
    time: np.ndarray | None = None
    input_type: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class SamplerOutput:
    """A sampled subgraph, with PyG's ``NeighborLoader`` semantics.

    Invariants: ``node`` is global and starts with the seeds in input order
    (``node[:batch_size]``), followed by each hop's new nodes in order of first
    appearance; ``row``/``col`` are local (positions in ``node``); directional edges are
    grouped by hop, so ``num_sampled_nodes``/``num_sampled_edges`` can drive
    PyG's ``trim_to_layer`` (bidirectional and induced subgraphs carry neither).

    Attributes:
        node: int64 ``[num_nodes]``, global node ids.
        row: int64 ``[num_edges]``, local id of each edge's source (the sampled neighbor).
        col: int64 ``[num_edges]``, local id of each edge's destination (the node it
            was sampled for).
        edge: int64 ``[num_edges]``, each edge's position in the graph's CSC ``indices``.
        num_sampled_nodes: nodes added per hop, the seeds first (``num_hops + 1`` ints);
            ``None`` where edges are not grouped by hop (bidirectional or induced subgraphs).
        num_sampled_edges: edges sampled per hop (``num_hops`` ints), or ``None`` likewise.
        batch_size: the number of seeds.
        input_id: int64 ``[batch_size]``, as in :class:`SamplerInput`.
        batch: int64 ``[num_nodes]``, the seed (position in the batch) whose tree each node
            belongs to, for disjoint sampling (a node reached from two seeds appears twice);
            ``None`` otherwise.
        edge_weight: float32 ``[num_edges]``, each sampled edge's weight for a mean over the
            kept in-neighbors that estimates the mean over all of them (LABOR with importance
            sampling: DGL's self-normalized ``edge_weights``); ``None`` otherwise.
        seed_time: int64 ``[batch_size]``, the seeds' times as the input gave them
            (``SamplerInput.time``; PyG's ``seed_time``), else ``None`` (also when temporal
            sampling takes the seeds' own node times).
    """

    node: np.ndarray
    row: np.ndarray
    col: np.ndarray
    edge: np.ndarray
    num_sampled_nodes: tuple[int, ...] | None
    num_sampled_edges: tuple[int, ...] | None
    batch_size: int
    input_id: np.ndarray
    batch: np.ndarray | None = None
    edge_weight: np.ndarray | None = None
    seed_time: np.ndarray | None = None

    @property
    def on_device(self) -> bool:
        """Whether the arrays are a GPU's (a sampler with ``device="cuda"``)."""
        return hasattr(self.node, "copy_to_host")

    def to_host(self) -> SamplerOutput:
        """This output with NumPy arrays: itself when they already are, else the GPU's arrays
        copied to the host, ``row`` and ``col`` as the two rows of one ``[2, num_edges]``
        array (see :func:`as_edge_index`)."""
        if not self.on_device:
            return self
        pair = np.stack([self.row.copy_to_host(), self.col.copy_to_host()])
        host = {
            name: None if value is None else value.copy_to_host()
            for name, value in (("node", self.node), ("edge", self.edge), ("batch", self.batch))
        }
        return replace(self, row=pair[0], col=pair[1], **host)


def as_edge_index(row: np.ndarray, col: np.ndarray) -> np.ndarray:
    """``row`` and ``col`` (``[num_edges]`` each, one dtype) as one ``[2, num_edges]`` array:
    the array whose two rows they are, where they are exactly that (the samplers write their
    last hop so, see :meth:`samplers.hop.EdgeBuffers.reserve`), else a stacked copy."""
    pair = row.base
    if (
        isinstance(pair, np.ndarray)
        and pair is col.base
        and pair.shape == (2, row.shape[0])
        and pair.flags.c_contiguous
        and pair.dtype == row.dtype == col.dtype
        and row.strides == col.strides == (pair.itemsize,)
        and row.ctypes.data == pair.ctypes.data
        and col.ctypes.data == pair.ctypes.data + row.nbytes
    ):
        return pair
    return np.stack([row, col])


@dataclass(frozen=True)
class HeteroSamplerOutput:
    """A sampled heterogeneous subgraph: :class:`SamplerOutput`'s fields, per node type
    (``node``, ``batch``, ``num_sampled_nodes``) or per ``(src, relation, dst)`` edge type
    (``row``, ``col``, ``edge``, ``num_sampled_edges``). Local ids count per node type: ``row``
    indexes ``node[src]``, ``col`` indexes ``node[dst]``. The seeds are the first
    ``batch_size`` nodes of ``input_type``. ``edge`` holds each edge's position in its edge
    type's CSC, or ``None`` for edge types merged with their reverse in a bidirectional
    subgraph (their edges have no single id, as in PyG).
    """

    node: dict[str, np.ndarray]
    row: dict[tuple[str, str, str], np.ndarray]
    col: dict[tuple[str, str, str], np.ndarray]
    edge: dict[tuple[str, str, str], np.ndarray | None]
    num_sampled_nodes: dict[str, tuple[int, ...]] | None
    num_sampled_edges: dict[tuple[str, str, str], tuple[int, ...]] | None
    batch_size: int
    input_id: np.ndarray
    input_type: str
    batch: dict[str, np.ndarray] | None = None
    seed_time: np.ndarray | None = None


class BaseSampler(ABC):
    """What every sampler implements. Samplers take and return NumPy arrays only; whatever
    a sampler holds is shared by the loader's threads, so it must be safe to call from
    several threads at once: a call keeps its state in locals and arguments, never in the
    sampler's attributes, and what it leaves for later calls (reusable id maps, buffer size
    hints) goes through pools whose take and give-back are atomic list operations."""

    @abstractmethod
    def sample_from_nodes(self, inputs: SamplerInput) -> SamplerOutput | HeteroSamplerOutput:
        """The subgraph around ``inputs.node``; its first ``batch_size`` nodes are the seeds."""

    def sample_from_edges(self, inputs: EdgeSamplerInput) -> SamplerOutput:
        """The subgraph around both endpoints of ``inputs``' edges (link prediction). Node
        samplers do not implement it themselves: :func:`samplers.link.sample_from_edges` runs
        any of them on the edges' ends, negatives included."""
        raise NotImplementedError(
            f"{type(self).__name__} samples from seed nodes; sample around seed edges with "
            "samplers.link.sample_from_edges(sampler, inputs, num_nodes, ...)"
        )
