"""``graphengine bench scaling``: sampling cost per edge on graphs of growing size."""

from __future__ import annotations

import time

import numpy as np

from graphengine.bench.report import print_report
from graphengine.bench.sample import set_threads
from graphengine.datasets.synthetic import SyntheticSpec, generate
from samplers import NeighborSampler, SamplerInput


def run(
    log2_nodes: list[int], fanouts: list[int], batch_size: int, batches: int, threads: int
) -> dict:
    """Sample ``batches`` batches on synthetic graphs of ``2**k`` nodes (mean degree ~23)."""
    set_threads(threads)
    rows, costs = [], {}
    for k in log2_nodes:
        n = 2**k
        spec = SyntheticSpec(
            num_nodes=n,
            num_edges=int(n * 22.9),
            num_features=1,
            num_classes=47,
            num_train=n // 2,
            num_val=0,
        )
        graph = generate(f"scaling-{k}", spec).graph
        sampler = NeighborSampler(
            graph.indptr, graph.indices, fanouts, validate=not graph.validated
        )
        seeds = np.random.default_rng(k).integers(0, n, size=(batches + 1) * batch_size)
        sampler.sample_from_nodes(SamplerInput(seeds[:batch_size], np.arange(batch_size), 0))
        edges = 0
        start = time.perf_counter()
        for b in range(1, batches + 1):
            chunk = seeds[b * batch_size : (b + 1) * batch_size]
            edges += sampler.sample_from_nodes(
                SamplerInput(chunk, np.arange(batch_size), b)
            ).row.size
        seconds = time.perf_counter() - start
        costs[k] = seconds / edges * 1e9
        rows.append([f"2^{k}", graph.num_edges, edges, seconds, edges / seconds, costs[k]])
    summary = {
        "bench": "scaling",
        "fanouts": fanouts,
        "batch_size": batch_size,
        "threads": threads,
        "ns_per_edge": {f"2^{k}": v for k, v in costs.items()},
        "max_over_min": max(costs.values()) / min(costs.values()),
    }
    print_report(
        ["nodes", "graph edges", "sampled edges", "seconds", "edges/s", "ns/edge"], rows, summary
    )
    return summary
