"""RowFile: rows of a .npy read from disk by id, against NumPy's indexing of the same file."""

import errno
import importlib
import os
import pickle
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphengine import ops
from graphengine.data import row_file
from graphengine.data.row_file import RowFile
from tests.helpers.special_files import tmpfs

MODES = [
    ("io_uring", True),
    ("io_uring", False),
    ("pread", True),
    ("pread", False),
    ("python", False),
]
DTYPES = [np.float32, np.float16, np.int64, np.uint8]


@pytest.fixture(scope="module", autouse=True)
def extension():
    if not ops.build_extension():
        pytest.fail("the extension did not build on this machine")


def saved(path, rows=200, cols=5, dtype=np.float32, seed=0):
    values = np.random.default_rng(seed).integers(0, 100, (rows, cols)).astype(dtype)
    np.save(path, values)
    return path


def expected(path, ids) -> np.ndarray:
    return np.load(path, mmap_mode="r")[np.asarray(ids, dtype=np.int64)]


@pytest.mark.parametrize(("engine", "direct"), MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 3])
def test_rows_equal_numpy_indexing(tmp_path, engine, direct, dtype, cols):
    path = saved(tmp_path / "x.npy", rows=300, cols=cols, dtype=dtype)
    rng = np.random.default_rng(1)
    cases = {
        "random": rng.integers(0, 300, 257),
        "repeated": np.array([7, 7, 7, 0, 299, 7, 0]),
        "sorted": np.arange(300),
        "reversed": np.arange(300)[::-1].copy(),
        "empty": np.array([], dtype=np.int64),
    }
    with RowFile(path, engine=engine, direct=direct, queue_depth=8) as rows:
        assert (rows.engine, rows.direct) == (engine, direct)
        assert rows.shape == (300, cols) and rows.dtype == np.dtype(dtype)
        for name, ids in cases.items():
            for index_dtype in (torch.int32, torch.int64):
                got = rows.read(torch.from_numpy(ids).to(index_dtype))
                assert got.shape == (len(ids), cols), name
                np.testing.assert_array_equal(got.numpy(), expected(path, ids), err_msg=name)


@pytest.mark.parametrize(("engine", "direct"), MODES)
def test_read_into_out_and_counters(tmp_path, engine, direct):
    path = saved(tmp_path / "x.npy", rows=100, cols=4)
    ids = torch.tensor([5, 6, 7, 50, 5])
    with RowFile(path, engine=engine, direct=direct) as rows:
        out = torch.full((5, 4), -1.0)
        assert rows.read(ids, out) is out
        np.testing.assert_array_equal(out.numpy(), expected(path, ids))
        counters = rows.counters()
    assert counters["rows"] == 5
    assert counters["reads"] >= 1 and counters["bytes"] >= 4 * 4 * 4  # 4 distinct rows at least


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_ids_any_engine_property(tmp_path_factory, data):
    rows = data.draw(st.integers(1, 400), label="rows")
    cols = data.draw(st.integers(1, 9), label="cols")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    engine, direct = data.draw(st.sampled_from(MODES), label="mode")
    depth = data.draw(st.sampled_from([1, 2, 64]), label="queue_depth")
    ids = data.draw(st.lists(st.integers(0, rows - 1), max_size=300), label="ids")
    path = saved(tmp_path_factory.mktemp("rows") / "x.npy", rows, cols, dtype, seed=rows)
    with RowFile(path, engine=engine, direct=direct, queue_depth=depth) as table:
        got = table.read(torch.tensor(ids, dtype=torch.int64))
    np.testing.assert_array_equal(got.numpy(), expected(path, ids).reshape(len(ids), cols))


@pytest.mark.parametrize(("engine", "direct"), MODES)
def test_concurrent_readers_from_threads(tmp_path, engine, direct):
    path = saved(tmp_path / "x.npy", rows=2000, cols=16)
    reference = np.load(path)
    failures = []
    with RowFile(path, engine=engine, direct=direct, queue_depth=16) as rows:

        def reader(seed):
            rng = np.random.default_rng(seed)
            for _ in range(20):
                ids = rng.integers(0, 2000, 300)
                if not np.array_equal(rows.read(torch.from_numpy(ids)).numpy(), reference[ids]):
                    failures.append(seed)

        threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert rows.counters()["rows"] == 4 * 20 * 300
    assert failures == []


@pytest.mark.parametrize(("engine", "direct"), MODES)
def test_truncated_after_opening_names_the_file_and_row(tmp_path, engine, direct):
    path = saved(tmp_path / "x.npy", rows=1000, cols=8)  # 32-byte rows
    before = np.load(path)
    with RowFile(path, engine=engine, direct=direct) as rows:
        os.truncate(path, rows.offset + 600 * 32 + 10)  # row 599 whole, 10 bytes of row 600
        got = rows.read(torch.tensor([3, 599]))
        np.testing.assert_array_equal(got.numpy(), before[[3, 599]])
        with pytest.raises(OSError, match=r"x\.npy.*row 600 at byte offset \d+.* 10 of its 32"):
            rows.read(torch.tensor([999, 3, 600]))


