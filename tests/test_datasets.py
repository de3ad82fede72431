"""Dataset readers against PyG's own readers, the generator, the catalog."""

import numpy as np
import pytest
import torch
from torch_geometric.io import read_npz, read_planetoid_data

from graphengine.datasets import GraphDataset, SyntheticSpec, generate, load_dataset
from graphengine.datasets.npz import load_npz
from graphengine.datasets.planetoid import load_planetoid


def edge_set(edge_index: torch.Tensor) -> set:
    return set(map(tuple, edge_index.T.tolist()))


@pytest.mark.parametrize("name,folder", [("cora", "Cora"), ("citeseer", "CiteSeer")])
def test_planetoid_matches_pyg(shared_datasets, name, folder):
    root = shared_datasets / "planetoid"
    dataset = load_planetoid(name, root)
    reference = read_planetoid_data(str(root / folder / "raw"), name)
    assert np.array_equal(dataset.x, reference.x.numpy())
    assert np.array_equal(dataset.y, reference.y.numpy())
    assert edge_set(dataset.graph.to_edge_index()) == edge_set(reference.edge_index)
    assert dataset.graph.num_edges == reference.edge_index.shape[1]
    for split in ("train", "val", "test"):
        mask = reference[f"{split}_mask"]
        assert np.array_equal(dataset.split(split), mask.nonzero().view(-1).numpy())


@pytest.mark.parametrize("stem", ["cora", "citeseer"])
def test_npz_matches_pyg(shared_datasets, stem):
    path = shared_datasets / "gnn-benchmark" / f"{stem}.npz"
    dataset = load_dataset(str(path))
    reference = read_npz(str(path))
    assert np.array_equal(dataset.x, reference.x.numpy())
    assert np.array_equal(dataset.y, reference.y.numpy())
    assert edge_set(dataset.graph.to_edge_index()) == edge_set(reference.edge_index)
    train, val, test = dataset.train_idx, dataset.val_idx, dataset.test_idx
    assert len(set(train) | set(val) | set(test)) == dataset.num_nodes
    assert not set(train) & set(val) and not set(val) & set(test)
    assert np.all(np.bincount(dataset.y[train]) == 20)
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
