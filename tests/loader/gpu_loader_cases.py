"""The cases of the loader's GPU-sampling tests (tests/loader/test_gpu_sampling.py): a
``NeighborLoader`` over a small id graph, sampled on the CPU or on the GPU, and the GPU's
batches, computed here.

Without a GPU, ``python -m tests.loader.gpu_loader_cases OUT.npz`` runs the loaders under
Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1``, set before Numba is
imported, hence a process of its own) with batches for the CPU (``sample_on="cuda"``,
``device=None``: sampled on the simulated GPU, then brought to the host), and saves them.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import torch

from graphengine.loader import NeighborLoader
from tests.helpers.graphs import id_graph

FIELDS = ("n_id", "e_id", "edge_index", "x", "y", "edge_attr", "input_id", "batch")


def cases() -> dict[str, dict]:
    """Name -> ``NeighborLoader`` keyword arguments (the data among them)."""
    data = id_graph(num_nodes=120, num_edges=700, seed=4)
    data.time = torch.arange(120) % 17
    base = {"data": data, "num_neighbors": [3, 2], "batch_size": 6, "seed": 11}
    return {
        "uniform": {**base, "input_nodes": torch.arange(0, 120, 9)},
        "disjoint-replace": {**base, "disjoint": True, "replace": True},
        "temporal": {**base, "num_neighbors": [2, 2], "time_attr": "time"},
    }


def batches(name: str, sample_on: str, count: int = 2) -> list[dict[str, np.ndarray]]:
    """The first ``count`` batches of case ``name``, sampled on ``sample_on``: each field of
    :data:`FIELDS` that the batch has, as a host array."""
    loader = NeighborLoader(**cases()[name], sample_on=sample_on, num_workers=0)
    out = []
    for batch, _ in zip(loader, range(count), strict=False):
        out.append({f: batch[f].cpu().numpy() for f in FIELDS if f in batch})
    return out


if __name__ == "__main__":
    # The simulator computes in Python, where uint64 products wrap with a warning.
    warnings.simplefilter("ignore", RuntimeWarning)
    saved = {}
    for name in cases():
        for i, batch in enumerate(batches(name, "cuda")):
            saved.update({f"{name}/{i}/{field}": value for field, value in batch.items()})
    np.savez(sys.argv[1], **saved)