def test_a_failed_python_pread_names_the_file_the_row_and_its_offset(tmp_path, monkeypatch):
    path = saved(tmp_path / "x.npy", rows=10, cols=2)  # 8-byte rows

    def failing_pread(fd, size, offset):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with RowFile(path, engine="python") as rows:
        monkeypatch.setattr(row_file.os, "pread", failing_pread)
        with pytest.raises(OSError) as raised:
            rows.read(torch.tensor([7]))
    assert raised.value.errno == errno.EIO
    offset = rows.offset + 7 * 8
    assert f"'{path}': reading row 7 (byte offset {offset} of the file) failed" in str(raised.value)
    assert os.strerror(errno.EIO) in str(raised.value)
    assert isinstance(raised.value.__cause__, OSError)


def test_an_out_of_another_dtype_or_kind_is_refused_before_reading(tmp_path):
    path = saved(tmp_path / "x.npy", rows=10, cols=2)
    with RowFile(path, engine="python") as rows:
        for out in (torch.empty(1, 2, dtype=torch.float64), torch.empty(1, 2, dtype=torch.int32)):
            with pytest.raises(ValueError, match=rf"'out' must be .*float32.*got {out.dtype}"):
                rows.read(torch.tensor([1]), out)
        with pytest.raises(TypeError, match="'out' must be a torch tensor"):
            rows.read(torch.tensor([1]), np.empty((1, 2), dtype=np.float32))
        assert rows.counters() == {"rows": 0, "reads": 0, "bytes": 0}


@pytest.mark.parametrize(("engine", "direct"), MODES)
def test_ids_out_of_range_raise_index_error_naming_id_and_position(tmp_path, engine, direct):
    path = saved(tmp_path / "x.npy", rows=10, cols=2)
    with RowFile(path, engine=engine, direct=direct) as rows:
        for bad, position in (([1, 10], 1), ([-1], 0), ([0, 3, 2**40], 2)):
            with pytest.raises(IndexError, match=rf"id {bad[position]} at position {position}"):
                rows.read(torch.tensor(bad))
        with pytest.raises(TypeError, match="int32 or int64"):
            rows.read(torch.tensor([1.0]))
        with pytest.raises(ValueError, match="'out' must be"):
            rows.read(torch.tensor([1]), torch.empty(1, 3))
        assert rows.counters() == {"rows": 0, "reads": 0, "bytes": 0}


def test_the_kernel_checks_its_own_arguments(tmp_path):
    path = saved(tmp_path / "x.npy", rows=10, cols=2)
    fd = os.open(path, os.O_RDONLY)
    try:
        out = torch.empty(1, 2)
        with pytest.raises(IndexError, match="id 10 at position 0"):
            torch.ops.graphengine.read_rows(fd, torch.tensor([10]), out, 128, 8, 10, "pread", 4, 0)
        with pytest.raises(RuntimeError, match="'engine'"):
            torch.ops.graphengine.read_rows(fd, torch.tensor([1]), out, 128, 8, 10, "aio", 4, 0)
        with pytest.raises(RuntimeError, match="'out' must be"):
            torch.ops.graphengine.read_rows(fd, torch.tensor([1]), out, 128, 16, 10, "pread", 4, 0)
        with pytest.raises(ValueError, match="'align' must be 0 or a power of two"):
            ops.read_rows(
                fd, torch.tensor([1]), out, offset=128, row_bytes=8, num_rows=10,
                engine="pread", queue_depth=4, align=3000,
            )  # fmt: skip
    finally:
        os.close(fd)


def test_a_read_error_names_errnos_text(tmp_path):
    path = saved(tmp_path / "x.npy", rows=10, cols=2)
    fd = os.open(tmp_path, os.O_RDONLY)  # a directory: every read fails with EISDIR
    try:
        for engine in ("io_uring", "pread"):
            with pytest.raises(RuntimeError, match=os.strerror(errno.EISDIR)):
                ops.read_rows(
                    fd, torch.tensor([1]), torch.empty(1, 2), offset=128, row_bytes=8,
                    num_rows=10, engine=engine, queue_depth=4,
                )  # fmt: skip
    finally:
        os.close(fd)
    assert path.exists()


