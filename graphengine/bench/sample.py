"""``graphengine bench sample``: seeds and sampled edges per second through the NeighborLoader,
against PyG's and DGL's node loaders (``--loader link|cluster|saint``:
:mod:`graphengine.bench.loaders`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numba
import numpy as np
import torch

from graphengine.bench.peers import (
    PEERS,
    Unavailable,
    check_peers,
    pyg_sampling,
    time_dgl_nodes,
)
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
    vs: Sequence[str] = (),
    seed: int = 0,
    device: str = "cpu",
    plot: str | Path | None = None,
) -> dict:
    """Time ``batches`` batches of the training split; print a table and a JSON line.

    Rows: the default NeighborLoader (one sampling-and-gathering thread beside the
    caller, its kernels using ``threads`` threads), the same with two such threads,
    with ``num_workers=0`` (everything in the calling thread: the fair figure at
    ``threads=1``), the sampler alone, and for the peers in ``vs`` (``'pyg'``, ``'dgl'``)
    PyG's NeighborLoader and DGL's ``DataLoader`` with its ``NeighborSampler`` (gathering
    ``feat`` and ``label``) on the same seeds; a peer that cannot run here is logged, with
    why, and its row says so. With a CUDA ``device``, also the sampler on that GPU alone and
    the NeighborLoader with batches on it (two sampling threads), sampled on the GPU and on
    the CPU. With ``plot``, also draws each row's seeds and edges per second to that file
    (:func:`graphengine.plot.plot_loaders`).
    """
    check_peers(vs)
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
    kernel_s, kernel_edges = time_sampler(sampler, seeds, batch_size, seed)
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
    if torch.device(device).type == "cuda":
        _gpu_rows(data, fanouts, batch_size, seeds, seed, device, rows, summary)
    peers = {"pyg": ("PyG NeighborLoader", _time_pyg), "dgl": ("DGL NeighborSampler", _time_dgl)}
    for key in (peer for peer in PEERS if peer in vs):
        name, time_peer = peers[key]
        try:
            peer_s, peer_edges = time_peer(data, fanouts, batch_size, seeds)
        except Unavailable as error:
            rows.append([f"{name} (not run)", "-", "-", "-", "-", "-"])
            summary[key] = str(error)
            continue
        rows.append(_row(name, len(timed), peer_edges, peer_s))
        peer_rate = peer_edges / peer_s
        summary.update(
            {
                f"{key}_seeds_per_s": len(timed) / peer_s,
                f"{key}_edges_per_s": peer_rate,
                f"speedup_vs_{key}": (edges / loader_s) / peer_rate,
                f"two_workers_speedup_vs_{key}": (two_edges / two_s) / peer_rate,
                f"inline_speedup_vs_{key}": (inline_edges / inline_s) / peer_rate,
            }
        )
    headers = ["loader", "seeds", "edges", "seconds", "seeds/s", "edges/s"]
    print_report(headers, rows, summary)
    for key in (peer for peer in PEERS if isinstance(summary.get(peer), str)):
        log.warning("%s not run: %s", peers[key][0], summary[key])
    if plot is not None:
        from graphengine.plot import plot_loaders

        title = (
            f"NeighborLoader on {dataset}: fanouts {','.join(map(str, fanouts))}, batches of "
            f"{batch_size}, {threads} thread{'s' if threads != 1 else ''}"
        )
        plot_loaders(headers, rows, ["seeds/s", "edges/s"], title, plot)
    return summary


def _gpu_rows(data, fanouts, batch_size, seeds, seed, device, rows, summary) -> None:
    """The rows (and ``summary`` entries) of sampling on GPU ``device``: the sampler alone,
    then loaders whose batches go there, sampled there and on the CPU."""
    timed = len(seeds) - batch_size
    sampler = NeighborSampler(
        data.graph.indptr,
        data.graph.indices,
        fanouts,
        validate=not data.graph.validated,
        device=device,
    )
    gpu_s, gpu_edges = time_sampler(sampler, seeds, batch_size, seed)
    name = f"graphengine sampler only ({sampler.device}, graph {sampler.graph_placement})"
    rows.append(_row(name, timed, gpu_edges, gpu_s))
    summary.update(
        gpu_sampler_edges_per_s=gpu_edges / gpu_s, graph_placement=sampler.graph_placement
    )
    for sample_on in ("cuda", "cpu"):
        loader = NeighborLoader(
            data,
            fanouts,
            batch_size=batch_size,
            input_nodes=seeds,
            seed=seed,
            num_workers=2,
            device=device,
            sample_on=sample_on,
        )
        loader_s, edges = _time_batches(loader)
        name = f"graphengine NeighborLoader (device={device}, sample_on={sample_on})"
        rows.append(_row(name, timed, edges, loader_s))
        summary[f"gpu_loader_sample_on_{sample_on}_edges_per_s"] = edges / loader_s


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
    if torch.cuda.is_available():  # the last batch's gathers may still run there
        torch.cuda.synchronize()
    return time.perf_counter() - start, edges


def time_sampler(sampler, seeds: np.ndarray, batch_size: int, seed: int) -> tuple[float, int]:
    """Seconds and sampled edges of ``sampler`` over the batches of ``seeds`` after the first
    (a warm-up); batch ``b`` draws with seed ``seed + b``."""

    def sample(b):
        chunk = seeds[b * batch_size : (b + 1) * batch_size]
        return sampler.sample_from_nodes(SamplerInput(chunk, np.arange(len(chunk)), seed + b))

    sample(0)
    edges = 0
    start = time.perf_counter()
    for b in range(1, len(seeds) // batch_size):
        edges += sample(b).row.shape[0]
    return time.perf_counter() - start, edges


def _time_pyg(data, fanouts, batch_size, seeds) -> tuple[float, int]:
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

    pyg_sampling()
    pyg_data = data.to_data()
    loader = PyGNeighborLoader(
        pyg_data, num_neighbors=fanouts, batch_size=batch_size, input_nodes=torch.from_numpy(seeds)
    )
    return _time_batches(loader)


def _time_dgl(data, fanouts, batch_size, seeds) -> tuple[float, int]:
    """DGL's loader, gathering ``feat`` (``x``) and ``label`` (``y``) as its users prefetch
    them: seconds and sampled edges."""
    node_data = {"feat": data.x, "label": data.y}
    timed = time_dgl_nodes(
        data.graph,
        node_data,
        fanouts,
        seeds,
        batch_size,
        len(seeds) // batch_size - 1,
        prefetch_node_feats=["feat"],
        prefetch_labels=["label"],
    )
    return timed.seconds, timed.edges
