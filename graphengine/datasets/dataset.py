"""A node-classification dataset: graph, features, labels and splits, saved as ``.npy`` files."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.data.arrays import memmap_source
from graphengine.data.disk_io import advise, is_mapped
from graphengine.data.disk_table import DiskTable
from graphengine.data.feature_store import FeatureStore
from graphengine.data.format import (
    FEATURE_DTYPES,
    array_listing,
    check_feature_dtype,
    is_inside,
    load_listed,
    manifest_count,
    manifest_string,
    read_manifest,
    save_arrays,
    write_manifest,
)
from graphengine.data.graph_store import Graph
from graphengine.data.out_of_core import cache_budget_for_process, plan_for_process
from graphengine.data.row_file import check_read_options
from samplers import check_node_ids

log = logging.getLogger("graphengine")

FORMAT = "graphengine.dataset"
FORMAT_VERSION = 1
MANIFEST = "dataset.json"
SPLITS = ("train", "val", "test")
ARRAYS = ("x", "y", *(f"{split}_idx" for split in SPLITS))  # the .npy files of a store
CACHE_POLICIES = ("static", "sieve")
#: The row cache's policy by default: for shuffled node-wise training, which reads each row at a
#: steady rate, the in-degree seed kept for good missed fewer rows than SIEVE seeded with it
#: (``graphengine bench cache``; figures in docs/benchmarks.md).
DEFAULT_CACHE_POLICY = "static"
#: How feature rows are read (``--feature-reads``): chosen by size, from disk, or by page faults.
FEATURE_READS = ("auto", "disk", "mmap")


@dataclass
class GraphDataset:
    """A graph with node features, labels and a train/val/test split.

    Attributes:
        name: catalog name or file stem.
        graph: the CSC graph store.
        x: float32 or float16 ``[num_nodes, num_features]`` (a numpy array or a read-only
            memmap); loaders hand a float16 table's rows over as float32.
        y: int64 ``[num_nodes]`` class labels in ``[0, num_classes)``, or -1 for an
            unlabelled node outside the splits (papers100M has them); checked on construction
            (:func:`check_labels`).
        train_idx, val_idx, test_idx: int64 node ids of each split.
        num_classes: number of classes.
        access: how batches read the memory maps (:meth:`advise`); ``"random"`` also makes
            :meth:`feature_store` prefetch each gather's rows.

    A store opened memory-mapped whose arrays take more than half the memory the process
    may use has its ``x`` rows read from disk through a host row cache
    (:meth:`read_from_disk`), decided at the first :meth:`feature_store`
    (:meth:`reads_from_disk`).
    """

    name: str
    graph: Graph
    x: np.ndarray
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    num_classes: int
    access: str = "normal"
    _disk_options: dict | None = field(default=None, init=False, repr=False, compare=False)
    _disk_table: DiskTable | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        n = self.graph.num_nodes
        if self.x.ndim != 2 or self.x.shape[0] != n:
            raise ValueError(f"'x' must have shape [{n}, num_features] (got {self.x.shape})")
        check_features(self.name, "'x'", self.x)
        if self.y.shape != (n,):
            raise ValueError(f"'y' must have shape [{n}] (got {self.y.shape})")
        for split in SPLITS:
            setattr(self, f"{split}_idx", check_node_ids(getattr(self, f"{split}_idx"), n, split))
        check_labels(self.name, self.y, self.num_classes, {s: self.split(s) for s in SPLITS})

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def split(self, name: str) -> np.ndarray:
        """The node ids of split ``name`` (``'train'``, ``'val'`` or ``'test'``)."""
        if name not in SPLITS:
            raise ValueError(f"'split' must be one of {SPLITS} (got {name!r})")
        return getattr(self, f"{name}_idx")

    def advise(self, access: str) -> list[str]:
        """Tell the kernel how the memory-mapped arrays that batches read at random (``x``,
        the graph's ``indices`` and ``indptr``) will be read: ``"normal"``, ``"random"`` (no
        read-ahead) or ``"sequential"`` (:func:`graphengine.data.disk_io.advise`). Returns the
        names of those that are memory-mapped and were advised."""
        arrays = {"x": self.x, "indices": self.graph.indices, "indptr": self.graph.indptr}
        advised = [name for name, array in arrays.items() if advise(array, access)]
        self.access = access
        return advised

    def feature_store(self) -> FeatureStore:
        """``x`` and ``y`` as the :class:`~graphengine.data.feature_store.FeatureStore` loaders
        gather from. ``x``'s rows come from disk through the dataset's one host row cache
        when :meth:`disk_table` says so; otherwise, after ``advise("random")``, a
        memory-mapped ``x`` has each gather's rows read ahead of it in one go
        (:meth:`FeatureStore.prefetch_`), which turning read-ahead off needs to read a batch
        from disk quickly."""
        store = FeatureStore({"x": self.x, "y": self.y})
        table = self.disk_table()
        if table is not None:
            store.read_from_disk_("x", table)
        elif self.access == "random":
            store.prefetch_("x")
        return store

    def read_from_disk(
        self,
        enabled: bool = True,
        *,
        cache_bytes: int | None = None,
        policy: str = DEFAULT_CACHE_POLICY,
        engine: str = "auto",
        direct: str | bool = "auto",
    ) -> None:
        """Read ``x``'s rows from disk (``enabled``) through a host row cache seeded with
        the highest in-degree rows, or (``enabled=False``) through the memory map, in every
        :meth:`feature_store` made from now on; they all share one cache, made at the first.

        Args:
            cache_bytes: the cache's budget; ``None``: sized from the memory this process
                may use (:func:`~graphengine.data.out_of_core.cache_budget`).
            policy: ``"static"`` (keeps the seeded rows) or ``"sieve"`` (admits the rows
                batches read, evicting by SIEVE).
            engine, direct: how rows are read (:class:`~graphengine.data.row_file.RowFile`).

        Raises ``TypeError`` for an ``enabled`` that is not a bool; ``ValueError`` for an
        ``x`` that is not a memory-mapped file, or a bad ``cache_bytes``, ``policy``,
        ``engine`` or ``direct`` (checked here, not at the first read of a row).
        """
        if not isinstance(enabled, bool):
            raise TypeError(
                f"read_from_disk: 'enabled' must be True or False (got {enabled!r}); a truthy "
                "value such as 'no' would turn disk reads on"
            )
        check_read_options(engine, direct, "read_from_disk")
        if enabled and memmap_source(self.x) is None:
            raise ValueError(
                f"'x' of dataset '{self.name}' is not a memory-mapped file (open the store "
                "with load_dataset(path) or GraphDataset.load); only such features can be "
                "read from disk"
            )
        if cache_bytes is not None and (
            isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0
        ):
            raise ValueError(f"'cache_bytes' must be an int >= 0 or None (got {cache_bytes!r})")
        if policy not in CACHE_POLICIES:
            raise ValueError(f"'policy' must be one of {CACHE_POLICIES} (got {policy!r})")
        self._disk_options = {
            "enabled": enabled,
            "cache_bytes": cache_bytes,
            "policy": policy,
            "engine": engine,
            "direct": direct,
        }
        self._disk_table = None

    def reads_from_disk(self) -> bool:
        """Whether ``x``'s rows are read from disk: as :meth:`read_from_disk` chose, else
        decided (once, logged with its reason) by the store's size against the memory this
        process may use (:func:`~graphengine.data.out_of_core.plan_features`); a store read
        from disk also has read-ahead turned off on the graph's memory maps, which the
        sampler reads at random."""
        if self._disk_options is None:
            plan = plan_for_process(self._mapped_feature_bytes(), self._mapped_graph_bytes())
            log.info("features of %s: %s", self.name, plan.reason)
            if plan.from_disk:
                self.read_from_disk(cache_bytes=plan.cache_bytes)
                for array in (self.graph.indices, self.graph.indptr):
                    advise(array, "random")
            else:
                self.read_from_disk(False)
        return bool(self._disk_options["enabled"])

    def disk_options(self) -> dict:
        """How ``x`` is read (:meth:`read_from_disk`'s arguments, decided by
        :meth:`reads_from_disk` when not given): ``enabled``, ``cache_bytes``, ``policy``,
        ``engine``, ``direct``."""
        self.reads_from_disk()
        return dict(self._disk_options)

    def disk_table(self) -> DiskTable | None:
        """The :class:`~graphengine.data.disk_table.DiskTable` ``x``'s rows are read through
        (made at the first call, its cache then seeded from disk), or ``None`` when
        :meth:`reads_from_disk` is false."""
        if not self.reads_from_disk():
            return None
        if self._disk_table is None:
            options = self._disk_options
            cache_bytes = options["cache_bytes"]
            if cache_bytes is None:
                cache_bytes = cache_budget_for_process(
                    self._mapped_feature_bytes(), self._mapped_graph_bytes()
                )
                options["cache_bytes"] = cache_bytes
            row_bytes = self.num_features * self.x.dtype.itemsize
            self._disk_table = DiskTable(
                memmap_source(self.x)[0],
                cache_rows=min(cache_bytes // max(row_bytes, 1), self.num_nodes),
                ranking=self.graph.in_degree(),
                policy=options["policy"],
                engine=options["engine"],
                direct=options["direct"],
            )
            log.info(
                "reading x of %s from disk (%s, %s) through a %s row cache of %d rows (%.2f GiB)",
                self.name,
                self._disk_table.file.engine,
                "direct I/O" if self._disk_table.file.direct else "buffered",
                options["policy"],
                self._disk_table.cache.capacity,
                self._disk_table.cache.nbytes / (1 << 30),
            )
        return self._disk_table

    def __getstate__(self) -> dict:
        # Another process makes its own disk table (and cache) from the same file.
        return {**self.__dict__, "_disk_table": None}

    def _mapped_feature_bytes(self) -> int:
        return int(self.x.nbytes) if is_mapped(self.x) else 0

    def _mapped_graph_bytes(self) -> int:
        arrays = (self.graph.indices, self.graph.indptr)
        return sum(int(a.nbytes) for a in arrays if is_mapped(a))

    def normalize_features(self) -> GraphDataset:
        """A copy whose feature rows each sum to one (all-zero rows stay zero), as PyG's
        ``NormalizeFeatures``; the features are read into memory as float32."""
        x = np.array(self.x, dtype=np.float32)
        sums = x.sum(axis=1, keepdims=True)
        np.divide(x, sums, out=x, where=sums != 0)
        return dataclasses.replace(self, x=x)

    def to_data(self) -> Data:
        """A PyG ``Data`` with ``x``, ``y``, ``edge_index`` and boolean split masks."""
        data = Data(
            x=torch.from_numpy(np.array(self.x, dtype=np.float32)),
            y=torch.from_numpy(np.array(self.y, dtype=np.int64)),
            edge_index=self.graph.to_edge_index(),
            num_nodes=self.num_nodes,
        )
        for split in SPLITS:
            mask = torch.zeros(self.num_nodes, dtype=torch.bool)
            mask[torch.from_numpy(np.array(self.split(split)))] = True
            data[f"{split}_mask"] = mask
        return data

    def __repr__(self) -> str:
        return (
            f"GraphDataset('{self.name}', num_nodes={self.num_nodes}, "
            f"num_edges={self.graph.num_edges}, num_features={self.num_features}, "
            f"num_classes={self.num_classes}, train/val/test="
            f"{len(self.train_idx)}/{len(self.val_idx)}/{len(self.test_idx)})"
        )

    def save(self, path: str | Path) -> None:
        """Write the dataset under ``path``: ``graph/``, an ``.npy`` per array, ``dataset.json``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.graph.save(path / "graph")
        fields = {"name": self.name, "num_classes": self.num_classes}
        save_arrays(path, MANIFEST, FORMAT, FORMAT_VERSION, self._arrays(), fields)

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> GraphDataset:
        """Open a dataset written by :meth:`save`, memory-mapped unless ``mmap=False``.

        Raises ``FileNotFoundError`` for a missing dataset or file, ``ValueError`` naming the
        manifest or file for a manifest of another format or with a malformed field, a file
        name leading outside the store, features neither float32 nor float16, a split listing a
        node twice, or a truncated or mismatched array.
        """
        path = Path(path)
        manifest_path = path / MANIFEST
        keys = ("name", "num_classes", "arrays")
        manifest = read_manifest(path, MANIFEST, FORMAT, FORMAT_VERSION, "dataset", keys)
        name = manifest_string(manifest, "name", manifest_path)
        num_classes = manifest_count(manifest, "num_classes", manifest_path, minimum=1)
        listing = array_listing(manifest, manifest_path, ARRAYS)
        check_feature_dtype(path / "x.npy", listing["x"][0], manifest_path)
        arrays = load_listed(path, manifest_path, listing, mmap)
        for split in SPLITS:
            check_distinct_ids(arrays[f"{split}_idx"], path / f"{split}_idx.npy")
        if not is_inside(path / "graph", path):
            raise ValueError(
                f"the graph folder '{path / 'graph'}' leads outside '{path}'; a store's files "
                "must lie inside its folder"
            )
        graph = Graph.load(path / "graph", mmap=mmap)
        try:
            return cls(name=name, graph=graph, num_classes=num_classes, **arrays)
        except (TypeError, ValueError) as error:
            raise ValueError(f"corrupt dataset '{manifest_path}': {error}") from None

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "x": self.x,
            "y": self.y,
            "train_idx": self.train_idx,
            "val_idx": self.val_idx,
            "test_idx": self.test_idx,
        }


