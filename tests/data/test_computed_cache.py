"""Cache files of computed arrays (graphengine.data.computed_cache): optional to write, never
opened unless a regular file, keyed by a digest computed without a copy of whole arrays."""

import hashlib
import logging

import numpy as np
import pytest

from graphengine.data import computed_cache
from graphengine.data.computed_cache import cache_key, read_cached, write_cached
from tests.helpers.special_files import fifo, tmpfs


def whole(arrays):
    return None


def test_a_cache_on_a_read_only_disk_is_a_warning_not_the_end_of_the_run(tmp_path, caplog):
    with tmpfs(tmp_path / "ro", read_only=True) as read_only:
        path = read_only / "part_4" / "metis.npz"
        with caplog.at_level(logging.WARNING):
            write_cached(path, cluster=np.arange(5))
        assert f"cache file '{path}': cannot write it (Read-only file system)" in caplog.text
        assert not path.exists()


def test_a_cache_on_a_full_disk_is_a_warning_and_leaves_no_temporary_file(tmp_path, caplog):
    with tmpfs(tmp_path / "full", size="8k") as full:
        with caplog.at_level(logging.WARNING):
            write_cached(full / "metis.npz", cluster=np.arange(10**5))
        assert f"cache file '{full / 'metis.npz'}': cannot write it (No space" in caplog.text
        assert list(full.iterdir()) == []


def test_a_fifo_at_the_cache_path_is_never_opened_nor_replaced(tmp_path, caplog):
    """np.load on a FIFO would wait for a writer forever; the cache is computed again and,
    since writing would replace what is not a file, not written."""
    path = fifo(tmp_path / "metis.npz")
    with caplog.at_level(logging.WARNING):
        assert read_cached(path, ("cluster",), whole) is None
        write_cached(path, cluster=np.arange(5))
    assert f"cache file '{path}' is a FIFO, expected a regular file" in caplog.text
    assert f"cache file '{path}' is a FIFO: expected a regular file to write" in caplog.text
    assert path.is_fifo()


def test_a_missing_cache_is_none_without_a_word(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert read_cached(tmp_path / "metis.npz", ("cluster",), whole) is None
    assert caplog.text == ""


def test_a_cache_reads_back_what_was_written(tmp_path):
    write_cached(tmp_path / "c" / "metis.npz", cluster=np.arange(5), num_nodes=np.int64(5))
    arrays = read_cached(tmp_path / "c" / "metis.npz", ("cluster", "num_nodes"), whole)
    assert arrays["cluster"].tolist() == [0, 1, 2, 3, 4] and int(arrays["num_nodes"]) == 5


def one_copy_key(arguments, *arrays):
    """The key as it was computed before hashing in chunks: each array whole as int64."""
    digest = hashlib.sha256(repr(sorted(arguments.items())).encode())
    for array in arrays:
        digest.update(f";{np.shape(array)};".encode())
        digest.update(np.ascontiguousarray(array, dtype=np.int64).data)
    return digest.hexdigest()[:32]


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_the_key_is_hashed_in_chunks_with_the_digest_of_one_whole_copy(monkeypatch, chunk):
    """Chunks of any size give the key a whole int64 copy gave (caches written before stay
    valid), for int32 and int64 arrays of the same values alike, and a strided view."""
    monkeypatch.setattr(computed_cache, "_HASH_CHUNK", chunk)
    indptr = np.array([0, 2, 5, 5, 9], dtype=np.int64)
    indices = np.random.default_rng(0).integers(0, 2**31 - 1, 9).astype(np.int32)
    matrix = np.arange(24, dtype=np.int64).reshape(4, 6)[:, ::2]  # not contiguous
    arguments = {"num_parts": 3, "seed": 0}
    expected = one_copy_key(arguments, indptr, indices, matrix)
    assert cache_key(arguments, indptr, indices, matrix) == expected
    assert cache_key(arguments, indptr.astype(np.int32), indices.astype(np.int64), matrix) == (
        expected
    )
    assert cache_key(arguments, indptr, indices[::-1].copy(), matrix) != expected


def test_the_key_never_converts_more_than_a_chunk_at_a_time(monkeypatch):
    monkeypatch.setattr(computed_cache, "_HASH_CHUNK", 4)
    converted = []
    original = np.ascontiguousarray

    def counted(array, dtype=None):
        converted.append(np.size(array))
        return original(array, dtype=dtype)

    monkeypatch.setattr(computed_cache.np, "ascontiguousarray", counted)
    cache_key({}, np.arange(10, dtype=np.int32))
    assert converted == [4, 4, 2]
