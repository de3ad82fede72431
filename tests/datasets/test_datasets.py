"""Dataset readers against hand-parsed raw files and published figures, the generator, the
catalog."""

import dataclasses
import pickle
import shutil
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch_geometric.io import read_planetoid_data

from graphengine.datasets import GraphDataset, SyntheticSpec, generate, load_dataset
from graphengine.datasets.npz import load_npz
from graphengine.datasets.planetoid import load_planetoid

# Published sizes (shared/datasets/README.md; PyG's Planetoid docs): nodes, directed edges
# (both directions), features, classes, train/val/test.
PLANETOID = {
    "cora": ("Cora", 2708, 10556, 1433, 7, (140, 500, 1000)),
    "citeseer": ("CiteSeer", 3327, 9104, 3703, 6, (120, 500, 1000)),
}
NPZ = {"cora": (2708, 1433, 7), "citeseer": (3312, 3703, 6)}


def edge_set(edge_index: torch.Tensor) -> set:
    return set(map(tuple, edge_index.T.tolist()))


def raw_planetoid(folder, name):
    """The raw parts by hand: pickles (latin1) and the test-index text file."""
    parts = {}
    for part in ("x", "tx", "allx", "y", "ty", "ally", "graph"):
        with (folder / f"ind.{name}.{part}").open("rb") as f, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = pickle.load(f, encoding="latin1")
        parts[part] = value.toarray() if sp.issparse(value) else value
    parts["test.index"] = np.loadtxt(folder / f"ind.{name}.test.index", dtype=np.int64)
    return parts


@pytest.mark.parametrize("name", sorted(PLANETOID))
def test_planetoid_matches_raw_files_and_published_sizes(shared_datasets, name):
    folder, nodes, edges, features, classes, split_sizes = PLANETOID[name]
    dataset = load_planetoid(name, shared_datasets / "planetoid")
    assert (dataset.num_nodes, dataset.graph.num_edges) == (nodes, edges)
    assert (dataset.num_features, dataset.num_classes) == (features, classes)
    assert tuple(len(dataset.split(s)) for s in ("train", "val", "test")) == split_sizes
    assert dataset.x.dtype == np.float32 and dataset.y.dtype == np.int64

    raw = raw_planetoid(shared_datasets / "planetoid" / folder / "raw", name)
    test_index, num_known = raw["test.index"], raw["allx"].shape[0]
    # Row i of tx/ty is node test_index[i]; nodes in neither allx nor tx stay zero.
    x = np.zeros((nodes, features), dtype=np.float32)
    x[:num_known] = raw["allx"]
    x[test_index] = raw["tx"]
    y = np.zeros(nodes, dtype=np.int64)
    y[:num_known] = raw["ally"].argmax(axis=1)
    y[test_index] = raw["ty"].argmax(axis=1)
    assert np.array_equal(dataset.x, x)
    assert np.array_equal(dataset.y, y)
    assert np.array_equal(np.bincount(dataset.y, minlength=classes), np.bincount(y))
    # Edges: source -> each listed neighbor, without self loops or repeats.
    expected = {(s, d) for s, nbrs in raw["graph"].items() for d in nbrs if s != d}
    assert len(expected) == edges
    assert edge_set(dataset.graph.to_edge_index()) == expected
    num_train = raw["y"].shape[0]
    assert np.array_equal(dataset.train_idx, np.arange(num_train))
    assert np.array_equal(dataset.val_idx, np.arange(num_train, num_train + 500))
    assert np.array_equal(dataset.test_idx, np.sort(test_index))


