"""The CUDA gathers, the copy stage and the loader on a GPU; skipped without CUDA.

Run by .ci/gpu-check on a lent GPU.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch_geometric.data import Data

from graphengine import FeatureStore, Graph, NeighborLoader, ops
from graphengine.loader.stages import CopyToDevice, GatherFeatures
from samplers import SamplerOutput

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
# float32 rows of 128, 512 and 400 bytes take the kernel's 16-byte loads; 12-byte rows its
# 4-byte loads.
COLS = [pytest.param(c, id=f"{c}cols") for c in (32, 128, 100, 3)]
INDEX_DTYPES = [pytest.param(torch.int32, id="idx32"), pytest.param(torch.int64, id="idx64")]


@pytest.fixture(scope="module", autouse=True)
def extension():
    if not ops.build_extension():
        pytest.fail(f"the extension did not build: {ops.build_error()}")


def table(rows, cols, seed=0):
    return torch.rand(rows, cols, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("backend", ["csrc", "torch"])
def test_gpu_zero_copy_and_cached_gathers(cols, index_dtype, backend):
    src = table(3000, cols)
    index = torch.randint(0, 3000, (5000,), dtype=index_dtype)
    expected = src.index_select(0, index.long()).cuda()
    cuda_index = index.cuda()
    for source in (src.cuda(), src.pin_memory()):
        result = ops.gather_rows(source, cuda_index, backend=backend)
        assert result.is_cuda and torch.equal(result, expected)
    out = torch.empty(5000, cols, device="cuda")
    assert ops.gather_rows(src.pin_memory(), cuda_index, out, backend=backend) is out
    assert torch.equal(out, expected)
    hot = torch.randperm(3000)[:700]
    slot_of = torch.full((3000,), -1, dtype=torch.int32)
    slot_of[hot] = torch.arange(700, dtype=torch.int32)
    cached = ops.cached_gather(
        src.pin_memory(), cuda_index, src[hot].cuda(), slot_of.cuda(), backend=backend
    )
    assert torch.equal(cached, expected)


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param("half3", id="6-byte rows: byte loads"),
        pytest.param("strided", id="rows 124 bytes apart 128: word loads"),
        pytest.param("offset", id="table starting at row 1 of a pinned buffer"),
    ],
)
def test_gpu_gathers_of_unaligned_tables(layout):
    if layout == "half3":
        src = table(2000, 3).half()
    elif layout == "strided":
        src = table(2000, 32)[:, :31]
    else:
        src = table(2001, 32)[1:]
    index = torch.randint(0, 2000, (3000,))
    expected = src.index_select(0, index).cuda()
    pinned = torch.empty(src.shape[0] + 1, *src.shape[1:], dtype=src.dtype).pin_memory()
    pinned_src = pinned[1:] if layout == "offset" else pinned[:-1]
    pinned_src.copy_(src)
    for source in (src.cuda(), pinned_src):
        result = ops.gather_rows(source, index.cuda(), backend="csrc")
        assert torch.equal(result, expected), layout


def test_opcheck_on_cuda():
    src = table(40, 6)
    index = torch.randint(0, 40, (25,), device="cuda")
    slot_of = torch.full((40,), -1, dtype=torch.int32, device="cuda")
    slot_of[3] = 0
    cache = src[3:4].cuda()
    gather = torch.ops.graphengine.gather_rows.default
    cached = torch.ops.graphengine.cached_gather.default
    torch.library.opcheck(gather, (src.cuda(), index, None))
    torch.library.opcheck(cached, (src.cuda(), index, cache, slot_of, None))
    # opcheck runs the op on copies of its inputs, and a copy of a pinned tensor is not
    # pinned: the zero-copy path's fake kernel is checked against the real one here.
    pinned = src.pin_memory()
    for op, args in ((gather, (pinned, index, None)), (cached, (pinned, index, cache, slot_of))):
        real = op(*args)
        mode = FakeTensorMode()
        fakes = [mode.from_tensor(arg) if isinstance(arg, torch.Tensor) else arg for arg in args]
        with mode:
            fake = op(*fakes)
        assert (fake.shape, fake.dtype, fake.device, fake.stride()) == (
            real.shape,
            real.dtype,
            real.device,
            real.stride(),
        )


def test_out_of_range_cuda_ids_trip_a_device_side_assertion():
    # The assertion ends the CUDA context, so it runs in a process of its own.
    script = (
        "import torch; from graphengine import ops\n"
        "src = torch.zeros(50, 4, device='cuda')\n"
        "ops.gather_rows(src, torch.tensor([1, 2, 50, 3], device='cuda'), backend='csrc')\n"
        "torch.cuda.synchronize()\n"
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    text = run.stdout + run.stderr
    assert run.returncode != 0, text
    assert "device-side assert" in text, text
    assert "'index' holds id 50 at position 2, outside [0, 50)" in text, text


def test_host_ids_are_checked_before_they_reach_the_gpu():
    store = FeatureStore({"x": table(50, 4)}).pin_memory_()
    gather = GatherFeatures(store, device="cuda")
    with pytest.raises(IndexError, match=r"holds id 50 at position 1, outside \[0, 50\)"):
        gather(_sampled([0, 50]))
    torch.cuda.synchronize()  # the context is still healthy


def _sampled(node):
    node = np.asarray(node, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    return SamplerOutput(
        node=node,
        row=empty,
        col=empty,
        edge=empty,
        num_sampled_nodes=(len(node),),
        num_sampled_edges=(),
        batch_size=len(node),
        input_id=np.arange(len(node)),
    )


def _graph(num_nodes=500, num_edges=5000):
    generator = torch.Generator().manual_seed(1)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    return Graph.from_data(Data(edge_index=edge_index, num_nodes=num_nodes))


@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("cached", [False, True], ids=["pinned", "pinned+cached"])
def test_loader_gathers_on_the_gpu(cols, cached):
    x, y = table(500, cols), torch.arange(500)
    store = FeatureStore({"x": x.clone(), "y": y.clone()}).pin_memory_()
    if cached:
        store.enable_cache("x", 0.3, torch.arange(500), device="cuda")
    loader = NeighborLoader((store, _graph()), [5, 3], batch_size=64, device="cuda", num_workers=2)
    batches = 0
    for batch in loader:
        n_id = batch.n_id.cpu()
        assert batch.x.is_cuda and batch.y.is_cuda
        assert torch.equal(batch.x.cpu(), x[n_id]) and torch.equal(batch.y.cpu(), y[n_id])
        batches += 1
    assert batches == len(loader)
    if cached:
        assert store.cache_stats("x")["hits"] > 0


def test_copy_stage_moves_and_keeps_tensors():
    copy = CopyToDevice("cuda")
    on_gpu = torch.arange(6.0, device="cuda")
    data = Data(x=torch.arange(12.0).view(6, 2).pin_memory(), z=on_gpu, n_id=torch.arange(6))
    moved = copy(data)
    assert moved.x.is_cuda and moved.n_id.is_cuda and torch.equal(moved.x.cpu(), data.x)
    assert moved.z.data_ptr() == on_gpu.data_ptr()


def test_pin_memory_keeps_values_and_gathers_by_zero_copy():
    x = table(300, 100)
    store = FeatureStore({"x": x.clone()}).pin_memory_()
    assert store["x"].is_pinned()
    index = torch.randint(0, 300, (1000,), device="cuda")
    assert torch.equal(store.gather("x", index), x.cuda()[index])
