"""The CSC graph store against scipy, and its on-disk format."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from graphengine import Graph


def random_edge_index(num_nodes, num_edges, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, num_nodes, size=(2, num_edges))


def test_from_edge_index_matches_scipy_csc():
    edge_index = random_edge_index(50, 400, 0)
    graph = Graph.from_edge_index(torch.from_numpy(edge_index), num_nodes=60)
    assert graph.num_nodes == 60 and graph.num_edges == 400
    assert graph.indptr.dtype == np.int64 and graph.indices.dtype == np.int32
    for v in range(60):
        mine = graph.indices[graph.indptr[v] : graph.indptr[v + 1]]
        assert sorted(mine) == sorted(edge_index[0][edge_index[1] == v])
    # Edge ids point back at the caller's columns.
    dst = np.repeat(np.arange(60), graph.in_degree())
    assert np.array_equal(edge_index[0][graph.edge_ids], graph.indices)
    assert np.array_equal(edge_index[1][graph.edge_ids], dst)
    assert torch.equal(graph.to_edge_index(), torch.from_numpy(edge_index))


def test_from_scipy_and_from_data():
    matrix = sp.random(30, 30, density=0.1, format="csr", random_state=1)
    graph = Graph.from_scipy(matrix)
    coo = matrix.tocoo()
    edges = set(zip(coo.row.tolist(), coo.col.tolist(), strict=True))
    assert set(map(tuple, graph.to_edge_index().T.tolist())) == edges
    from torch_geometric.data import Data

    data = Data(edge_index=torch.tensor([[0, 1], [1, 2]], dtype=torch.int32), num_nodes=5)
    assert Graph.from_data(data).num_nodes == 5


def test_save_load_memory_maps(tmp_path):
    graph = Graph.from_edge_index(random_edge_index(100, 1000, 2))
    graph.save(tmp_path / "g")
    loaded = Graph.load(tmp_path / "g")
    assert isinstance(loaded.indices, np.memmap)
    for name in ("indptr", "indices", "edge_ids"):
        assert np.array_equal(getattr(loaded, name), getattr(graph, name))
    restored = pickle.loads(pickle.dumps(loaded))
    assert isinstance(restored.indices, np.memmap)
    assert np.array_equal(restored.indptr, graph.indptr)
    in_memory = Graph.load(tmp_path / "g", mmap=False)
    assert not isinstance(in_memory.indices, np.memmap)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no graph at"):
        Graph.load(tmp_path / "missing")
    graph = Graph.from_edge_index(random_edge_index(100, 1000, 3))
    graph.save(tmp_path / "g")
    path = tmp_path / "g" / "indices.npy"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="corrupt or truncated array file"):
        Graph.load(tmp_path / "g")

    graph.save(tmp_path / "h")
    manifest = json.loads((tmp_path / "h" / "graph.json").read_text())
    manifest["num_edges"] += 1
    (tmp_path / "h" / "graph.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="expected int32"):
        Graph.load(tmp_path / "h")

    manifest["version"] = 99
    (tmp_path / "h" / "graph.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="version=99"):
        Graph.load(tmp_path / "h")
    (tmp_path / "h" / "graph.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupt manifest"):
        Graph.load(tmp_path / "h")
    graph.save(tmp_path / "i")
    (tmp_path / "i" / "indptr.npy").unlink()
    with pytest.raises(FileNotFoundError, match="missing array file"):
        Graph.load(tmp_path / "i")


def test_bad_edge_index():
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        Graph.from_edge_index(np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(TypeError, match="int32 or int64"):
        Graph.from_edge_index(np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="negative node id"):
        Graph.from_edge_index(np.array([[0, -1], [1, 1]]))
    with pytest.raises(ValueError, match="node id 7, outside"):
        Graph.from_edge_index(np.array([[0, 7], [1, 1]]), num_nodes=5)
    with pytest.raises(ValueError, match="must be square"):
        Graph.from_scipy(sp.random(3, 4, density=0.5))
    with pytest.raises(ValueError, match="'indptr' must end at"):
        Graph(np.array([0, 1, 3], dtype=np.int64), np.array([0, 1], dtype=np.int32))


def test_share_memory_keeps_values(tmp_path):
    graph = Graph.from_edge_index(random_edge_index(100, 1000, 4))
    graph.save(tmp_path / "g")
    for source in (graph, Graph.load(tmp_path / "g")):
        expected = {name: np.array(getattr(source, name)) for name in ("indptr", "indices")}
        source.share_memory_()
        for name, values in expected.items():
            shared = getattr(source, name)
            assert not isinstance(shared, np.memmap)
            assert "/dev/shm/" in mapping_of(shared.ctypes.data)
            assert np.array_equal(shared, values)


def mapping_of(address: int) -> str:
    """The line of /proc/self/maps whose range holds ``address``."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        low, high = (int(x, 16) for x in line.split()[0].split("-"))
        if low <= address < high:
            return line
    return ""