@pytest.mark.parametrize(
    ("write", "match"),
    [
        (lambda p: np.save(p, np.zeros((3, 2, 2))), "3-D"),
        (lambda p: np.save(p, np.asfortranarray(np.zeros((3, 2)))), "Fortran"),
        (lambda p: np.save(p, np.array([[None, 1]], dtype=object)), "not a readable|object"),
        (lambda p: p.write_bytes(b"not an npy file at all"), "not a readable .npy"),
        (lambda p: p.write_bytes(saved(p, 50, 4).read_bytes()[:300]), "shorter than"),
        (lambda p: np.save(p, np.zeros((3, 2), dtype=">f4")), "byte order"),
        (lambda p: np.save(p, np.zeros((3, 0))), "0 columns"),
    ],
)
def test_malformed_npy_raises_value_error_naming_the_file(tmp_path, write, match):
    path = tmp_path / "bad.npy"
    write(path)
    with pytest.raises(ValueError, match=match) as raised:
        RowFile(path)
    assert "bad.npy" in str(raised.value)


def test_bad_options_are_refused(tmp_path):
    path = saved(tmp_path / "x.npy")
    with pytest.raises(ValueError, match="'engine'"):
        RowFile(path, engine="aio")
    with pytest.raises(ValueError, match="'direct'"):
        RowFile(path, direct="yes")
    # 1 == True, but only the bools are modes: 1 is refused, not read as "auto".
    with pytest.raises(ValueError, match=r"'direct' must be one of \(True, False, 'auto'\)"):
        RowFile(path, direct=1)
    with pytest.raises(ValueError, match="'queue_depth'"):
        RowFile(path, queue_depth=0)
    with pytest.raises(FileNotFoundError, match="missing"):
        RowFile(tmp_path / "nothing.npy")


@pytest.mark.parametrize(("engine", "direct"), MODES)
def test_pickles_as_path_and_options_and_reopens(tmp_path, engine, direct):
    path = saved(tmp_path / "x.npy", rows=40, cols=3)
    with RowFile(path, engine=engine, direct=direct, queue_depth=5) as rows:
        copy = pickle.loads(pickle.dumps(rows))
        rows.close()
        with pytest.raises(ValueError, match="closed"):
            rows.read(torch.tensor([1]))
    with copy:
        assert (copy.engine, copy.direct, copy.queue_depth) == (engine, direct, 5)
        np.testing.assert_array_equal(
            copy.read(torch.tensor([39, 0])).numpy(), expected(path, [39, 0])
        )


def test_auto_falls_back_to_buffered_where_o_direct_is_refused(tmp_path, monkeypatch):
    path = saved(tmp_path / "x.npy")
    real_open = os.open

    def refusing_open(name, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return real_open(name, flags, *args)

    monkeypatch.setattr(row_file.os, "open", refusing_open)
    with RowFile(path, engine="pread") as rows:
        assert not rows.direct and "refuses O_DIRECT" in rows.reason
        np.testing.assert_array_equal(rows.read(torch.tensor([3])).numpy(), expected(path, [3]))
    with pytest.raises(OSError, match="O_DIRECT"):
        RowFile(path, engine="pread", direct=True)


def test_auto_on_a_tmpfs_reads_the_rows(tmp_path):
    with tmpfs(tmp_path / "mnt", size="1m") as mount:
        path = saved(mount / "x.npy", rows=64, cols=3)
        with RowFile(path) as rows:
            assert ("O_DIRECT" in rows.reason) == rows.direct
            np.testing.assert_array_equal(
                rows.read(torch.tensor([63, 1])).numpy(), expected(path, [63, 1])
            )


def test_auto_falls_back_to_pread_where_io_uring_is_refused(tmp_path, monkeypatch):
    read_rows = importlib.import_module("graphengine.ops.read_rows")  # the module, not the op
    path = saved(tmp_path / "x.npy")
    monkeypatch.setattr(read_rows, "io_uring_probe", lambda: "Operation not permitted (errno 1)")
    monkeypatch.setattr(row_file, "AUTO_ORDER", ("io_uring", "pread"))
    with RowFile(path) as rows:
        assert rows.engine == "pread" and "io_uring refused: Operation not permitted" in rows.reason
    with pytest.raises(OSError, match="engine='io_uring' cannot run: Operation not permitted"):
        RowFile(path, engine="io_uring")


def test_engine_from_the_environment_and_the_torch_backend(tmp_path, monkeypatch):
    path = saved(tmp_path / "x.npy")
    for engine in ("io_uring", "pread", "python"):
        monkeypatch.setenv(row_file.ENGINE_ENV, engine)
        with RowFile(path, direct=False) as rows:
            assert rows.engine == engine
    monkeypatch.setenv(row_file.ENGINE_ENV, "aio")
    with pytest.raises(ValueError, match="GRAPHENGINE_IO_ENGINE"):
        RowFile(path)
    monkeypatch.delenv(row_file.ENGINE_ENV)
    previous = ops.set_backend("torch")
    try:
        with RowFile(path) as rows:
            assert rows.engine == "python" and "unusable" in rows.reason
            np.testing.assert_array_equal(rows.read(torch.tensor([2])).numpy(), expected(path, [2]))
    finally:
        ops.set_backend(previous)
