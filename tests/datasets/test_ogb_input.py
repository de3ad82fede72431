"""OGB files holding arrays of the wrong dtype, negative counts or labels outside the classes
are refused with a ``ValueError`` naming the file, the array and what was expected."""

import os
import subprocess
import sys

import numpy as np
import pytest

from graphengine.data.format import read_npz
from graphengine.datasets.ogb import convert_ogb
from tests.datasets.test_ogb import NUM_NODES, random_ogb, write_csv_ogb, write_gz, write_splits
from tests.helpers.special_files import fifo


def write_papers(root, **changes):
    edges, x, y, splits = random_ogb(2)
    labels = changes.pop("node_label", y.astype(np.float64).reshape(-1, 1))
    raw = root / "ogbn_papers100M" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    arrays = {
        "edge_index": edges.T.copy(),
        "node_feat": x,
        "num_nodes_list": np.array([NUM_NODES]),
        "num_edges_list": np.array([len(edges)]),
    }
    np.savez(raw / "data.npz", **{**arrays, **changes})
    np.savez(raw / "node-label.npz", node_label=labels)
    write_splits(root / "ogbn_papers100M", "time", splits)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"edge_index": np.zeros((2, 5), np.float64)}, r"'edge_index'.*integer.*float64"),
        ({"node_feat": np.zeros((NUM_NODES, 3), "U2")}, r"'node_feat'.*numbers.*<U2"),
        ({"num_nodes_list": np.array([-4])}, r"'num_nodes_list'.*-4.*non-negative"),
        ({"num_nodes_list": np.array([60.5])}, r"'num_nodes_list'.*integers.*float64"),
        ({"node_label": np.full((NUM_NODES, 1), 2.5)}, r"node-label\.npz'.*2\.5.*whole"),
        (
            {"node_label": np.full((NUM_NODES, 1), "a")},
            r"'node_label'.*node-label\.npz'.*numbers.*<U1",
        ),
    ],
)
def test_papers_arrays_of_the_wrong_dtype_are_named(tmp_path, changes, message):
    write_papers(tmp_path, **changes)
    with pytest.raises(ValueError, match=message):
        convert_ogb("ogbn-papers100M", tmp_path)


def test_ogb_labels_outside_the_classes_are_named(tmp_path):
    edges, x, y, splits = random_ogb()
    y[splits["train"][0]] = 40  # arxiv has 40 classes
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    with pytest.raises(ValueError, match=r"'ogbn-arxiv'.*label 40.*\[0, 40\)"):
        convert_ogb("ogbn-arxiv", tmp_path)


def test_ogb_negative_node_count_is_named(tmp_path):
    edges, x, y, splits = random_ogb()
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    write_gz(tmp_path / "ogbn_arxiv" / "raw" / "num-node-list.csv.gz", [-3])
    with pytest.raises(ValueError, match=r"num-node-list\.csv\.gz'.*-3.*non-negative"):
        convert_ogb("ogbn-arxiv", tmp_path)


class Calls:
    """Pickles as a call of ``function(*args)``, which unpickling it makes."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


@pytest.mark.parametrize("damage", ["not a zip", "cut short", "other array", "pickled objects"])
def test_papers_unreadable_label_archive_is_named(tmp_path, damage):
    """A node-label.npz that is damaged, lacks node_label, or holds pickled objects (never
    unpickled: the marker file a call would create does not appear) is named."""
    write_papers(tmp_path)
    labels, marker = tmp_path / "ogbn_papers100M" / "raw" / "node-label.npz", tmp_path / "ran"
    if damage == "not a zip":
        labels.write_bytes(b"not an npz")
    elif damage == "cut short":
        labels.write_bytes(labels.read_bytes()[:-50])
    elif damage == "other array":
        np.savez(labels, labels=np.zeros(NUM_NODES))
    else:
        np.savez(labels, node_label=np.array([Calls(os.system, f"touch {marker}")] * NUM_NODES))
    with pytest.raises(ValueError, match=r"node-label\.npz' is not a readable \.npz archive"):
        convert_ogb("ogbn-papers100M", tmp_path)
    assert not marker.exists()


def test_papers_label_archive_that_is_a_fifo_is_named_unopened(tmp_path):
    write_papers(tmp_path)
    labels = tmp_path / "ogbn_papers100M" / "raw" / "node-label.npz"
    labels.unlink()
    fifo(labels)  # np.load would wait for a writer forever
    with pytest.raises(ValueError, match=r"file '.*node-label\.npz' is a FIFO"):
        convert_ogb("ogbn-papers100M", tmp_path)


@pytest.mark.parametrize("error", [FileNotFoundError, PermissionError])
def test_an_archive_that_cannot_be_opened_is_not_called_damaged(tmp_path, monkeypatch, error):
    """No permission (or the file gone meanwhile) says nothing about what the file holds: the
    error comes through as it is, not as "not a readable .npz archive"."""
    np.savez(tmp_path / "a.npz", a=np.zeros(3))

    def cannot_open(*args, **kwargs):
        raise error(13, "Permission denied", str(tmp_path / "a.npz"))

    monkeypatch.setattr(np, "load", cannot_open)
    with pytest.raises(error):
        read_npz(tmp_path / "a.npz", ("a",))


def test_ogb_split_listing_a_node_twice_is_named(tmp_path):
    edges, x, y, splits = random_ogb()
    repeated = int(splits["valid"][1])
    splits["valid"] = np.append(splits["valid"], repeated)
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    with pytest.raises(ValueError, match=rf"valid\.csv\.gz' lists node {repeated} more than once"):
        convert_ogb("ogbn-arxiv", tmp_path)


def test_a_disk_filling_up_while_the_csc_is_written_is_an_error_not_a_crash(tmp_path):
    """The CSC's indices are written through a memory map: on a disk that fills up, that
    killed the process with SIGBUS and no word; now the conversion fails naming the disk."""
    from tests.helpers.special_files import tmpfs

    edges, x, y, splits = random_ogb(num_edges=40_000)  # 320 KB of indices with the reverses
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    script = (
        "import sys; from graphengine.datasets import load_dataset; "
        "load_dataset('ogbn-arxiv', root=sys.argv[1])"
    )
    with tmpfs(tmp_path / "ogbn-arxiv", size="64k"):
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True
        )
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "WriteError: writing dataset 'ogbn-arxiv' failed" in done.stderr
    assert "No space left on device" in done.stderr
