"""Property tests of the store manifests as untrusted data: a small store of each kind (graph,
dataset, hetero dataset, partition, part) is written by the project's own writers, one field of
its manifest is mutated (removed, replaced by a value of another type or range or by a path
that leads outside, a key renamed to such a path) or one of its files or folders replaced by a
symlink to a copy outside the store; opening it then either gives the same arrays or raises
``ValueError``/``FileNotFoundError`` naming the manifest file (the store, for a link), never
another exception, and never opens or stats a file outside the store's folder."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphengine.data.graph_store import Graph
from graphengine.data.partition import open_part, partition_dataset
from graphengine.datasets import GraphDataset, SyntheticSpec, generate
from graphengine.datasets.hetero import HeteroGraphDataset, HeteroSpec, generate_hetero

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A path-like value, a store's file name may be any of them: absolute, escaping with "..",
# escaping from a sub-folder, a name of its own, empty.
PATHS = st.sampled_from(
    ["/etc/hostname", "../outside", "part-0/../../outside", "graph/../x", "", "."]
)
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=4),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**63), -1),
    st.integers(2**31, 2**70),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
    PATHS,
)


def _graph_store(folder: Path) -> tuple[Path, str]:
    _small().graph.save(folder)
    return folder, "graph.json"


def _dataset_store(folder: Path) -> tuple[Path, str]:
    _small().save(folder)
    return folder, "dataset.json"


def _hetero_store(folder: Path) -> tuple[Path, str]:
    spec = HeteroSpec(20, 10, 3, 3, 5, 5, paper_features=4, author_features=3)
    generate_hetero("h", spec).save(folder)
    return folder, "dataset.json"


def _partition_store(folder: Path) -> tuple[Path, str]:
    partition_dataset(_small(), 2, folder, method="random")
    return folder, "partition.json"


def _part_store(folder: Path) -> tuple[Path, str]:
    partition_dataset(_small(), 2, folder, method="random")
    return folder, "part-0/part.json"


def _small() -> GraphDataset:
    return generate("s", SyntheticSpec(30, 120, 3, 3, 6, 6))


def _arrays(opened) -> dict[str, np.ndarray]:
    """Every array an opened store holds, by name."""
    if isinstance(opened, Graph):
        return {"indptr": opened.indptr, "indices": opened.indices, "edge_ids": opened.edge_ids}
    if isinstance(opened, GraphDataset):
        return {**_arrays(opened.graph), "x": opened.x, "y": opened.y, **_splits(opened)}
    if isinstance(opened, HeteroGraphDataset):
        arrays = {f"x.{t}": x for t, x in opened.x.items()}
        arrays.update({f"edge_index.{t}": e for t, e in opened.edge_index.items()})
        return {**arrays, "y": opened.y, **_splits(opened)}
    names = ("indptr", "indices", "edge_ids", "x", "y", "train_idx", "val_idx", "test_idx")
    book = opened.book
    maps = {"bounds": book.bounds, "new_to_orig": book.new_to_orig, "orig_to_new": book.orig_to_new}
    return {**maps, **{name: getattr(opened, name) for name in names}}


def _splits(dataset) -> dict[str, np.ndarray]:
    return {f"{s}_idx": dataset.split(s) for s in ("train", "val", "test")}


KINDS = {
    "graph": (_graph_store, Graph.load),
    "dataset": (_dataset_store, GraphDataset.load),
    "hetero": (_hetero_store, HeteroGraphDataset.load),
    "partition": (_partition_store, lambda path: open_part(path, 0)),
    "part": (_part_store, lambda path: open_part(path, 0)),
}


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """Each kind's store, written once, and its arrays as opened unchanged."""
    root = tmp_path_factory.mktemp("stores")
    written = {}
    for kind, (write, load) in KINDS.items():
        folder, manifest = write(root / kind)
        written[kind] = (folder, manifest, _arrays(load(folder)))
    return written


