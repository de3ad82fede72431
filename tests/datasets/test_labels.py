"""A dataset's labels lie in ``[0, num_classes)``, or are -1 (unlabelled) outside its
splits; others are refused, naming the dataset, the label and the range, when it is built or
loaded: not later, as an index error inside the loss."""

import dataclasses
import json

import numpy as np
import pytest

from graphengine.datasets import GraphDataset, SyntheticSpec, generate
from graphengine.datasets.catalog import HETERO
from graphengine.datasets.hetero import generate_hetero


@pytest.fixture(scope="module")
def small():
    return generate("s", SyntheticSpec(100, 1000, 4, 3, 10, 10))


def with_labels(dataset, y, num_classes=3):
    return GraphDataset(
        "s",
        dataset.graph,
        dataset.x,
        y,
        dataset.train_idx,
        dataset.val_idx,
        dataset.test_idx,
        num_classes,
    )


def test_labels_outside_the_classes_are_named(small):
    y = small.y.copy()
    y[small.test_idx[0]] = 11
    with pytest.raises(ValueError, match=r"'s'.*label 11.*\[0, 3\)"):
        with_labels(small, y)
    with pytest.raises(ValueError, match=r"'s'.*label 2.*\[0, 2\)"):
        with_labels(small, small.y, num_classes=2)
    y = small.y.copy()
    y[small.train_idx[3]] = -1
    with pytest.raises(ValueError, match=r"'s'.*train node .* label -1"):
        with_labels(small, y)
    y[small.train_idx[3]] = -2
    with pytest.raises(ValueError, match=r"'s'.*label -2"):
        with_labels(small, y)
    with pytest.raises(TypeError, match=r"'y'.*integer.*float32"):
        with_labels(small, small.y.astype(np.float32))
    with pytest.raises(ValueError, match=r"'num_classes'.*0"):
        with_labels(small, small.y, num_classes=0)


def test_unlabelled_nodes_outside_the_splits_keep_label_minus_one(small, tmp_path):
    y = small.y.copy()
    outside = np.setdiff1d(np.arange(100), np.r_[small.train_idx, small.val_idx, small.test_idx])
    y[outside] = -1
    with_labels(small, y).save(tmp_path / "d")
    assert (GraphDataset.load(tmp_path / "d").y[outside] == -1).all()


def test_saved_labels_outside_the_classes_are_named_on_load(small, tmp_path):
    small.save(tmp_path / "d")
    manifest = json.loads((tmp_path / "d" / "dataset.json").read_text())
    manifest["num_classes"] = 2
    (tmp_path / "d" / "dataset.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"'s'.*label 2.*\[0, 2\)"):
        GraphDataset.load(tmp_path / "d")


def test_heterogeneous_labels_outside_the_classes_are_named():
    tiny = generate_hetero("h", HETERO["synthetic-hetero-s"])
    y = tiny.y.copy()
    y[tiny.val_idx[0]] = tiny.num_classes
    with pytest.raises(ValueError, match=rf"'h'.*label {tiny.num_classes}.*\[0, 4\)"):
        dataclasses.replace(tiny, y=y)
