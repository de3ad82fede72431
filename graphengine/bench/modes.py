"""``graphengine bench modes``: the sampling modes beyond uniform (weighted, temporal,
heterogeneous, LABOR) on one dataset, against DGL 2.1's samplers in the same run.

Both sides run the sampler alone, as their users call it per batch (graphengine's
``sample_from_nodes``; DGL's ``sampler.sample_blocks(g, seeds)``, what its ``DataLoader``
calls), on the same seeds, fanouts and threads, without feature gathering. The samples are
not alike in size: DGL's blocks sample every layer's destinations again, the seeds included
(each block's sources hold its destinations), where PyG's layout, which graphengine keeps,
samples each node once, at the hop it joins; so DGL's batches hold more edges and nodes,
and sampled edges per second is the figure to compare. Edge weights
are uniform on ``[0, 1)`` and node times integers on ``[0, 1000)``, drawn once from
``seed``; the heterogeneous graph is the dataset's graph with its nodes cut into three
types by id and its edges typed by their ends' types (nine edge types), every edge type
with the same fanouts. DGL's core has no temporal sampler (GraphBolt's is not built for
this torch), so that row has no peer. PyG (its ``NeighborSampler.sample_from_nodes``) is
timed where its installed backend samples the mode: torch-sparse samples uniformly,
homogeneous and heterogeneous; weighted and temporal sampling need pyg-lib, which has no
build for this torch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np
import torch

from graphengine.bench.peers import dgl_fanouts
from graphengine.bench.report import print_report
from graphengine.bench.sample import set_threads
from graphengine.data.arrays import as_tensor
from graphengine.datasets import load_dataset
from samplers import HeteroNeighborSampler, LaborSampler, NeighborSampler, SamplerInput

log = logging.getLogger(__name__)

NUM_TYPES = 3
MODES = ("uniform", "weighted", "temporal", "hetero", "labor")


def run(
    dataset: str,
    fanouts: list[int],
    batch_size: int,
    batches: int,
    threads: int,
    root: str | None = None,
    vs_dgl: bool = False,
    seed: int = 0,
    vs_pyg: bool = False,
) -> dict:
    """Time ``batches`` batches of each mode (after one warm-up batch); print a table of
    seeds and sampled edges per second and nodes per batch, and a JSON line. Heterogeneous
    batches seed with the first type's share of each batch."""
    set_threads(threads)
    data = load_dataset(dataset, root=root)
    graph = data.graph
    rng = np.random.default_rng(seed)
    seeds = rng.permutation(data.train_idx)[: (batches + 1) * batch_size]
    if seeds.shape[0] < 2 * batch_size:
        raise ValueError(f"'{dataset}' has too few training nodes for batch size {batch_size}")
    weights = rng.random(graph.num_edges, dtype=np.float32)
    node_time = rng.integers(0, 1000, graph.num_nodes)
    indptr, indices = graph.indptr, graph.indices
    typed = _typed_graph(indptr, indices, graph.num_nodes)

    ours: dict[str, Callable] = {
        "uniform": _homogeneous(NeighborSampler(indptr, indices, fanouts, validate=False)),
        "weighted": _homogeneous(
            NeighborSampler(indptr, indices, fanouts, validate=False, weights=weights)
        ),
        "temporal": _homogeneous(
            NeighborSampler(indptr, indices, fanouts, validate=False, node_time=node_time)
        ),
        "hetero": _hetero(typed, fanouts),
        "labor": _homogeneous(LaborSampler(indptr, indices, fanouts, validate=False)),
    }
    contenders = [("graphengine", "", ours)]
    if vs_dgl:
        contenders.append(("DGL 2.1", "dgl_", _dgl_samplers(typed, graph, weights, fanouts)))
    if vs_pyg:
        contenders.append(("PyG", "pyg_", _pyg_samplers(typed, graph, fanouts)))

    rows, summary = [], {}
    for mode in MODES:
        for who, prefix, samplers in contenders:
            if mode not in samplers:
                rows.append([mode, who, "-", "-", "-"])
                continue
            seconds, counts = _time(samplers[mode], seeds, batch_size, seed)
            per_batch = counts[2] / batches
            rows.append([mode, who, counts[0] / seconds, counts[1] / seconds, per_batch])
            summary[f"{prefix}{mode}_edges_per_s"] = counts[1] / seconds
            summary[f"{prefix}{mode}_nodes_per_batch"] = per_batch
    summary.update(
        bench="modes",
        dataset=dataset,
        fanouts=fanouts,
        batch_size=batch_size,
        batches=batches,
        threads=threads,
    )
    print_report(["mode", "sampler", "seeds/s", "edges/s", "nodes/batch"], rows, summary)
    return summary


