"""The feature store's own API and PyG's FeatureStore API on the same tables, pinning
bookkeeping (with a fake CUDA runtime), shared memory and pickling of memory maps."""

import gc
import multiprocessing
import os
import pickle
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
import torch
from torch_geometric.data import TensorAttr

from graphengine import FeatureStore, Graph
from graphengine.data import pinning


def make_tables(num_rows=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((num_rows, 5)).astype(np.float32), rng.integers(0, 7, num_rows)


def saved_memmap(tmp_path, name, array):
    np.save(tmp_path / f"{name}.npy", array)
    return np.load(tmp_path / f"{name}.npy", mmap_mode="r")


def test_keys_group_name_pairs_and_plain_names():
    x, y = make_tables()
    paper = np.arange(12, dtype=np.int64).reshape(6, 2)
    store = FeatureStore({"x": x, (None, "y"): y, ("paper", "x"): paper})
    assert store.keys() == ["x", "y", ("paper", "x")]
    assert list(store) == store.keys() and len(store) == 3
    assert store["x"] is store[None, "x"]
    assert np.array_equal(store["x"].numpy(), x)
    assert np.array_equal(store["paper", "x"].numpy(), paper)
    assert "y" in store and (None, "y") in store and ("paper", "x") in store
    assert "paper" not in store and ("author", "x") not in store and 3 not in store
    assert store.num_rows(None) == 40 and store.num_rows("paper") == 6
    assert store.num_nodes == 40
    assert FeatureStore({("paper", "x"): paper}).num_nodes == 6


def test_read_size_update_multi_read_against_numpy():
    x, y = make_tables()
    store = FeatureStore({"x": torch.from_numpy(x.copy()), "y": torch.from_numpy(y.copy())})
    ids = np.array([3, 0, 39, 3, 17])
    assert store.read("x") is store["x"]
    assert np.array_equal(store.read("x", torch.from_numpy(ids)).numpy(), x[ids])
    assert np.array_equal(store.read("y", ids.astype(np.int32)).numpy(), y[ids])
    mask = np.zeros(40, dtype=bool)
    mask[[1, 5, 30]] = True
    assert np.array_equal(store.read("x", torch.from_numpy(mask)).numpy(), x[mask])
    assert store.size("x") == torch.Size([5]) and store.size("y") == torch.Size([])

    got = store.multi_read(["x", "y"], torch.from_numpy(ids))
    assert np.array_equal(got[0].numpy(), x[ids]) and np.array_equal(got[1].numpy(), y[ids])
    got = store.multi_read(["x", (None, "y")], [torch.tensor([1]), torch.tensor([2, 3])])
    assert np.array_equal(got[0].numpy(), x[[1]]) and np.array_equal(got[1].numpy(), y[[2, 3]])

    expected_x, expected_y = x.copy(), y.copy()
    rows = np.full((2, 5), 9.5, dtype=np.float32)
    store.update("x", torch.from_numpy(rows), torch.tensor([4, 11]))
    expected_x[[4, 11]] = rows
    store.update("y", np.array([-1, -2]), np.array([0, 39]))
    expected_y[[0, 39]] = [-1, -2]
    assert np.array_equal(store["x"].numpy(), expected_x)
    assert np.array_equal(store["y"].numpy(), expected_y)

    store.update("z", np.arange(40.0))  # a new table
    store.update("x", np.zeros((40, 3), dtype=np.float32))  # replaced whole
    assert store.size("x") == torch.Size([3]) and store.keys() == ["x", "y", "z"]
    store["w"] = torch.ones(40)
    assert store.remove("w") and not store.remove("w") and "w" not in store
    del store["z"]
    assert store.keys() == ["x", "y"]


def test_update_rewrites_cached_rows():
    x, _ = make_tables(100)
    store = FeatureStore({"x": torch.from_numpy(x.copy())})
    ranking = np.arange(100)[::-1].copy()  # rows 0..9 are the hottest
    assert store.enable_cache("x", 0.1, ranking, device="cpu") == 10
    expected = x.copy()
    ids = np.array([2, 50, 9])  # two cached rows, one not
    rows = np.arange(15, dtype=np.float32).reshape(3, 5)
    store.update("x", rows, ids)
    expected[ids] = rows
    everything = np.arange(100)
    assert np.array_equal(store.read("x", everything).numpy(), expected)
    assert store.cache_stats("x")["hits"] == 10


def test_pyg_feature_store_api_on_the_same_store():
    x, y = make_tables()
    paper = np.arange(12, dtype=np.int64).reshape(6, 2)
    store = FeatureStore({"x": x.copy(), "y": y, ("paper", "x"): paper})
    ids = torch.tensor([5, 1, 5, 20])
    assert torch.equal(
        store.get_tensor(group_name=None, attr_name="x", index=ids), store.read("x", ids)
    )
    assert np.array_equal(store.get_tensor(None, "x", ids).numpy(), x[ids.numpy()])
    assert np.array_equal(store.get_tensor(None, "y", None).numpy(), y)
    assert np.array_equal(store.get_tensor(None, "x", slice(2, 4)).numpy(), x[2:4])
    assert np.array_equal(store.get_tensor("paper", "x", torch.tensor([5])).numpy(), paper[[5]])
    # PyG's indexing: a 3-tuple and a group view reach get_tensor.
    assert np.array_equal(store[None, "x", ids].numpy(), x[ids.numpy()])
    assert np.array_equal(store["paper"]["x"][torch.tensor([1, 2])].numpy(), paper[[1, 2]])
    assert np.array_equal(store[TensorAttr(None, "y", ids)].numpy(), y[ids.numpy()])

    attrs = [TensorAttr(None, "x", ids), TensorAttr(None, "y", ids)]
    got = store.multi_get_tensor(attrs)
    assert np.array_equal(got[0].numpy(), x[ids.numpy()])
    assert np.array_equal(got[1].numpy(), y[ids.numpy()])
    mixed = store.multi_get_tensor([TensorAttr(None, "x", ids), TensorAttr("paper", "x", None)])
    assert np.array_equal(mixed[1].numpy(), paper)

    found = {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()}
    assert found == {(None, "x"), (None, "y"), ("paper", "x")}
    assert store.get_tensor_size(None, "x") == (40, 5)
    assert store.get_tensor_size("paper", "x") == (6, 2)
    assert store.get_tensor_size(None, "missing") is None

    assert store.put_tensor(torch.zeros(40, 2), group_name=None, attr_name="h", index=None)
    assert store.keys()[-1] == "h" and store.size("h") == torch.Size([2])
    store.put_tensor(torch.ones(2, 5), group_name=None, attr_name="x", index=torch.tensor([0, 7]))
    expected = x.copy()
    expected[[0, 7]] = 1.0
    assert np.array_equal(store.read("x").numpy(), expected)
    assert store.update_tensor(torch.ones(40), None, "h", None)
    assert store.size("h") == torch.Size([])
    assert store.remove_tensor(None, "h", None) and "h" not in store
    assert not store.remove_tensor(None, "h", None)
    store[TensorAttr(None, "v", None)] = torch.arange(40)
    assert torch.equal(store["v"], torch.arange(40))


def test_errors_name_the_argument():
    x, y = make_tables()
    store = FeatureStore({"x": x, "y": y})
    with pytest.raises(TypeError, match=r"'tables' must be a mapping .*\(got list\)"):
        FeatureStore([x])
    with pytest.raises(TypeError, match=r"table 'x' must be a tensor or numpy array \(got list\)"):
        FeatureStore({"x": [1, 2]})
    with pytest.raises(ValueError, match=r"table 'x' must be 1-D or 2-D \(got shape \(2, 2, 2\)\)"):
        FeatureStore({"x": np.zeros((2, 2, 2))})
    with pytest.raises(ValueError, match="table 'z' has 3 rows, the others 40"):
        store.update("z", np.zeros(3))
    with pytest.raises(
        TypeError, match=r"'key' must be a table name or a \(group, name\) pair \(got 7\)"
    ):
        store.read(7)
    with pytest.raises(KeyError, match="no table 'q'"):
        store["q"]
    with pytest.raises(KeyError, match="no table 'x' of group 'paper'"):
        store.read(("paper", "x"))
    with pytest.raises(TypeError, match=r"'ids' must be int32 or int64 \(got torch.float32\)"):
        store.read("x", torch.tensor([1.0]))
    with pytest.raises(TypeError, match=r"'ids' must be a tensor or numpy array \(got list\)"):
        store.read("x", [1, 2])
    with pytest.raises(ValueError, match=r"'ids' must be 1-D \(got shape \(1, 1\)\)"):
        store.read("x", torch.tensor([[1]]))
    with pytest.raises(IndexError, match="holds id 40"):
        store.read("x", torch.tensor([40]))
    with pytest.raises(ValueError, match=r"one entry per key \(2\) \(got 1\)"):
        store.multi_read(["x", "y"], [torch.tensor([0])])
    with pytest.raises(
        TypeError, match=r"'value' must have table 'x''s dtype torch.float32 \(got torch.float64\)"
    ):
        store.update("x", np.zeros((1, 5)), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"'value' must have shape \(1, 5\) \(got \(1, 4\)\)"):
        store.update("x", np.zeros((1, 4), dtype=np.float32), torch.tensor([0]))
    with pytest.raises(IndexError, match=r"'ids' holds id -1, outside \[0, 40\)"):
        store.update("x", np.zeros((1, 5), dtype=np.float32), torch.tensor([-1]))
    with pytest.raises(TypeError, match=r"'value' must be a tensor or numpy array \(got float\)"):
        store.update("x", 1.0, torch.tensor([0]))
    with pytest.raises(ValueError, match="'num_nodes' of an empty FeatureStore"):
        _ = FeatureStore().num_nodes
    hetero = FeatureStore({("a", "x"): np.zeros(2), ("b", "x"): np.zeros(3)})
    with pytest.raises(ValueError, match="'num_nodes' is ambiguous for groups"):
        _ = hetero.num_nodes
    with pytest.raises(KeyError, match="no table in group 'c'"):
        hetero.num_rows("c")
    with pytest.raises(KeyError, match="table 'x' has no cache"):
        store.cache_stats("x")


def test_read_only_memory_map_refuses_row_updates(tmp_path):
    x, _ = make_tables()
    store = FeatureStore({"x": saved_memmap(tmp_path, "x", x)})
    with pytest.raises(ValueError, match="table 'x' is a read-only memory map"):
        store.update("x", np.zeros((1, 5), dtype=np.float32), torch.tensor([0]))
    writable = np.load(tmp_path / "x.npy", mmap_mode="r+")
    store = FeatureStore({"x": writable})
    store.update("x", np.ones((1, 5), dtype=np.float32), torch.tensor([2]))
    assert np.array_equal(np.load(tmp_path / "x.npy")[2], np.ones(5))


def test_from_npy_says_what_a_table_file_is_instead_of_missing(tmp_path):
    os.mkfifo(tmp_path / "fifo.npy")  # opening it would wait for a writer forever
    (tmp_path / "loop.npy").symlink_to(tmp_path / "loop.npy")
    (tmp_path / "dir.npy").mkdir()
    for name, what in [("fifo", "a FIFO"), ("loop", "a symlink loop"), ("dir", "a directory")]:
        with pytest.raises(ValueError, match=rf"table file for 'x': '.*{name}\.npy' is {what}"):
            FeatureStore.from_npy({"x": tmp_path / f"{name}.npy"})
    with pytest.raises(FileNotFoundError, match=r"missing table file for 'x': '.*gone\.npy'"):
        FeatureStore.from_npy({"x": tmp_path / "gone.npy"})


class FakeCudart:
    """Records cudaHostRegister / cudaHostUnregister calls; ``fail`` makes register fail."""

    def __init__(self, fail=0):
        self.registered = {}
        self.calls = []
        self.fail = fail

    def cudaHostRegister(self, pointer, size, flags):
        self.calls.append(("register", pointer, size, flags))
        if not self.fail:
            self.registered[pointer] = size
        return self.fail

    def cudaHostUnregister(self, pointer):
        self.calls.append(("unregister", pointer))
        return 0 if self.registered.pop(pointer, None) is not None else 1


@pytest.fixture
def fake_cudart(monkeypatch):
    runtime = FakeCudart()
    monkeypatch.setattr(pinning, "cudart", lambda: runtime)
    return runtime


def test_pinning_registers_once_and_unregisters_on_drop(fake_cudart, tmp_path):
    x, y = make_tables()
    store = FeatureStore({"x": x.copy(), "y": saved_memmap(tmp_path, "y", y)})
    store.pin_memory_()
    store.pin_memory_()  # harmless: nothing registered twice
    registers = [call for call in fake_cudart.calls if call[0] == "register"]
    assert len(registers) == 2
    x_ptr, y_ptr = store["x"].data_ptr(), store["y"].data_ptr()
    assert {(p, s, f) for _, p, s, f in registers} == {
        (x_ptr, x.nbytes, pinning.HOST_REGISTER_DEFAULT),
        (y_ptr, y.nbytes, pinning.HOST_REGISTER_READ_ONLY),
    }
    assert pinning.is_registered(store["x"]) and pinning.is_registered(store["y"])
    with pytest.raises(ValueError, match="table 'x' is pinned; call share_memory_"):
        store.share_memory_()

    store.remove("x")
    assert fake_cudart.calls[-1] == ("unregister", x_ptr)
    assert x_ptr not in fake_cudart.registered
    store.update("y", np.zeros(40))  # replacing a table unregisters the old one
    assert fake_cudart.calls[-1] == ("unregister", y_ptr) and not fake_cudart.registered

    store = FeatureStore({"x": x.copy()}).pin_memory_()
    pointer = store["x"].data_ptr()
    del store
    gc.collect()
    assert fake_cudart.calls[-1] == ("unregister", pointer) and not fake_cudart.registered
    assert not pinning._registered


def test_pinning_tracks_ranges_not_start_addresses(fake_cudart):
    whole = torch.ones(100, 4)
    head = pinning.pin(whole[:10], what="table 'head'")
    assert pinning.is_registered(head) and not pinning.is_registered(whole)
    with pytest.raises(ValueError, match=r"part of table 'x''s memory is registered already"):
        pinning.pin(whole, what="table 'x'")
    assert pinning.unpin(head)
    pinned = pinning.pin(whole, what="table 'x'")
    assert pinning.is_registered(pinned[10:20]) and pinning.is_registered(pinned)
    assert pinning.pin(pinned[5:9]) is not None  # covered: nothing registered again
    assert [call[0] for call in fake_cudart.calls] == ["register", "unregister", "register"]
    assert pinning.unpin(pinned)


def test_forked_child_does_not_unregister(fake_cudart, monkeypatch):
    table = pinning.pin(torch.ones(8, 2), what="table 'x'")
    pointer = table.data_ptr()
    monkeypatch.setattr(pinning.os, "getpid", lambda: -1)  # as if in a forked child
    assert not pinning.unpin(table) and not pinning.is_registered(table)
    assert fake_cudart.calls == [("register", pointer, 64, 0)]


def test_pinning_failure_and_no_cuda(monkeypatch):
    runtime = FakeCudart(fail=2)
    monkeypatch.setattr(pinning, "cudart", lambda: runtime)
    store = FeatureStore({"x": torch.ones(4, 2)})
    with pytest.raises(RuntimeError, match=r"cudaHostRegister failed for table 'x' \(error 2\)"):
        store.pin_memory_()
    assert not pinning.is_registered(store["x"])
    with pytest.raises(ValueError, match="'tensor' must be on the CPU"):
        pinning.pin(torch.ones(2, device="meta"))
    monkeypatch.undo()
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="pinning needs CUDA"):
            store.pin_memory_()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_real_cuda_pinning_round_trip():
    store = FeatureStore({"x": torch.arange(64.0).view(16, 4)})
    store.pin_memory_().pin_memory_()
    assert store["x"].is_pinned() and pinning.is_registered(store["x"])
    table = store["x"]
    assert store.remove("x") and not pinning.is_registered(table)
    assert not table.is_pinned()