@pytest.mark.parametrize("name", sorted(PLANETOID))
def test_planetoid_matches_pygs_reader(shared_datasets, name):
    """The parts read as data only and assembled here give PyG's ``read_planetoid_data``'s
    features, labels, split and edges (PyG unpickles the same trusted files itself)."""
    raw = shared_datasets / "planetoid" / PLANETOID[name][0] / "raw"
    dataset = load_planetoid(name, shared_datasets / "planetoid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = read_planetoid_data(str(raw), name)
    assert np.array_equal(dataset.x, reference.x.numpy())
    assert np.array_equal(dataset.y, reference.y.numpy())
    for split in ("train", "val", "test"):
        mask = reference[f"{split}_mask"]
        assert np.array_equal(dataset.split(split), mask.nonzero().view(-1).numpy())
    assert edge_set(dataset.graph.to_edge_index()) == edge_set(reference.edge_index)
    assert dataset.graph.num_edges == reference.edge_index.shape[1]


def test_citeseer_test_index_gaps_are_featureless_unsplit_nodes(shared_datasets):
    dataset = load_planetoid("citeseer", shared_datasets / "planetoid")
    raw = raw_planetoid(shared_datasets / "planetoid" / "CiteSeer" / "raw", "citeseer")
    test_index = raw["test.index"]
    gaps = np.setdiff1d(np.arange(test_index.min(), test_index.max() + 1), test_index)
    assert len(gaps) == 15 and dataset.num_nodes == test_index.max() + 1
    assert not dataset.x[gaps].any()
    assert not dataset.y[gaps].any()
    splits = np.concatenate([dataset.split(s) for s in ("train", "val", "test")])
    assert not np.isin(gaps, splits).any()
    # The gaps keep the distinct, non-loop edges the graph file lists into them.
    into_gaps = {(s, d) for s, nbrs in raw["graph"].items() for d in nbrs if s != d}
    into_gaps = {(s, d) for s, d in into_gaps if d in set(gaps.tolist())}
    assert dataset.graph.in_degree()[gaps].sum() == len(into_gaps) > 0


@pytest.mark.parametrize("stem", sorted(NPZ))
def test_npz_matches_raw_arrays_and_published_sizes(shared_datasets, stem):
    path = shared_datasets / "gnn-benchmark" / f"{stem}.npz"
    dataset = load_dataset(str(path))
    nodes, features, classes = NPZ[stem]
    assert (dataset.num_nodes, dataset.num_features, dataset.num_classes) == (
        nodes,
        features,
        classes,
    )
    with np.load(path, allow_pickle=True) as f:
        adjacency = sp.csr_matrix(
            (f["adj_data"], f["adj_indices"], f["adj_indptr"]), shape=f["adj_shape"]
        ).tocoo()
        attributes = sp.csr_matrix(
            (f["attr_data"], f["attr_indices"], f["attr_indptr"]), shape=f["attr_shape"]
        )
        labels = f["labels"]
    pairs = {(int(a), int(b)) for a, b in zip(adjacency.row, adjacency.col, strict=True) if a != b}
    expected = pairs | {(b, a) for a, b in pairs}
    assert edge_set(dataset.graph.to_edge_index()) == expected
    assert dataset.graph.num_edges == len(expected)
    assert np.array_equal(dataset.x, (attributes.toarray() > 0).astype(np.float32))
    assert np.array_equal(dataset.y, labels)
    train, val, test = dataset.train_idx, dataset.val_idx, dataset.test_idx
    assert len(set(train) | set(val) | set(test)) == dataset.num_nodes
    assert not set(train) & set(val) and not set(val) & set(test) and not set(train) & set(test)
    assert np.all(np.bincount(dataset.y[train]) == 20)
    assert np.all(np.bincount(dataset.y[val]) == 30)
    assert np.array_equal(load_npz(path, split_seed=0).train_idx, train)
    assert not np.array_equal(load_npz(path, split_seed=1).train_idx, train)


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"ind\.cora\.x.*Planetoid repository"):
        load_dataset("cora", root=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"amazon_electronics_photo\.npz.*gnn-benchmark"):
        load_dataset("amazon-photo", root=tmp_path)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="corrupt gnn-benchmark file"):
        load_npz(bad)
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="not a gnn-benchmark file"):
        load_npz(tmp_path / "other.npz")
    raw = tmp_path / "Cora" / "raw"
    raw.mkdir(parents=True)
    for part in ("x", "tx", "allx", "y", "ty", "ally", "graph"):
        (raw / f"ind.cora.{part}").write_bytes(b"garbage")
    (raw / "ind.cora.test.index").write_text("1\n2\n")
    with pytest.raises(ValueError, match="corrupt Planetoid file"):
        load_dataset("cora", root=tmp_path)
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load_dataset("nope", root=tmp_path)
    with pytest.raises(ValueError, match=r"'name' must be one of \['citeseer', 'cora', 'pubmed'\]"):
        load_planetoid("reddit", tmp_path)


def test_random_bytes_npz_is_not_a_gnn_benchmark_file(tmp_path):
    path = tmp_path / "noise.npz"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ValueError, match=r"noise\.npz.*not a gnn-benchmark file") as error:
        load_npz(path)
    assert "allow_pickle" not in str(error.value)
    truncated = tmp_path / "truncated.npz"
    np.savez(truncated, adj_data=np.ones(100))
    truncated.write_bytes(truncated.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"truncated\.npz.*not a gnn-benchmark file"):
        load_npz(truncated)


