"""Property tests of the readers over generated files, valid and damaged: the gnn-benchmark
``.npz`` reader returns the features, labels and undirected edges that scipy and NumPy read
from the same arrays, and a saved graph loads back as it was saved; a damaged file raises
``ValueError`` naming the file and the array or manifest entry (``FileNotFoundError`` for a
missing file, as documented), never a crash or a wrong dataset."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graphengine.data.graph_store import Graph
from graphengine.datasets.npz import KEYS, load_npz

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def csr_arrays(draw, rows, cols, max_entries=40):
    """``(data, indices, indptr, shape)`` of a ``rows x cols`` CSR matrix, repeated entries
    and explicit zeros allowed, index dtypes int32 or int64."""
    count = draw(st.integers(0, max_entries)) if rows and cols else 0
    row = np.sort(draw(hnp.arrays(np.int64, count, elements=st.integers(0, max(rows - 1, 0)))))
    col = draw(hnp.arrays(np.int64, count, elements=st.integers(0, max(cols - 1, 0))))
    data = draw(hnp.arrays(np.float32, count, elements=st.sampled_from([0.0, 0.5, 1.0, 3.0])))
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=rows), out=indptr[1:])
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    return data, col.astype(index_dtype), indptr.astype(index_dtype), np.array([rows, cols])


@st.composite
def npz_arrays(draw, max_nodes=12, max_features=6):
    """The arrays of a valid gnn-benchmark file: ``attr_*``, ``adj_*`` and ``labels``."""
    num_nodes = draw(st.integers(1, max_nodes))
    num_features = draw(st.integers(0, max_features))
    arrays = {}
    for prefix, cols in (("attr", num_features), ("adj", num_nodes)):
        parts = draw(csr_arrays(num_nodes, cols))
        names = (f"{prefix}_{k}" for k in ("data", "indices", "indptr", "shape"))
        arrays.update(zip(names, parts, strict=True))
    label_dtype = draw(st.sampled_from([np.int8, np.int32, np.int64]))
    arrays["labels"] = draw(hnp.arrays(label_dtype, num_nodes, elements=st.integers(0, 4)))
    return arrays


def dense(arrays, prefix) -> np.ndarray:
    """The reference matrix: every CSR entry added into its cell with NumPy."""
    rows, cols = arrays[f"{prefix}_shape"]
    indptr = arrays[f"{prefix}_indptr"]
    matrix = np.zeros((rows, cols), dtype=np.float64)
    row = np.repeat(np.arange(rows), np.diff(indptr))
    np.add.at(matrix, (row, arrays[f"{prefix}_indices"]), arrays[f"{prefix}_data"])
    return matrix


@SETTINGS
@given(npz_arrays())
def test_npz_reader_matches_the_arrays(arrays):
    """A valid file gives the binarized features, the labels and the undirected edges off the
    diagonal that NumPy reads from its arrays, and a split covering every node once."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.npz"
        np.savez(path, **arrays)
        dataset = load_npz(path)
    num_nodes = arrays["labels"].shape[0]
    attr = dense(arrays, "attr")
    np.testing.assert_array_equal(dataset.x, np.where(attr > 0, 1, attr))  # binarized
    assert dataset.x.dtype == np.float32
    np.testing.assert_array_equal(dataset.y, arrays["labels"].astype(np.int64))
    # Edges: every stored entry off the diagonal (explicit zeros too), both ways, once each.
    rows = np.repeat(np.arange(num_nodes), np.diff(arrays["adj_indptr"]))
    cols = arrays["adj_indices"].astype(np.int64)
    off = rows != cols
    expected = {*zip(rows[off], cols[off], strict=True), *zip(cols[off], rows[off], strict=True)}
    graph = dataset.graph
    src, dst = graph.to_edge_index().numpy()
    assert graph.num_nodes == num_nodes and graph.num_edges == len(expected)
    assert set(zip(src.tolist(), dst.tolist(), strict=True)) == expected
    # The split covers every node once; each class gives min(20, its size) training nodes.
    split = np.concatenate([dataset.train_idx, dataset.val_idx, dataset.test_idx])
    np.testing.assert_array_equal(np.sort(split), np.arange(num_nodes))
    per_class = np.bincount(dataset.y[dataset.train_idx], minlength=dataset.num_classes)
    expected_train = np.minimum(np.bincount(dataset.y, minlength=dataset.num_classes), 20)
    np.testing.assert_array_equal(per_class, expected_train)


