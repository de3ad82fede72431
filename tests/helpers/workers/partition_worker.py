"""Worker programs that tests/test_dist_sampling.py starts under torchrun (1-3 processes, gloo).

``sample PARTITION OUT``: every worker samples batches of its own seeds across the parts with
:class:`DistNeighborSampler` and checks each one against :class:`samplers.NeighborSampler` on
the original graph (ids mapped back); it writes how many batches it checked to ``OUT.<rank>``.

``load PARTITION OUT``: every worker loads an epoch with :class:`DistNeighborLoader`, without a
cache of remote rows and with caches of several sizes, checks that the batches are the same
and that every row equals the original dataset's row of its node, and writes the cache's hit
rates and the resident bytes of each partition file it has mapped to ``OUT.<rank>``.

An assertion that fails ends the worker with an error, which fails the run.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphengine.data.graph_store import Graph
from graphengine.data.partition import open_part
from graphengine.datasets.dataset import GraphDataset
from graphengine.distributed.data import DistData
from graphengine.distributed.exchange import Exchange
from graphengine.distributed.launch import finish
from graphengine.distributed.sampler import DistNeighborSampler
from graphengine.loader.dist_neighbor_loader import DistNeighborLoader
from samplers import NeighborSampler, SamplerInput

# (fanouts, replace, options): without and with replacement, taking every neighbor, disjoint
# trees and bidirectional subgraphs.
SAMPLING_CASES = [
    ([3, 2], False, {}),
    ([4, 3], True, {}),
    ([-1, 2], False, {}),
    ([2, -1, 3], False, {}),
    ([3, 3], False, {"disjoint": True}),
    ([3, 2], True, {"subgraph_type": "bidirectional"}),
    ([3, 2], False, {"weights": "edges"}),
    ([4, 2], True, {"weights": "edges"}),
    ([3, 3], False, {"node_time": "nodes"}),
    ([2, 3], False, {"edge_time": "edges", "temporal_strategy": "last"}),
]


def whole_graph_arrays(options: dict, graph) -> tuple[dict, dict]:
    """``options`` with ``"nodes"``/``"edges"`` made arrays of the whole graph (fixed draws):
    by original id for the distributed sampler, in CSC order for the single-machine one."""
    rng = np.random.default_rng(5)
    distributed, local = dict(options), dict(options)
    for name, value in options.items():
        if value == "nodes":
            distributed[name] = local[name] = rng.integers(0, 20, graph.num_nodes)
        elif value == "edges":
            values = (
                rng.random(graph.num_edges)
                if name == "weights"
                else rng.integers(0, 20, graph.num_edges)
            )
            if name == "weights":
                values[::7] = 0.0  # some edges never drawn
            distributed[name] = values
            local[name] = values[graph.edge_ids]
    return distributed, local


def multigraph() -> GraphDataset:
    """A directed multigraph with self loops, repeated edges, isolated nodes, high-degree
    nodes and ``edge_ids`` that are not the CSC order (the same on every worker)."""
    rng = np.random.default_rng(11)
    n, e = 300, 2400
    edge_index = rng.integers(0, n - 10, (2, e))  # the last 10 nodes are isolated
    edge_index[1, :200] = 7  # node 7 has a high in-degree
    edge_index[:, 200:240] = edge_index[0, 200:240]  # self loops
    edge_index[:, 240:280] = edge_index[:, 280:320]  # repeated edges
    graph = Graph.from_edge_index(edge_index, n)
    order = rng.permutation(n)
    return GraphDataset(
        name="multigraph",
        graph=graph,
        x=rng.standard_normal((n, 5)).astype(np.float32),
        y=rng.integers(0, 3, n),
        train_idx=order[:90],
        val_idx=np.sort(order[90:150]),
        test_idx=np.sort(order[150:]),
        num_classes=3,
    )


def sample(path: Path, out: Path) -> None:
    rank = dist.get_rank()
    dataset = multigraph()
    graph = dataset.graph
    part = open_part(path, rank)
    book = part.book
    exchange = Exchange()
    rng = np.random.default_rng(100 + rank)
    checked = 0
    for fanouts, replace, options in SAMPLING_CASES:
        whole, in_csc_order = whole_graph_arrays(options, graph)
        local = NeighborSampler(
            graph.indptr, graph.indices, fanouts, replace, num_threads=1, **in_csc_order
        )
        distributed = DistNeighborSampler(part, fanouts, exchange, replace, **whole)
        timed = "edge_time" in options
        for batch in range(6):
            # Seeds from anywhere in the graph, some repeated; rank 1's third batch is empty.
            size = 0 if (rank == 1 and batch == 2) else int(rng.integers(1, 40))
            seeds = rng.integers(0, graph.num_nodes, size)
            if size > 4:
                seeds[-2:] = seeds[:2]
            seed = 1000 * batch + 7
            ids = np.arange(size, dtype=np.int64)
            time = rng.integers(5, 20, size) if timed else None
            expected = local.sample_from_nodes(SamplerInput(seeds, ids, seed, time))
            got = distributed.sample_from_nodes(SamplerInput(book.to_new(seeds), ids, seed, time))
            np.testing.assert_array_equal(book.to_orig(got.node), expected.node)
            np.testing.assert_array_equal(got.row, expected.row)
            np.testing.assert_array_equal(got.col, expected.col)
            np.testing.assert_array_equal(got.edge, graph.edge_ids[expected.edge])
            assert got.num_sampled_nodes == expected.num_sampled_nodes
            assert got.num_sampled_edges == expected.num_sampled_edges
            np.testing.assert_array_equal(got.batch, expected.batch)  # None unless disjoint
            checked += 1
    stats = distributed.stats.as_dict()
    Path(f"{out}.{rank}").write_text(json.dumps({"checked": checked, "stats": stats}))


def load(path: Path, out: Path) -> None:
    dataset = multigraph()
    data = DistData.open(path)
    book = data.book
    reference = None
    hit_rates = {}
    for cache in (None, "10%", 25, "100%"):
        if cache is None:
            data.features.fill_cache(np.empty(0, dtype=np.int64))
        loader = DistNeighborLoader(
            data, [4, 3], batch_size=16, shuffle=True, seed=3, remote_cache=cache
        )
        loader.set_epoch(0)
        batches = list(loader)
        stats = loader.reset_stats()
        hit_rates[str(cache)] = stats["cache_hits"] / max(stats["remote_rows"], 1)
        for batch in batches:
            orig = book.to_orig(batch.n_id.numpy())
            np.testing.assert_array_equal(batch.x.numpy(), dataset.x[orig])
            np.testing.assert_array_equal(batch.y.numpy(), dataset.y[orig])
            assert set(batch.n_id[: batch.batch_size].tolist()) <= set(data.train_idx.tolist())
        if reference is None:
            reference = batches
            continue
        assert len(batches) == len(reference)
        for got, expected in zip(batches, reference, strict=True):
            for key in ("n_id", "e_id", "edge_index", "x", "y", "input_id"):
                assert torch.equal(got[key], expected[key]), key
    seeds = sorted(int(i) for b in reference for i in b.n_id[: b.batch_size])
    assert seeds == sorted(data.train_idx.tolist())  # every own training node once
    report = {"hit_rates": hit_rates, "mapped": mapped_rss(path)}
    Path(f"{out}.{dist.get_rank()}").write_text(json.dumps(report))


def mapped_rss(directory: Path) -> dict[str, int]:
    """Resident bytes of each file under ``directory`` this process has memory-mapped, by path
    relative to ``directory``."""
    resident: dict[str, int] = {}
    current = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if not line[:1].isupper():  # a mapping's header line: address range, perms, path
            fields = line.split()
            path = Path(fields[-1]) if len(fields) >= 6 else None
            current = path if path is not None and path.is_relative_to(directory) else None
        elif current is not None and line.startswith("Rss:"):
            name = str(current.relative_to(directory))
            resident[name] = resident.get(name, 0) + int(line.split()[1]) * 1024
    return resident


if __name__ == "__main__":
    dist.init_process_group("gloo")
    programs = {"sample": sample, "load": load}
    programs[sys.argv[1]](Path(sys.argv[2]), Path(sys.argv[3]))
    finish(0)
