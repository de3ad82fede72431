"""The sampler-to-loader contract: what a sampler takes and what it returns."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SamplerInput:
    """One mini-batch of seed nodes.

    Attributes:
        node: int64 ``[batch_size]``, global ids of the seeds, in batch order.
        input_id: int64 ``[batch_size]``, each seed's position in the loader's
            list of input nodes.
        seed: the random seed of this batch (any Python int); the same seed gives
            the same sample whatever the number of threads.
    """

    node: np.ndarray
    input_id: np.ndarray
    seed: int


@dataclass(frozen=True)
class SamplerOutput:
    """A sampled subgraph, with PyG's ``NeighborLoader`` semantics.

    Invariants: ``node`` is global and starts with the seeds in input order
    (``node[:batch_size]``), followed by each hop's new nodes in order of first
    appearance; ``row``/``col`` are local (positions in ``node``); edges are
    grouped by hop, so ``num_sampled_nodes``/``num_sampled_edges`` can drive
    PyG's ``trim_to_layer``.

    Attributes:
        node: int64 ``[num_nodes]``, global node ids.
        row: int64 ``[num_edges]``, local id of each edge's source (the sampled neighbor).
        col: int64 ``[num_edges]``, local id of each edge's destination (the node it
            was sampled for).
        edge: int64 ``[num_edges]``, each edge's position in the graph's CSC ``indices``.
        num_sampled_nodes: nodes added per hop, the seeds first (``num_hops + 1`` ints).
        num_sampled_edges: edges sampled per hop (``num_hops`` ints).
        batch_size: the number of seeds.
        input_id: int64 ``[batch_size]``, as in :class:`SamplerInput`.
    """

    node: np.ndarray
    row: np.ndarray
    col: np.ndarray
    edge: np.ndarray
    num_sampled_nodes: tuple[int, ...]
    num_sampled_edges: tuple[int, ...]
    batch_size: int
    input_id: np.ndarray
