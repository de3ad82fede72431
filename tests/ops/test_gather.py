"""Row gathers of the C++ extension and the feature store, against torch.index_select."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from graphengine import ops
from graphengine.data.feature_store import FeatureStore

DTYPES = [
    pytest.param(torch.float32, id="float32"),
    pytest.param(torch.float16, id="float16"),
    pytest.param(torch.bfloat16, id="bfloat16"),
    pytest.param(torch.int64, id="int64"),
    pytest.param(torch.uint8, id="uint8"),
]
INDEX_DTYPES = [pytest.param(torch.int32, id="idx32"), pytest.param(torch.int64, id="idx64")]
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here"),
    ),
]


def table(rows, cols, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(rows, cols, generator=generator) * 100).to(dtype)


@pytest.fixture(scope="module", autouse=True)
def extension():
    if not ops.build_extension():
        pytest.fail("the extension did not build on this machine")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_gather_matches_index_select(dtype, index_dtype, device):
    src = table(1000, 37, dtype)
    index = torch.randint(0, 1000, (5000,), dtype=index_dtype)  # repeats included
    if device == "cuda":
        expected = src.index_select(0, index.long()).cuda()
        for source in (src.cuda(), src.pin_memory()):
            assert torch.equal(ops.gather_rows(source, index.cuda()), expected)
        return
    assert torch.equal(ops.gather_rows(src, index), src.index_select(0, index.long()))
    out = torch.empty(5000, 37, dtype=dtype)
    assert ops.gather_rows(src, index, out) is out
    assert torch.equal(out, src.index_select(0, index.long()))


def test_empty_index_and_large_pooled_outputs():
    src = table(100, 8, torch.float32)
    assert ops.gather_rows(src, torch.empty(0, dtype=torch.int64)).shape == (0, 8)
    big = table(20_000, 128, torch.float32)
    index = torch.randint(0, 20_000, (30_000,))
    first = ops.gather_rows(big, index)
    assert torch.equal(first, big[index])
    del first
    second = ops.gather_rows(big, index.flip(0))
    assert torch.equal(second, big[index.flip(0)])
    kept = second[:10]
    del second
    third = ops.gather_rows(big, index)
    assert third.data_ptr() != kept.data_ptr()
    assert torch.equal(kept, big[index.flip(0)[:10]])
    assert torch.equal(third, big[index])


# In a fresh process: in this one, buffers that earlier tests' tensors (or their threads) free
# at any moment may be the better fit for the next gather. The pool keeps buffers within a
# span (a loader pass) only.
POOL_REUSE_SCRIPT = """
import torch
from graphengine import ops
from graphengine.runtime import host_memory_cache
assert ops.build_extension()
big = torch.rand(20_000, 128)
index = torch.randint(0, 20_000, (30_000,))
with host_memory_cache():
    first = ops.gather_rows(big, index)
    address = first.data_ptr()
    del first
    second = ops.gather_rows(big, index.flip(0))
    assert second.data_ptr() == address, "the freed buffer was not reused"
    assert torch.equal(second, big[index.flip(0)])
