"""Write a dataset as K parts on disk, and open the partition book or one part (memory-mapped).

Layout of a partition directory::

    partition.json         format "graphengine.partition", version 1: K, bounds, method,
                           counts, edge cut, balance, stats and {file: {bytes, sha256}}
    new_to_orig.npy        int64 [num_nodes]
    orig_to_new.npy        int64 [num_nodes]
    part-<p>/part.json     format "graphengine.partition.part", version 1: the part's arrays
    part-<p>/indptr.npy    int64 [n_p + 1], over the part's own nodes (local positions)
    part-<p>/indices.npy   int32 (int64 past 2^31 nodes) [e_p], sources as GLOBAL NEW ids
    part-<p>/edge_ids.npy  int64 [e_p], each edge's original edge id
    part-<p>/x.npy         features of the part's nodes, in new-id order
    part-<p>/y.npy         labels of the part's nodes
    part-<p>/{train,val,test}_idx.npy  int64, the part's split nodes as GLOBAL NEW ids, ascending

Part ``p`` owns new ids ``[bounds[p], bounds[p + 1])``; local position ``i`` is new id
``bounds[p] + i``. An edge belongs to the part owning its destination, and each node's in-edges
keep the order they have in the original CSC. The top-level manifest is written last: a
directory without it is not a partition.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import resource
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from graphengine.data.compressed import check_compressed
from graphengine.data.files import check_regular_file
from graphengine.data.format import (
    array_listing,
    check_feature_dtype,
    is_count,
    load_array,
    load_listed,
    manifest_count,
    manifest_file,
    manifest_mapping,
    manifest_string,
    read_manifest,
    write_manifest,
)
from graphengine.data.graph_store import Graph
from graphengine.data.output_files import temporaries
from graphengine.data.partition.book import PartitionBook
from graphengine.data.partition.partitioner import (
    METHODS,
    assign_parts,
    check_num_parts,
    renumber,
)

log = logging.getLogger(__name__)

FORMAT = "graphengine.partition"
PART_FORMAT = "graphengine.partition.part"
FORMAT_VERSION = 1
MANIFEST = "partition.json"
_PART_MANIFEST = "part.json"
_MAPS = ("new_to_orig", "orig_to_new")
_INT32_MAX = np.iinfo(np.int32).max
_HASH_CHUNK = 1 << 22
SPLITS = ("train", "val", "test")  # the splits a PartitionSource names
# The .npy files of a part, each listed in part.json and partition.json.
PART_ARRAYS = ("indptr", "indices", "edge_ids", "x", "y", *(f"{split}_idx" for split in SPLITS))


class PartitionSource(Protocol):
    """What :func:`partition_dataset` reads from a dataset (``GraphDataset`` is one).

    Declared here because ``datasets/`` builds on ``data/``: the partition store must not
    import the dataset class.

    Attributes:
        name: the dataset's name, written into the manifest.
        graph: the CSC graph, ``num_nodes`` nodes.
        x: float ``[num_nodes, num_features]`` features (an array or a memory map).
        y: int ``[num_nodes]`` labels.
        train_idx: int64, the training nodes (METIS balances them across parts).
        num_features, num_classes: written into the manifest.
    """

    name: str
    graph: Graph
    x: np.ndarray
    y: np.ndarray
    train_idx: np.ndarray

    @property
    def num_features(self) -> int: ...

    @property
    def num_classes(self) -> int: ...

    def split(self, name: str) -> np.ndarray:
        """int64, the ids of split ``name`` (one of :data:`SPLITS`)."""
        ...


@dataclass
class Part:
    """One part, memory-mapped (read-only) from its directory.

    Attributes:
        part: the part's index ``p``.
        start, stop: the new ids it owns, ``[start, stop)``; local position ``i`` is new id
            ``start + i``.
        indptr: int64 ``[stop - start + 1]``; the in-edges of local node ``i`` are
            positions ``indptr[i]:indptr[i + 1]`` of ``indices`` and ``edge_ids``.
        indices: int32 (int64 past 2^31 nodes) ``[num_edges]``, source nodes as global new ids.
        edge_ids: int64 ``[num_edges]``, each edge's id in the original graph.
        x: float ``[stop - start, num_features]``, features in local order.
        y: int64 ``[stop - start]``, labels in local order.
        train_idx, val_idx, test_idx: int64, the part's split nodes as global new ids,
            ascending.
        book: the partition book (bounds and id maps).
    """

    part: int
    start: int
    stop: int
    indptr: np.ndarray
    indices: np.ndarray
    edge_ids: np.ndarray
    x: np.ndarray
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    book: PartitionBook

    @property
    def num_nodes(self) -> int:
        return self.stop - self.start

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])


def partition_dataset(
    dataset: PartitionSource,
    num_parts: int,
    out: str | Path,
    method: str = "metis",
    force: bool = False,
    seed: int = 0,
) -> dict:
    """Partition ``dataset`` into ``num_parts`` parts and write them under ``out``.

    The parts are written one at a time (only one part's edges and features are in memory
    besides the graph, the ``[num_nodes]`` id maps and, for METIS, its input and workspace).

    Returns:
        The stats, also written into the manifest under ``"stats"``: ``seconds``,
        ``peak_rss_bytes`` (the process's peak resident memory, ``ru_maxrss``, so it includes
        what the process held before), ``edge_cut`` (edges whose source is owned by another
        part than their destination) and ``edge_cut_share``, the per-part ``nodes``,
        ``train_nodes`` and ``edges``, and ``balance``: max/mean per part of each.

    Raises:
        ValueError: ``num_parts`` outside ``[1, num_nodes]``, an unknown ``method``, or an
            ``out`` directory that is not empty while ``force`` is false.
    """
    started = time.perf_counter()
    graph = dataset.graph
    check_num_parts(num_parts, graph.num_nodes)
    if method not in METHODS:
        raise ValueError(f"'method' must be one of {METHODS} (got {method!r})")
    out = Path(out)
    _prepare_out(out, force)

    part_of = assign_parts(graph, num_parts, method, dataset.train_idx, seed)
    new_to_orig, orig_to_new, bounds = renumber(part_of, num_parts)
    del part_of
    assigned = time.perf_counter() - started
    book = PartitionBook(bounds, new_to_orig, orig_to_new)
    files: dict[str, dict] = {}
    for name, array in (("new_to_orig", new_to_orig), ("orig_to_new", orig_to_new)):
        files[f"{name}.npy"] = _save(out, f"{name}.npy", array)

    split_new = {split: np.sort(orig_to_new[dataset.split(split)]) for split in SPLITS}
    part_edges, part_train, cut = [], [], 0
    for p in range(num_parts):
        edges, train, part_cut = _write_part(out, p, dataset, book, split_new, files)
        part_edges.append(edges)
        part_train.append(train)
        cut += part_cut

    part_nodes = np.diff(bounds).tolist()
    num_edges = graph.num_edges
    stats = {
        "method": method,
        "num_parts": num_parts,
        "seconds": round(time.perf_counter() - started, 3),
        "assign_seconds": round(assigned, 3),
        "peak_rss_bytes": peak_rss_bytes(),
        "edge_cut": cut,
        "edge_cut_share": cut / num_edges if num_edges else 0.0,
        "nodes": part_nodes,
        "train_nodes": part_train,
        "edges": part_edges,
        "balance": {
            "nodes": _imbalance(part_nodes),
            "train_nodes": _imbalance(part_train),
            "edges": _imbalance(part_edges),
        },
    }
    write_manifest(  # last, and whole or not at all: it marks the partition complete
        out / MANIFEST,
        FORMAT,
        FORMAT_VERSION,
        {
            "dataset": dataset.name,
            "method": method,
            "seed": seed,
            "num_parts": num_parts,
            "num_nodes": graph.num_nodes,
            "num_edges": num_edges,
            "num_features": dataset.num_features,
            "num_classes": dataset.num_classes,
            "bounds": bounds.tolist(),
            "edge_cut": cut,
            "stats": stats,
            "files": files,
        },
    )
    log.info(
        "partitioned %s into %d parts (%s) in %.1f s, peak RSS %.2f GiB: edge cut %d (%.1f%%), "
        "balance (max/mean) nodes %.3f, train nodes %.3f, edges %.3f",
        dataset.name,
        num_parts,
        method,
        stats["seconds"],
        stats["peak_rss_bytes"] / 2**30,
        cut,
        100 * stats["edge_cut_share"],
        stats["balance"]["nodes"],
        stats["balance"]["train_nodes"],
        stats["balance"]["edges"],
    )
    return stats


def load_partition(path: str | Path, verify: bool = True) -> PartitionBook:
    """Open the partition book of the partition under ``path`` (id maps memory-mapped).

    Every file the manifest lists must lie inside ``path`` (checked for all before any is
    touched) and exist with its recorded size, except those of a part whose whole directory is
    absent: a host of a cluster holds only its own parts (``docs/cluster.md``). With
    ``verify`` the id maps are also checked against their sha256 (a part's own files are
    hashed by :func:`open_part`).

    Raises:
        FileNotFoundError: no partition at ``path``, or a missing file (named).
        ValueError: a manifest of another format or version or with a malformed field (the
            manifest and the field named), a file name leading outside ``path``, or a
            truncated, mismatched or irregular file (named).
    """
    path = Path(path)
    manifest, files = _read_partition_manifest(path)
    for name, (file, entry) in files.items():
        if _held(path, name):
            _check_size(file, entry, path / MANIFEST)
    n = manifest["num_nodes"]
    maps = {}
    for name in _MAPS:
        file, entry = files[f"{name}.npy"]
        if verify:
            _check_hash(file, entry, path / MANIFEST)
        maps[name] = load_array(file, "int64", (n,), mmap=True, manifest=path / MANIFEST)
    bounds = np.asarray(manifest["bounds"], dtype=np.int64)
    return PartitionBook(bounds, maps["new_to_orig"], maps["orig_to_new"], manifest)


def open_part(path: str | Path, part: int, verify: bool = True) -> Part:
    """Open part ``part`` of the partition under ``path``, memory-mapped (read-only).

    With ``verify`` the part's files are checked against their sha256 in the top-level
    manifest (reading them once).

    Raises:
        FileNotFoundError: no partition at ``path``, or a missing file (named).
        ValueError: ``part`` outside ``[0, num_parts)``, a malformed manifest (named, with
            the field), a part file the top-level manifest does not list, a truncated,
            corrupted or mismatched file, features neither float32 nor float16 or of another
            width than the partition's ``num_features``, or a part whose CSC arrays are malformed
            (an ``indptr`` that decreases, a source outside the graph: the file and the value
            named).
    """
    path = Path(path)
    book = load_partition(path, verify=verify)
    start, stop = book.part_range(part)
    directory = path / _part_dir(part)
    # Every file of the part is listed, so that the book has checked each lies inside ``path``
    # (the part's folder could be a symlink leading elsewhere) before it is read.
    unlisted = [
        f"{_part_dir(part)}/{name}"
        for name in [_PART_MANIFEST, *(f"{key}.npy" for key in PART_ARRAYS)]
        if f"{_part_dir(part)}/{name}" not in book.manifest["files"]
    ]
    if unlisted:
        raise ValueError(
            f"corrupt manifest '{path / MANIFEST}': 'files' lists no {unlisted[0]!r}; every "
            "file of a part is listed with its size and sha256"
        )
    check = _check_hash if verify else _check_size  # the book skipped an absent part's files
    for name, entry in book.manifest["files"].items():
        if name.startswith(f"{_part_dir(part)}/"):
            check(path / name, entry, path / MANIFEST)
    part_path = directory / _PART_MANIFEST
    keys = ("part", "start", "stop", "arrays")
    manifest = read_manifest(directory, _PART_MANIFEST, PART_FORMAT, FORMAT_VERSION, "part", keys)
    described = tuple(manifest_count(manifest, key, part_path) for key in keys[:3])
    if described != (part, start, stop):
        raise ValueError(
            f"'{part_path}' describes part {described[0]} [{described[1]}, {described[2]}), "
            f"expected part {part} [{start}, {stop})"
        )
    listing = array_listing(manifest, part_path, PART_ARRAYS)
    if "num_edges" in manifest:  # as the writer records it: the length of indices
        num_edges = manifest_count(manifest, "num_edges", part_path)
        if listing["indices"][1] != (num_edges,):
            raise ValueError(
                f"corrupt manifest '{part_path}': 'num_edges' is {num_edges}, but 'arrays' "
                f"lists indices of shape {list(listing['indices'][1])}"
            )
    _check_part_features(directory / "x.npy", listing["x"], part_path, book.manifest)
    arrays = load_listed(directory, part_path, listing, mmap=True)
    totals = (book.manifest["num_nodes"], book.manifest["num_edges"])
    _check_part_csc(directory, arrays, stop - start, *totals)
    return Part(part=part, start=start, stop=stop, book=book, **arrays)


def _read_partition_manifest(path: Path) -> tuple[dict, dict[str, tuple[Path, dict]]]:
    """``(manifest, files)`` of the partition under ``path``, every field checked (the counts,
    ``bounds`` rising from 0 to ``num_nodes`` in ``num_parts`` steps, each ``files`` entry a
    name inside ``path`` with ``{"bytes": count, "sha256": 64 hex digits}``, the id maps
    among them); ``files`` maps each listed name to its path and entry. Nothing the manifest
    names is touched here.

    Raises ``ValueError`` naming the manifest and the field.
    """
    manifest_path = path / MANIFEST
    counts = {"num_parts": 1, "num_nodes": 0, "num_edges": 0, "num_features": 0, "num_classes": 1}
    keys = ("files", "bounds", *counts)
    manifest = read_manifest(path, MANIFEST, FORMAT, FORMAT_VERSION, "partition", keys)
    for key, minimum in counts.items():
        manifest_count(manifest, key, manifest_path, minimum)
    for key in ("dataset", "method"):
        if key in manifest:
            manifest_string(manifest, key, manifest_path)
    for key in ("seed", "edge_cut"):
        if key in manifest:
            manifest_count(manifest, key, manifest_path)
    if "stats" in manifest:
        manifest_mapping(manifest, "stats", manifest_path)
    bounds = manifest["bounds"]
    num_parts, num_nodes = manifest["num_parts"], manifest["num_nodes"]
    if (
        not isinstance(bounds, list)
        or len(bounds) != num_parts + 1
        or not all(is_count(bound) for bound in bounds)
        or bounds[0] != 0
        or bounds[-1] != num_nodes
        or any(high < low for low, high in itertools.pairwise(bounds))
    ):
        raise ValueError(
            f"corrupt manifest '{manifest_path}': 'bounds' must be {num_parts + 1} integers "
            f"(num_parts + 1) rising from 0 to num_nodes={num_nodes} (got {bounds!r})"
        )
    files = {}
    for name, entry in manifest_mapping(manifest, "files", manifest_path).items():
        where = f"'files' entry {name!r}"
        file = manifest_file(path, name, manifest_path, where)
        if (
            not isinstance(entry, dict)
            or not is_count(entry.get("bytes"))
            or not _is_sha256(entry.get("sha256"))
        ):
            raise ValueError(
                f"corrupt manifest '{manifest_path}': {where} must be {{\"bytes\": a "
                f'non-negative integer, "sha256": 64 hex digits}} (got {entry!r})'
            )
        files[name] = (file, entry)
    missing = [f"{name}.npy" for name in _MAPS if f"{name}.npy" not in files]
    if missing:
        raise ValueError(f"corrupt manifest '{manifest_path}': 'files' lists no {missing[0]!r}")
    return manifest, files


def _is_sha256(value) -> bool:
    return (
        isinstance(value, str)
        and len(value) == 64
        and all(digit in "0123456789abcdef" for digit in value)
    )


def _check_part_features(
    x_path: Path, listed: tuple[str, tuple[int, ...]], part_path: Path, partition: dict
) -> None:
    """Refuse a part's features (``x.npy``, listed in ``part.json`` as ``listed``) that are
    neither float32 nor float16, or not ``num_features`` wide as the partition's manifest
    says (every part's are): another width would only fail later, inside the distributed
    model, naming no file."""
    dtype, shape = listed
    check_feature_dtype(x_path, dtype, part_path)
    expected = partition["num_features"]
    if len(shape) != 2 or shape[1] != expected:
        width = shape[1] if len(shape) == 2 else f"shape {list(shape)}"
        raise ValueError(
            f"'{x_path}' holds {width} features a node ('{part_path}' lists shape "
            f"{list(shape)}), expected {expected}: the 'num_features' of every part in "
            f"'{x_path.parent.parent / MANIFEST}'"
        )


def _check_part_csc(
    directory: Path,
    arrays: dict[str, np.ndarray],
    num_local: int,
    num_nodes: int,
    total_edges: int,
) -> None:
    """Check a part's ``indptr``, ``indices`` (sources in ``[0, num_nodes)``) and ``edge_ids``
    (in ``[0, total_edges)``, the whole graph's edges) in one pass over each: the samplers
    index with them unchecked, and a file can be edited with its sha256 updated. Raises
    ``ValueError`` naming the file, the bad value and what was expected."""
    names = ("indptr", "indices", "edge_ids")
    indptr, indices, edge_ids = arrays["indptr"], arrays["indices"], arrays["edge_ids"]
    where = {name: f"corrupt partition file '{directory / name}.npy':" for name in names}
    check_compressed(indptr, indices, num_local, num_nodes, where.__getitem__, "source")
    if edge_ids.ndim != 1 or not np.issubdtype(edge_ids.dtype, np.integer):
        raise ValueError(
            f"{where['edge_ids']} must be a 1-D integer array (got {edge_ids.dtype} "
            f"{edge_ids.shape})"
        )
    num_edges = indices.shape[0]
    if edge_ids.shape[0] != num_edges:
        raise ValueError(
            f"{where['edge_ids']} must have one entry per edge ({num_edges}), "
            f"got {edge_ids.shape[0]}"
        )
    if num_edges:
        low, high = edge_ids.min(), edge_ids.max()
        if low < 0 or high >= total_edges:
            raise ValueError(
                f"{where['edge_ids']} holds edge id {low if low < 0 else high}, outside "
                f"[0, {total_edges}) for the partition's {total_edges} edges"
            )


def peak_rss_bytes() -> int:
    """The process's peak resident memory so far, in bytes (``ru_maxrss``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _write_part(
    out: Path,
    p: int,
    dataset: PartitionSource,
    book: PartitionBook,
    split_new: dict[str, np.ndarray],
    files: dict[str, dict],
) -> tuple[int, int, int]:
    """Write part ``p``; returns ``(num_edges, num_train_nodes, edge_cut)`` of the part."""
    graph = dataset.graph
    start, stop = book.part_range(p)
    nodes = np.asarray(book.new_to_orig[start:stop])  # original ids, in new-id order
    indptr_orig = np.asarray(graph.indptr)
    degree = indptr_orig[nodes + 1] - indptr_orig[nodes]
    indptr = np.zeros(nodes.size + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    # CSC positions of the part's edges, node by node, each node's edges in original order.
    positions = np.repeat(indptr_orig[nodes] - indptr[:-1], degree)
    positions += np.arange(indptr[-1], dtype=np.int64)
    sources = book.orig_to_new[np.asarray(graph.indices)[positions]]
    cut = int(np.count_nonzero((sources < start) | (sources >= stop)))
    index_dtype = np.int32 if graph.num_nodes <= _INT32_MAX else np.int64
    edge_ids = positions if graph.edge_ids is None else np.asarray(graph.edge_ids)[positions]
    del positions
    arrays = {
        "indptr": indptr,
        "indices": sources.astype(index_dtype),
        "edge_ids": edge_ids.astype(np.int64, copy=False),
        "x": np.asarray(dataset.x[nodes]),
        "y": np.asarray(dataset.y[nodes], dtype=np.int64),
    }
    del sources, edge_ids
    for split, ids in split_new.items():
        lo, hi = np.searchsorted(ids, [start, stop])
        arrays[f"{split}_idx"] = ids[lo:hi]
    directory = _part_dir(p)
    (out / directory).mkdir()
    for name, array in arrays.items():
        files[f"{directory}/{name}.npy"] = _save(out, f"{directory}/{name}.npy", array)
    write_manifest(
        out / directory / _PART_MANIFEST,
        PART_FORMAT,
        FORMAT_VERSION,
        {
            "part": p,
            "start": start,
            "stop": stop,
            "num_edges": int(indptr[-1]),
            "arrays": {name: [str(a.dtype), list(a.shape)] for name, a in arrays.items()},
        },
    )
    files[f"{directory}/{_PART_MANIFEST}"] = _file_entry(out / directory / _PART_MANIFEST)
    log.debug("wrote part %d: %d nodes, %d edges", p, stop - start, int(indptr[-1]))
    return int(indptr[-1]), len(arrays["train_idx"]), cut


def _prepare_out(out: Path, force: bool) -> None:
    """Create ``out``; when it is not empty, refuse unless ``force``, which removes what a
    partition writes there (``partition.json`` and the temporary files of its writes, the id
    maps, ``part-*/``) and nothing else."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"'out' must be a directory (got the file '{out}')")
    if out.is_dir():
        entries = sorted(entry.name for entry in out.iterdir())
        if entries and not force:
            raise ValueError(
                f"'out' directory '{out}' is not empty (got {len(entries)} entries, e.g. "
                f"'{entries[0]}'); pass force=True (--force) to overwrite"
            )
        ours = {MANIFEST, *(f"{name}.npy" for name in _MAPS)}
        ours.update(temporary.name for temporary, _ in temporaries(out / MANIFEST))
        for entry in out.iterdir():
            if entry.is_dir() and entry.name.startswith("part-") and not entry.is_symlink():
                shutil.rmtree(entry)
            elif entry.name in ours:
                entry.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _part_dir(p: int) -> str:
    return f"part-{p}"


def _held(path: Path, name: str) -> bool:
    """Whether this copy of the partition holds the manifest's file ``name``: every
    top-level file, and the files of each part whose directory is present."""
    directory, _, rest = name.partition("/")
    return not rest or (path / directory).is_dir()


def _save(out: Path, name: str, array: np.ndarray) -> dict:
    np.save(out / name, np.ascontiguousarray(array))
    return _file_entry(out / name)


def _file_entry(path: Path) -> dict:
    return {"bytes": path.stat().st_size, "sha256": _sha256(path)}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _check_size(path: Path, entry: dict, manifest: Path) -> None:
    """Check the file ``path`` against its ``entry`` in the partition's ``manifest``:
    a regular file of the recorded size."""
    check_regular_file(path, "partition file", manifest)
    size = path.stat().st_size
    if size != entry["bytes"]:
        raise ValueError(
            f"truncated or mismatched partition file '{path}': "
            f"{size} bytes, '{manifest}' says {entry['bytes']}"
        )


def _check_hash(path: Path, entry: dict, manifest: Path) -> None:
    """:func:`_check_size`, then the file's sha256 against the entry's."""
    _check_size(path, entry, manifest)
    if _sha256(path) != entry["sha256"]:
        raise ValueError(
            f"corrupted partition file '{path}': its sha256 does not match '{manifest}'"
        )


def _imbalance(loads: list[int]) -> float:
    """max/mean of the per-part loads (1.0 = perfect; 1.0 when all are zero)."""
    mean = sum(loads) / len(loads)
    return round(max(loads) / mean, 4) if mean else 1.0