def test_share_memory_skips_memory_maps(tmp_path):
    x, y = make_tables()
    mapped = saved_memmap(tmp_path, "x", x)
    store = FeatureStore({"x": mapped, "y": torch.from_numpy(y.copy())}).share_memory_()
    assert store["x"].data_ptr() == mapped.ctypes.data and not store["x"].is_shared()
    assert store["y"].is_shared()
    assert np.array_equal(store["y"].numpy(), y) and np.array_equal(store["x"].numpy(), x)


def test_pickle_names_memory_mapped_tables(tmp_path):
    big = np.arange(200_000, dtype=np.float32).reshape(50_000, 4)
    mapped = saved_memmap(tmp_path, "big", big)
    store = FeatureStore({"x": mapped, ("paper", "x"): mapped[100:110]})
    blob = pickle.dumps(store)
    assert len(blob) < 2_000  # names and shapes, no array bytes (800 kB of them)
    restored = pickle.loads(blob)
    assert restored.keys() == ["x", ("paper", "x")]
    assert np.array_equal(restored["x"].numpy(), big)
    assert np.array_equal(restored["paper", "x"].numpy(), big[100:110])
    assert len(pickle.dumps(restored)) < 2_000
    in_memory = FeatureStore({"x": big})
    assert len(pickle.dumps(in_memory)) > big.nbytes


