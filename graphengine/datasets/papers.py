"""``synthetic-papers``: a citation-like graph of ``2^scale`` nodes, written to disk in chunks.

Made for graphs larger than memory (ogbn-papers100M: 111M nodes, 1.6B edges, 128 float32
features, about 1.4% of the nodes labelled), so nothing of the size of the edges or features is
ever held in memory: the generator walks the destinations in chunks of :data:`CHUNK_NODES`,
draws each chunk's in-edges and features, and appends them to the store's files. Memory holds
the per-node arrays the draws need (about 30 bytes a node: weights, classes, the order by class,
the CSC pointers; at the end 16 more for the splits' permutation and the labels) and the few
chunks being drawn or waiting to be written (a thread each, about 80 MB a chunk).

The model is the one of :mod:`graphengine.datasets.synthetic` (degree-weighted random graph,
planted skewed classes, features ``centroid[class] + noise``), made streamable: node ``v``'s
in-degree is Poisson with mean ``mean_degree * w_v / mean(w)`` for a log-normal weight ``w_v``
(papers' long-tailed citation counts), and each of its in-edges comes from a source drawn by
weight, from ``v``'s class with probability ``homophily``. The graph is directed (a paper's
in-neighbors are its citers); self loops and repeated edges are dropped. Each chunk's draws come
from its own seed, so the data depend only on the spec.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from graphengine.data.format import NpyWriter, feature_rows
from graphengine.data.graph_store import write_graph_manifest
from graphengine.data.output_files import WriteError
from graphengine.datasets.dataset import GraphDataset, write_dataset_manifest
from graphengine.datasets.synthetic import draw_weighted

log = logging.getLogger(__name__)

CHUNK_NODES = 2**17  # destinations per chunk: part of the model (each chunk has its own seed)
MAX_SCALE = 30
_WORKERS = 4  # chunks drawn at once (at most the CPUs)
_SPEC_FILE = "spec.json"


@dataclass(frozen=True)
class PapersSpec:
    """One ``synthetic-papers`` graph: ``2^scale`` nodes; the fractions are of all nodes."""

    scale: int
    num_features: int = 128
    num_classes: int = 172
    mean_degree: float = 14.5
    degree_sigma: float = 1.2
    homophily: float = 0.7
    noise: float = 4.0
    train_fraction: float = 0.011
    val_fraction: float = 0.0011
    test_fraction: float = 0.0019
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.scale, bool) or not isinstance(self.scale, int):
            raise ValueError(f"'scale' must be an int (got {self.scale!r})")
        if not 10 <= self.scale <= MAX_SCALE:
            raise ValueError(f"'scale' must be in [10, {MAX_SCALE}] (got {self.scale})")

    @property
    def num_nodes(self) -> int:
        return 2**self.scale

    def disk_bytes(self) -> int:
        """About how many bytes the store takes (the edges are drawn, so not exactly)."""
        n = self.num_nodes
        index_bytes = 4 if n <= np.iinfo(np.int32).max else 8
        edges = int(n * self.mean_degree * index_bytes)
        splits = int(n * (self.train_fraction + self.val_fraction + self.test_fraction)) * 8
        return (n + 1) * 8 + edges + n * self.num_features * 4 + n * 8 + splits


def store_name(scale: int) -> str:
    """The folder under the data root of the ``synthetic-papers`` graph of ``scale``."""
    return f"synthetic-papers-s{scale}"


def write_papers(
    spec: PapersSpec, path: str | Path, progress: bool = False, feature_dtype: str = "float32"
) -> GraphDataset:
    """Generate ``spec``'s graph into ``path`` (the layout :meth:`GraphDataset.load` opens) and
    open it memory-mapped, its features in ``feature_dtype`` (float32, or float16: half the
    bytes a row, drawn as float32 and rounded). The manifests are written last, so an
    interrupted run leaves a folder that does not open and is generated again.

    Raises :class:`~graphengine.data.output_files.WriteError` (an ``OSError``) when the disk
    lacks :meth:`PapersSpec.disk_bytes` (checked first).
    """
    path = Path(path)
    (path / "graph").mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path).free
    edge_bytes = int(spec.num_nodes * spec.mean_degree * 8)  # the edges are copied at the end
    if free < spec.disk_bytes() * 1.05 + edge_bytes:
        raise WriteError(
            f"synthetic-papers at scale {spec.scale} needs about {spec.disk_bytes() / 1e9:.1f} GB "
            f"on disk (and {edge_bytes / 1e9:.1f} GB more while written); '{path}' has "
            f"{free / 1e9:.1f} GB free"
        )
    n, c = spec.num_nodes, spec.num_classes
    rng = np.random.default_rng([spec.seed, 2**32])  # the per-node draws; chunks use [seed, k]
    class_weight = 1.0 / np.arange(1, c + 1) ** 0.7
    y = rng.choice(c, size=n, p=class_weight / class_weight.sum()).astype(np.int16)
    tables = _node_tables(rng, spec, y)
    centroid = rng.normal(size=(c, spec.num_features)).astype(np.float32)
    _write_graph_and_features(spec, path, tables, centroid, progress, feature_dtype)
    del tables  # the splits below need the memory

    order = rng.permutation(n)
    bounds = np.cumsum(
        [int(n * f) for f in (spec.train_fraction, spec.val_fraction, spec.test_fraction)]
    )
    splits = {
        "train_idx": np.sort(order[: bounds[0]]),
        "val_idx": np.sort(order[bounds[0] : bounds[1]]),
        "test_idx": np.sort(order[bounds[1] : bounds[2]]),
    }
    (path / _SPEC_FILE).write_text(json.dumps(asdict(spec), indent=2) + "\n")
    write_dataset_manifest(
        path,
        "synthetic-papers",
        c,
        {"y": y.astype(np.int64), **splits},
        (feature_dtype, [n, spec.num_features]),
    )
    return GraphDataset.load(path)


def _node_tables(rng, spec: PapersSpec, y: np.ndarray) -> _NodeTables:
    """Each node's weight (log-normal, mean 1), drawn from ``rng``, and the tables the edge
    draws search."""
    weight = np.exp(rng.normal(0.0, spec.degree_sigma, size=y.shape[0])).astype(np.float32)
    weight *= np.float32(1.0 / weight.mean())
    by_class = np.argsort(y, kind="stable")
    cum_weight = np.cumsum(weight[by_class], dtype=np.float64)
    class_end = np.searchsorted(y[by_class], np.arange(spec.num_classes + 1), side="left")
    class_lo = np.where(class_end[:-1] > 0, cum_weight[class_end[:-1] - 1], 0.0)
    class_hi = cum_weight[np.maximum(class_end[1:] - 1, 0)]
    return _NodeTables(y, weight, by_class, cum_weight, class_lo, class_hi)


def _write_graph_and_features(
    spec: PapersSpec,
    path: Path,
    tables: _NodeTables,
    centroid: np.ndarray,
    progress: bool,
    feature_dtype: str,
) -> None:
    """Draw the chunks on a thread pool and write them in order: ``x.npy`` and the graph
    (``graph/``)."""
    n, y = spec.num_nodes, tables.y
    index_dtype = np.dtype(np.int32 if n <= np.iinfo(np.int32).max else np.int64)

    def chunk(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Chunk ``k``'s in-degrees, sources (``index_dtype``) and features, from its seed."""
        start, end = k * CHUNK_NODES, min((k + 1) * CHUNK_NODES, n)
        chunk_rng = np.random.default_rng([spec.seed, k])
        targets, sources = _chunk_edges(chunk_rng, spec, start, end, tables)
        x = chunk_rng.standard_normal(size=(end - start, spec.num_features), dtype=np.float32)
        x *= np.float32(spec.noise)
        x += centroid[y[start:end]]
        return np.bincount(targets, minlength=end - start), sources.astype(index_dtype), x

    indptr = np.zeros(n + 1, dtype=np.int64)
    raw_indices = path / "graph" / "indices.raw"
    num_chunks = -(-n // CHUNK_NODES)
    workers = max(1, min(_WORKERS, os.cpu_count() or 1))
    with (
        open(raw_indices, "wb") as edges_file,
        NpyWriter(path / "x.npy", feature_dtype, (n, spec.num_features)) as features,
        ThreadPoolExecutor(workers) as pool,  # NumPy's sorts and draws release the GIL
    ):

        def in_order():
            """The chunks' results in order, ``workers`` drawn ahead."""
            pending: deque = deque()
            for k in range(num_chunks):
                pending.append(pool.submit(chunk, k))
                if len(pending) > workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

        results = tqdm(in_order(), "synthetic-papers", num_chunks, disable=not progress)
        for k, (degree, sources, x) in enumerate(results):
            first, last = k * CHUNK_NODES, k * CHUNK_NODES + degree.shape[0]
            indptr[first + 1 : last + 1] = indptr[first] + np.cumsum(degree)
            edges_file.write(sources.tobytes())
            features.write(feature_rows(x, feature_dtype, path / "x.npy", first).tobytes())
    num_edges = int(indptr[-1])
    with (
        open(raw_indices, "rb") as source,
        NpyWriter(path / "graph" / "indices.npy", index_dtype, (num_edges,)) as target,
    ):
        shutil.copyfileobj(source, target, 2**22)
    raw_indices.unlink()
    np.save(path / "graph" / "indptr.npy", indptr)
    write_graph_manifest(path / "graph", n, num_edges, index_dtype)


@dataclass(frozen=True)
class _NodeTables:
    """The per-node arrays every chunk's edge draws read (see :func:`write_papers`)."""

    y: np.ndarray  # int16 [n] classes
    weight: np.ndarray  # float32 [n], mean 1
    by_class: np.ndarray  # int64 [n]: node ids sorted by class
    cum_weight: np.ndarray  # float64 [n]: cumulative weights in that order
    class_lo: np.ndarray  # float64 [classes]: each class's range of cum_weight
    class_hi: np.ndarray


def _chunk_edges(rng, spec: PapersSpec, start: int, end: int, tables: _NodeTables):
    """The in-edges of destinations ``[start, end)``: int64 ``(targets - start, sources)``,
    sorted by target, then source; no self loops, no repeats."""
    degree = rng.poisson(spec.mean_degree * tables.weight[start:end])
    targets = np.repeat(np.arange(end - start, dtype=np.int64), degree)
    count = targets.shape[0]
    same = rng.random(count) < spec.homophily
    target_class = tables.y[start + targets]
    cum_weight = tables.cum_weight
    lo = np.where(same, tables.class_lo[target_class], 0.0)
    hi = np.where(same, tables.class_hi[target_class], cum_weight[-1])
    sources = tables.by_class[draw_weighted(rng, cum_weight, lo, hi, count)]
    n = np.int64(cum_weight.shape[0])
    kept = sources != start + targets
    return np.divmod(np.unique(targets[kept] * n + sources[kept]), n)