def choose_feature_reads(dataset: GraphDataset, reads: str, policy: str) -> None:
    """``reads`` (one of :data:`FEATURE_READS`) and the cache ``policy`` on ``dataset``:
    ``"disk"`` and ``"mmap"`` force the choice that ``"auto"`` leaves to
    :meth:`GraphDataset.reads_from_disk`."""
    if reads not in FEATURE_READS:
        raise ValueError(f"'reads' must be one of {FEATURE_READS} (got {reads!r})")
    if reads == "disk":
        dataset.read_from_disk(policy=policy)
    elif reads == "mmap":
        dataset.read_from_disk(False)
    elif policy != DEFAULT_CACHE_POLICY and dataset.reads_from_disk():
        dataset.read_from_disk(policy=policy)


def check_features(name: str, what: str, x: np.ndarray) -> None:
    """Refuse the features ``what`` of dataset ``name`` unless they are float32 or float16,
    as a store's manifest must list them (:func:`~graphengine.data.format.check_feature_dtype`):
    a dataset built in memory with other features would train into torch's dtype mismatch
    inside the first layer, or save a store that cannot be opened again."""
    if str(x.dtype) not in FEATURE_DTYPES:
        raise ValueError(
            f"{what} of dataset '{name}' must be one of {', '.join(FEATURE_DTYPES)} (got "
            f"{x.dtype}): convert it with x.astype(np.float32)"
        )


