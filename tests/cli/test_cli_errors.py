"""``graphengine train`` and ``partition`` fail early and point at the option to fix: a loss
that is not finite, output paths that cannot be written, bad labels and option ranges, each
a one-line error with exit code 2 (the contract of :mod:`graphengine.cli.errors`)."""

import dataclasses
import json
import math
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from graphengine import cli
from graphengine.cli import main
from graphengine.cli.paths import check_output_file
from graphengine.datasets import load_dataset
from graphengine.train.metrics import json_line
from tests.helpers.special_files import char_device, fifo, fill, tmpfs, unix_socket

SMALL = ["--fanouts", "4,4", "--batch-size", "400", "--hidden", "16", "--no-progress"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """A data root holding synthetic-small, generated once for the module."""
    root = tmp_path_factory.mktemp("root")
    load_dataset("synthetic-small", root=root)
    return str(root)


@pytest.fixture(scope="module")
def small(data_root):
    """synthetic-small, opened from :func:`data_root`."""
    return load_dataset("synthetic-small", root=data_root)


def test_json_lines_are_valid_json_with_non_finite_floats_as_null():
    line = json_line({"loss": math.nan, "stage_s": {"a": math.inf}, "l": [1.0, -math.inf]})
    assert json.loads(line) == {"loss": None, "stage_s": {"a": None}, "l": [1.0, None]}
    assert "NaN" not in line and "Infinity" not in line


@pytest.mark.parametrize("task", ["node", "link"])
def test_nan_features_stop_training_at_the_first_step_with_exit_2(
    small, tmp_path, capsys, caplog, task
):
    x = np.array(small.x)
    x[:] = np.nan
    store = tmp_path / "nan"
    dataclasses.replace(small, x=x).save(store)
    metrics = tmp_path / "metrics.jsonl"
    argv = ["train", "--task", task, "--dataset", str(store), "--epochs", "2", *SMALL]
    assert main([*argv, "--metrics", str(metrics)]) == 2
    assert "the training loss is nan at epoch 1, step 1" in caplog.text
    assert capsys.readouterr().out == ""  # no epoch line claims a loss
    assert not metrics.exists()


def output_cases(tmp_path):
    """(option, path, message) for output paths that cannot be written, as root too: a
    directory given as the file, and a file's path under a regular file."""
    (tmp_path / "plain").write_text("a file")
    (tmp_path / "folder").mkdir()
    under_file = tmp_path / "plain" / "out"
    return [
        ("--checkpoint", tmp_path / "folder", "is a directory: expected a regular file to write"),
        ("--metrics", tmp_path / "folder", "is a directory: expected a regular file to write"),
        ("--checkpoint", under_file / "run.ckpt", "is a file, not a directory"),
        ("--metrics", under_file, "is a file, not a directory"),
        ("--metrics", tmp_path / "missing" / "m.jsonl", "does not exist"),
    ]


def test_unwritable_output_paths_are_refused_before_the_dataset_is_opened(tmp_path, caplog):
    root = tmp_path / "root"
    root.mkdir()
    for option, path, message in output_cases(tmp_path):
        caplog.clear()
        assert main(["train", "--root", str(root), option, str(path), *SMALL]) == 2
        assert f"{option} '{path}'" in caplog.text and message in caplog.text
    assert list(root.iterdir()) == []  # refused before synthetic-small was generated


def test_devices_fifos_and_sockets_are_refused_before_training_and_left_alone(tmp_path, caplog):
    """A checkpoint path at /dev/full used to become a regular file, a metrics FIFO with no
    reader blocked the end of the first epoch: every output option refuses a target that
    is not a regular file, followed through a symlink, before the dataset is opened."""
    root = tmp_path / "root"
    root.mkdir()
    device = char_device(tmp_path / "full")
    link = tmp_path / "link"
    link.symlink_to(device)
    pipe = fifo(tmp_path / "fifo")
    with unix_socket(tmp_path / "sock") as sock:
        cases = [
            (["train", "--checkpoint", str(device)], f"--checkpoint '{device}' is a character"),
            (["train", "--checkpoint", str(link)], f"--checkpoint '{link}' is a character"),
            (["train", "--metrics", str(pipe)], f"--metrics '{pipe}' is a FIFO"),
            (["train", "--metrics", str(sock)], f"--metrics '{sock}' is a socket"),
            (["plot", str(tmp_path / "m.jsonl"), "--out", str(device)], "--out '"),
        ]
        for argv, message in cases:
            caplog.clear()
            assert main([*argv, "--root", str(root)] if argv[0] == "train" else argv) == 2
            assert message in caplog.text and len(caplog.records) == 1, caplog.text
    assert stat.S_ISCHR(os.lstat(device).st_mode) and link.is_symlink()
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert list(root.iterdir()) == []  # refused before synthetic-small was generated


def test_a_full_disk_under_metrics_is_one_line_and_no_partial_json(data_root, tmp_path, caplog):
    with tmpfs(tmp_path / "small") as small:
        metrics = small / "m.jsonl"
        fill(small)
        argv = ["train", "--root", data_root, "--epochs", "1", "--eval-every", "0", *SMALL]
        assert main([*argv, "--metrics", str(metrics)]) == 2
        assert f"'{metrics}': cannot append a line (No space left on device)" in caplog.text
        assert metrics.read_bytes() == b""


def test_a_read_only_directory_is_refused_unless_root_can_write_there(tmp_path):
    """Writability is tried by creating a file: root writes in a read-only directory, so
    there the check passes (the checkpoint would be written); anyone else is refused."""
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        if os.geteuid() == 0:
            check_output_file("--checkpoint", read_only / "run.ckpt", replaced=True)
        else:
            with pytest.raises(ValueError, match=r"--checkpoint '.*': cannot write in '.*ro'"):
                check_output_file("--checkpoint", read_only / "run.ckpt", replaced=True)
    finally:
        read_only.chmod(0o755)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--feature-cache", "-5"], "argument --feature-cache: expected rows"),
        (["train", "--remote-cache", "-5"], "argument --remote-cache: expected rows"),
        (["train", "--seed", str(2**64)], r"argument --seed: must be in [0, 2^63 - 1]"),
        (["train", "--seed", "-1"], r"argument --seed: must be in [0, 2^63 - 1] (got -1)"),
        (["partition", "--seed", str(2**63)], r"argument --seed: must be in [0, 2^63 - 1]"),
        (
            ["train", "--fanouts", "99999999999999999999"],
            "argument --fanouts: fanouts must be >= -1 and at most 2147483647",
        ),
        (
            ["train", "--fanouts", f"5,{2**63 - 1}"],
            "argument --fanouts: fanouts must be >= -1 and at most 2147483647",
        ),
        (["train", "--dist-timeout", "1e-9"], "--dist-timeout: must be in [1, 604800] seconds"),
        (["train", "--dist-timeout", "nan"], "argument --dist-timeout: expected a finite number"),
        (["train", "--hidden", str(10**12)], "argument --hidden: must be in [1, 2^20]"),
        (["train", "--walk-length", str(10**9)], "argument --walk-length: must be in [1, 2^16]"),
        (["train", "--num-workers", "100000"], "argument --num-workers: must be in [0, 1024]"),
    ],
)
def test_out_of_range_sizes_and_seeds_name_their_option_and_range(argv, message, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "remote_cache" not in err and "Overflow" not in err


def test_directories_that_are_files_are_refused_naming_the_option(data_root, tmp_path, caplog):
    """A file where --root, partition's --out or --cluster-dir names a directory, or a path
    under a file: exit 2 naming the option, before anything is read or written (root too:
    no file can be created under a regular file)."""
    plain = tmp_path / "plain"
    plain.write_text("a file")
    root = data_root
    cases = [
        (["train", "--root", str(plain)], f"--root '{plain}' is a file"),
        (["train", "--root", str(plain / "sub")], f"--root '{plain / 'sub'}': '{plain}' is a file"),
        (["partition", "--root", root, "--parts", "2", "--out", str(plain)], "--out '"),
        (["partition", "--root", root, "--parts", "2", "--out", str(plain / "p")], "--out '"),
        (
            ["train", "--root", root, "--sampler", "cluster", "--cluster-dir", str(plain)],
            "--cluster-dir '",
        ),
    ]
    for argv, message in cases:
        caplog.clear()
        assert main([*argv, "--no-progress"] if argv[0] == "train" else argv) == 2, argv
        assert message in caplog.text, argv
        assert len(caplog.records) == 1  # one line, no traceback


def write_npz(path, labels: np.ndarray) -> None:
    """A gnn-benchmark ``.npz`` of a ring of ``len(labels)`` nodes, one-hot features."""
    n = len(labels)
    ring = np.arange(n)
    arrays = {}
    for prefix, matrix in [
        ("adj", sp.csr_matrix((np.ones(n), ((ring + 1) % n, ring)), shape=(n, n))),
        ("attr", sp.csr_matrix(np.eye(n, dtype=np.float32))),
    ]:
        arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"] = matrix.data, matrix.indices
        arrays[f"{prefix}_indptr"], arrays[f"{prefix}_shape"] = matrix.indptr, matrix.shape
    np.savez(path, labels=labels, **arrays)


def test_out_of_range_labels_reaching_the_cli_exit_2(small, tmp_path, caplog):
    """Labels are checked as a dataset is opened, the CLI maps that to one line and exit 2:
    an edited num_classes in a store's manifest, a store's y.npy, an .npz's labels."""
    edited = tmp_path / "edited"
    small.save(edited)
    manifest = json.loads((edited / "dataset.json").read_text())
    (edited / "dataset.json").write_text(json.dumps({**manifest, "num_classes": 2}))
    relabelled = tmp_path / "relabelled"
    small.save(relabelled)
    y = np.array(small.y)
    y[0] = 99
    np.save(relabelled / "y.npy", y)
    write_npz(tmp_path / "bad.npz", np.array([0, 1, -5] * 20))
    for store, message in [
        (edited, "outside [0, 2)"),
        (relabelled, "holds label 99, outside [0, 8)"),
        (tmp_path / "bad.npz", "holds label -5"),
    ]:
        caplog.clear()
        assert main(["train", "--dataset", str(store), "--epochs", "1", *SMALL]) == 2, store
        assert message in caplog.text and "Traceback" not in caplog.text, caplog.text


def test_a_partition_with_an_edited_num_classes_exits_2_naming_the_part(data_root, tmp_path):
    """A worker checks its part's labels against the partition's num_classes as it opens the
    part (an index error inside the loss before)."""
    parts = tmp_path / "parts"
    argv = ["--root", data_root, "--parts", "1", "--method", "random", "--out", str(parts)]
    assert main(["partition", *argv]) == 0
    manifest = json.loads((parts / "partition.json").read_text())
    (parts / "partition.json").write_text(json.dumps({**manifest, "num_classes": 3}))
    command = [sys.executable, "-m", "graphengine", "train", "--partitions", str(parts)]
    done = subprocess.run(
        [*command, "--epochs", "1", *SMALL, "--dist-timeout", "20"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 2, done.stderr
    assert f"dataset '{parts} (part 0)' holds label 7, outside [0, 3)" in done.stderr


def test_a_permission_error_is_one_line_and_exit_2(monkeypatch, tmp_path, caplog):
    """A path the user may not write (a read-only --root a dataset must be generated in)
    ends in one line naming it. Root writes anywhere: there the error is raised by hand;
    anyone else also trains on a read-only root for real."""

    def denied(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "ro"))

    monkeypatch.setattr(cli.datasets, "run", denied)
    assert main(["datasets"]) == 2
    assert f"Permission denied: '{tmp_path / 'ro'}'" in caplog.text
    assert len(caplog.records) == 1
    if os.geteuid() != 0:
        read_only = tmp_path / "ro"
        read_only.mkdir(mode=0o555)
        assert main(["train", "--root", str(read_only), "--epochs", "1", *SMALL]) == 2
