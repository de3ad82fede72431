"""``graphengine bench sample``: seeds and sampled edges per second through the NeighborLoader."""

from __future__ import annotations

import logging
import time

import numba
import numpy as np
import torch

from graphengine.bench.report import print_report
from graphengine.datasets import load_dataset
from graphengine.loader import NeighborLoader
from samplers import NeighborSampler, SamplerInput

log = logging.getLogger(__name__)


def run(
    dataset: str,
    fanouts: list[int],
    batch_size: int,
    batches: int,
    threads: int,
    root: str | None = None,
    vs_pyg: bool = False,
    seed: int = 0,
) -> dict:
    """Time ``batches`` batches of the training split; print a table and a JSON line.

    Rows: the default NeighborLoader (one sampling-and-gathering thread beside the
    caller, its kernels using ``threads`` threads), the same with two such threads,
    with ``num_workers=0`` (everything in the calling thread: the fair figure at
    ``threads=1``), the sampler alone, and with ``vs_pyg`` PyG's NeighborLoader on the
    same seeds.
    """
    set_threads(threads)
    data = load_dataset(dataset, root=root)
    rng = np.random.default_rng(seed)
    seeds = rng.permutation(data.train_idx)[: (batches + 1) * batch_size]
    if seeds.shape[0] < 2 * batch_size:
        raise ValueError(f"'{dataset}' has too few training nodes for batch size {batch_size}")
    timed = seeds[batch_size:]

    rows, summary = [], {}
    loader = NeighborLoader(data, fanouts, batch_size=batch_size, input_nodes=seeds, seed=seed)
    loader_s, edges = _time_batches(loader)
    rows.append(_row("graphengine NeighborLoader (default)", len(timed), edges, loader_s))
    two = NeighborLoader(
        data, fanouts, batch_size=batch_size, input_nodes=seeds, seed=seed, num_workers=2
    )
    two_s, two_edges = _time_batches(two)
    rows.append(_row("graphengine NeighborLoader (num_workers=2)", len(timed), two_edges, two_s))
    inline = NeighborLoader(
        data, fanouts, batch_size=batch_size, input_nodes=seeds, seed=seed, num_workers=0
    )
    inline_s, inline_edges = _time_batches(inline)
    rows.append(
        _row("graphengine NeighborLoader (num_workers=0)", len(timed), inline_edges, inline_s)
    )
    sampler = NeighborSampler(
        data.graph.indptr, data.graph.indices, fanouts, validate=not data.graph.validated
    )
    kernel_s, kernel_edges = _time_sampler(sampler, seeds, batch_size, seed)
    rows.append(_row("graphengine sampler only", len(timed), kernel_edges, kernel_s))
    summary.update(
        bench="sample",
        dataset=dataset,
        fanouts=fanouts,
        batch_size=batch_size,
        batches=len(timed) // batch_size,
        threads=threads,
        seeds_per_s=len(timed) / loader_s,
        edges_per_s=edges / loader_s,
        two_workers_edges_per_s=two_edges / two_s,
        inline_seeds_per_s=len(timed) / inline_s,
        inline_edges_per_s=inline_edges / inline_s,
        sampler_only_edges_per_s=kernel_edges / kernel_s,
    )
    if vs_pyg:
        pyg = _time_pyg(data, fanouts, batch_size, seeds)
        if pyg is None:
            summary["pyg"] = "PyG sampling backend not installed (pyg-lib or torch-sparse)"
        else:
            pyg_s, pyg_edges = pyg
            rows.append(_row("PyG NeighborLoader", len(timed), pyg_edges, pyg_s))
            summary.update(
                pyg_seeds_per_s=len(timed) / pyg_s,
                pyg_edges_per_s=pyg_edges / pyg_s,
                speedup_vs_pyg=(edges / loader_s) / (pyg_edges / pyg_s),
                two_workers_speedup_vs_pyg=(two_edges / two_s) / (pyg_edges / pyg_s),
                inline_speedup_vs_pyg=(inline_edges / inline_s) / (pyg_edges / pyg_s),
            )
    print_report(["loader", "seeds", "edges", "seconds", "seeds/s", "edges/s"], rows, summary)
    if "pyg" in summary:
        log.warning("%s", summary["pyg"])
    return summary


def set_threads(threads: int) -> None:
    """Use ``threads`` threads in Numba's kernels and in torch's operators."""
    if threads < 1 or threads > numba.config.NUMBA_NUM_THREADS:
        raise ValueError(
            f"'threads' must be in [1, {numba.config.NUMBA_NUM_THREADS}] (got {threads})"
        )
    numba.set_num_threads(threads)
    torch.set_num_threads(threads)


def _row(name: str, seeds: int, edges: int, seconds: float) -> list:
    return [name, seeds, edges, seconds, seeds / seconds, edges / seconds]


def _time_batches(loader) -> tuple[float, int]:
    """Seconds and sampled edges over all batches but the first (a warm-up)."""
    iterator = iter(loader)
    next(iterator)
    edges = 0
    start = time.perf_counter()
    for batch in iterator:
        edges += batch.edge_index.shape[1]
    return time.perf_counter() - start, edges


def _time_sampler(sampler, seeds, batch_size, seed) -> tuple[float, int]:
    def sample(b):
        chunk = seeds[b * batch_size : (b + 1) * batch_size]
        return sampler.sample_from_nodes(SamplerInput(chunk, np.arange(len(chunk)), seed + b))

    sample(0)
    edges = 0
    start = time.perf_counter()
    for b in range(1, len(seeds) // batch_size):
        edges += sample(b).row.shape[0]
    return time.perf_counter() - start, edges


def _time_pyg(data, fanouts, batch_size, seeds) -> tuple[float, int] | None:
    import torch_geometric.typing as pyg_typing
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        return None
    pyg_data = data.to_data()
    loader = PyGNeighborLoader(
        pyg_data, num_neighbors=fanouts, batch_size=batch_size, input_nodes=torch.from_numpy(seeds)
    )
    return _time_batches(loader)
