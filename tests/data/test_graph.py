"""The CSC graph store against scipy, and its on-disk format."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from graphengine import FeatureStore, Graph, NeighborLoader


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


def test_share_memory_copies_only_in_memory_arrays(tmp_path):
    graph = Graph.from_edge_index(random_edge_index(100, 1000, 4))
    graph.save(tmp_path / "g")
    expected = {name: np.array(getattr(graph, name)) for name in ("indptr", "indices")}
    graph.share_memory_()
    for name, values in expected.items():
        shared = getattr(graph, name)
        assert not isinstance(shared, np.memmap)
        assert "/dev/shm/" in mapping_of(shared.ctypes.data)
        assert np.array_equal(shared, values)
    mapped = Graph.load(tmp_path / "g")
    before = {name: getattr(mapped, name) for name in ("indptr", "indices", "edge_ids")}
    mapped.share_memory_()
    for name, array in before.items():
        after = getattr(mapped, name)
        assert after is array and isinstance(after, np.memmap)
        assert mapping_of(after.ctypes.data).endswith(str(tmp_path / "g" / f"{name}.npy"))
        assert np.array_equal(after, expected.get(name, graph.edge_ids))


def test_share_memory_is_once_and_torch_multiprocessing_sends_handles():
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers torch's shared-memory reducers)

    graph = Graph.from_edge_index(random_edge_index(20000, 200000, 5)).share_memory_()
    where = {name: getattr(graph, name).ctypes.data for name in ("indptr", "indices")}
    graph.share_memory_()
    assert {name: getattr(graph, name).ctypes.data for name in where} == where
    assert graph.validated
    nbytes = graph.indptr.nbytes + graph.indices.nbytes + graph.edge_ids.nbytes
    assert len(bytes(ForkingPickler.dumps(graph))) < 10_000 < nbytes  # handles, not values
    rebuilt = pickle.loads(pickle.dumps(graph))  # plain pickle: values
    assert np.array_equal(rebuilt.indices, graph.indices) and rebuilt.validated


def test_new_arrays_are_validated_again():
    graph = Graph.from_edge_index(random_edge_index(10, 30, 6))
    assert graph.validated
    graph.indices = np.array(graph.indices)
    assert not graph.validated
    graph.validate()
    assert graph.validated


def test_put_edge_index_checks_before_narrowing():
    graph = Graph.from_edge_index(random_edge_index(10, 30, 7))
    colptr = torch.tensor([0, 1, 2])
    with pytest.raises(ValueError, match=r"'indices' must lie in \[0, 2\) for 2 nodes"):
        graph.put_edge_index((torch.tensor([2**32 + 1, 0]), colptr), layout="csc", size=(2, 2))
    with pytest.raises(TypeError, match=r"'colptr' must hold integer ids \(got dtype float32\)"):
        graph.put_edge_index(
            (torch.tensor([0, 1]), torch.tensor([0, 0.7, 1.2])), layout="csc", size=(2, 2)
        )
    graph.put_edge_index((torch.tensor([1, 0]), colptr), layout="csc", size=(2, 2))
    assert graph.indices.dtype == np.int32 and graph.validated
    assert np.array_equal(graph.indices, [1, 0]) and np.array_equal(graph.indptr, [0, 1, 2])


def unique_edge_index(num_nodes, num_edges, seed):
    """Random edges without duplicates, in random order."""
    rng = np.random.default_rng(seed)
    keys = rng.choice(num_nodes * num_nodes, size=num_edges, replace=False)
    return np.stack(np.divmod(keys, num_nodes))


def test_from_edge_index_against_scipy_csc_and_stable():
    edge_index = unique_edge_index(300, 4000, 5)
    graph = Graph.from_edge_index(edge_index, num_nodes=310)
    edge_id = np.arange(edge_index.shape[1])
    reference = sp.csc_matrix(
        (edge_id + 1, (edge_index[0], edge_index[1])), shape=(310, 310)
    )  # the data carries each edge's id (+1: no explicit zeros)
    reference.sort_indices()
    assert np.array_equal(graph.indptr, reference.indptr)
    dst = np.repeat(np.arange(310), graph.in_degree())
    order = np.lexsort((graph.indices, dst))  # sort ours by (column, row) as scipy is
    assert np.array_equal(graph.indices[order], reference.indices)
    assert np.array_equal(graph.edge_ids[order], reference.data - 1)
    # Stable: within a column, edges keep the caller's order.
    same_column = dst[1:] == dst[:-1]
    assert np.all(np.diff(graph.edge_ids)[same_column] > 0)
    # Already sorted by destination: no permutation.
    sorted_graph = Graph.from_edge_index(edge_index[:, np.argsort(edge_index[1], kind="stable")])
    assert sorted_graph.edge_ids is None


def test_pyg_graph_store_interface_against_scipy():
    from torch_geometric.data import EdgeAttr

    edge_index = unique_edge_index(200, 1500, 6)
    graph = Graph.from_edge_index(torch.from_numpy(edge_index), num_nodes=200)
    reference = sp.csc_matrix((np.ones(1500), (edge_index[0], edge_index[1])), shape=(200, 200))
    row, colptr, perm = graph.csc()
    assert perm is None and np.array_equal(colptr.numpy(), reference.indptr)
    for v in (0, 17, 199):
        mine = np.sort(row[colptr[v] : colptr[v + 1]].numpy())
        assert np.array_equal(
            mine, np.sort(reference.indices[reference.indptr[v] : reference.indptr[v + 1]])
        )
    (attr,) = graph.get_all_edge_attrs()
    assert attr == EdgeAttr(None, "csc", is_sorted=True, size=(200, 200))
    row2, colptr2 = graph.get_edge_index(layout="csc")
    assert torch.equal(row2, row) and torch.equal(colptr2, colptr)
    row3, col3 = graph.get_edge_index(None, "coo")
    assert np.array_equal(torch.stack([row3, col3]).numpy(), edge_index)
    coo_row, coo_col, _ = graph.coo()
    assert np.array_equal(
        np.sort(coo_row.numpy() * 200 + coo_col.numpy()),
        np.sort(edge_index[0] * 200 + edge_index[1]),
    )
    with pytest.raises(KeyError, match="not found"):
        graph.get_edge_index(("a", "to", "b"), "csc")
    with pytest.raises(KeyError, match="not found"):
        graph.get_edge_index(None, "csr")
    assert not graph.remove_edge_index(None, "csc")

    other = Graph.from_edge_index(np.array([[1, 0, 2], [0, 2, 2]]))
    assert other.put_edge_index((row, colptr), None, "csc")
    assert np.array_equal(other.indptr, graph.indptr) and other.edge_ids is None
    assert other.validated and other.num_edges == 1500
    assert other.put_edge_index(
        (torch.tensor([3, 0]), torch.tensor([1, 1])), None, "coo", size=(5, 5)
    )
    assert other.num_nodes == 5 and other.to_edge_index().tolist() == [[3, 0], [1, 1]]
    with pytest.raises(ValueError, match="'edge_type' must be None"):
        other.put_edge_index((row, colptr), ("a", "to", "b"), "csc")
    with pytest.raises(ValueError, match=r"'size' must be square for a Graph \(got \(5, 6\)\)"):
        other.put_edge_index((row, colptr), None, "coo", size=(5, 6))
    with pytest.raises(ValueError, match="'indices' must lie in"):
        other.put_edge_index((torch.tensor([9]), torch.tensor([0, 1])), None, "csc")


def test_from_scipy_validates_malformed_matrices():
    for fmt in ("csc", "csr"):
        matrix = sp.random(30, 30, density=0.1, format=fmt, random_state=2)
        matrix.indices[3] = 40  # edited after construction: out of range
        with pytest.raises(ValueError, match="'matrix' is malformed: indices must be < 30"):
            Graph.from_scipy(matrix)
    coo = sp.random(30, 30, density=0.1, format="coo", random_state=2)
    coo.row[0] = 31
    with pytest.raises(ValueError, match=r"'matrix' is malformed: row index 31 outside \[0, 30\)"):
        Graph.from_scipy(coo)
    coo.row[0] = 0
    coo.col[1] = -1
    with pytest.raises(ValueError, match="'matrix' is malformed: col index -1"):
        Graph.from_scipy(coo)
    good = Graph.from_scipy(sp.random(30, 30, density=0.1, format="coo", random_state=2))
    assert good.validated


def test_validated_flag_survives_pickle_and_load(tmp_path):
    indptr = np.array([0, 1, 2], dtype=np.int64)
    indices = np.array([1, 0], dtype=np.int32)
    assert Graph(indptr, indices).validated
    unchecked = Graph(indptr, indices, validate=False)
    assert not unchecked.validated
    assert not pickle.loads(pickle.dumps(unchecked)).validated
    built = Graph.from_edge_index(random_edge_index(50, 300, 7))
    assert built.validated and pickle.loads(pickle.dumps(built)).validated
    built.save(tmp_path / "g")
    assert Graph.load(tmp_path / "g").validated
    unchecked_load = Graph.load(tmp_path / "g", validate=False)
    assert not unchecked_load.validated
    restored = pickle.loads(pickle.dumps(unchecked_load))
    assert isinstance(restored.indices, np.memmap) and not restored.validated
    restored = pickle.loads(pickle.dumps(Graph.load(tmp_path / "g")))
    assert isinstance(restored.indices, np.memmap) and restored.validated
    assert len(pickle.dumps(restored)) < 1_000


def mapping_of(address: int) -> str:
    """The line of /proc/self/maps whose range holds ``address``."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        low, high = (int(x, 16) for x in line.split()[0].split("-"))
        if low <= address < high:
            return line
    return ""