def _child_view(graph, store):
    """What a spawned child sees of a pickled graph and store."""
    return (
        np.array(graph.indptr),
        np.array(graph.indices),
        isinstance(graph.indices, np.memmap),
        graph.validated,
        store.read("x").numpy().copy(),
        len(pickle.dumps(store)),
    )


def test_memory_mapped_stores_survive_spawn(tmp_path):
    rng = np.random.default_rng(3)
    Graph.from_edge_index(rng.integers(0, 300, (2, 3000))).save(tmp_path / "g")
    graph = Graph.load(tmp_path / "g")
    x = rng.standard_normal((300, 8)).astype(np.float32)
    store = FeatureStore({"x": saved_memmap(tmp_path, "x", x)})
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        indptr, indices, still_mapped, validated, values, size = pool.submit(
            _child_view, graph, store
        ).result(timeout=120)
    assert np.array_equal(indptr, graph.indptr) and np.array_equal(indices, graph.indices)
    assert still_mapped and validated
    assert np.array_equal(values, x) and size == len(pickle.dumps(store)) < 2_000


def test_pyg_remote_backend_code_reads_our_stores():
    """PyG's own sampler set-up and batch filter take (FeatureStore, Graph) as they take any
    remote backend, and give the rows our loader gathers."""
    import warnings

    from torch_geometric.loader.utils import filter_custom_store
    from torch_geometric.sampler import NeighborSampler as PygNeighborSampler

    from graphengine import NeighborLoader

    edge_index = torch.randint(0, 50, (2, 300), generator=torch.Generator().manual_seed(0))
    graph = Graph.from_edge_index(edge_index, 50)
    store = FeatureStore({"x": torch.arange(150.0).view(50, 3), "y": torch.arange(50)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyG warns that pyg-lib is not installed
        pyg_sampler = PygNeighborSampler((store, graph), num_neighbors=[3, 2])
    in_degree = np.bincount(edge_index[1].numpy(), minlength=50)  # repeated edges count
    expected_colptr = np.concatenate([[0], np.cumsum(in_degree)])
    assert np.array_equal(pyg_sampler.colptr.numpy(), expected_colptr)
    batch = next(iter(NeighborLoader((store, graph), [3, 2], batch_size=5, num_workers=0)))
    data = filter_custom_store(store, graph, batch.n_id, *batch.edge_index, batch.e_id)
    assert torch.equal(data.x, torch.arange(150.0).view(50, 3)[batch.n_id])
    assert torch.equal(data.y, batch.n_id)


def test_masks_must_match_the_table_rows_and_rank():
    x, y = make_tables()
    store = FeatureStore({"x": x, "y": y})
    short = torch.ones(39, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"'ids' as a mask must have 40 entries \(got 39\)"):
        store.read("x", short)
    with pytest.raises(ValueError, match=r"'ids' as a mask must have 40 entries \(got 41\)"):
        store.read("x", np.ones(41, dtype=np.bool_))
    with pytest.raises(ValueError, match=r"'ids' as a mask must be 1-D \(got shape \(40, 1\)\)"):
        store.read("x", torch.ones(40, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"'ids' as a mask must have 40 entries \(got 39\)"):
        store.multi_read(["x", "y"], short)
    with pytest.raises(ValueError, match=r"'ids' as a mask must have 40 entries \(got 39\)"):
        store.update("y", torch.zeros(39, dtype=torch.int64), short)
    mask = torch.zeros(40, dtype=torch.bool)
    mask[[3, 7]] = True
    assert torch.equal(store.read("x", mask), torch.as_tensor(x)[[3, 7]])


def test_gather_takes_the_ids_read_takes():
    x, _ = make_tables()
    store = FeatureStore({"x": x})
    expected = torch.as_tensor(x)[[5, 0, 5]]
    assert torch.equal(store.gather("x", np.array([5, 0, 5])), expected)
    assert torch.equal(store.gather("x", np.array([5, 0, 5], dtype=np.int32)), expected)
    out = torch.empty(3, x.shape[1], dtype=torch.as_tensor(x).dtype)
    assert store.gather("x", np.array([5, 0, 5]), out=out) is out
    assert torch.equal(out, expected)
    with pytest.raises(TypeError, match=r"'ids' must be a tensor or numpy array \(got list\)"):
        store.gather("x", [1, 2])
    with pytest.raises(TypeError, match=r"'ids' must be int32 or int64 \(got torch.float64\)"):
        store.gather("x", np.array([1.0]))


def test_gather_and_read_take_strided_ids(tmp_path):
    """The loaders take ``ids[::2]``; gather and read refused it ("'index' must be contiguous",
    or torch's negative-stride error for a reversed numpy array)."""
    x, _ = make_tables()
    np.save(tmp_path / "x.npy", x)
    for table in (x, np.load(tmp_path / "x.npy", mmap_mode="r")):
        store = FeatureStore({"x": table})
        ids = torch.arange(x.shape[0])
        for strided in (ids[::2], ids.numpy()[::3], ids.numpy()[::-1], ids.int()[1::2]):
            expected = torch.as_tensor(x)[[int(i) for i in strided]]
            assert torch.equal(store.gather("x", strided), expected)
            assert torch.equal(store.read("x", strided), expected)
            assert torch.equal(store.multi_read(["x"], strided)[0], expected)


def test_one_mask_for_tables_of_different_row_counts_is_refused():
    store = FeatureStore({("a", "x"): np.zeros(2), ("b", "x"): np.zeros(3)})
    with pytest.raises(ValueError, match=r"tables have \[2, 3\] rows; pass one mask per key"):
        store.multi_read([("a", "x"), ("b", "x")], torch.ones(2, dtype=torch.bool))
    masks = [torch.tensor([True, False]), torch.tensor([False, True, True])]
    picked = store.multi_read([("a", "x"), ("b", "x")], masks)
    assert [tuple(each.shape) for each in picked] == [(1,), (2,)]
