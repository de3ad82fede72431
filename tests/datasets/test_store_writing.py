"""A dataset generated into a data root that cannot hold it: refused before the work where
the root cannot be written, one error naming the dataset, the file and the error where the
disk fills up, and no partial store left to be opened later; where the file system cannot
preallocate, the array files are written unallocated."""

import errno
import logging
import os

import numpy as np
import pytest

from graphengine.cli import main
from graphengine.data.format import open_allocated_memmap
from graphengine.data.output_files import WriteError
from graphengine.datasets import catalog, load_dataset
from tests.helpers.special_files import tmpfs


def test_a_read_only_root_is_refused_before_generating(tmp_path, monkeypatch):
    def never(*args):
        raise AssertionError("generated into a root it cannot write")

    monkeypatch.setattr(catalog, "generate", never)
    with tmpfs(tmp_path / "ro", read_only=True) as root:
        store = root / "synthetic-small"
        with pytest.raises(
            WriteError,
            match=f"dataset 'synthetic-small' cannot be written to '{store}' \\(Read-only file",
        ):
            load_dataset("synthetic-small", root=root)


def test_a_full_disk_names_the_file_and_leaves_no_partial_store(tmp_path):
    with tmpfs(tmp_path / "small", size="256k") as root:
        with pytest.raises(
            WriteError,
            match=f"writing dataset 'synthetic-small' failed at '{root}/synthetic-small.*' "
            r"\(.*(No space left on device|a short write, as a full disk makes)\); the partial "
            "store was removed",
        ):
            load_dataset("synthetic-small", root=root)
        assert list(root.iterdir()) == []


def test_an_interrupted_generation_leaves_no_partial_store(tmp_path, monkeypatch):
    def interrupted(self, path):
        (path / "graph").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog.GraphDataset, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_dataset("synthetic-small", root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_train_on_a_read_only_root_is_one_line_and_exit_2(tmp_path, caplog):
    with tmpfs(tmp_path / "ro", read_only=True) as root:
        assert main(["train", "--root", str(root), "--epochs", "1", "--no-progress"]) == 2
    assert "dataset 'synthetic-small' cannot be written to" in caplog.text
    assert len(caplog.records) == 1


@pytest.mark.parametrize("answer", [errno.EOPNOTSUPP, errno.EINVAL, "absent"])
def test_a_file_system_that_does_not_preallocate_gets_the_file_unallocated(
    tmp_path, monkeypatch, caplog, answer
):
    """macOS has no posix_fallocate, and some file systems answer EOPNOTSUPP or EINVAL: the
    array file is then written as it is, not refused."""
    if answer == "absent":
        monkeypatch.delattr(os, "posix_fallocate", raising=False)
    else:

        def unsupported(fd, offset, length):
            raise OSError(answer, os.strerror(answer))

        monkeypatch.setattr(os, "posix_fallocate", unsupported)
    with caplog.at_level(logging.DEBUG, logger="graphengine.data.format"):
        array = open_allocated_memmap(tmp_path / "x.npy", np.float32, (3, 2))
    array[:] = 1.5
    array.flush()
    del array
    assert np.load(tmp_path / "x.npy").tolist() == [[1.5, 1.5]] * 3
    assert "x.npy' not preallocated" in caplog.text


def test_a_full_disk_is_still_an_error_when_preallocating(tmp_path, monkeypatch):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError, match="No space left"):
        open_allocated_memmap(tmp_path / "x.npy", np.float32, (3, 2))
