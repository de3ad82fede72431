"""``graphengine compact`` and ``generate --feature-dtype``: a half store written and reported;
bad input (a missing source, an existing or nested --out, a value beyond float16) is one line
and exit code 2."""

import json

import numpy as np
import pytest

from graphengine.cli import main
from graphengine.datasets.dataset import GraphDataset


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    assert main(["generate", "synthetic-small", "--root", str(root)]) == 0
    return root


def test_compact_writes_a_half_store_and_reports_both_sizes(root, tmp_path, capsys):
    source, out = root / "synthetic-small", tmp_path / "half"
    capsys.readouterr()
    assert main(["compact", str(source), "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    full, half = GraphDataset.load(source), GraphDataset.load(out)
    np.testing.assert_array_equal(half.x, np.asarray(full.x).astype(np.float16))
    assert summary["converted"] == {"x.npy": "float32 -> float16"}
    assert summary["source_bytes"] - summary["out_bytes"] == full.x.size * 2


def test_generate_feature_dtype_float16(tmp_path, capsys):
    argv = ["generate", "synthetic-small", "--root", str(tmp_path), "--feature-dtype", "float16"]
    assert main(argv) == 0
    assert GraphDataset.load(tmp_path / "synthetic-small").x.dtype == np.float16
    argv[-1] = "float32"
    assert main(argv) == 2  # the store there holds float16


def bad_inputs(root, tmp_path):
    source = root / "synthetic-small"
    empty = tmp_path / "empty"
    empty.mkdir()
    return {
        "missing source": (
            ["compact", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")],
            "no store at",
        ),
        "existing out": (["compact", str(source), "--out", str(root)], "exists; pick a new"),
        "out inside source": (
            ["compact", str(source), "--out", str(source / "half")],
            "lies inside the source store",
        ),
        "not a store": (["compact", str(empty), "--out", str(tmp_path / "o")], "no dataset at"),
    }


@pytest.mark.parametrize(
    "case", ["missing source", "existing out", "out inside source", "not a store"]
)
def test_bad_input_is_one_line_and_exit_2(root, tmp_path, caplog, case):
    argv, message = bad_inputs(root, tmp_path)[case]
    assert main(argv) == 2
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and message in errors[0].getMessage(), caplog.text
    assert "Traceback" not in caplog.text
    assert not (root / "synthetic-small" / "half").exists()
    assert not (tmp_path / "o").exists()


def test_a_value_beyond_float16_exits_2_naming_row_and_column(root, tmp_path, caplog):
    dataset = GraphDataset.load(root / "synthetic-small", mmap=False)
    dataset.x[40, 7] = -1e6
    dataset.save(tmp_path / "big")
    assert main(["compact", str(tmp_path / "big"), "--out", str(tmp_path / "half")]) == 2
    assert "row 40, column 7 holds -1e+06, beyond float16" in caplog.text
    assert not (tmp_path / "half").exists()


def test_an_unknown_feature_dtype_is_an_argparse_error(root, tmp_path):
    argv = ["compact", str(root / "synthetic-small"), "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--feature-dtype", "bfloat16"])
    assert exit_info.value.code == 2