def test_npz_without_features_names_the_missing_arrays(tmp_path):
    path = tmp_path / "adjacency_only.npz"
    np.savez(
        path,
        adj_data=np.ones(1),
        adj_indices=np.array([1]),
        adj_indptr=np.array([0, 1, 1]),
        adj_shape=np.array([2, 2]),
        labels=np.array([0, 1]),
    )
    with pytest.raises(
        ValueError, match=r"adjacency_only\.npz' is not a readable .*no \['attr_data'"
    ):
        load_npz(path)


def test_planetoid_missing_test_index_and_bad_graph_are_named(shared_datasets, tmp_path):
    raw = tmp_path / "Cora" / "raw"
    shutil.copytree(shared_datasets / "planetoid" / "Cora" / "raw", raw)
    (raw / "ind.cora.test.index").unlink()
    with pytest.raises(FileNotFoundError, match=r"ind\.cora\.test\.index.*kimiyoung/planetoid"):
        load_planetoid("cora", tmp_path)
    shutil.copy(shared_datasets / "planetoid" / "Cora" / "raw" / "ind.cora.test.index", raw)
    with (raw / "ind.cora.graph").open("wb") as f:
        pickle.dump({0: [1, 99_999]}, f)
    with pytest.raises(ValueError, match=r"corrupt Planetoid file '.*ind\.cora\.graph'.*99999"):
        load_planetoid("cora", tmp_path)


def test_synthetic_is_deterministic_and_graph_like():
    spec = SyntheticSpec(
        num_nodes=20_000,
        num_edges=400_000,
        num_features=16,
        num_classes=5,
        num_train=2000,
        num_val=1000,
    )
    first, second = generate("s", spec), generate("s", spec)
    assert np.array_equal(first.graph.indices, second.graph.indices)
    assert np.array_equal(first.x, second.x)
    degree = first.graph.in_degree()
    assert (degree == 0).mean() < 0.01
    assert 12 <= np.median(degree) <= 18
    assert degree.max() > 8 * np.median(degree)
    dst = np.repeat(np.arange(first.num_nodes), degree)
    homophily = (first.y[dst] == first.y[first.graph.indices]).mean()
    assert 0.7 < homophily < 0.9
    # Symmetric, no self loops, no repeated edges.
    edges = first.graph.to_edge_index().numpy()
    assert not np.any(edges[0] == edges[1])
    keys = edges[0] * first.num_nodes + edges[1]
    assert len(np.unique(keys)) == len(keys)
    assert np.array_equal(np.sort(keys), np.sort(edges[1] * first.num_nodes + edges[0]))


def test_catalog_caches_synthetic_memory_mapped(tmp_path):
    dataset = load_dataset("synthetic-small", root=tmp_path)
    assert isinstance(dataset.x, np.memmap)
    assert (tmp_path / "synthetic-small" / "dataset.json").is_file()
    again = load_dataset("synthetic-small", root=tmp_path)
    assert np.array_equal(again.graph.indices, dataset.graph.indices)
    data = again.to_data()
    assert data.train_mask.sum() == len(dataset.train_idx)


def test_dataset_shape_checks():
    dataset = generate("s", SyntheticSpec(100, 1000, 4, 2, 10, 10))
    with pytest.raises(ValueError, match=r"'x' must have shape \[100, num_features\]"):
        GraphDataset("s", dataset.graph, dataset.x[:5], dataset.y, [0], [1], [2], 2)
    with pytest.raises(ValueError, match="'train' holds node id 100"):
        GraphDataset("s", dataset.graph, dataset.x, dataset.y, [100], [1], [2], 2)


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_features_neither_float32_nor_float16_are_refused_when_the_dataset_is_built(
    tmp_path, dtype
):
    """A dataset built in memory with other features is refused as its saved store would be,
    instead of saving a store that cannot be opened or training into a dtype mismatch."""
    dataset = generate("s", SyntheticSpec(100, 1000, 4, 2, 10, 10))
    message = rf"'x' of dataset 's' must be one of float32, float16 \(got {np.dtype(dtype)}\)"
    with pytest.raises(ValueError, match=message):
        GraphDataset("s", dataset.graph, dataset.x.astype(dtype), dataset.y, [0], [1], [2], 2)


def test_normalize_features_scales_rows_to_sum_one(tmp_path):
    dataset = load_dataset("synthetic-small", root=tmp_path)
    x = np.array(dataset.x, dtype=np.float32)
    x[3] = 0
    dataset = dataclasses.replace(dataset, x=x)
    normalized = dataset.normalize_features()
    sums = x.sum(axis=1, keepdims=True)
    expected = np.divide(x, sums, out=np.zeros_like(x), where=sums != 0)
    assert np.allclose(normalized.x, expected)
    assert not np.any(normalized.x[3])
    assert normalized.graph is dataset.graph and np.array_equal(normalized.y, dataset.y)
