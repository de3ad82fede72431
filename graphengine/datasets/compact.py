"""A copy of a dataset store with fewer bytes a row: its features converted (float32 to
float16 halves every row a batch reads from disk or a cache holds) and an int64 ``indices``
narrowed to int32 where the node count allows.

The copy streams: each array is read and written in chunks of whole rows
(:data:`CHUNK_BYTES`), through :class:`~graphengine.data.format.NpyWriter`, so a store larger
than memory converts with one chunk in memory. Arrays that do not change are copied with
the kernel's file copy (or hard-linked with ``link=True``). The manifests are written last,
the graph's and then the dataset's, so a run that fails or is killed leaves a folder that does
not open; one that fails is removed (:func:`~graphengine.datasets.writing.writing_store`).

float16 holds magnitudes up to 65504 with 11 significant bits (about three decimal digits)
and flushes magnitudes under about 6e-8 to zero. A finite feature value beyond 65504 would
become infinity: it is refused, naming the file, the row, the column and the value, and the
partial copy is removed (scale the features first, or keep that store float32).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from graphengine.data.columns import row_chunks
from graphengine.data.format import (
    FEATURE_DTYPES,
    NpyWriter,
    feature_rows,
    is_inside,
    manifest_file,
    write_manifest,
)
from graphengine.datasets.dataset import MANIFEST, GraphDataset
from graphengine.datasets.hetero import FORMAT as HETERO_FORMAT
from graphengine.datasets.hetero import HeteroGraphDataset
from graphengine.datasets.writing import writing_store

log = logging.getLogger(__name__)

CHUNK_BYTES = 64 << 20  # source bytes read per chunk: what the copy holds in memory
_GRAPH = "graph"
_GRAPH_MANIFEST = "graph.json"


@dataclass
class CompactReport:
    """What :func:`compact_store` wrote.

    Attributes:
        source_bytes, out_bytes: the bytes of the files under each store's folder.
        converted: ``relative file -> "old dtype -> new dtype"`` for each array converted.
        linked: whether unchanged arrays were to be hard-linked rather than copied (each
            is copied where the file system cannot link it).
    """

    source_bytes: int = 0
    out_bytes: int = 0
    converted: dict[str, str] = field(default_factory=dict)
    linked: bool = False


def check_compact_paths(source: Path, out: Path) -> None:
    """Refuse an ``out`` folder that exists or lies inside ``source`` (the copy would be
    written into the store it reads), before anything is read or written.

    Raises ``FileNotFoundError`` for a missing ``source``, ``ValueError`` otherwise."""
    if not source.is_dir():
        raise FileNotFoundError(f"no store at '{source}': expected a folder with {MANIFEST}")
    if out.exists() or out.is_symlink():
        raise ValueError(
            f"'{out}' exists; pick a new --out folder (one left without {MANIFEST} is an "
            "interrupted run's: remove it)"
        )
    if is_inside(out, source):
        raise ValueError(f"--out '{out}' lies inside the source store '{source}'; pick another")


def open_store(source: Path) -> GraphDataset | HeteroGraphDataset:
    """The homogeneous or heterogeneous store at ``source``, as its manifest's format says,
    opened memory-mapped and checked by its own reader."""
    path = source / MANIFEST
    fmt = None
    if path.is_file():  # a FIFO or a folder is left for the reader to refuse
        # A manifest that does not parse is left to the reader, which names what is wrong.
        with contextlib.suppress(ValueError, AttributeError, RecursionError):
            fmt = json.loads(path.read_text()).get("format")
    if fmt == HETERO_FORMAT:
        return HeteroGraphDataset.load(source)
    return GraphDataset.load(source)


def compact_store(
    source: str | Path,
    out: str | Path,
    feature_dtype: str = "float16",
    link: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
) -> CompactReport:
    """Copy the store at ``source`` into the new folder ``out`` with its feature tables in
    ``feature_dtype`` (``"float16"`` or ``"float32"``) and an int64 ``indices`` as int32 when
    the node count fits; other arrays copied (hard-linked with ``link``: the two stores then
    share those files, and writing one writes the other). ``chunk_bytes``: the source bytes
    read at a time.

    Raises:
        FileNotFoundError: no store at ``source``.
        ValueError: ``out`` exists or lies inside ``source``; ``feature_dtype`` is not one of
            the feature dtypes; a feature value beyond float16's range (naming the file, row,
            column and value); or the source store is damaged (its reader's error).
        graphengine.data.WriteError: ``out`` cannot be written (a full disk); the partial
            copy is removed.
    """
    source, out = Path(source), Path(out)
    if feature_dtype not in FEATURE_DTYPES:
        raise ValueError(
            f"'feature_dtype' must be one of {', '.join(FEATURE_DTYPES)} (got {feature_dtype!r})"
        )
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise ValueError(f"'chunk_bytes' must be a positive int (got {chunk_bytes!r})")
    check_compact_paths(source, out)
    dataset = open_store(source)
    manifest = json.loads((source / MANIFEST).read_text())  # checked by the reader above
    report = CompactReport(linked=link)
    copier = _Copier(source, out, link, chunk_bytes, report)
    with writing_store(dataset.name, out):
        for name, entry in manifest["arrays"].items():
            if name == "x" or name.startswith("x."):
                copier.features(f"{name}.npy", feature_dtype)
                entry[0] = feature_dtype
            else:
                copier.same(f"{name}.npy")
        extra = manifest.get("order")
        if isinstance(extra, dict) and isinstance(extra.get("file"), str):
            manifest_file(source, extra["file"], source / MANIFEST, "'order' entry 'file'")
            copier.same(extra["file"])
        if isinstance(dataset, GraphDataset):
            copier.graph(dataset.num_nodes)
        _write_manifest_like(out / MANIFEST, manifest)
    report.source_bytes = _store_bytes(source)
    report.out_bytes = _store_bytes(out)
    return report


class _Copier:
    """Writes the arrays of one compact copy (see :func:`compact_store`)."""

    def __init__(self, source: Path, out: Path, link: bool, chunk_bytes: int, report):
        self.source, self.out = source, out
        self.link, self.chunk_bytes, self.report = link, chunk_bytes, report

    def same(self, relative: str) -> None:
        """``relative`` copied unchanged (or hard-linked)."""
        target = self.out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.link:
            try:
                os.link(self.source / relative, target)
                return
            except OSError as error:  # another file system, or none that links
                log.info("'%s' copied, not linked (%s)", target, error.strerror)
        shutil.copyfile(self.source / relative, target)

    def features(self, relative: str, dtype: str) -> None:
        """The feature table ``relative`` in ``dtype`` (copied when it holds that already)."""
        table = np.load(self.source / relative, mmap_mode="r", allow_pickle=False)
        if str(table.dtype) == dtype:
            self.same(relative)
        else:
            self._convert(relative, table, dtype)

    def graph(self, num_nodes: int) -> None:
        """``graph/``: ``indices`` narrowed to int32 when int64 and ``num_nodes`` fits, the
        other arrays as they are, then ``graph.json``."""
        graph_manifest = json.loads((self.source / _GRAPH / _GRAPH_MANIFEST).read_text())
        for name, dtype in graph_manifest["arrays"].items():
            relative = f"{_GRAPH}/{name}.npy"
            fits = num_nodes <= np.iinfo(np.int32).max
            if name == "indices" and dtype == "int64" and fits:
                table = np.load(self.source / relative, mmap_mode="r", allow_pickle=False)
                self._convert(relative, table, "int32")
                graph_manifest["arrays"][name] = "int32"
                log.info("'%s': int64 indices stored as int32 (%d nodes fit)", relative, num_nodes)
            else:
                self.same(relative)
        _write_manifest_like(self.out / _GRAPH / _GRAPH_MANIFEST, graph_manifest)

    def _convert(self, relative: str, table: np.ndarray, dtype: str):
        """``table`` (memory-mapped) written to ``out / relative`` as ``dtype``, a chunk of
        whole rows at a time; a feature table's through
        :func:`~graphengine.data.format.feature_rows` (float16's range checked)."""
        target = self.out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        row_bytes = max(1, table[:1].nbytes) if table.shape[0] else 1
        rows = max(1, self.chunk_bytes // row_bytes)
        with NpyWriter(target, dtype, tuple(table.shape)) as file:
            # Plain reads into one buffer: a 39 GB table's pages are never mapped here.
            for first, chunk in row_chunks(table, rows):
                if dtype in FEATURE_DTYPES:
                    chunk = feature_rows(chunk, dtype, self.source / relative, first)
                file.write(np.ascontiguousarray(chunk, dtype=dtype).data)
        self.report.converted[relative] = f"{table.dtype} -> {dtype}"


def _write_manifest_like(path: Path, manifest: dict) -> None:
    """``manifest`` (a source manifest, edited) written to ``path`` as the readers expect."""
    fields = {k: v for k, v in manifest.items() if k not in ("format", "version")}
    write_manifest(path, manifest["format"], manifest["version"], fields)


def _store_bytes(path: Path) -> int:
    """The bytes of the files under ``path`` (a store)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