def test_loader_validates_an_unchecked_graph_once():
    indptr = np.array([0, 1, 2], dtype=np.int64)
    bad = Graph(indptr, np.array([1, 7], dtype=np.int32), validate=False)
    store = FeatureStore({"x": torch.arange(2.0)})
    with pytest.raises(ValueError, match=r"'indices' must lie in \[0, 2\) for 2 nodes \(found 7\)"):
        NeighborLoader((store, bad), [1])
    good = Graph(indptr, np.array([1, 0], dtype=np.int32), validate=False)
    assert not good.validated
    NeighborLoader((store, good), [1])
    assert good.validated


def test_reads_graphs_written_by_earlier_versions(tmp_path):
    """The manifest as graphengine has written it since format version 1."""
    np.save(tmp_path / "indptr.npy", np.array([0, 1, 3], dtype=np.int64))
    np.save(tmp_path / "indices.npy", np.array([1, 0, 1], dtype=np.int32))
    manifest = {
        "format": "graphengine.graph",
        "version": 1,
        "num_nodes": 2,
        "num_edges": 3,
        "arrays": {"indptr": "int64", "indices": "int32"},
    }
    (tmp_path / "graph.json").write_text(json.dumps(manifest))
    graph = Graph.load(tmp_path)
    assert graph.validated and graph.to_edge_index().tolist() == [[1, 0, 1], [0, 1, 1]]


