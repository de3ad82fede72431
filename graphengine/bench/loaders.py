"""``graphengine bench sample --loader link|cluster|saint``: graphengine's link, Cluster-GCN and
GraphSAINT loaders against PyG's and DGL's namesakes in the same run.

Each library's loader is built and iterated as its users write it, with the same parameters,
over the same graph (the dataset's, edge ``i`` at CSC position ``i`` everywhere) and the same
node data, in the calling thread unless a loader's default says otherwise:

* ``link``: graphengine's and PyG's ``LinkNeighborLoader(data, fanouts, edge_label_index,
  neg_sampling='binary', batch_size)`` over the same seed edges (a random sample of the
  graph's, in the same order), gathering ``x``; DGL's ``DataLoader`` with
  ``as_edge_prediction_sampler(NeighborSampler(fanouts, prefetch_node_feats=['feat']),
  negative_sampler=Uniform(1))`` over the same edge ids. One negative per seed edge
  everywhere, but PyG's binary negatives (which graphengine draws as PyG does) pair two random
  nodes where DGL's keep the seed edge's source, so their batches hold more seed nodes; and
  DGL's blocks sample every layer's destinations again (see :mod:`graphengine.bench.modes`).
  Seed edges per second is the figure to compare.
* ``cluster``: ``ClusterData(data, parts)`` then ``ClusterLoader(clusters_per_batch,
  shuffle=True)`` (graphengine's and PyG's), DGL's ``ClusterGCNSampler(g, parts,
  prefetch_ndata=['feat', 'label'])`` with a ``DataLoader`` over the cluster ids: batches of
  whole clusters with every edge between their nodes, ``x`` and ``y`` sliced. Each runs its
  own METIS (graphengine's ``pymetis``, PyG's torch-sparse or pyg-lib, DGL's built-in) when
  the loader is built, timed apart from the batches.
* ``saint``: GraphSAINT's random-walk (``batch_size`` roots, ``walk_length`` steps), node or
  edge sampler (a budget of ``batch_size`` draws), ``sample_coverage=0`` (no normalization
  coefficients: DGL's sampler has none): graphengine's and PyG's ``GraphSAINT*Sampler``,
  DGL's ``SAINTSampler(mode, budget, prefetch_ndata=['feat', 'label'])`` with a
  ``DataLoader``; subgraphs induced by the drawn nodes, ``x`` and ``y`` sliced.

Rows: the one-off seconds to build the loader (METIS for the cluster loaders) and to its first
batch, apart; then over the timed batches, batches per second, seed edges per second (link),
nodes and edges per second and per batch.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.bench.peers import (
    PEERS,
    Timed,
    Unavailable,
    check_peers,
    dgl_fanouts,
    dgl_graph,
    dgl_module,
    measure,
    pyg_sampling,
    pyg_torch_sparse,
)
from graphengine.bench.report import print_report
from graphengine.bench.sample import set_threads
from graphengine.data.graph_store import Graph
from graphengine.datasets import load_dataset
from graphengine.loader import (
    ClusterData,
    ClusterLoader,
    GraphSAINTEdgeSampler,
    GraphSAINTNodeSampler,
    GraphSAINTRandomWalkSampler,
    LinkNeighborLoader,
)

LOADERS = ("link", "cluster", "saint")
SAINT_MODES = ("walk", "node", "edge")


@dataclass(frozen=True)
class Workload:
    """What every library's loader gets.

    Attributes:
        data: PyG ``Data``: ``x`` float32 ``[num_nodes, num_features]``, ``y`` int64
            ``[num_nodes]`` (not for ``link``), ``edge_index`` int64 ``[2, num_edges]`` in
            the graph's CSC order.
        graph: the same graph in CSC (for DGL's).
        fanouts: neighbors per hop (``link``).
        batch_size: seed edges (``link``), walk roots or node/edge draws (``saint``).
        batches: batches timed after the warm-up one.
        seed: the seed of the seed edges' sample and of graphengine's loaders.
        seed_edges: int64 ``[(batches + 1) * batch_size]`` edge ids (``link``), else empty.
        parts, clusters_per_batch: METIS clusters and clusters per batch (``cluster``).
        walk_length, saint_mode: GraphSAINT's walk steps and sampler (``saint``).
    """

    data: Data
    graph: Graph
    fanouts: list[int]
    batch_size: int
    batches: int
    seed: int
    seed_edges: np.ndarray
    parts: int
    clusters_per_batch: int
    walk_length: int
    saint_mode: str


def run(
    loader: str,
    dataset: str,
    fanouts: list[int],
    batch_size: int,
    batches: int,
    threads: int,
    root: str | None = None,
    vs: Sequence[str] = (),
    seed: int = 0,
    parts: int = 1500,
    clusters_per_batch: int = 20,
    walk_length: int = 2,
    saint_mode: str = "walk",
    plot: str | Path | None = None,
) -> dict:
    """Time ``batches`` batches (after a warm-up one) of graphengine's ``loader`` and of the
    peers in ``vs`` (``'pyg'``, ``'dgl'``) on ``dataset`` with ``threads`` threads; print a
    table (a peer that cannot run here gets a row saying why) and a JSON line, and return it.
    With ``plot``, also draw each loader's batches (seed edges for ``link``) and edges per
    second to that file (:func:`graphengine.plot.plot_loaders`).
    """
    if loader not in LOADERS:
        raise ValueError(f"'loader' must be one of {LOADERS} (got {loader!r})")
    if saint_mode not in SAINT_MODES:
        raise ValueError(f"'saint_mode' must be one of {SAINT_MODES} (got {saint_mode!r})")
    check_peers(vs)
    set_threads(threads)
    data = load_dataset(dataset, root=root)
    graph = data.graph
    if loader == "link":
        seed_edges = _seed_edges(dataset, graph.num_edges, batch_size, batches, seed)
    else:
        seed_edges = np.empty(0, dtype=np.int64)
    if loader == "cluster":
        _check_clusters(parts, clusters_per_batch, batches, graph.num_nodes)
    work = Workload(
        data=_pyg_data(data, labels=loader != "link"),
        graph=graph,
        fanouts=list(fanouts),
        batch_size=batch_size,
        batches=batches,
        seed=seed,
        seed_edges=seed_edges,
        parts=parts,
        clusters_per_batch=clusters_per_batch,
        walk_length=walk_length,
        saint_mode=saint_mode,
    )
    rows, summary = [], {}
    ours = None
    for name, key, time_it in CONTENDERS[loader]:
        if key in PEERS and key not in vs:
            continue
        name = name.format(saint=SAINT_LOADERS[saint_mode].__name__, mode=saint_mode)
        try:
            timed = time_it(work)
        except Unavailable as error:
            rows.append([name, *["-"] * (len(_headers(loader)) - 2), str(error)])
            summary[key] = str(error)
            continue
        figures = timed.figures()
        rows.append(_row(name, loader, figures))
        summary.update({f"{key}_{field}": value for field, value in figures.items()})
        if key == "graphengine":
            ours = figures
        elif key in PEERS and ours is not None:
            summary[f"speedup_vs_{key}"] = ours["batches_per_s"] / figures["batches_per_s"]
    summary.update(
        bench="sample",
        loader=loader,
        dataset=dataset,
        batch_size=batch_size,
        batches=batches,
        threads=threads,
        **_parameters(loader, work),
    )
    print_report(_headers(loader), rows, summary)
    if plot is not None:
        from graphengine.plot import plot_loaders

        columns = ["batches/s", *(["seed edges/s"] if loader == "link" else []), "edges/s"]
        title = (
            f"{loader} loaders on {dataset}: batches of {batch_size}, {threads} "
            f"thread{'s' if threads != 1 else ''}"
        )
        plot_loaders(_headers(loader), rows, columns, title, plot)
    return summary


def _pyg_data(data, labels: bool) -> Data:
    """``data`` (a :class:`~graphengine.datasets.GraphDataset`) as a PyG ``Data`` in memory:
    ``x``, ``y`` when ``labels``, and ``edge_index`` in the graph's CSC order."""
    pyg = Data(
        x=torch.from_numpy(np.array(data.x, dtype=np.float32)),
        edge_index=data.graph.to_edge_index(),
        num_nodes=data.num_nodes,
    )
    if labels:
        pyg.y = torch.from_numpy(np.array(data.y, dtype=np.int64))
    return pyg


def _seed_edges(dataset: str, num_edges: int, batch_size: int, batches: int, seed: int):
    """int64 ``[(batches + 1) * batch_size]``: distinct edge ids drawn from ``seed``."""
    needed = (batches + 1) * batch_size
    if needed > num_edges:
        raise ValueError(
            f"'{dataset}' has {num_edges} edges, fewer than {batches + 1} batches (the timed "
            f"ones and a warm-up) of {batch_size} seed edges"
        )
    return np.random.default_rng(seed).permutation(num_edges)[:needed]


def _check_clusters(parts: int, clusters_per_batch: int, batches: int, num_nodes: int) -> None:
    if not 1 <= parts <= num_nodes:
        raise ValueError(f"'parts' must be in [1, {num_nodes}] (got {parts})")
    if clusters_per_batch < 1 or parts // clusters_per_batch < batches + 1:
        raise ValueError(
            f"'parts' {parts} in batches of 'clusters_per_batch' {clusters_per_batch} must "
            f"give at least {batches + 1} batches (the timed ones and a warm-up): give more "
            "parts or fewer clusters per batch or batches"
        )


def _parameters(loader: str, work: Workload) -> dict:
    """The JSON line's loader-specific parameters."""
    if loader == "link":
        return {"fanouts": work.fanouts, "negatives_per_edge": 1}
    if loader == "cluster":
        return {"parts": work.parts, "clusters_per_batch": work.clusters_per_batch}
    if work.saint_mode == "walk":
        return {"saint_mode": "walk", "walk_length": work.walk_length}
    return {"saint_mode": work.saint_mode}


def _headers(loader: str) -> list[str]:
    seeds = ["seed edges/s"] if loader == "link" else []
    return [
        "loader",
        "build s",
        "1st batch s",
        "batches/s",
        *seeds,
        "nodes/s",
        "edges/s",
        "nodes/batch",
        "edges/batch",
        "note",
    ]


def _row(name: str, loader: str, figures: dict[str, float]) -> list:
    seeds = [figures["seeds_per_s"]] if loader == "link" else []
    return [
        name,
        figures["build_s"],
        figures["first_batch_s"],
        figures["batches_per_s"],
        *seeds,
        figures["nodes_per_s"],
        figures["edges_per_s"],
        figures["nodes_per_batch"],
        figures["edges_per_batch"],
        "",
    ]


# Counting a batch: (seeds, nodes, edges).


def _count_data(seeds: Callable[[Data], int]) -> Callable[[Data], tuple[int, int, int]]:
    """A PyG ``Data`` batch's seeds (``seeds(batch)``), nodes and edges."""
    return lambda batch: (seeds(batch), batch.num_nodes, batch.edge_index.shape[1])


def _count_dgl_subgraph(seeds: int) -> Callable:
    """A DGL subgraph batch's ``seeds`` (a constant), nodes and edges."""
    return lambda g: (seeds, g.num_nodes(), g.num_edges())


def _count_dgl_link(batch) -> tuple[int, int, int]:
    """DGL's link batch ``(input_nodes, pair_graph, negative_pair_graph, blocks)``."""
    input_nodes, pair_graph, _, blocks = batch
    return pair_graph.num_edges(), input_nodes.shape[0], sum(b.num_edges() for b in blocks)


# Link prediction.


def _link_seeds(work: Workload) -> torch.Tensor:
    return work.data.edge_index[:, torch.from_numpy(work.seed_edges)]


def _graphengine_link(num_workers: int | None) -> Callable[[Workload], Timed]:
    def time_it(work: Workload) -> Timed:
        options = {} if num_workers is None else {"num_workers": num_workers}

        def build():
            return LinkNeighborLoader(
                work.data,
                work.fanouts,
                edge_label_index=_link_seeds(work),
                neg_sampling="binary",
                batch_size=work.batch_size,
                seed=work.seed,
                **options,
            )

        return measure(build, _count_data(lambda b: b.input_id.numel()), work.batches)

    return time_it


def _pyg_link(work: Workload) -> Timed:
    from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader

    pyg_sampling()
    torch.manual_seed(work.seed)

    def build():
        return PyGLinkNeighborLoader(
            work.data,
            num_neighbors=work.fanouts,
            edge_label_index=_link_seeds(work),
            neg_sampling="binary",
            batch_size=work.batch_size,
        )

    return measure(build, _count_data(lambda b: b.input_id.numel()), work.batches)


def _dgl_link(work: Workload) -> Timed:
    dgl = dgl_module()

    def build():
        g = dgl_graph(dgl, work.graph, {"feat": work.data.x})
        sampler = dgl.dataloading.as_edge_prediction_sampler(
            dgl.dataloading.NeighborSampler(
                dgl_fanouts(work.fanouts), prefetch_node_feats=["feat"]
            ),
            negative_sampler=dgl.dataloading.negative_sampler.Uniform(1),
        )
        return dgl.dataloading.DataLoader(
            g, torch.from_numpy(work.seed_edges), sampler, batch_size=work.batch_size
        )

    return measure(build, _count_dgl_link, work.batches)


# Cluster-GCN.


def _graphengine_cluster(work: Workload) -> Timed:
    def build():
        clusters = ClusterData(work.data, work.parts, log=False, seed=work.seed)
        return ClusterLoader(
            clusters, batch_size=work.clusters_per_batch, shuffle=True, seed=work.seed
        )

    return measure(build, _count_data(lambda _: work.clusters_per_batch), work.batches)


def _pyg_cluster(work: Workload) -> Timed:
    from torch_geometric.loader import ClusterData as PyGClusterData
    from torch_geometric.loader import ClusterLoader as PyGClusterLoader

    torch.manual_seed(work.seed)

    def build():
        try:
            clusters = PyGClusterData(work.data, work.parts, log=False)
        except ImportError as error:
            raise Unavailable(_no_pyg_metis(error)) from None
        return PyGClusterLoader(clusters, batch_size=work.clusters_per_batch, shuffle=True)

    return measure(build, _count_data(lambda _: work.clusters_per_batch), work.batches)


def _no_pyg_metis(error: ImportError) -> str:
    """Why PyG's ``ClusterData`` raised ``error``: it runs torch-sparse's METIS, swallowing
    its error, then pyg-lib's, then raises ``ImportError``."""
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_TORCH_SPARSE and not pyg_typing.WITH_PYG_LIB:
        return "PyG's ClusterData: torch-sparse here was built without METIS, and no pyg-lib"
    return f"PyG's ClusterData: {error}"


def _dgl_cluster(work: Workload) -> Timed:
    dgl = dgl_module()
    with tempfile.TemporaryDirectory() as cache:

        def build():
            g = dgl_graph(dgl, work.graph, {"feat": work.data.x, "label": work.data.y})
            sampler = dgl.dataloading.ClusterGCNSampler(
                g,
                work.parts,
                prefetch_ndata=["feat", "label"],
                cache_path=str(Path(cache) / "cluster_gcn.pkl"),
            )
            return dgl.dataloading.DataLoader(
                g,
                torch.arange(work.parts),
                sampler,
                batch_size=work.clusters_per_batch,
                shuffle=True,
            )

        return measure(build, _count_dgl_subgraph(work.clusters_per_batch), work.batches)


# GraphSAINT.

SAINT_LOADERS = {
    "walk": GraphSAINTRandomWalkSampler,
    "node": GraphSAINTNodeSampler,
    "edge": GraphSAINTEdgeSampler,
}


def _saint_args(work: Workload) -> tuple:
    """The GraphSAINT loaders' positional arguments after ``data``."""
    if work.saint_mode == "walk":
        return (work.batch_size, work.walk_length)
    return (work.batch_size,)


def _graphengine_saint(work: Workload) -> Timed:
    def build():
        return SAINT_LOADERS[work.saint_mode](
            work.data,
            *_saint_args(work),
            num_steps=work.batches + 1,
            sample_coverage=0,
            log=False,
            seed=work.seed,
        )

    return measure(build, _count_data(lambda _: work.batch_size), work.batches)


def _pyg_saint(work: Workload) -> Timed:
    from torch_geometric import loader as pyg_loader

    pyg_torch_sparse()
    if work.saint_mode == "edge":
        # PyG draws the edges through a dense float32 [batch_size, num_edges] tensor.
        dense = work.batch_size * work.data.num_edges * 4
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if dense > memory // 2:
            raise Unavailable(
                "PyG's GraphSAINTEdgeSampler draws through a float32 [batch_size, num_edges] "
                f"tensor: {dense / 2**30:,.0f} GiB here, {memory / 2**30:,.0f} GiB of memory"
            )
    torch.manual_seed(work.seed)
    cls = getattr(pyg_loader, SAINT_LOADERS[work.saint_mode].__name__)

    def build():
        return cls(
            work.data,
            *_saint_args(work),
            num_steps=work.batches + 1,
            sample_coverage=0,
            log=False,
        )

    return measure(build, _count_data(lambda _: work.batch_size), work.batches)


def _dgl_saint(work: Workload) -> Timed:
    dgl = dgl_module()
    budget = (work.batch_size, work.walk_length) if work.saint_mode == "walk" else work.batch_size

    def build():
        g = dgl_graph(dgl, work.graph, {"feat": work.data.x, "label": work.data.y})
        sampler = dgl.dataloading.SAINTSampler(
            work.saint_mode, budget, prefetch_ndata=["feat", "label"]
        )
        return dgl.dataloading.DataLoader(g, torch.arange(work.batches + 1), sampler)

    return measure(build, _count_dgl_subgraph(work.batch_size), work.batches)


# Per loader: (row name, with {saint} the GraphSAINT class and {mode} its mode; JSON key;
# timing function), graphengine's first.
CONTENDERS: dict[str, list[tuple[str, str, Callable[[Workload], Timed]]]] = {
    "link": [
        ("graphengine LinkNeighborLoader (default)", "graphengine", _graphengine_link(None)),
        (
            "graphengine LinkNeighborLoader (num_workers=0)",
            "graphengine_inline",
            _graphengine_link(0),
        ),
        ("PyG LinkNeighborLoader", "pyg", _pyg_link),
        ("DGL as_edge_prediction_sampler + DataLoader", "dgl", _dgl_link),
    ],
    "cluster": [
        ("graphengine ClusterData + ClusterLoader", "graphengine", _graphengine_cluster),
        ("PyG ClusterData + ClusterLoader", "pyg", _pyg_cluster),
        ("DGL ClusterGCNSampler + DataLoader", "dgl", _dgl_cluster),
    ],
    "saint": [
        ("graphengine {saint}", "graphengine", _graphengine_saint),
        ("PyG {saint}", "pyg", _pyg_saint),
        ("DGL SAINTSampler('{mode}') + DataLoader", "dgl", _dgl_saint),
    ],
}
