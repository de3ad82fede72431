"""The ``graphengine`` command: option checks, output, errors, and Ctrl-C."""

import argparse
import json
import logging
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

from graphengine import cli
from graphengine.cli import main
from graphengine.cli.options import join_negative_values
from graphengine.datasets import CATALOG


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--epochs", "0", "must be >= 1 (got 0)"),
        ("--epochs", "-1", "must be >= 1 (got -1)"),
        ("--eval-every", "-1", "must be >= 0 (got -1)"),
        ("--hidden", "0", "must be in [1, 2^20] (got 0)"),
        ("--batch-size", "0", "must be >= 1 (got 0)"),
        ("--num-workers", "-1", "must be in [0, 1024] (got -1)"),
        ("--nproc", "0", "must be >= 1 (got 0)"),
        ("--lr", "0", "must be > 0 (got 0.0)"),
        ("--lr", "nan", "expected a finite number"),
        ("--dropout", "1", "must be in [0, 1) (got 1.0)"),
        ("--dropout", "-0.1", "must be in [0, 1) (got -0.1)"),
        ("--weight-decay", "-1e-4", "must be >= 0"),
        ("--dist-timeout", "0", "must be in [1, 604800] seconds (got 0)"),
        ("--epochs", "two", "expected an integer (got 'two')"),
        ("--device", "gpu", "expected auto, cpu, cuda or cuda:N (got 'gpu')"),
        ("--fanouts", "5,-3", "fanouts must be >= -1"),
        ("--fanouts", "5,2147483648", "fanouts must be >= -1 and at most 2147483647"),
    ],
)
def test_bad_train_options_fail_at_parse_time_naming_the_flag(
    tmp_path, capsys, flag, value, message
):
    with pytest.raises(SystemExit) as exit:
        main(["train", "--root", str(tmp_path), f"{flag}={value}"])
    assert exit.value.code == 2
    assert f"argument {flag}: {message}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # refused before the dataset was generated


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU would be used")
@pytest.mark.parametrize("task", ["node", "link"])
def test_a_gpu_device_without_one_is_refused_before_the_data(tmp_path, caplog, task):
    code = main(["train", "--task", task, "--device", "cuda", "--root", str(tmp_path)])
    assert code == 2
    assert "--device cuda: this torch has no CUDA" in caplog.text or "finds no GPU" in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_the_training_device_follows_torch_and_torchrun(monkeypatch):
    from graphengine.cli.train_node import training_device

    if not torch.cuda.is_available():
        assert training_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert training_device("auto") == training_device("cuda") == torch.device("cuda", 0)
    assert training_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="has 2 GPU"):
        training_device("cuda:2")
    with pytest.raises(ValueError, match="names one GPU; each worker takes its own"):
        training_device("cuda:1", workers=2)
    with pytest.raises(ValueError, match="names one GPU"):  # one part, still launched
        training_device("cuda:1", workers=1)
    assert training_device("cuda", workers=2) == torch.device("cuda", 0)
    with pytest.raises(ValueError, match="3 workers, one GPU each, and this machine has 2"):
        training_device("auto", workers=3)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert training_device("auto") == training_device("cuda") == torch.device("cuda", 1)
    assert training_device("cpu") == torch.device("cpu")


def test_negative_fanouts_parse_as_separate_words():
    parse = cli.build_parser().parse_args
    assert parse(join_negative_values(["train", "--fanouts", "-1,-1"])).fanouts == [-1, -1]
    assert parse(join_negative_values(["train", "--fanouts", "-1"])).fanouts == [-1]
    assert parse(["train", "--fanouts=-1,5"]).fanouts == [-1, 5]
    # A following option is not taken for a value.
    args = parse(join_negative_values(["bench", "sample", "--fanouts", "3", "--vs", "pyg"]))
    assert args.fanouts == [3] and args.vs == ["pyg"]