@pytest.mark.parametrize("num_nodes", [5.0, "5", True])
def test_from_edge_index_refuses_a_num_nodes_that_is_not_an_integer(num_nodes):
    with pytest.raises(TypeError, match=rf"'num_nodes' must be an integer \(got {num_nodes!r}\)"):
        Graph.from_edge_index(np.array([[0, 1], [1, 2]]), num_nodes)


def test_from_edge_index_refuses_a_negative_num_nodes():
    with pytest.raises(ValueError, match=r"'num_nodes' must be >= 0 \(got -3\)"):
        Graph.from_edge_index(np.zeros((2, 0), dtype=np.int64), -3)
    assert Graph.from_edge_index(np.array([[0], [1]]), np.int64(4)).num_nodes == 4


@pytest.mark.parametrize(
    ("edge_ids", "message"),
    [
        ([0, 1, -1], r"'edge_ids' holds -1, outside \[0, 3\)"),
        ([0, 3, 1], r"'edge_ids' holds 3, outside \[0, 3\)"),
        ([0, 2, 2], r"'edge_ids' must be a permutation of 0..2 \(edge id 1 is missing"),
    ],
)
def test_edge_ids_must_be_a_permutation(tmp_path, edge_ids, message):
    indptr = np.array([0, 1, 3], dtype=np.int64)
    indices = np.array([1, 0, 1], dtype=np.int32)
    edge_ids = np.array(edge_ids, dtype=np.int64)
    with pytest.raises(ValueError, match=message):
        Graph(indptr, indices, edge_ids)
    Graph(indptr, indices, np.array([2, 0, 1])).save(tmp_path / "g")
    np.save(tmp_path / "g" / "edge_ids.npy", edge_ids)
    with pytest.raises(ValueError, match=message):
        Graph.load(tmp_path / "g")


def test_validated_graph_arrays_are_read_only(tmp_path):
    """A write into a validated graph's arrays would reach samplers that trust them (a source
    id of 10**9 crashed a NeighborLoader): it raises at once, for every way to validate."""
    edge_index = random_edge_index(20, 60, 8)
    built = Graph.from_edge_index(edge_index)
    indptr, indices = np.array(built.indptr), np.array(built.indices)
    checked = Graph(indptr, indices, np.array(built.edge_ids))
    built.save(tmp_path / "g")
    graphs = {
        "from_edge_index": built,
        "constructor": checked,
        "load(mmap=False)": Graph.load(tmp_path / "g", mmap=False),
        "pickled": pickle.loads(pickle.dumps(built)),
        "shared": Graph.from_edge_index(edge_index).share_memory_(),
        "validate()": Graph(indptr, indices, validate=False).validate(),
    }
    for how, graph in graphs.items():
        for name in ("indptr", "indices", "edge_ids"):
            array = getattr(graph, name)
            if array is None:
                continue
            with pytest.raises(ValueError, match="assignment destination is read-only"):
                array[5] = 10**9
            assert array.dtype.kind == "i", how
    assert indices.flags.writeable and indptr.flags.writeable  # the caller's arrays keep theirs
    assert np.array_equal(built.to_edge_index(), edge_index)
    unchecked = Graph(indptr, indices, validate=False)
    unchecked.indices[0] = 1  # not validated: writable, and checked when it is validated
    unchecked.indices = np.array(indices)
    assert not unchecked.validated and unchecked.indices.flags.writeable
    store = FeatureStore({"x": torch.arange(20.0)})
    assert sum(batch.num_nodes for batch in NeighborLoader((store, built), [2], batch_size=5)) > 0


def test_to_edge_index_checks_edge_ids_first():
    """``edge_ids`` index a scratch array: a bad one quoted an uninitialised value."""
    indptr = np.array([0, 1, 3], dtype=np.int64)
    indices = np.array([1, 0, 1], dtype=np.int32)
    cases = (([0, 0, 1], r"'edge_ids' must be a permutation of 0..2"), ([0, 9, 1], r"holds 9"))
    for edge_ids, message in cases:
        graph = Graph(indptr, indices, np.array(edge_ids, dtype=np.int64), validate=False)
        with pytest.raises(ValueError, match=message):
            graph.to_edge_index()
