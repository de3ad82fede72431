"""Cluster-GCN (Chiang et al., KDD 2019): ``ClusterData`` cuts a graph into METIS clusters and
``ClusterLoader`` serves batches of whole clusters with every edge between their nodes, as
drop-ins for PyG's classes of the same names."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.data.computed_cache import cache_key, read_cached, write_cached
from graphengine.data.graph_store import Graph
from graphengine.data.partition.partitioner import check_num_parts, metis_parts, renumber
from graphengine.loader.adapters import as_numpy, check_attribute_rows, select_rows
from graphengine.loader.config import loading_config
from graphengine.loader.pipeline import Stage, StagedLoader, copy_stages
from graphengine.loader.seeds import BatchRequest, SeedBatches

logger = logging.getLogger(__name__)

SPARSE_FORMATS = ("csr", "csc")


@dataclass
class Partition:
    """The clusters of a graph and its edges in their order (PyG's ``Partition``).

    Attributes:
        indptr: int64 ``[num_nodes + 1]``, row pointers over the renumbered nodes (sources
            for ``'csr'``, destinations for ``'csc'``).
        index: int64 ``[num_edges]``, the other end of each edge (renumbered).
        partptr: int64 ``[num_parts + 1]``: cluster ``c`` is renumbered nodes
            ``partptr[c]:partptr[c + 1]``.
        node_perm: int64 ``[num_nodes]``, the original id of each renumbered node.
        edge_perm: int64 ``[num_edges]``, the original id of each edge in this order.
        sparse_format: ``'csr'`` or ``'csc'``.
    """

    indptr: np.ndarray
    index: np.ndarray
    partptr: np.ndarray
    node_perm: np.ndarray
    edge_perm: np.ndarray
    sparse_format: str


class ClusterData:
    """A graph cut into ``num_parts`` METIS clusters (``pymetis``, unweighted, on the
    symmetrized graph), its nodes renumbered cluster by cluster in their original order.

    ``data`` holds the graph's attributes permuted (node attributes by ``node_perm``, edge
    attributes by ``edge_perm``, no ``edge_index``), as PyG's. ``cluster_data[c]`` is cluster
    ``c`` alone: its nodes' attributes and its inner edges (with
    ``keep_inter_cluster_edges``, also the edges leaving it, their far ends as renumbered ids,
    as PyG gives them).

    Args:
        data: a PyG ``Data`` with ``edge_index``.
        num_parts: clusters, in ``[1, num_nodes]``.
        recursive: METIS recursive bisection instead of k-way.
        save_dir: a directory (one the user can write, never a read-only dataset's) where the
            clusters are cached under ``part_{num_parts}[_recursive]/{key}/``, ``key`` a
            digest of the graph's CSC arrays, ``num_parts``, ``recursive`` and ``seed``: a
            later ``ClusterData`` of the same graph and arguments reads them instead of
            running METIS; another graph or other arguments never do. A cache file that is
            damaged or not this graph's is logged as a warning and overwritten with clusters
            computed again.
        filename: the cache file's name (``metis.npz``).
        log: log the METIS run.
        keep_inter_cluster_edges: keep edges between clusters in ``cluster_data[c]``.
        sparse_format: ``'csr'`` (edges grouped by source) or ``'csc'`` (by destination).
        seed: METIS's random seed (PyG's has none: its clusters follow METIS's default).
    """

    def __init__(
        self,
        data: Data,
        num_parts: int,
        recursive: bool = False,
        save_dir: str | Path | None = None,
        filename: str | None = None,
        log: bool = True,
        keep_inter_cluster_edges: bool = False,
        sparse_format: str = "csr",
        seed: int = 0,
    ):
        if not isinstance(data, Data) or getattr(data, "edge_index", None) is None:
            raise TypeError(
                f"'data' must be a torch_geometric Data with an 'edge_index' "
                f"(got {type(data).__name__})"
            )
        if sparse_format not in SPARSE_FORMATS:
            raise ValueError(
                f"'sparse_format' must be one of {SPARSE_FORMATS} (got {sparse_format!r})"
            )
        graph = Graph.from_data(data)
        check_attribute_rows(data)
        check_num_parts(num_parts, graph.num_nodes)
        self.num_parts = int(num_parts)
        self.recursive = bool(recursive)
        self.keep_inter_cluster_edges = bool(keep_inter_cluster_edges)
        self.sparse_format = sparse_format

        path = cluster = None
        if save_dir is not None:
            suffix = "_recursive" if self.recursive else ""
            key = _cache_key(graph, self.num_parts, self.recursive, seed)
            folder = Path(save_dir) / f"part_{self.num_parts}{suffix}" / key
            path = folder / (filename or "metis.npz")
            cluster = _read_clusters(path, graph.num_nodes, self.num_parts)
        if cluster is None:
            if log:
                logger.info("Computing METIS partitioning into %d clusters", self.num_parts)
            cluster = metis_parts(
                graph, self.num_parts, seed=seed, balanced=False, recursive=self.recursive
            )
            if path is not None:
                write_cached(path, cluster=cluster, num_nodes=np.int64(graph.num_nodes))
        edge_index = as_numpy(data.edge_index).astype(np.int64, copy=False)
        self.partition = _partition(edge_index, cluster, self.num_parts, sparse_format)
        self.data = _permute(data, self.partition)

    def __len__(self) -> int:
        return self.num_parts

    def __getitem__(self, idx: int) -> Data:
        """Cluster ``idx`` (an int in ``[0, num_parts)``) alone."""
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
            raise TypeError(f"'idx' must be an integer cluster id (got {idx!r})")
        if not 0 <= idx < self.num_parts:
            raise IndexError(f"cluster {idx} out of range [0, {self.num_parts})")
        p = self.partition
        node_start, node_end = int(p.partptr[idx]), int(p.partptr[idx + 1])
        edge_start, edge_end = int(p.indptr[node_start]), int(p.indptr[node_end])
        own = np.repeat(
            np.arange(node_end - node_start, dtype=np.int64),
            np.diff(p.indptr[node_start : node_end + 1]),
        )
        other = p.index[edge_start:edge_end]
        keep = slice(None)
        if not self.keep_inter_cluster_edges:
            keep = (other >= node_start) & (other < node_end)
            other = other[keep] - node_start
            own = own[keep]
        edges = np.arange(edge_start, edge_end)[keep]
        pair = (own, other) if self.sparse_format == "csr" else (other, own)
        return _subgraph(self.data, np.arange(node_start, node_end), edges, pair)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.num_parts})"


class ClusterLoader(StagedLoader):
    """Batches of ``batch_size`` clusters of a :class:`ClusterData` (Cluster-GCN's stochastic
    multiple partitions): each a ``Data`` of the clusters' nodes, cluster by cluster in the
    batch's order, with every edge of the graph between them (within and across the batch's
    clusters) and every node and edge attribute sliced, as PyG's ``ClusterLoader``.

    Args:
        cluster_data: the clustered graph.
        batch_size: clusters per batch.
        shuffle: reshuffle the clusters every epoch.
        drop_last: drop the last, incomplete batch.
        seed: the base seed of the epochs' orders; ``None`` draws one per epoch from torch's
            global generator (as PyG's ``shuffle``).
        num_workers: threads building batches; 0 builds them in the caller's thread.
        prefetch: batches in flight per thread (also as ``prefetch_factor``).
        device: where batches go; a CUDA device adds a copy stage on a side stream.

    ``persistent_workers``, ``timeout`` and ``multiprocessing_context`` are accepted and have
    no effect; other ``DataLoader`` options raise ``TypeError``.
    """

    def __init__(
        self,
        cluster_data: ClusterData,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        device: str | torch.device | None = None,
        **kwargs,
    ):
        if not isinstance(cluster_data, ClusterData):
            raise TypeError(
                f"'cluster_data' must be a ClusterData (got {type(cluster_data).__name__})"
            )
        loading = loading_config(
            type(self).__name__,
            {
                **kwargs,
                "batch_size": batch_size,
                "shuffle": shuffle,
                "drop_last": drop_last,
                "seed": seed,
                "num_workers": num_workers,
                "prefetch": prefetch,
            },
        )
        self.cluster_data = cluster_data
        self.num_workers = num_workers
        p = cluster_data.partition
        # The cluster of every renumbered node, to keep the edges whose far end is in a batch.
        self._cluster_of = np.repeat(
            np.arange(cluster_data.num_parts, dtype=np.int64), np.diff(p.partptr)
        )
        batches = SeedBatches(cluster_data.num_parts, batch_size, shuffle, drop_last, seed)
        stages = [Stage("collate", self._collate, loading.threads), *copy_stages(device)]
        self._set_stages(batches, stages, loading.in_flight)

    @property
    def batch_size(self) -> int:
        return self._seed_batches.batch_size

    def __call__(self, clusters) -> Data:
        """One batch of the given cluster ids (distinct integers ``[k]``, ``k >= 1``: a list,
        array or tensor), built in this thread."""
        num_parts = self.cluster_data.num_parts
        clusters = as_numpy(clusters)
        if clusters.size and not np.issubdtype(clusters.dtype, np.integer):
            # A cast would truncate them: [1.7] would be cluster 1.
            raise TypeError(
                f"cluster ids must be integers (got {clusters.dtype}: {clusters.ravel()[:5]})"
            )
        clusters = clusters.astype(np.int64, copy=False)
        if (
            clusters.ndim != 1
            or not clusters.size
            or clusters.min() < 0
            or clusters.max() >= num_parts
            # A repeated cluster's edges would all end in its last copy.
            or np.bincount(clusters, minlength=num_parts).max() > 1
        ):
            raise ValueError(
                f"cluster ids must be a non-empty 1-D list of distinct ids in [0, {num_parts}) "
                f"(got {clusters.tolist()})"
            )
        return self._collate(BatchRequest(index=clusters, seed=0))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _collate(self, request: BatchRequest) -> Data:
        """The batch of clusters ``request.index`` (int64 cluster ids, in batch order)."""
        p = self.cluster_data.partition
        clusters = np.asarray(request.index, dtype=np.int64)
        starts, ends = p.partptr[clusters], p.partptr[clusters + 1]
        sizes = ends - starts
        nodes = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
        # Where each chosen cluster's nodes land in the batch.
        batch_start = np.full(self.cluster_data.num_parts, -1, dtype=np.int64)
        batch_start[clusters] = np.cumsum(sizes) - sizes
        edges = np.concatenate(
            [np.arange(p.indptr[s], p.indptr[e]) for s, e in zip(starts, ends, strict=True)]
        )
        own = np.repeat(np.arange(nodes.shape[0], dtype=np.int64), np.diff(p.indptr)[nodes])
        other = p.index[edges]
        other_cluster = self._cluster_of[other]
        keep = batch_start[other_cluster] >= 0
        other = other[keep] - p.partptr[other_cluster[keep]] + batch_start[other_cluster[keep]]
        own, edges = own[keep], edges[keep]
        pair = (own, other) if p.sparse_format == "csr" else (other, own)
        return _subgraph(self.cluster_data.data, nodes, edges, pair)


def _partition(edge_index: np.ndarray, cluster: np.ndarray, num_parts: int, fmt: str) -> Partition:
    """Renumber nodes cluster by cluster and order the edges by (source, destination) for
    ``'csr'`` or (destination, source) for ``'csc'`` in the new ids, stably."""
    node_perm, orig_to_new, partptr = renumber(cluster, num_parts)
    row, col = orig_to_new[edge_index[0]], orig_to_new[edge_index[1]]
    first, second = (row, col) if fmt == "csr" else (col, row)
    edge_perm = np.lexsort((second, first)).astype(np.int64, copy=False)
    indptr = np.zeros(node_perm.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(first, minlength=node_perm.shape[0]), out=indptr[1:])
    return Partition(indptr, second[edge_perm], partptr, node_perm, edge_perm, fmt)


def _permute(data: Data, partition: Partition) -> Data:
    """``data``'s attributes in the partition's node and edge orders, without ``edge_index``."""
    return _sliced(data, partition.node_perm, partition.edge_perm)


def _subgraph(data: Data, nodes: np.ndarray, edges: np.ndarray, pair) -> Data:
    """The batch: ``data``'s (permuted) node attributes at ``nodes``, edge attributes at
    ``edges`` (positions in the partition's edge order), ``edge_index`` from ``pair``."""
    out = _sliced(data, nodes, edges)
    out.edge_index = torch.from_numpy(np.stack(pair).astype(np.int64, copy=False))
    return out


def _sliced(data: Data, nodes: np.ndarray, edges: np.ndarray) -> Data:
    """``data``'s node attributes at ``nodes`` and edge attributes at ``edges`` (int64), its
    other attributes as they are, no ``edge_index``."""
    out = Data()
    node_index, edge_index = torch.from_numpy(nodes), torch.from_numpy(edges)
    for key, value in data.items():
        if key in ("edge_index", "num_nodes"):
            continue
        if data.is_node_attr(key):
            out[key] = select_rows(value, data.__cat_dim__(key, value), node_index)
        elif data.is_edge_attr(key):
            out[key] = select_rows(value, data.__cat_dim__(key, value), edge_index)
        else:
            out[key] = value
    out.num_nodes = int(nodes.shape[0])
    return out


def _cache_key(graph: Graph, num_parts: int, recursive: bool, seed: int) -> str:
    """A digest of what METIS's clusters depend on: the graph's CSC arrays and the arguments."""
    arguments = {"num_nodes": graph.num_nodes, "num_parts": num_parts, "recursive": recursive}
    return cache_key({**arguments, "seed": seed}, graph.indptr, graph.indices)


def _read_clusters(path: Path, num_nodes: int, num_parts: int) -> np.ndarray | None:
    """The cached clusters of ``path`` (int64 ``[num_nodes]``, each in ``[0, num_parts)``), or
    ``None`` when there are none or they cannot be this graph's (logged)."""

    def why_not(saved: dict[str, np.ndarray]) -> str | None:
        cluster, saved_nodes = saved["cluster"], saved["num_nodes"]
        if saved_nodes.shape != () or saved_nodes != num_nodes:
            return f"num_nodes {saved_nodes}, expected {num_nodes}"
        if cluster.shape != (num_nodes,) or not np.issubdtype(cluster.dtype, np.integer):
            return f"cluster of {cluster.dtype} {cluster.shape}, expected integers ({num_nodes},)"
        if cluster.size and (cluster.min() < 0 or cluster.max() >= num_parts):
            return f"cluster ids in [{cluster.min()}, {cluster.max()}], expected [0, {num_parts})"
        return None

    saved = read_cached(path, ("cluster", "num_nodes"), why_not)
    return None if saved is None else saved["cluster"].astype(np.int64, copy=False)