def _time(sample: Callable, seeds: np.ndarray, batch_size: int, seed: int):
    """Seconds, and the seeds, sampled edges and batch nodes summed, over all batches but the
    first (a warm-up)."""
    sample(seeds[:batch_size], seed)
    counts = np.zeros(3, dtype=np.int64)
    start = time.perf_counter()
    for b in range(1, len(seeds) // batch_size):
        counts += sample(seeds[b * batch_size : (b + 1) * batch_size], seed + b)
    return time.perf_counter() - start, counts


def _homogeneous(sampler) -> Callable:
    def sample(batch: np.ndarray, seed: int) -> tuple[int, int, int]:
        out = sampler.sample_from_nodes(SamplerInput(batch, np.arange(batch.size), seed))
        return batch.size, out.row.shape[0], out.node.shape[0]

    return sample


def _typed_graph(indptr: np.ndarray, indices: np.ndarray, num_nodes: int) -> dict:
    """The graph with node ``v`` of type ``v * NUM_TYPES // num_nodes`` (local id ``v`` minus
    the type's first id) and each edge typed by its ends: per edge type ``(src, "to", dst)``
    its CSC ``(indptr, indices)`` over local ids, and the node counts."""
    bounds = np.array([t * num_nodes // NUM_TYPES for t in range(NUM_TYPES + 1)])
    names = [f"t{t}" for t in range(NUM_TYPES)]
    dst = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr))
    src = np.asarray(indices, dtype=np.int64)
    src_type = np.searchsorted(bounds, src, side="right") - 1
    dst_type = np.searchsorted(bounds, dst, side="right") - 1
    csc = {}
    for s in range(NUM_TYPES):
        for d in range(NUM_TYPES):
            keep = (src_type == s) & (dst_type == d)  # CSC order: still grouped by dst
            local_dst = dst[keep] - bounds[d]
            count = int(bounds[d + 1] - bounds[d])
            type_indptr = np.zeros(count + 1, dtype=np.int64)
            np.cumsum(np.bincount(local_dst, minlength=count), out=type_indptr[1:])
            csc[(names[s], "to", names[d])] = (type_indptr, src[keep] - bounds[s])
    num_nodes_per_type = {names[t]: int(bounds[t + 1] - bounds[t]) for t in range(NUM_TYPES)}
    return {"csc": csc, "num_nodes": num_nodes_per_type, "bounds": bounds, "names": names}


def _hetero(typed: dict, fanouts: list[int]) -> Callable:
    sampler = HeteroNeighborSampler(
        typed["names"], typed["num_nodes"], typed["csc"], fanouts, validate=False
    )
    bounds, names = typed["bounds"], typed["names"]

    def sample(batch: np.ndarray, seed: int) -> tuple[int, int, int]:
        # Seeds are global ids; a batch seeds with those of the first type.
        local = batch[batch < bounds[1]]
        out = sampler.sample_from_nodes(
            SamplerInput(local, np.arange(local.size), seed, input_type=names[0])
        )
        edges = sum(row.shape[0] for row in out.row.values())
        return local.size, edges, sum(node.shape[0] for node in out.node.values())

    return sample


def _dgl_samplers(typed: dict, graph, weights: np.ndarray, fanouts: list[int]) -> dict:
    """DGL's samplers for the modes it has, over the same graphs (edge ``i`` of DGL's graph
    is CSC position ``i`` of ours, so weights line up)."""
    import dgl  # benchmark-only peer, never a dependency

    dgl.utils.set_num_threads(torch.get_num_threads())
    dgl.seed(0)  # once: DGL's samplers draw from its global generator
    num_edges = graph.num_edges
    csc = (
        as_tensor(graph.indptr),
        as_tensor(np.asarray(graph.indices, dtype=np.int64)),
        torch.arange(num_edges),
    )
    g = dgl.graph(("csc", csc), num_nodes=graph.num_nodes)
    g.edata["w"] = torch.from_numpy(weights)
    hetero = dgl.heterograph(
        {
            edge_type: (
                "csc",
                (
                    torch.from_numpy(indptr),
                    torch.from_numpy(indices),
                    torch.arange(indices.shape[0]),
                ),
            )
            for edge_type, (indptr, indices) in typed["csc"].items()
        },
        num_nodes_dict=typed["num_nodes"],
    )
    first_type = typed["names"][0]
    first_bound = typed["bounds"][1]

    def blocks(sampler, graph_, typed_seeds: bool = False) -> Callable:
        def sample(batch: np.ndarray, seed: int) -> tuple[int, int, int]:
            if typed_seeds:
                batch = batch[batch < first_bound]
                seeds = {first_type: torch.from_numpy(batch)}
            else:
                seeds = torch.from_numpy(batch)
            input_nodes, _, sampled = sampler.sample_blocks(graph_, seeds)
            if isinstance(input_nodes, dict):
                nodes = sum(v.shape[0] for v in input_nodes.values())
            else:
                nodes = input_nodes.shape[0]
            return batch.size, sum(block.num_edges() for block in sampled), nodes

        return sample

    fanouts = dgl_fanouts(fanouts)
    return {
        "uniform": blocks(dgl.dataloading.NeighborSampler(fanouts), g),
        "weighted": blocks(dgl.dataloading.NeighborSampler(fanouts, prob="w"), g),
        "hetero": blocks(dgl.dataloading.NeighborSampler(fanouts), hetero, typed_seeds=True),
        "labor": blocks(dgl.dataloading.LaborSampler(fanouts), g),
    }


def _pyg_samplers(typed: dict, graph, fanouts: list[int]) -> dict:
    """PyG's ``NeighborSampler``, uniform, homogeneous and heterogeneous (what torch-sparse
    samples; none without a backend). Its weighted and temporal modes need pyg-lib, which
    this torch has no build of, so they are not timed."""
    import torch_geometric.typing as pyg_typing
    from torch_geometric.data import Data, HeteroData
    from torch_geometric.sampler import NeighborSampler as PyGNeighborSampler
    from torch_geometric.sampler import NodeSamplerInput

    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        log.warning("PyG has no sampling backend here (pyg-lib or torch-sparse): no PyG rows")
        return {}
    homogeneous = Data(edge_index=graph.to_edge_index(), num_nodes=graph.num_nodes)
    hetero = HeteroData()
    for name, count in typed["num_nodes"].items():
        hetero[name].num_nodes = count
    for edge_type, (indptr, indices) in typed["csc"].items():
        dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
        hetero[edge_type].edge_index = torch.from_numpy(np.stack([indices, dst]))
    first_type, first_bound = typed["names"][0], typed["bounds"][1]

    def sampler_of(data, typed_seeds: bool = False) -> Callable:
        sampler = PyGNeighborSampler(data, fanouts)  # draws from torch's global generator

        def sample(batch: np.ndarray, seed: int) -> tuple[int, int, int]:
            if typed_seeds:
                batch = batch[batch < first_bound]
            inputs = NodeSamplerInput(
                None, torch.from_numpy(batch), input_type=first_type if typed_seeds else None
            )
            out = sampler.sample_from_nodes(inputs)
            if typed_seeds:
                edges = sum(row.numel() for row in out.row.values())
                return batch.size, edges, sum(node.numel() for node in out.node.values())
            return batch.size, out.row.numel(), out.node.numel()

        return sample

    return {"uniform": sampler_of(homogeneous), "hetero": sampler_of(hetero, True)}