def test_help_documents_defaults_modes_datasets_and_results(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--help"])
    assert exit.value.code == 0
    top = capsys.readouterr().out
    assert "graphengine build" in top and "``" not in top
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere
    assert "``" not in text
    assert "(default: 1024)" in text and "(default: 15,10,5)" in text
    assert "-1 takes all neighbors" in text and "first hop" in text
    assert "{auto,full,layerwise,sampled}" in text
    for name in CATALOG:
        assert name in text.replace("- ", "-")  # a name may be wrapped at its hyphen
    for field in ("train_acc_running", "first_epoch_s", "epoch_s", "exit code 130"):
        assert field in text


def subcommands(parser: argparse.ArgumentParser, prefix: tuple = ()):
    """``(argv prefix, parser)`` for ``parser`` and every subcommand under it."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subcommands(sub, (*prefix, name))


def test_every_command_has_help_and_names_no_path_outside_the_project(capsys):
    commands = list(subcommands(cli.build_parser()))
    assert len(commands) == 22  # graphengine, its 11 commands, bench's 10
    for prefix, _ in commands:
        with pytest.raises(SystemExit) as exit:
            main([*prefix, "--help"])
        assert exit.value.code == 0, prefix
        text = capsys.readouterr().out
        assert text.startswith("usage: graphengine"), prefix
        assert "../" not in text and "shared/" not in text, prefix
    bench_partition = " ".join(main_help(capsys, "bench", "partition").split())
    assert "(default: 0,5%,20%)" in bench_partition  # a % in a default is not a format


def main_help(capsys, *command: str) -> str:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    return capsys.readouterr().out


DATASET_COMMANDS = [
    ["train"],
    ["partition", "--parts", "2", "--out", "x"],
    ["reorder", "--out", "x"],
    ["bench", "sample"],
    ["bench", "modes"],
    ["bench", "train"],
    ["bench", "partition"],
    ["bench", "cache"],
]
FANOUT_COMMANDS = [["train"]] + [["bench", b] for b in ("sample", "modes", "train", "partition")]
FANOUT_COMMANDS += [["bench", "scaling"], ["bench", "cache"]]


@pytest.mark.parametrize("command", DATASET_COMMANDS)
def test_every_command_takes_the_dataset_options_alike(command):
    args = cli.build_parser().parse_args([*command, "--dataset", "synthetic-papers"])
    assert args.dataset == "synthetic-papers" and args.root is None and args.scale is None
    args = cli.build_parser().parse_args([*command, "--root", "R", "--scale", "12"])
    assert args.root == "R" and args.scale == 12


@pytest.mark.parametrize("command", FANOUT_COMMANDS)
def test_every_command_takes_the_fanouts_alike(command, capsys):
    parse = cli.build_parser().parse_args
    assert parse(command).fanouts == [15, 10, 5]
    assert parse(join_negative_values([*command, "--fanouts", "-1,4"])).fanouts == [-1, 4]
    with pytest.raises(SystemExit) as exit:
        parse([*command, "--fanouts=5,-3"])
    assert exit.value.code == 2
    assert (
        "argument --fanouts: fanouts must be >= -1 and at most 2147483647 (got '5,-3')"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("bench", ["sample", "modes", "train"])
def test_every_benchmark_with_peers_takes_them_alike(bench):
    parse = cli.build_parser().parse_args
    assert parse(["bench", bench]).vs == []
    assert parse(["bench", bench, "--vs", "dgl", "pyg"]).vs == ["dgl", "pyg"]


def test_train_prints_each_epoch_then_a_plain_result(tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO)
    argv = ["train", "--root", str(tmp_path), "--fanouts", "4,4", "--batch-size", "400"]
    assert main([*argv, "--epochs", "3", "--hidden", "16", "--eval-every", "2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    epochs, result = lines[:-1], lines[-1]
    assert [m["epoch"] for m in epochs] == [1, 2, 3]
    assert ["val_acc" in m for m in epochs] == [False, True, True]
    assert result["epochs"] == result["epochs_run"] == 3
    assert result["first_epoch_s"] == epochs[0]["epoch_s"]
    assert result["epoch_s"] == pytest.approx((epochs[1]["epoch_s"] + epochs[2]["epoch_s"]) / 2)
    assert result["train_acc_running"] == epochs[-1]["train_acc"]
    assert {"train_acc", "val_acc", "test_acc"} <= set(result)
    assert '{"epoch"' not in caplog.text  # the log gets a readable line, not the JSON again
    assert "epoch 3: loss" in caplog.text


def test_feature_flags_train_to_the_same_result(tmp_path, capsys, caplog):
    """--aggregate-from-store and --no-bf16-features change where rows are read, not what
    the model computes."""
    caplog.set_level(logging.INFO)
    argv = ["train", "--root", str(tmp_path), "--model", "sage", "--fanouts", "4,4"]
    argv += ["--batch-size", "400", "--epochs", "1", "--hidden", "16"]
    accuracies = []
    for extra in ([], ["--aggregate-from-store"]):
        assert main([*argv, *extra]) == 0
        accuracies.append(json.loads(capsys.readouterr().out.splitlines()[-1])["test_acc"])
    assert accuracies[0] == accuracies[1]
    assert caplog.text.count("the first layer reads x's rows from the feature table") == 1
    bf16 = []
    for extra in ([], ["--no-bf16-features"]):
        assert main([*argv, "--precision", "bf16", *extra]) == 0
        bf16.append(json.loads(capsys.readouterr().out.splitlines()[-1])["test_acc"])
    assert bf16[0] == bf16[1]  # GraphSAGE's fused layer casts x to bfloat16 either way


def test_user_errors_are_one_line_and_exit_2(tmp_path, caplog):
    assert main(["train", "--dataset", "nope", "--root", str(tmp_path)]) == 2
    assert "unknown dataset 'nope'" in caplog.text
    assert main(["train", "--dataset", str(tmp_path / "missing.npz")]) == 2


def test_other_errors_keep_their_traceback(monkeypatch):
    def broken(args):
        raise RuntimeError("an internal bug")

    monkeypatch.setattr(cli.datasets, "run", broken)
    with pytest.raises(RuntimeError, match="an internal bug"):
        main(["datasets"])


def test_datasets_lists_npz_files_in_the_root(tmp_path, capsys):
    np.savez(tmp_path / "mine.npz", a=np.zeros(1))
    (tmp_path / "notes.txt").write_text("not a dataset")
    assert main(["datasets", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith(str(tmp_path / "mine.npz")) for line in out)
    summary = json.loads(out[-1])
    assert summary["npz_files"] == [str(tmp_path / "mine.npz")]
    assert summary["on_disk"] == []


def test_ctrl_c_stops_cleanly_and_says_where_the_checkpoint_is(tmp_path):
    checkpoint = tmp_path / "run.ckpt"
    command = [sys.executable, "-m", "graphengine", "train", "--root", str(tmp_path / "data")]
    command += ["--epochs", "1000", "--fanouts", "4,4", "--hidden", "16", "--no-progress"]
    process = subprocess.Popen(
        [*command, "--checkpoint", str(checkpoint)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        # A shell starts background jobs with SIGINT ignored; Python then keeps ignoring it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        first = json.loads(process.stdout.readline())  # printed as epoch 1 ends
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert first["epoch"] == 1
    assert process.returncode == 130, err
    assert "Traceback" not in err, err
    assert re.search(
        rf"interrupted: the last checkpoint is {re.escape(str(checkpoint))} \(after epoch \d+\)",
        err,
    )
    assert checkpoint.is_file()


def test_interrupted_launcher_exits_130(monkeypatch, caplog):
    """Under ``--nproc``, torchrun's agent turns Ctrl-C into a ``SignalException``."""
    import torch.distributed.run
    from torch.distributed.elastic.multiprocessing.api import SignalException

    def interrupted(argv):
        raise SignalException("Process 1 got signal: 2", signal.SIGINT)

    monkeypatch.setattr(torch.distributed.run, "main", interrupted)
    assert main(["train", "--nproc", "2", "--epochs", "1"]) == 130
    assert "interrupted (SIGINT): the workers were stopped" in caplog.text


def test_bench_train_takes_several_peers_and_refuses_zero_rounds(capsys):
    parse = cli.build_parser().parse_args
    args = parse(["bench", "train", "--vs", "pyg", "dgl", "--rounds", "3", "--tune-peers"])
    assert args.vs == ["pyg", "dgl"] and args.rounds == 3 and args.tune_peers
    with pytest.raises(SystemExit) as exit:
        parse(["bench", "train", "--rounds", "0"])
    assert exit.value.code == 2
    assert "argument --rounds: must be >= 1 (got 0)" in capsys.readouterr().err