def check_labels(name: str, y: np.ndarray, num_classes: int, splits: dict) -> None:
    """Refuse labels that would fail inside the loss, as an index error naming no dataset: ``y``
    must hold integers in ``[0, num_classes)``, or -1 (unlabelled) at nodes of no split
    (``splits``: split name -> int64 node ids). One pass over ``y`` and over each split.

    Raises ``TypeError`` for non-integer labels, ``ValueError`` naming dataset ``name``, the
    label and the range otherwise.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer):
        raise TypeError(
            f"'num_classes' of dataset '{name}' must be an integer (got {num_classes!r})"
        )
    if num_classes < 1:
        raise ValueError(f"'num_classes' of dataset '{name}' must be >= 1 (got {num_classes})")
    if not np.issubdtype(y.dtype, np.integer):
        raise TypeError(f"'y' of dataset '{name}' must hold integer labels (got dtype {y.dtype})")
    if y.size:
        low, high = int(y.min()), int(y.max())
        if low < -1 or high >= num_classes:
            raise ValueError(
                f"dataset '{name}' holds label {low if low < -1 else high}, outside "
                f"[0, {num_classes}) (-1 marks an unlabelled node)"
            )
    for split, ids in splits.items():
        labels = y[ids]
        if labels.size and labels.min() < 0:
            node = int(ids[np.argmax(labels < 0)])
            raise ValueError(
                f"dataset '{name}': {split} node {node} has label -1 (unlabelled); the nodes "
                f"of a split need a label in [0, {num_classes})"
            )


def check_distinct_ids(ids: np.ndarray, path: Path) -> None:
    """Refuse a split (the file ``path``) listing a node twice: it would count twice in the
    loss and the accuracy. One sort of a copy of ``ids``.

    Raises ``ValueError`` naming the file and one repeated id.
    """
    ordered = np.sort(np.asarray(ids))
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.size:
        raise ValueError(
            f"'{path}' lists node {int(repeated[0])} more than once, expected each node of a "
            "split once"
        )


def write_dataset_manifest(
    path: Path,
    name: str,
    num_classes: int,
    arrays: dict[str, np.ndarray],
    x_listing: tuple[str, list[int]],
    **fields,
) -> None:
    """Save ``arrays`` (``y`` and the splits) as ``.npy`` files in ``path`` beside an ``x.npy``
    (and ``graph/``) a streaming writer made, whose dtype and shape are ``x_listing``; then
    ``dataset.json`` with ``fields``, last, as it marks the dataset complete."""
    for key, array in arrays.items():
        np.save(path / f"{key}.npy", array)
    listing = {key: [str(a.dtype), list(a.shape)] for key, a in arrays.items()}
    listing["x"] = [x_listing[0], list(x_listing[1])]
    fields = {"name": name, "num_classes": num_classes, **fields, "arrays": listing}
    write_manifest(path / MANIFEST, FORMAT, FORMAT_VERSION, fields)