def damage_npz(arrays: dict, data) -> tuple[dict, str]:
    """One damaged copy of ``arrays`` and the key its error must name."""
    arrays = dict(arrays)
    key = data.draw(st.sampled_from(KEYS))
    array = arrays[key]
    n = arrays["labels"].shape[0]
    if key.endswith("_shape"):
        options = [np.array([-1, 3]), np.array([n]), np.array([], dtype=np.int64)]
        options += [np.array([float(n), 3.0])]
        options += [np.array([n + 1, n + 1]) if key == "adj_shape" else np.array([n + 1, 3])]
        shape = data.draw(st.sampled_from(options))
        arrays[key] = shape
        # A wrong row count is refused by whichever array it disagrees with first (adj_shape's
        # [n + 1, n + 1] by adj_indptr, whose length is read before the square is checked).
        rows_wrong = shape.dtype.kind == "i" and shape.size == 2 and shape[0] == n + 1
        either = key == "attr_shape" or rows_wrong
        return arrays, r"'(attr|adj)_(shape|indptr)'" if either else key
    if key.endswith("_indptr"):
        options = ["decreasing", "start", "end", "length", "float", "2-D"]
        how = data.draw(st.sampled_from(options))
        if how == "decreasing":
            if array[-1] == 0 or n < 2:
                how = "end"
            else:
                array = array.copy()
                array[data.draw(st.integers(1, n - 1))] = array[-1] + 1
        if how == "start":
            array = array.copy()
            array[0] = -1 if array[0] == 0 else 0
        elif how == "end":
            array = array.copy()
            array[-1] += data.draw(st.integers(1, 3))
        elif how == "length":
            array = np.append(array, array[-1])
        elif how == "float":
            array = array.astype(np.float64)
        elif how == "2-D":
            array = array.reshape(1, -1)
        arrays[key] = array
        return arrays, key
    if key.endswith("_indices"):
        cols = int(arrays[key.replace("indices", "shape")][1])
        if array.size == 0:
            arrays[key] = array.astype(np.float64)  # empty, but of the wrong dtype
            return arrays, key
        array = array.astype(np.int64)
        array[data.draw(st.integers(0, array.size - 1))] = data.draw(
            st.sampled_from([-1, cols, cols + 100])
        )
        arrays[key] = array
        return arrays, key
    if key.endswith("_data"):
        arrays[key] = np.append(array, np.float32(1))
        return arrays, key
    how = data.draw(st.sampled_from(["short", "negative", "float", "2-D"]))
    arrays[key] = {
        "short": array[:-1],
        "negative": np.append(array[:-1], -2),
        "float": array + 0.5,
        "2-D": array.reshape(-1, 1),
    }[how]
    return arrays, key


