"""``graphengine bench partition``: what partitioning costs, measured and simulated.

Measured, for each method and K (K processes on this machine, one per part):
``graphengine partition``'s time, peak memory and edge cut; then, through the
:class:`~graphengine.loader.DistNeighborLoader` (workers started by torchrun,
:mod:`graphengine.bench.partition_worker`), the seconds per loaded batch and the rows and bytes
that crossed parts per batch, for each size of the cache of remote rows, against the
single-machine :class:`~graphengine.NeighborLoader` at the same global batch. Loading only:
no model runs, so the figures isolate what partitioning adds; per-epoch figures are the
per-batch ones times the batches of an epoch.

Simulated, for larger K (no processes): the partition's assignment, then a few hundred
batches drawn by the single-machine sampler (distributed batches equal them, see
:class:`~graphengine.distributed.DistNeighborSampler`), each worker's share of a global batch
taken from its own training nodes; counted per batch: remote frontier nodes and the edges
sampled for them, remote feature rows, the bytes all that moves, and the balance of the
rows each part serves.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from graphengine.bench.report import print_report
from graphengine.data.partition import assign_parts
from graphengine.datasets import load_dataset
from graphengine.distributed.launch import cores_per_worker, numba_threads_env
from graphengine.loader import NeighborLoader
from graphengine.loader.seeds import derive_seed
from samplers import NeighborSampler, SamplerInput

log = logging.getLogger(__name__)

_ID_BYTES = 8
# An edge answered: its source id and its edge id (the per-node count is charged per node).
_EDGE_BYTES = 16


def run(
    dataset_name: str,
    root: str | None,
    parts: list[int],
    methods: list[str],
    fanouts: list[int],
    batch_size: int,
    batches: int,
    cache_sizes: list[str],
    simulate: list[int],
    simulated_batches: int,
    workdir: str | None = None,
) -> dict:
    dataset = load_dataset(dataset_name, root=root)
    row_bytes = dataset.num_features * np.dtype(dataset.x.dtype).itemsize + 8
    single_s = _single_machine(dataset, fanouts, batch_size, batches)
    epoch_batches = -(-len(dataset.train_idx) // batch_size)
    measured = []
    with tempfile.TemporaryDirectory(dir=workdir) as scratch:
        for method in methods:
            for k in parts:
                out = Path(scratch) / f"{method}-{k}"
                stats = _partition(dataset_name, root, k, method, out)
                reports = _load(out, k, fanouts, batch_size // k, batches, cache_sizes, scratch)
                measured.append(_summarize(method, k, stats, reports, cache_sizes, row_bytes))
    simulated = [
        _simulate(dataset, method, k, fanouts, batch_size, simulated_batches, row_bytes)
        for method in methods
        for k in simulate
    ]
    headers = [
        "method", "K", "partition s", "peak GB", "edge cut", "cache", "hit rate",
        "remote rows/batch", "remote MB/batch", "s/batch", "epoch s (load)", "worker peak GB",
    ]  # fmt: skip
    rows = [
        ["single machine", 1, "", "", "", "", "", 0, 0.0, single_s, single_s * epoch_batches, ""]
    ]
    for m in measured:
        for size, r in m["caches"].items():
            rows.append(
                [
                    m["method"], m["parts"], m["partition_s"], m["partition_peak_bytes"] / 1e9,
                    m["edge_cut_share"], size, r["hit_rate"], r["remote_rows_per_batch"],
                    r["remote_bytes_per_batch"] / 1e6, r["s_per_batch"],
                    r["s_per_batch"] * r["batches_per_epoch"], m["worker_peak_bytes"] / 1e9,
                ]
            )  # fmt: skip
    print_report(headers, rows, None)
    sim_headers = [
        "method", "K", "edge cut", "remote frontier/batch", "remote rows/batch",
        "remote MB/batch", "served rows max/mean",
    ]  # fmt: skip
    sim_rows = [
        [
            s["method"], s["parts"], s["edge_cut_share"], s["remote_frontier_per_batch"],
            s["remote_rows_per_batch"], s["remote_bytes_per_batch"] / 1e6, s["served_balance"],
        ]
        for s in simulated
    ]  # fmt: skip
    summary = {
        "bench": "partition",
        "dataset": dataset_name,
        "fanouts": fanouts,
        "batch_size": batch_size,
        "batches": batches,
        "single_machine_s_per_batch": single_s,
        "measured": measured,
        "simulated": simulated,
    }
    print_report(sim_headers, sim_rows, summary)
    return summary


def _single_machine(dataset, fanouts: list[int], batch_size: int, batches: int) -> float:
    """Seconds per batch of the single-machine NeighborLoader (one untimed batch first)."""
    loader = NeighborLoader(
        dataset, fanouts, batch_size=batch_size, input_nodes=dataset.train_idx, shuffle=True
    )
    iterator = iter(loader)
    next(iterator)
    started = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    seconds = time.perf_counter() - started
    iterator.close()
    return seconds / batches


def _partition(dataset: str, root: str | None, k: int, method: str, out: Path) -> dict:
    command = [sys.executable, "-m", "graphengine", "partition", "--dataset", dataset]
    command += ["--parts", str(k), "--method", method, "--out", str(out)]
    command += ["--root", root] if root else []
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"partitioning failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def _load(
    path: Path,
    k: int,
    fanouts: list[int],
    worker_batch_size: int,
    batches: int,
    cache_sizes: list[str],
    scratch: str,
) -> list[dict]:
    config = {
        "fanouts": fanouts,
        "worker_batch_size": worker_batch_size,
        "batches": batches,
        "cache_sizes": cache_sizes,
    }
    out = Path(scratch) / f"load-{path.name}"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += [f"--nproc-per-node={k}", "-m", "graphengine.bench.partition_worker"]
    command += [str(path), json.dumps(config), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": str(cores_per_worker(k)), **numba_threads_env(k)}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the loading workers failed: {done.stderr[-3000:]}")
    return [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(k)]


def _summarize(method, k, stats, reports, cache_sizes, row_bytes) -> dict:
    caches = {}
    for size in map(str, cache_sizes):
        per_batch = [r["results"][size]["per_batch"] for r in reports]
        remote = sum(p["remote_rows"] for p in per_batch)
        hits = sum(p["cache_hits"] for p in per_batch)
        sent = sum(p["sampling_sent_bytes"] + p["fetching_sent_bytes"] for p in per_batch)
        caches[size] = {
            "cache_rows": sum(r["results"][size]["cache_rows"] for r in reports),
            "hit_rate": hits / remote if remote else 0.0,
            "remote_rows_per_batch": remote,
            "fetched_rows_per_batch": sum(p["fetched_rows"] for p in per_batch),
            "remote_bytes_per_batch": sent,
            "s_per_batch": max(r["results"][size]["s_per_batch"] for r in reports),
            "batches_per_epoch": reports[0]["batches_per_epoch"],
            "exchange_s_per_batch": max(
                p["sampling_seconds"] + p["fetching_seconds"] for p in per_batch
            ),
        }
    return {
        "method": method,
        "parts": k,
        "partition_s": stats["seconds"],
        "partition_peak_bytes": stats["peak_rss_bytes"],
        "edge_cut_share": stats["edge_cut_share"],
        "balance": stats["balance"],
        "worker_peak_bytes": max(r["peak_rss_bytes"] for r in reports),
        "rehearsal_s": max(r["rehearsal_s"] for r in reports),
        "caches": caches,
    }


def _simulate(dataset, method, k, fanouts, batch_size, num_batches, row_bytes) -> dict:
    """Cross-part traffic of ``num_batches`` global batches over a ``k``-way partition."""
    graph = dataset.graph
    started = time.perf_counter()
    owner = assign_parts(graph, k, method, dataset.train_idx, seed=0).astype(np.int64)
    assign_s = time.perf_counter() - started
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    cut = float(np.mean(owner[indices] != np.repeat(owner, np.diff(indptr))))
    sampler = NeighborSampler(indptr, indices, fanouts, validate=False)
    train = np.asarray(dataset.train_idx)
    own_train = [train[owner[train] == p] for p in range(k)]
    share = max(1, batch_size // k)
    rng = np.random.default_rng(0)
    frontier = rows = edges = 0
    served = np.zeros(k, dtype=np.int64)
    for b in range(num_batches):
        for p in range(k):
            if len(own_train[p]) == 0:
                continue
            seeds = rng.choice(own_train[p], min(share, len(own_train[p])), replace=False)
            out = sampler.sample_from_nodes(
                SamplerInput(seeds, np.arange(len(seeds)), derive_seed(b, p))
            )
            node_owner = owner[out.node]
            remote_node = node_owner != p
            rows += int(remote_node.sum())
            served += np.bincount(node_owner[remote_node], minlength=k)
            # Frontier nodes are all but the last hop's new nodes; their sampled edges.
            last = out.node.shape[0] - out.num_sampled_nodes[-1]
            frontier += int(remote_node[:last].sum())
            edges += int(remote_node[out.col].sum())
    scale = 1 / num_batches
    structure = frontier * 2 * _ID_BYTES + edges * _EDGE_BYTES
    return {
        "method": method,
        "parts": k,
        "assign_s": assign_s,
        "edge_cut_share": cut,
        "remote_frontier_per_batch": frontier * scale,
        "remote_edges_per_batch": edges * scale,
        "remote_rows_per_batch": rows * scale,
        "remote_bytes_per_batch": (structure + rows * (row_bytes + _ID_BYTES)) * scale,
        "served_balance": float(served.max() / served.mean()) if served.any() else 1.0,
    }
