"""``graphengine train`` and ``partition`` fail early and point at the option to fix: a loss
that is not finite, output paths that cannot be written, bad labels and option ranges, each
a one-line error with exit code 2 (the contract of :mod:`graphengine.cli.errors`)."""

import dataclasses
import json
import math

import numpy as np
import pytest

from graphengine.cli import main
from graphengine.datasets import load_dataset
from graphengine.train.metrics import json_line

SMALL = ["--fanouts", "4,4", "--batch-size", "400", "--hidden", "16", "--no-progress"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """synthetic-small, generated once for the module."""
    return load_dataset("synthetic-small", root=tmp_path_factory.mktemp("root"))


def test_json_lines_are_valid_json_with_non_finite_floats_as_null():
    line = json_line({"loss": math.nan, "stage_s": {"a": math.inf}, "l": [1.0, -math.inf]})
    assert json.loads(line) == {"loss": None, "stage_s": {"a": None}, "l": [1.0, None]}
    assert "NaN" not in line and "Infinity" not in line


def test_nan_features_stop_training_at_the_first_step_with_exit_2(small, tmp_path, capsys, caplog):
    x = np.array(small.x)
    x[:] = np.nan
    store = tmp_path / "nan"
    dataclasses.replace(small, x=x).save(store)
    metrics = tmp_path / "metrics.jsonl"
    argv = ["train", "--dataset", str(store), "--epochs", "2", *SMALL]
    assert main([*argv, "--metrics", str(metrics)]) == 2
    assert "the training loss is nan at epoch 1, step 1" in caplog.text
    assert capsys.readouterr().out == ""  # no epoch line claims a loss
    assert not metrics.exists()
