"""OGB node-property datasets from the files the ``ogb`` package leaves on disk, converted once.

``PygNodePropPredDataset(name, root)`` keeps ``<root>/ogbn_<name>/raw/`` (``edge.csv.gz``,
``node-feat.csv.gz``, ``node-label.csv.gz``, ``num-node-list.csv.gz``; for papers100M the
binary ``data.npz`` and ``node-label.npz``) and ``<root>/ogbn_<name>/split/<scheme>/{train,
valid,test}.csv.gz``. :func:`convert_ogb` turns them into graphengine's dataset layout under
``<root>/<name>/`` (CSC graph, ``x.npy``, ``y.npy``, splits), which then opens memory-mapped.

Nothing is held whole: the CSV files are read in blocks of :data:`BLOCK_BYTES`, parsed by
NumPy; the CSC is built in two passes over the edges (in-degrees, then each edge written at its
destination's next free slot of the memory-mapped ``indices.npy``), so memory holds the
per-node counts, pointers and slots (about 24 bytes a node) and one block. The graph is the
one OGB's loaders build: for ogbn-products its ``add_inverse_edge`` (each edge followed by its
reverse); arxiv and papers100M stay directed. Edges into a node keep that order. Unlabelled
nodes (papers100M's NaN labels) get label -1.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import logging
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from graphengine.data.files import check_regular_file
from graphengine.data.format import (
    FEATURE_DTYPES,
    NpyWriter,
    feature_rows,
    open_allocated_memmap,
    read_npz,
)
from graphengine.data.graph_store import write_graph_manifest
from graphengine.datasets.dataset import (
    GraphDataset,
    check_distinct_ids,
    check_labels,
    write_dataset_manifest,
)

log = logging.getLogger(__name__)

BLOCK_BYTES = 2**26
_WHERE = (
    "get them with the ogb package (`pip install ogb`; PygNodePropPredDataset(name={name!r}, "
    "root=ROOT) downloads and unpacks them) or from https://ogb.stanford.edu/docs/nodeprop/"
)


@dataclass(frozen=True)
class OgbInfo:
    """What graphengine needs to know of one OGB node-property dataset."""

    folder: str  # under the root, as the ogb package names it
    split: str  # the split scheme's folder
    num_classes: int
    add_inverse_edge: bool
    binary: bool  # data.npz and node-label.npz instead of CSV files


OGB = {
    "ogbn-arxiv": OgbInfo("ogbn_arxiv", "time", 40, add_inverse_edge=False, binary=False),
    "ogbn-products": OgbInfo(
        "ogbn_products", "sales_ranking", 47, add_inverse_edge=True, binary=False
    ),
    "ogbn-papers100M": OgbInfo("ogbn_papers100M", "time", 172, add_inverse_edge=False, binary=True),
}


def raw_files(name: str, root: Path) -> list[Path]:
    """The OGB files :func:`convert_ogb` reads for ``name`` under ``root``."""
    info = OGB[name]
    raw, split = root / info.folder / "raw", root / info.folder / "split" / info.split
    if info.binary:
        files = [raw / "data.npz", raw / "node-label.npz"]
    else:
        names = ("num-node-list", "edge", "node-feat", "node-label")
        files = [raw / f"{n}.csv.gz" for n in names]
    return files + [split / f"{s}.csv.gz" for s in ("train", "valid", "test")]


def convert_ogb(
    name: str, root: str | Path, progress: bool = False, feature_dtype: str = "float32"
) -> GraphDataset:
    """Convert OGB dataset ``name`` (a key of :data:`OGB`) from its files under ``root`` into
    ``root / name`` and open it memory-mapped. The manifests are written last: an interrupted
    conversion leaves a store that does not open. ``feature_dtype``: float32, or float16 for
    half the bytes a row (:func:`~graphengine.data.format.feature_rows`: a value beyond
    float16's range is refused).

    Raises:
        FileNotFoundError: a file is missing (its expected path, and where to get it).
        ValueError: a file that is not a regular file (a FIFO, a directory), a malformed or
            truncated file (the file, and the line for CSV files), or node ids outside
            ``[0, num_nodes)``.
    """
    if name not in OGB:
        raise ValueError(f"unknown OGB dataset {name!r}: expected one of {sorted(OGB)}")
    if feature_dtype not in FEATURE_DTYPES:
        raise ValueError(
            f"'feature_dtype' must be one of {', '.join(FEATURE_DTYPES)} (got {feature_dtype!r})"
        )
    root = Path(root)
    files = raw_files(name, root)
    missing = []
    for file in files:  # a FIFO or a directory is named as such, not as missing
        try:
            check_regular_file(file, f"{name} file")
        except FileNotFoundError:
            missing.append(str(file))
    if missing:
        raise FileNotFoundError(
            f"{name}: missing {', '.join(missing)}; " + _WHERE.format(name=name)
        )
    info, out = OGB[name], root / name
    (out / "graph").mkdir(parents=True, exist_ok=True)
    source = _BinarySource(files[0]) if info.binary else _CsvSource(files[:3])
    num_nodes = source.num_nodes()
    log.info("%s: %d nodes; building the CSC", name, num_nodes)
    num_edges = _write_csc(source, num_nodes, info.add_inverse_edge, out / "graph", progress)
    log.info("%s: %d edges; writing the features", name, num_edges)
    num_features = source.write_features(out / "x.npy", num_nodes, feature_dtype)
    labels = _read_labels(files[1] if info.binary else files[3], info.binary, num_nodes)
    splits = {
        key: _ids(read_csv(path, np.int64, 1)[:, 0], num_nodes, path)
        for key, path in zip(("train_idx", "val_idx", "test_idx"), files[-3:], strict=True)
    }
    for key, path in zip(splits, files[-3:], strict=True):
        check_distinct_ids(splits[key], path)
    # Before the manifest: a store with bad labels would be complete, and refused at each load.
    check_labels(name, labels, info.num_classes, {k[: -len("_idx")]: v for k, v in splits.items()})
    write_dataset_manifest(
        out,
        name,
        info.num_classes,
        {"y": labels, **splits},
        (feature_dtype, [num_nodes, num_features]),
    )
    return GraphDataset.load(out)


def _write_csc(source, num_nodes: int, add_inverse_edge: bool, out: Path, progress) -> int:
    """The CSC of the source's edges in two passes over them: in-degrees, then each edge at its
    destination's next free slot. With ``add_inverse_edge``, each edge is followed by its
    reverse, as OGB's ``read_csv_graph_raw`` interleaves them (``[e0, rev(e0), e1, ...]``)."""
    degree = np.zeros(num_nodes, dtype=np.int64)
    for src, dst in source.edges(progress, "counting edges"):
        _ids(src, num_nodes, source.path)
        _ids(dst, num_nodes, source.path)
        for ends in (dst, src) if add_inverse_edge else (dst,):
            nodes, counts = np.unique(ends, return_counts=True)  # O(block), not O(nodes)
            degree[nodes] += counts
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    del degree
    num_edges = int(indptr[-1])
    dtype = np.int32 if num_nodes <= np.iinfo(np.int32).max else np.int64
    indices = open_allocated_memmap(out / "indices.npy", dtype, (num_edges,))
    free = indptr[:-1].copy()  # each destination's next slot
    for src, dst in source.edges(progress, "writing edges"):
        if add_inverse_edge:
            src, dst = np.column_stack([src, dst]).ravel(), np.column_stack([dst, src]).ravel()
        _place(indices, free, src, dst)
    indices.flush()
    del indices
    np.save(out / "indptr.npy", indptr)
    write_graph_manifest(out, num_nodes, num_edges, dtype)
    return num_edges


def _place(indices: np.ndarray, free: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    """Write ``src`` at the next free slots of their ``dst`` (in block order), advancing
    ``free``."""
    order = np.argsort(dst, kind="stable")
    dst, src = dst[order], src[order]
    starts = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
    counts = np.diff(np.r_[starts, dst.shape[0]])
    rank = np.arange(dst.shape[0]) - np.repeat(starts, counts)
    indices[free[dst] + rank] = src
    free[dst[starts]] += counts


def _ids(ids: np.ndarray, num_nodes: int, path: Path) -> np.ndarray:
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        bad = ids[(ids < 0) | (ids >= num_nodes)][0]
        raise ValueError(f"'{path}' holds node id {bad}, outside [0, {num_nodes})")
    return ids


class _CsvSource:
    """``num-node-list.csv.gz``, ``edge.csv.gz`` and ``node-feat.csv.gz``."""

    def __init__(self, files: list[Path]):
        self.node_list, self.edge_file, self.feature_file = files
        self.path = self.edge_file

    def num_nodes(self) -> int:
        counts = read_csv(self.node_list, np.int64, 1)
        if counts.shape[0] != 1:
            raise ValueError(f"'{self.node_list}' must hold one count (got {counts.shape[0]})")
        return _node_count(counts[0], self.node_list)

    def edges(self, progress: bool, what: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for block in tqdm(csv_blocks(self.edge_file, np.int64, 2), desc=what, disable=not progress):
            yield block[:, 0], block[:, 1]

    def write_features(self, path: Path, num_nodes: int, dtype: str) -> int:
        blocks = csv_blocks(self.feature_file, np.float32, None)
        first = next(blocks, np.zeros((0, 0), np.float32))
        rows = 0
        with NpyWriter(path, dtype, (num_nodes, first.shape[1])) as out:
            for block in itertools.chain([first], blocks):
                if rows + block.shape[0] > num_nodes:
                    raise ValueError(f"'{self.feature_file}' has more than {num_nodes} rows")
                out.write(feature_rows(block, dtype, self.feature_file, rows).tobytes())
                rows += block.shape[0]
            if rows != num_nodes:
                raise ValueError(f"'{self.feature_file}' has {rows} rows, expected {num_nodes}")
        return first.shape[1]


class _BinarySource:
    """papers100M's ``data.npz``: ``num_nodes_list``, ``edge_index`` int ``[2, E]``,
    ``node_feat`` ``[N, F]``, read from the archive in blocks."""

    def __init__(self, path: Path):
        self.path = path

    def _member(self, key: str, stack: contextlib.ExitStack):
        """The open ``key.npy`` member (closed with ``stack``), its shape and dtype (after the
        header)."""
        try:
            archive = stack.enter_context(zipfile.ZipFile(self.path))
            member = stack.enter_context(archive.open(f"{key}.npy"))
        except KeyError:
            raise ValueError(f"'{self.path}' has no array {key!r}") from None
        except zipfile.BadZipFile as error:
            raise ValueError(f"'{self.path}' is not a readable .npz archive ({error})") from None
        if np.lib.format.read_magic(member) == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
        if fortran:
            raise ValueError(f"'{self.path}': {key!r} is in Fortran order; expected C order")
        return member, shape, dtype

    def num_nodes(self) -> int:
        with contextlib.ExitStack() as stack:
            member, shape, dtype = self._member("num_nodes_list", stack)
            _check_kind("num_nodes_list", shape, dtype, "iu", "integers", self.path)
            counts = _read(member, dtype, int(np.prod(shape)), self.path)
            return _node_count(counts, self.path, "'num_nodes_list' in ")

    def edges(self, progress: bool, what: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        with contextlib.ExitStack() as stack:
            sources, shape, dtype = self._member("edge_index", stack)
            targets, _, _ = self._member("edge_index", stack)
            if len(shape) != 2 or shape[0] != 2:
                raise ValueError(f"'{self.path}': edge_index must be [2, E] (got {shape})")
            _check_kind("edge_index", shape, dtype, "iu", "integer node ids", self.path)
            num_edges, step = shape[1], BLOCK_BYTES // dtype.itemsize
            _skip(targets, num_edges * dtype.itemsize, self.path)
            for start in tqdm(range(0, num_edges, step), desc=what, disable=not progress):
                count = min(step, num_edges - start)
                yield (
                    _read(sources, dtype, count, self.path),
                    _read(targets, dtype, count, self.path),
                )

    def write_features(self, path: Path, num_nodes: int, feature_dtype: str) -> int:
        with contextlib.ExitStack() as stack:
            member, shape, dtype = self._member("node_feat", stack)
            if len(shape) != 2 or shape[0] != num_nodes:
                raise ValueError(f"'{self.path}': node_feat must be [{num_nodes}, F] (got {shape})")
            _check_kind("node_feat", shape, dtype, "biuf", "numbers", self.path)
            rows_per_block = max(1, BLOCK_BYTES // (shape[1] * dtype.itemsize))
            with NpyWriter(path, feature_dtype, shape) as out:
                for start in range(0, num_nodes, rows_per_block):
                    count = min(rows_per_block, num_nodes - start) * shape[1]
                    rows = _read(member, dtype, count, self.path).reshape(-1, shape[1])
                    out.write(feature_rows(rows, feature_dtype, self.path, start).tobytes())
        return shape[1]


def _check_kind(key: str, shape, dtype: np.dtype, kinds: str, what: str, path: Path) -> None:
    if dtype.kind not in kinds:
        raise ValueError(
            f"{key!r} in '{path}' must hold {what} (got dtype {dtype}, shape {tuple(shape)})"
        )


def _node_count(counts: np.ndarray, path: Path, what: str = "") -> int:
    """The node count of ``counts`` (per-graph counts, summed), or ``ValueError`` naming the
    file (and ``what``) and the negative count (NumPy would fail later on a negative size)."""
    if counts.size and counts.min() < 0:
        raise ValueError(
            f"{what}'{path}' holds node count {counts.min()}, expected non-negative counts"
        )
    return int(counts.sum())


def _read(stream, dtype: np.dtype, count: int, path: Path) -> np.ndarray:
    data = stream.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise ValueError(f"'{path}' is truncated")
    return np.frombuffer(data, dtype=dtype).astype(np.int64 if dtype.kind in "iu" else dtype)


def _skip(stream, size: int, path: Path) -> None:
    while size > 0:
        data = stream.read(min(size, BLOCK_BYTES))
        if not data:
            raise ValueError(f"'{path}' is truncated")
        size -= len(data)


def _read_labels(path: Path, binary: bool, num_nodes: int) -> np.ndarray:
    """int64 ``[num_nodes]`` labels, -1 where OGB has NaN (unlabelled)."""
    if binary:
        values = read_npz(path, ("node_label",))["node_label"]
        _check_kind("node_label", values.shape, values.dtype, "biuf", "numbers", path)
        values = values.reshape(-1)
    else:
        values = read_csv(path, np.float64, 1)[:, 0]
    if values.shape[0] != num_nodes:
        raise ValueError(f"'{path}' has {values.shape[0]} labels, expected {num_nodes}")
    labels = np.full(num_nodes, -1, dtype=np.int64)
    known = ~np.isnan(values)
    # A cast would truncate 2.5 (or wrap inf) into a valid-looking class.
    unwhole = known & (~np.isfinite(values) | (values != np.trunc(values)))
    if unwhole.any():
        at = int(np.argmax(unwhole))
        raise ValueError(
            f"'{path}' holds label {values[at]} at node {at}, expected whole numbers "
            "(or NaN: unlabelled)"
        )
    labels[known] = values[known].astype(np.int64)
    return labels


def read_csv(path: Path, dtype, columns: int | None) -> np.ndarray:
    """The whole of a small CSV file (see :func:`csv_blocks`)."""
    blocks = list(csv_blocks(path, dtype, columns))
    width = columns if columns is not None else (blocks[0].shape[1] if blocks else 0)
    return np.concatenate(blocks) if blocks else np.zeros((0, width), dtype)


def csv_blocks(path: Path, dtype, columns: int | None) -> Iterator[np.ndarray]:
    """A gzip-compressed CSV file without header, ``[rows, columns]`` blocks of ``dtype``
    (``columns=None``: as many as the first line has) of about :data:`BLOCK_BYTES` of text
    each. Raises ``ValueError`` naming the file and the line of a row that does not parse or
    has another number of values (a truncated file ends in such a row, or fails to
    decompress)."""
    line, rest = 0, b""
    try:
        with gzip.open(path, "rb") as stream:
            while True:
                data = stream.read(BLOCK_BYTES)
                text = rest + data
                cut = text.rfind(b"\n") + 1 if data else len(text)
                block, rest = text[:cut], text[cut:]
                if block.strip():
                    if columns is None:
                        columns = block[: block.find(b"\n")].count(b",") + 1
                    yield _parse(block, dtype, columns, path, line)
                    line += block.count(b"\n")
                if not data:
                    return
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(f"'{path}' is corrupt or truncated ({error})") from None


def _parse(block: bytes, dtype, columns: int, path: Path, first_line: int) -> np.ndarray:
    """``block``'s rows (whole lines) as a ``[rows, columns]`` array of ``dtype``."""
    rows = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # older NumPy warns where it stops parsing
            values = np.fromstring(block.replace(b"\n", b","), dtype=dtype, sep=",")
    except ValueError:  # NumPy 2.3+ raises there instead
        values = None
    if values is not None and values.shape[0] == rows * columns:
        return values.reshape(rows, columns)
    kind = np.dtype(dtype).name
    parse_one = int if np.dtype(dtype).kind in "iu" else float
    for offset, text in enumerate(block.split(b"\n")[:rows]):
        fields = text.split(b",")
        try:
            ok = len(fields) == columns and all(parse_one(f) is not None for f in fields)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"'{path}', line {first_line + offset + 1}: expected {columns} {kind} values "
                f"separated by commas (got {text[:80].decode(errors='replace')!r})"
            )
    raise ValueError(f"'{path}', lines {first_line + 1}-{first_line + rows}: do not parse")