@SETTINGS
@given(npz_arrays(), st.data())
def test_damaged_npz_is_refused_naming_the_array(arrays, data):
    """A damaged array, a missing one, a file that is not a zip or is truncated, or a file of no
    nodes raises ``ValueError`` naming the file and the array."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "damaged.npz"
        how = data.draw(st.sampled_from(["array", "missing", "not-zip", "truncated", "empty"]))
        if how == "array":
            damaged, name = damage_npz(arrays, data)
            np.savez(path, **damaged)
        elif how == "empty":  # well-formed arrays of no nodes
            name = "attr_shape"
            csr = {"data": np.zeros(0), "indices": np.zeros(0, int), "indptr": np.zeros(1, int)}
            empty = {f"{p}_{k}": v for p in ("attr", "adj") for k, v in csr.items()}
            empty |= {"attr_shape": np.array([0, 3]), "adj_shape": np.array([0, 0])}
            np.savez(path, **empty, labels=np.zeros(0, int))
        elif how == "missing":
            name = data.draw(st.sampled_from(KEYS))
            np.savez(path, **{k: v for k, v in arrays.items() if k != name})
        else:
            name = "damaged.npz"
            np.savez(path, **arrays)
            raw = path.read_bytes()
            path.write_bytes(raw[: len(raw) // 2] if how == "truncated" else b"\x93NUMPY" + raw)
        with pytest.raises(ValueError, match=name) as error:
            load_npz(path)
        assert "damaged.npz" in str(error.value)


@st.composite
def graphs(draw, max_nodes=20, max_edges=60):
    """A graph from a generated edge list: with ``edge_ids`` unless the list is sorted by
    destination."""
    num_nodes = draw(st.integers(0, max_nodes))
    count = draw(st.integers(0, max_edges)) if num_nodes else 0
    edges = draw(hnp.arrays(np.int64, (2, count), elements=st.integers(0, max(num_nodes - 1, 0))))
    if draw(st.booleans()):
        edges = edges[:, np.argsort(edges[1], kind="stable")]
    return Graph.from_edge_index(edges, num_nodes)


def assert_same_graph(got: Graph, expected: Graph) -> None:
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    assert got.indices.dtype == expected.indices.dtype
    assert (got.edge_ids is None) == (expected.edge_ids is None)
    if expected.edge_ids is not None:
        np.testing.assert_array_equal(got.edge_ids, expected.edge_ids)


@SETTINGS
@given(graphs(), st.booleans())
def test_saved_graph_loads_as_saved(graph, mmap):
    """A saved graph loads (memory-mapped or not) with the same arrays and edges."""
    with tempfile.TemporaryDirectory() as tmp:
        graph.save(tmp)
        loaded = Graph.load(tmp, mmap=mmap)
        assert loaded.validated
        assert_same_graph(loaded, graph)
        np.testing.assert_array_equal(loaded.to_edge_index(), graph.to_edge_index())


MANIFEST_DAMAGES = {
    "format": lambda m: {**m, "format": "graphengine.other"},
    "version": lambda m: {**m, "version": 99},
    "num_nodes-negative": lambda m: {**m, "num_nodes": -1},
    "num_nodes-string": lambda m: {**m, "num_nodes": str(m["num_nodes"])},
    "num_nodes-bool": lambda m: {**m, "num_nodes": True},
    "num_nodes-wrong": lambda m: {**m, "num_nodes": m["num_nodes"] + 1},
    "num_edges-wrong": lambda m: {**m, "num_edges": m["num_edges"] + 1},
    "num_edges-missing": lambda m: {k: v for k, v in m.items() if k != "num_edges"},
    "arrays-list": lambda m: {**m, "arrays": list(m["arrays"])},
    "arrays-no-indptr": lambda m: {**m, "arrays": {"indices": m["arrays"]["indices"]}},
    "arrays-unknown": lambda m: {**m, "arrays": {**m["arrays"], "weights": "float32"}},
    "arrays-dtype": lambda m: {**m, "arrays": {**m["arrays"], "indptr": "int32"}},
    "arrays-dtype-number": lambda m: {**m, "arrays": {**m["arrays"], "indices": 4}},
}


@SETTINGS
@given(graphs(), st.sampled_from([*sorted(MANIFEST_DAMAGES), "not-json", "json-list"]))
def test_damaged_manifest_is_refused_naming_it(graph, damage):
    """A manifest of another format or version, with a bad count, a bad ``arrays`` entry, or not
    JSON or an object raises ``ValueError`` naming the manifest or the array file."""
    with tempfile.TemporaryDirectory() as tmp:
        graph.save(tmp)
        manifest_path = Path(tmp) / "graph.json"
        if damage == "not-json":
            manifest_path.write_text(manifest_path.read_text()[:-5])
        elif damage == "json-list":
            manifest_path.write_text("[]")
        else:
            manifest = MANIFEST_DAMAGES[damage](json.loads(manifest_path.read_text()))
            manifest_path.write_text(json.dumps(manifest))
        with pytest.raises(ValueError, match=r"graph\.json|\.npy'"):
            Graph.load(tmp)


@SETTINGS
@given(graphs(), st.data())
def test_damaged_arrays_are_refused_naming_them(graph, data):
    """A truncated array file, one of the wrong dtype or length, or one holding a bad value raises
    ``ValueError`` naming it; a missing one ``FileNotFoundError``."""
    names = ["indptr", "indices"] + (["edge_ids"] if graph.edge_ids is not None else [])
    name = data.draw(st.sampled_from(names))
    damage = data.draw(st.sampled_from(["truncated", "dtype", "length", "value", "missing"]))
    with tempfile.TemporaryDirectory() as tmp:
        graph.save(tmp)
        path = Path(tmp) / f"{name}.npy"
        array = np.load(path)
        errors, message = ValueError, rf"'{name}'|{name}\.npy"
        if damage == "truncated":
            raw = path.read_bytes()
            path.write_bytes(raw[: data.draw(st.integers(0, len(raw) - 1))])
        elif damage == "dtype":
            np.save(path, array.astype(np.float64))
        elif damage == "length":
            np.save(path, np.append(array, np.zeros(1, array.dtype)))
        elif damage == "missing":
            path.unlink()
            errors = FileNotFoundError
        elif name == "indptr" and graph.num_nodes:
            array[data.draw(st.integers(0, graph.num_nodes))] = -1  # a falling indptr
            np.save(path, array)
        elif array.size:
            array[data.draw(st.integers(0, array.size - 1))] = -1  # an id outside the range
            np.save(path, array)
        else:
            return  # no value to damage
        with pytest.raises(errors, match=message):
            Graph.load(tmp, mmap=data.draw(st.booleans()))
