"""A dataset generated into a data root that cannot hold it: refused before the work where
the root cannot be written, one error naming the dataset, the file and the error where the
disk fills up, and no partial store left to be opened later."""

import pytest

from graphengine.cli import main
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
