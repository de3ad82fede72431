"""``graphengine bench scaling``: sampling cost per edge on graphs of growing size, against
PyG's and DGL's loaders on the same graphs (``vs``).

graphengine's row is its ``NeighborSampler`` alone, which returns a batch's sampled edges
in batch-local ids and its nodes. The peers are timed as their users write them, over the
graph alone (no node features, so nothing is gathered): PyG's ``NeighborLoader`` over a
``Data`` holding ``edge_index``, and DGL's ``DataLoader`` with its ``NeighborSampler``
(:func:`graphengine.bench.peers.measure`: building the loader and its first batch apart,
then the timed batches), each drawing the same seeds. Each library's cost is its seconds
over its own count of sampled edges: DGL's blocks sample every layer's destinations again,
so its batches hold more edges than PyG's or graphengine's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from graphengine.bench.peers import (
    PEERS,
    Unavailable,
    check_peers,
    measure,
    pyg_sampling,
    time_dgl_nodes,
)
from graphengine.bench.report import print_report
from graphengine.bench.sample import set_threads, time_sampler
from graphengine.data.graph_store import Graph
from graphengine.datasets.synthetic import SyntheticSpec, generate
from samplers import NeighborSampler

log = logging.getLogger(__name__)

# The peers' rows: key -> the table's name.
PEER_NAMES = {"pyg": "PyG NeighborLoader", "dgl": "DGL NeighborSampler"}


def run(
    log2_nodes: list[int],
    fanouts: list[int],
    batch_size: int,
    batches: int,
    threads: int,
    vs: Sequence[str] = (),
    plot: str | Path | None = None,
) -> dict:
    """Sample ``batches`` batches on synthetic graphs of ``2**k`` nodes (mean degree ~23);
    print a table and a JSON line, and return it.

    Args:
        log2_nodes: the graphs' sizes, ``k`` of ``2**k`` nodes.
        fanouts, batch_size, batches, threads: each library's sampling, the same for all.
        vs: peers also timed on each graph (``"pyg"``, ``"dgl"``); one that cannot run here,
            or runs out of memory on a larger graph, gets a row saying why (its summary key
            holds the reason, beside the costs of the graphs it ran on) and a warning.
        plot: also draw the cost against the graph size to this file
            (:func:`graphengine.plot.plot_scaling`).

    Returns:
        The JSON line as a dict: ``ns_per_edge`` (``"2^k"`` -> graphengine's nanoseconds a
        sampled edge), ``max_over_min`` (its spread over the sizes) and, per peer that ran,
        ``pyg_ns_per_edge`` / ``dgl_ns_per_edge`` likewise.
    """
    check_peers(vs)
    set_threads(threads)
    peers = [peer for peer in PEERS if peer in vs]
    rows, costs = [], {}
    peer_costs: dict[str, dict[str, float]] = {peer: {} for peer in peers}
    errors: dict[str, str] = {}
    for k in log2_nodes:
        graph = _graph(k)
        seeds = np.random.default_rng(k).integers(0, 2**k, size=(batches + 1) * batch_size)
        seconds, edges = _time_sampler(graph, fanouts, batch_size, seeds)
        costs[k] = seconds / edges * 1e9
        rows.append(_row(k, graph, edges, seconds))
        for peer in (peer for peer in peers if peer not in errors):
            try:
                timed = TIME_PEER[peer](graph, fanouts, batch_size, seeds, batches)
            except Unavailable as error:
                errors[peer] = str(error)
                continue
            except MemoryError:  # the larger graphs only: the smaller ones' costs stand
                errors[peer] = f"out of memory on the graph of 2^{k} nodes"
                continue
            peer_costs[peer][f"2^{k}"] = timed.seconds / timed.edges * 1e9
            rows.append([*_row(k, graph, timed.edges, timed.seconds), PEER_NAMES[peer]])
    summary = {
        "bench": "scaling",
        "fanouts": fanouts,
        "batch_size": batch_size,
        "threads": threads,
        "ns_per_edge": {f"2^{k}": v for k, v in costs.items()},
        "max_over_min": max(costs.values()) / min(costs.values()),
    }
    for peer in peers:
        if peer_costs[peer]:
            summary[f"{peer}_ns_per_edge"] = peer_costs[peer]
        if peer in errors:
            summary[peer] = errors[peer]
            rows.append(["-", "-", "-", "-", "-", "-", f"{PEER_NAMES[peer]} (not run)"])
    headers = ["nodes", "graph edges", "sampled edges", "seconds", "edges/s", "ns/edge"]
    if peers:  # a library per row; without peers, the table as it always was
        headers.append("library")
        rows = [row if len(row) == len(headers) else [*row, "graphengine"] for row in rows]
    print_report(headers, rows, summary)
    for peer in errors:
        log.warning("%s not run: %s", PEER_NAMES[peer], errors[peer])
    if plot is not None:
        from graphengine.plot import plot_scaling

        plot_scaling(summary, plot)
    return summary


def _graph(k: int) -> Graph:
    """A synthetic graph of ``2**k`` nodes, mean degree ~23 (products'), in memory."""
    n = 2**k
    spec = SyntheticSpec(
        num_nodes=n,
        num_edges=int(n * 22.9),
        num_features=1,
        num_classes=47,
        num_train=n // 2,
        num_val=0,
    )
    return generate(f"scaling-{k}", spec).graph


def _time_sampler(graph: Graph, fanouts: list[int], batch_size: int, seeds) -> tuple[float, int]:
    """graphengine's ``NeighborSampler`` on ``graph``: seconds and sampled edges over the
    batches of ``seeds`` after the first (a warm-up)."""
    sampler = NeighborSampler(graph.indptr, graph.indices, fanouts, validate=not graph.validated)
    return time_sampler(sampler, seeds, batch_size, seed=0)


def _row(k: int, graph: Graph, edges: int, seconds: float) -> list:
    return [f"2^{k}", graph.num_edges, edges, seconds, edges / seconds, seconds / edges * 1e9]


def _time_pyg(graph: Graph, fanouts: list[int], batch_size: int, seeds, batches: int):
    """PyG's ``NeighborLoader`` over a ``Data`` of ``graph``'s ``edge_index`` only."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

    pyg_sampling()
    data = Data(edge_index=graph.to_edge_index(), num_nodes=graph.num_nodes)

    def build():
        return PyGNeighborLoader(
            data, num_neighbors=fanouts, batch_size=batch_size, input_nodes=torch.from_numpy(seeds)
        )

    def count(batch) -> tuple[int, int, int]:
        return batch.batch_size, batch.num_nodes, batch.edge_index.shape[1]

    return measure(build, count, batches)


def _time_dgl(graph: Graph, fanouts: list[int], batch_size: int, seeds, batches: int):
    """DGL's ``DataLoader`` with its ``NeighborSampler`` over ``graph`` (no node data)."""
    return time_dgl_nodes(graph, {}, fanouts, seeds, batch_size, batches)


# Timing a peer on one graph: (graph, fanouts, batch_size, seeds, batches) -> Timed.
TIME_PEER = {"pyg": _time_pyg, "dgl": _time_dgl}
