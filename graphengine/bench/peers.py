"""What ``graphengine bench sample`` shares across loaders: timing a loader as its users
iterate it, and the peers PyG and DGL.

Every loader, graphengine's or a peer's, is timed the same way (:func:`measure`): building it
(converting the graph, METIS for the cluster loaders, the sampler's tables), its first batch
(one-off work a loader defers to it: a lazy conversion, JIT compilation, sampling tables),
then a fixed number of batches, counting their seeds, nodes and edges. DGL
(installed for benchmarks only, never a dependency) and PyG's
compiled sampling backends are imported inside the functions here, never when graphengine is
imported; a peer that cannot run here raises :class:`Unavailable` with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import torch

from graphengine.data.arrays import as_tensor
from graphengine.data.graph_store import Graph

PEERS = ("pyg", "dgl")
DGL_HINT = "install DGL 2.1 (pip install dgl) or put its directory on PYTHONPATH"


def check_peers(vs) -> None:
    """Raise ``ValueError`` unless every name in ``vs`` is one of :data:`PEERS`."""
    unknown = sorted(set(vs) - set(PEERS))
    if unknown:
        raise ValueError(f"'vs' takes peers from {PEERS} (got {unknown})")


class Unavailable(Exception):
    """A peer that cannot run here; the message says why (shown in its row)."""


@dataclass(frozen=True)
class Timed:
    """One loader's figures.

    Attributes:
        build_s: seconds to build the loader (graph conversion, METIS, tables), once.
        first_batch_s: seconds to its first batch (the warm-up: deferred one-off work).
        seconds: seconds for the timed batches, those after the first.
        batches: batches timed.
        seeds, nodes, edges: summed over the timed batches: seeds (seed nodes, seed edges,
            clusters or walk roots), the batches' nodes and their (sampled) edges.
    """

    build_s: float
    first_batch_s: float
    seconds: float
    batches: int
    seeds: int
    nodes: int
    edges: int

    def figures(self) -> dict[str, float]:
        """The one-off seconds ``build_s`` and ``first_batch_s``, then the timed batches'
        ``batches_per_s``, ``seeds_per_s``, ``nodes_per_s``, ``edges_per_s``,
        ``nodes_per_batch`` and ``edges_per_batch``."""
        return {
            "build_s": self.build_s,
            "first_batch_s": self.first_batch_s,
            "batches_per_s": self.batches / self.seconds,
            "seeds_per_s": self.seeds / self.seconds,
            "nodes_per_s": self.nodes / self.seconds,
            "edges_per_s": self.edges / self.seconds,
            "nodes_per_batch": self.nodes / self.batches,
            "edges_per_batch": self.edges / self.batches,
        }


def measure(
    build: Callable[[], Iterable],
    count: Callable[[Any], tuple[int, int, int]],
    batches: int,
) -> Timed:
    """Build a loader with ``build()`` and take its first batch (both timed apart), then time
    the next ``batches`` (fewer if the loader runs out), summing ``count(batch)``: its
    ``(seeds, nodes, edges)``."""
    start = time.perf_counter()
    loader = build()
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    iterator = iter(loader)
    next(iterator)
    first_batch_s = time.perf_counter() - start
    totals = np.zeros(3, dtype=np.int64)
    timed = 0
    start = time.perf_counter()
    for batch in islice(iterator, batches):
        totals += count(batch)
        timed += 1
    seconds = time.perf_counter() - start
    if timed == 0:
        raise ValueError("the loader gave no batch beyond the warm-up one")
    return Timed(build_s, first_batch_s, seconds, timed, *(int(v) for v in totals))


def pyg_sampling() -> None:
    """Raise :class:`Unavailable` unless PyG has a sampling backend (pyg-lib or
    torch-sparse)."""
    import torch_geometric.typing as pyg_typing

    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        raise Unavailable("PyG has no sampling backend here (pyg-lib or torch-sparse)")


def pyg_torch_sparse() -> None:
    """Raise :class:`Unavailable` unless torch-sparse is installed (PyG's GraphSAINT
    samplers run on its ``SparseTensor``)."""
    import torch_geometric.typing as pyg_typing

    if not pyg_typing.WITH_TORCH_SPARSE:
        raise Unavailable("PyG's GraphSAINT samplers need torch-sparse, not installed here")


def dgl_module():
    """DGL, its threads set to torch's and its generator seeded (0), or :class:`Unavailable`."""
    try:
        import dgl  # benchmark-only peer
    except ImportError as error:
        raise Unavailable(f"DGL is not importable ({error}): {DGL_HINT}") from None
    dgl.utils.set_num_threads(torch.get_num_threads())
    dgl.seed(0)  # DGL's samplers draw from its global generator
    return dgl


def dgl_fanouts(fanouts: list[int]) -> list[int]:
    """``fanouts`` in DGL's order. graphengine and PyG list them from the seeds outwards (the
    first hop draws ``fanouts[0]``); DGL's samplers list them by layer, input first, and draw
    the last from the seeds: ``[15, 10, 5]`` is DGL's ``[5, 10, 15]``."""
    return list(reversed(fanouts))


def dgl_graph(dgl, graph: Graph, node_data: dict[str, Any]):
    """``graph`` as a DGL graph, every format built (edge ``i`` is CSC position ``i``, as
    column ``i`` of ``graph.to_edge_index()``), with ``node_data`` (name -> ``[num_nodes,
    ...]`` array or tensor) as its ``ndata``."""
    csc = (
        as_tensor(graph.indptr),
        as_tensor(np.asarray(graph.indices, dtype=np.int64)),
        torch.arange(graph.num_edges),
    )
    g = dgl.graph(("csc", csc), num_nodes=graph.num_nodes)
    for name, value in node_data.items():
        g.ndata[name] = as_tensor(value)
    g.create_formats_()
    return g


def time_dgl_nodes(
    graph: Graph,
    node_data: dict[str, Any],
    fanouts: list[int],
    seeds: np.ndarray,
    batch_size: int,
    batches: int,
    **prefetch: list[str],
) -> Timed:
    """DGL's ``DataLoader`` with its ``NeighborSampler`` (``fanouts`` in graphengine's order)
    over ``graph`` with ``node_data``, as its users write it: the first batch of ``seeds`` a
    warm-up, then ``batches`` timed. ``prefetch``: the sampler's ``prefetch_node_feats`` /
    ``prefetch_labels``. Its blocks sample every layer's destinations again, so a batch holds
    more edges than PyG's."""
    dgl = dgl_module()
    g = dgl_graph(dgl, graph, node_data)
    sampler = dgl.dataloading.NeighborSampler(dgl_fanouts(fanouts), **prefetch)

    def build():
        return dgl.dataloading.DataLoader(
            g, torch.from_numpy(seeds), sampler, batch_size=batch_size
        )

    def count(batch) -> tuple[int, int, int]:
        input_nodes, output_nodes, blocks = batch
        return output_nodes.shape[0], input_nodes.shape[0], sum(b.num_edges() for b in blocks)

    return measure(build, count, batches)
