"""The cases of the GPU sampler's tests (tests/samplers/test_gpu_sampler.py): graphs, seeds
and options, each sampled on the CPU and on the GPU, and the GPU's batches, computed here.

Without a GPU, ``python -m tests.samplers.gpu_cases OUT.npz`` runs under Numba's CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1``, which must be set before Numba is
imported, hence a process of its own) and saves every case's GPU batches to ``OUT.npz``.
The simulator runs one Python thread per GPU thread, so the graphs are small; they still take
every path of the kernels: repeated seeds, isolated nodes, a hub above Floyd's limit, ``-1``
fanouts, int32 and int64 indices, disjoint and temporal trees, graphs in mapped memory.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from samplers import NeighborSampler, SamplerInput, SamplerOutput
from tests.helpers.graphs import random_csc

FIELDS = ("node", "row", "col", "edge", "batch")
# Lengths around the scan's block (32 threads in the simulator, 256 on a GPU); 1057 takes three
# levels in the simulator (34 blocks, then 2, then 1).
SCAN_LENGTHS = (0, 1, 31, 32, 33, 257, 1057)
SEEDS = (7, 2**40 + 3)  # two batches per case, so that a sampler's second call is checked too


def _with_hub(indptr: np.ndarray, indices: np.ndarray, hub_degree: int):
    """The graph with node 0's in-edges replaced by ``hub_degree`` distinct sources (more
    than Floyd's limit takes)."""
    num_nodes = indptr.shape[0] - 1
    sources = np.arange(1, hub_degree + 1, dtype=indices.dtype) % num_nodes
    indices = np.concatenate([sources, indices[indptr[1] :]])
    degrees = np.diff(indptr)
    degrees[0] = hub_degree
    indptr = np.zeros_like(indptr)
    np.cumsum(degrees, out=indptr[1:])
    return indptr, indices


def cases() -> dict[str, dict]:
    """Name -> ``{"graph": (indptr, indices), "seeds": int64 ids, "options": sampler kwargs,
    "time": seed times or None}``; every case's sampler gets ``fanouts`` from its options."""
    out = {}
    indptr, indices = random_csc(90, 420, seed=1, dtype=np.int64)
    repeated = np.array([3, 5, 3, 10, 89, 5, 0], dtype=np.int64)
    base = {"graph": (indptr, indices), "seeds": repeated, "time": None}
    out["uniform"] = {**base, "options": {"fanouts": [3, 2]}}
    out["replace"] = {**base, "options": {"fanouts": [4, 3], "replace": True}}
    out["all-then-some"] = {**base, "options": {"fanouts": [-1, 2]}}
    out["disjoint"] = {**base, "options": {"fanouts": [3, 2], "disjoint": True}}
    out["int32-indices"] = {
        **base,
        "graph": (indptr, indices.astype(np.int32)),
        "options": {"fanouts": [2, 2, 2]},
    }
    out["mapped-graph"] = {**base, "options": {"fanouts": [3, 2], "graph_placement": "mapped"}}
    hub = _with_hub(indptr, indices, hub_degree=85)
    out["hub"] = {
        **base,
        "graph": hub,
        "seeds": np.array([0, 1, 0], dtype=np.int64),
        "options": {"fanouts": [70, 2]},
    }
    sparse = random_csc(120, 40, seed=2, dtype=np.int64)  # most nodes isolated
    out["isolated"] = {
        "graph": sparse,
        "seeds": np.arange(0, 120, 7, dtype=np.int64),
        "time": None,
        "options": {"fanouts": [2, -1]},
    }
    rng = np.random.default_rng(3)
    node_time = rng.integers(0, 20, 90)
    edge_time = rng.integers(0, 20, indices.shape[0])
    seed_time = rng.integers(5, 20, repeated.shape[0])
    out["node-time"] = {**base, "options": {"fanouts": [3, 2], "node_time": node_time}}
    out["edge-time-last"] = {
        **base,
        "time": seed_time,
        "options": {"fanouts": [2, 2], "edge_time": edge_time, "temporal_strategy": "last"},
    }
    out["edge-time-replace"] = {
        **base,
        "time": seed_time,
        "options": {"fanouts": [3, 1], "edge_time": edge_time, "replace": True},
    }
    for k in range(4):  # random graphs, seeds and fanouts
        rng = np.random.default_rng(100 + k)
        num_nodes = int(rng.integers(2, 150))
        graph = random_csc(num_nodes, int(rng.integers(0, 600)), seed=k, dtype=np.int64)
        out[f"random-{k}"] = {
            "graph": graph,
            "seeds": rng.integers(0, num_nodes, int(rng.integers(1, 12))),
            "time": None,
            "options": {
                "fanouts": [int(f) for f in rng.integers(-1, 6, int(rng.integers(1, 4)))],
                "replace": bool(rng.integers(0, 2)),
                "disjoint": bool(rng.integers(0, 2)),
            },
        }
    return out


def sample(case: dict, seed: int, device: str) -> SamplerOutput:
    """``case``'s batch for ``seed`` on ``device``, as NumPy arrays."""
    indptr, indices = case["graph"]
    sampler = NeighborSampler(indptr, indices, device=device, **case["options"])
    seeds = case["seeds"]
    inputs = SamplerInput(seeds, np.arange(seeds.shape[0]), seed=seed, time=case["time"])
    return sampler.sample_from_nodes(inputs).to_host()


def gpu_batches() -> dict[str, np.ndarray]:
    """Every case's GPU batches, flattened to ``"case/seed/field"`` -> array (fields that are
    ``None`` left out), plus ``"case/seed/counts"``: the per-hop node and edge counts."""
    out = {}
    for name, case in cases().items():
        for seed in SEEDS:
            batch = sample(case, seed, "cuda")
            for field in FIELDS:
                if getattr(batch, field) is not None:
                    out[f"{name}/{seed}/{field}"] = getattr(batch, field)
            out[f"{name}/{seed}/counts"] = np.array(
                batch.num_sampled_nodes + batch.num_sampled_edges, dtype=np.int64
            )
    return out


def scan_values(length: int) -> np.ndarray:
    """The int64 values the prefix-sum cases sum: ``length`` of them, some large."""
    return np.random.default_rng(length).integers(0, 1 << 40, length)


def gpu_scans() -> dict[str, np.ndarray]:
    """``"scan/<length>"`` -> :func:`~samplers._kernels.cuda_target.exclusive_sum` of
    :func:`scan_values` on the GPU, the total read back appended."""
    from samplers._kernels.cuda_target import Stream, exclusive_sum

    out = {}
    with Stream() as stream:
        for length in SCAN_LENGTHS:
            sums, total = exclusive_sum(stream, stream.to_device(scan_values(length)))
            out[f"scan/{length}"] = np.append(sums.copy_to_host(), total)
    return out


if __name__ == "__main__":
    # The simulator computes in Python, where uint64 products wrap with a warning.
    warnings.simplefilter("ignore", RuntimeWarning)
    np.savez(sys.argv[1], **gpu_batches(), **gpu_scans())