def _json_paths(value, prefix=()) -> list[tuple]:
    """The path (keys and list positions) of every node below ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    paths = []
    for key, child in items:
        paths.append((*prefix, key))
        if isinstance(child, dict | list):
            paths.extend(_json_paths(child, (*prefix, key)))
    return paths


@st.composite
def mutations(draw, manifest: dict):
    """``(description, mutate)``: one edit of ``manifest`` (a JSON object, edited in place) or,
    with ``mutate=None``, a file or folder replaced by a symlink to a copy outside the store."""
    if draw(st.integers(0, 9)) == 0:
        return "symlink", None
    path = draw(st.sampled_from(_json_paths(manifest)))
    *parents, key = path
    op = draw(st.sampled_from(["remove", "replace", "rename"]))
    value = draw(VALUES)

    def mutate(fields):
        parent = fields
        for step in parents:
            parent = parent[step]
        if op == "remove":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[value if isinstance(value, str) else str(value)] = parent.pop(key)
        else:
            parent[key] = value

    return f"{op} {path!r} -> {value!r}", mutate


def _sha256_entry(path: Path) -> dict:
    return {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _symlink_outside(store: Path, outside: Path, seed: int) -> None:
    """Replace one of the store's files or folders (an array, a manifest, ``graph/``, a part)
    by a symlink to a copy of it beside the store: the same bytes, so only where it lies is
    wrong."""
    entries = sorted(p for p in store.rglob("*") if p.suffix in (".npy", ".json") or p.is_dir())
    target = entries[seed % len(entries)]
    if target.is_dir():
        shutil.copytree(target, outside)
        shutil.rmtree(target)
    else:
        shutil.copy(target, outside)
        target.unlink()
    target.symlink_to(outside)


class _Touches:
    """Records every path opened or stat'ed (``open``, ``io.open``, ``os.stat``) while
    active."""

    def __init__(self):
        self.paths: list[str] = []

    def _wrap(self, function):
        def recorded(file, *args, **kwargs):
            if isinstance(file, str | bytes | os.PathLike):
                self.paths.append(os.fsdecode(file))
            return function(file, *args, **kwargs)

        return recorded

    def __enter__(self):
        self.patches = [
            mock.patch.object(builtins, "open", self._wrap(builtins.open)),
            mock.patch.object(io, "open", self._wrap(io.open)),
            mock.patch.object(os, "stat", self._wrap(os.stat)),
        ]
        for patch in self.patches:
            patch.start()
        return self

    def __exit__(self, *exc):
        for patch in reversed(self.patches):
            patch.stop()

    def outside(self, folder: Path) -> list[str]:
        """The recorded paths that lead to what a manifest could name outside ``folder``:
        beside it, or the absolute path :data:`PATHS` holds (libraries may read their own
        files meanwhile)."""
        store, beside = (Path(os.path.realpath(p)) for p in (folder, folder.parent))
        return [
            path
            for path in self.paths
            if (real := Path(os.path.realpath(path))) == Path("/etc/hostname")
            or (real.is_relative_to(beside) and not real.is_relative_to(store))
        ]


@pytest.mark.parametrize("kind", list(KINDS))
@SETTINGS
@given(data=st.data())
def test_a_mutated_manifest_opens_the_same_data_or_is_refused_naming_it(templates, kind, data):
    template, manifest_name, expected = templates[kind]
    fields = json.loads((template / manifest_name).read_text())
    description, mutate = data.draw(mutations(fields), label="mutation")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(template, store, symlinks=True)
        manifest = store / manifest_name
        if mutate is None:
            _symlink_outside(store, Path(tmp) / "outside", data.draw(st.integers(0, 99)))
        else:
            mutate(fields)
            manifest.write_text(json.dumps(fields))
        if kind == "part":  # as someone editing it on purpose: the partition lists its hash
            top = json.loads((store / "partition.json").read_text())
            top["files"]["part-0/part.json"] = _sha256_entry(manifest)
            (store / "partition.json").write_text(json.dumps(top))
        with _Touches() as touches:
            try:
                opened = KINDS[kind][1](store)
            except (ValueError, FileNotFoundError) as error:
                refused = error
            else:
                refused = None
        assert touches.outside(store) == [], description
        if refused is None:
            for name, array in _arrays(opened).items():
                assert np.array_equal(np.asarray(array), expected[name]), (description, name)
        else:
            message = str(refused)
            named = [str(manifest)] if mutate else [str(store)]
            assert any(name in message for name in named), (description, message)