"""


def test_pool_hands_a_freed_buffer_to_the_next_gather():
    result = subprocess.run(
        [sys.executable, "-c", POOL_REUSE_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr


def test_strided_and_memory_mapped_sources(tmp_path):
    wide = table(500, 64, torch.float32)
    narrow = wide[:, 8:40]  # rows strided, columns contiguous: copied right
    index = torch.randint(0, 500, (700,))
    assert torch.equal(ops.gather_rows(narrow, index), narrow[index])
    with pytest.raises(RuntimeError, match="'src' rows must be contiguous"):
        ops.gather_rows(wide.t(), index)
    with pytest.raises(RuntimeError, match="'src' must be 2-D"):
        ops.gather_rows(wide[0], index)
    np.save(tmp_path / "x.npy", wide.numpy())
    mapped = FeatureStore.from_npy({"x": tmp_path / "x.npy"})
    assert torch.equal(mapped.gather("x", index), wide[index])


def test_out_of_range_ids_name_the_first_bad_one():
    src = table(50, 4, torch.float32)
    out = torch.full((4, 4), -7.0)
    with pytest.raises(IndexError, match="holds id 50 at position 2, outside \\[0, 50\\)"):
        ops.gather_rows(src, torch.tensor([1, 2, 50, 60]), out)
    with pytest.raises(IndexError, match="holds id -1 at position 0"):
        ops.gather_rows(src, torch.tensor([-1, 3], dtype=torch.int32))


def test_bad_arguments():
    src = table(50, 4, torch.float32)
    index = torch.tensor([1, 2])
    with pytest.raises(RuntimeError, match="'index' must be int32 or int64"):
        ops.gather_rows(src, index.float())
    with pytest.raises(RuntimeError, match=r"'out' must have shape \[2, 4\]"):
        ops.gather_rows(src, index, torch.empty(3, 4))
    with pytest.raises(RuntimeError, match="'out' must have dtype Float"):
        ops.gather_rows(src, index, torch.empty(2, 4, dtype=torch.float64))


def test_cached_gather_matches_reference():
    src = table(300, 16, torch.float32)
    slot_of = torch.full((300,), -1, dtype=torch.int32)
    hot = torch.tensor([5, 17, 299, 0])
    slot_of[hot] = torch.arange(4, dtype=torch.int32)
    cache = src[hot].clone()
    index = torch.cat([hot, torch.randint(0, 300, (100,))])
    assert torch.equal(ops.cached_gather(src, index, cache, slot_of), src[index])
    slot_of[7] = 9
    with pytest.raises(IndexError, match=r"'slot_of'\[7\] = 9 is outside the cache's \[0, 4\)"):
        ops.cached_gather(src, torch.tensor([7]), cache, slot_of)


def test_feature_store_cache_hit_rate():
    x = table(1000, 8, torch.float32)
    y = torch.arange(1000)
    store = FeatureStore({"x": x, "y": y})
    degree = torch.randint(0, 50, (1000,))
    rows = store.enable_cache("x", 0.1, degree, device="cpu")
    assert rows == 100
    ids = torch.randint(0, 1000, (5000,))
    assert torch.equal(store.gather("x", ids), x[ids])
    assert torch.equal(store.gather("y", ids), y[ids])
    hottest = set(torch.sort(degree, descending=True, stable=True).indices[:100].tolist())
    expected_hits = sum(int(i) in hottest for i in ids)
    stats = store.cache_stats("x")
    assert stats["hits"] == expected_hits and stats["lookups"] == 5000
    assert stats["hit_rate"] == pytest.approx(expected_hits / 5000)
    assert store.enable_cache("x", 8 * 4 * 10, degree, device="cpu") == 10


def test_feature_store_errors(tmp_path):
    with pytest.raises(ValueError, match="table 'y' has 5 rows, the others 4"):
        FeatureStore({"x": torch.zeros(4, 2), "y": torch.zeros(5)})
    with pytest.raises(FileNotFoundError, match="missing table file"):
        FeatureStore.from_npy({"x": tmp_path / "nope.npy"})
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(ValueError, match="corrupt or truncated table file"):
        FeatureStore.from_npy({"x": tmp_path / "bad.npy"})
    store = FeatureStore({"x": torch.zeros(4, 2)})
    with pytest.raises(KeyError, match="no table 'z'"):
        store.gather("z", torch.tensor([0]))
    with pytest.raises(ValueError, match="'capacity' as a fraction must be in"):
        store.enable_cache("x", 1.5, torch.zeros(4), device="cpu")
    with pytest.raises(ValueError, match=r"table 'x' is not pinned: .* call pin_memory_\(\)"):
        store.enable_cache("x", 0.5, torch.zeros(4), device="cuda")
    with pytest.raises(IndexError, match="holds id 4"):
        store.gather("x", torch.tensor([4]))


def test_shared_memory_keeps_values():
    x = table(10, 3, torch.float32)
    store = FeatureStore({"x": x.clone()}).share_memory_()
    assert store["x"].is_shared()
    assert torch.equal(store.gather("x", torch.tensor([3, 1])), x[[3, 1]])


def test_fallback_without_compiler_warns_once(monkeypatch):
    def broken(verbose):
        raise RuntimeError("no compiler found")

    monkeypatch.setattr(ops.build, "_state", {})
    monkeypatch.setattr(ops.backend, "_warned", [])
    monkeypatch.setattr(ops.build, "_compile", broken)
    src = table(20, 3, torch.float32)
    with pytest.warns(RuntimeWarning, match="could not be built.*no compiler found.*index_select"):
        result = ops.gather_rows(src, torch.tensor([4, 2]))
    assert torch.equal(result, src[[4, 2]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(ops.gather_rows(src, torch.tensor([1])), src[[1]])
    with pytest.raises(IndexError, match="holds id 20 at position 1, outside \\[0, 20\\)"):
        ops.gather_rows(src, torch.tensor([0, 20]))


def test_operators_pass_torch_opcheck():
    src = table(40, 6, torch.float32)
    index = torch.randint(0, 40, (25,))
    torch.library.opcheck(torch.ops.graphengine.gather_rows.default, (src, index, None))
    slot_of = torch.full((40,), -1, dtype=torch.int32)
    slot_of[3] = 0
    torch.library.opcheck(
        torch.ops.graphengine.cached_gather.default, (src, index, src[3:4].clone(), slot_of, None)
    )


def test_fake_kernels_put_the_result_on_the_index_device():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        src = torch.empty(10, 4, dtype=torch.float16)  # a pinned CPU table, say
        index = torch.empty(5, dtype=torch.int32, device="cuda")
        result = torch.ops.graphengine.gather_rows(src, index, None)
        assert (result.device.type, result.shape, result.dtype) == ("cuda", (5, 4), src.dtype)
        cache = torch.empty(2, 4, dtype=torch.float16, device="cuda")
        slot_of = torch.empty(10, dtype=torch.int32, device="cuda")
        cached = torch.ops.graphengine.cached_gather(src, index, cache, slot_of, None)
        assert (cached.device.type, cached.shape) == ("cuda", (5, 4))
        out = torch.empty(5, 4, dtype=torch.float16, device="cuda")
        assert torch.ops.graphengine.gather_rows(src, index, out) is out
