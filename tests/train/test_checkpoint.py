"""Checkpoint files: checksummed, refused when foreign or damaged, tied to model and dataset."""

import copy
import hashlib
import os
import re
import stat
import subprocess
import sys
import threading

import pytest
import torch

from graphengine.data.output_files import WriteError
from graphengine.datasets import load_dataset
from graphengine.nn.models import build_model
from graphengine.parallel import SingleProcess
from graphengine.train.checkpoint import MAGIC, read_state, write_state
from graphengine.train.trainer import Trainer
from tests.helpers.special_files import char_device, fifo, fill, tmpfs


def state():
    generator = torch.Generator().manual_seed(0)
    return {
        "model": {"weight": torch.randn(64, 32, generator=generator), "bias": torch.zeros(64)},
        "epoch": 3,
        "names": ["a", "b"],
    }


def test_round_trip(tmp_path):
    path = tmp_path / "sub" / "ckpt.pt"
    write_state(path, state())
    loaded = read_state(path)
    expected = state()
    assert loaded["epoch"] == 3 and loaded["names"] == ["a", "b"]
    for key in ("weight", "bias"):
        assert torch.equal(loaded["model"][key], expected["model"][key])
    assert [p.name for p in path.parent.iterdir()] == ["ckpt.pt"]


def test_header_holds_the_payloads_sha256_and_length(tmp_path):
    path = tmp_path / "ckpt.pt"
    write_state(path, state())
    data = path.read_bytes()
    header, payload = data.split(b"\n", 1)
    # An independent reading of the documented layout.
    assert header == b"%s 1 sha256=%s length=%d" % (
        MAGIC,
        hashlib.sha256(payload).hexdigest().encode(),
        len(payload),
    )


def test_garbage_in_the_middle_is_refused_as_corrupt(tmp_path):
    path = tmp_path / "ckpt.pt"
    write_state(path, state())
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 800] = os.urandom(800)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"ckpt\.pt is a corrupt graphengine checkpoint.*checksum"):
        read_state(path)


def test_truncated_file_is_refused_as_corrupt(tmp_path):
    path = tmp_path / "ckpt.pt"
    write_state(path, state())
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"ckpt\.pt is a corrupt graphengine checkpoint.*trunc"):
        read_state(path)


def test_random_bytes_are_not_a_checkpoint(tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match=r"random\.bin is not a graphengine checkpoint"):
        read_state(path)


def test_plain_torch_save_file_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "plain.pt"
    torch.save(state(), path)
    with pytest.raises(ValueError, match=r"plain\.pt is not a graphengine checkpoint"):
        read_state(path)


def test_other_format_version_is_refused(tmp_path):
    path = tmp_path / "ckpt.pt"
    write_state(path, state())
    path.write_bytes(path.read_bytes().replace(MAGIC + b" 1 ", MAGIC + b" 9 ", 1))
    with pytest.raises(
        ValueError, match=r"ckpt\.pt is a graphengine checkpoint of format version 9"
    ):
        read_state(path)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return load_dataset("synthetic-small", root=tmp_path_factory.mktemp("data"))


def trainer(dataset, checkpoint, hidden=16, **options):
    torch.manual_seed(0)
    model = build_model("sage", dataset.num_features, hidden, dataset.num_classes, 2)
    return Trainer(
        model,
        dataset,
        fanouts=[3, 3],
        batch_size=800,
        progress=False,
        checkpoint=checkpoint,
        eval_mode="full",
        num_workers=0,
        **options,
    )


def test_checkpoint_records_what_it_was_trained_on(dataset, tmp_path):
    path = tmp_path / "ckpt.pt"
    trainer(dataset, path).fit(1, eval_every=0)
    saved = read_state(path)["trained_on"]
    assert saved["dataset"] == "synthetic-small"
    assert (saved["num_nodes"], saved["num_features"], saved["num_classes"]) == (8192, 32, 8)
    assert saved["model"] == "GraphSAGE"
    assert saved["parameters"]["convs.0.lin_l.weight"] == [16, 32]


def test_resuming_another_hidden_size_is_refused_naming_the_difference(dataset, tmp_path):
    path = tmp_path / "ckpt.pt"
    trainer(dataset, path, hidden=16).fit(1, eval_every=0)
    with pytest.raises(
        ValueError,
        match=r"ckpt\.pt was trained on a different model or dataset: .*"
        r"parameter convs\.0\.lin_l\.weight of shape \[16, 32\] in the checkpoint, \[24, 32\] now",
    ):
        trainer(dataset, path, hidden=24)


def test_resuming_another_dataset_is_refused_naming_it(dataset, tmp_path):
    path = tmp_path / "ckpt.pt"
    trainer(dataset, path).fit(1, eval_every=0)
    state = read_state(path)
    state["trained_on"]["dataset"] = "cora"
    write_state(path, state)
    with pytest.raises(ValueError, match="dataset 'cora' in the checkpoint, 'synthetic-small' now"):
        trainer(dataset, path)


def test_damaged_checkpoint_is_refused_on_resume(dataset, tmp_path):
    path = tmp_path / "ckpt.pt"
    trainer(dataset, path).fit(1, eval_every=0)
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 800] = bytes(800)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt graphengine checkpoint"):
        trainer(dataset, path)


def test_bad_header_and_unreadable_payload_are_refused(tmp_path):
    path = tmp_path / "bad.pt"
    path.write_bytes(MAGIC + b" 1 sha256 length=x\npayload")
    with pytest.raises(ValueError, match=r"bad\.pt is a corrupt graphengine checkpoint \(bad head"):
        read_state(path)
    payload = b"not a torch file"
    digest = hashlib.sha256(payload).hexdigest()
    path.write_bytes(MAGIC + f" 1 sha256={digest} length={len(payload)}\n".encode() + payload)
    with pytest.raises(ValueError, match=r"bad\.pt holds data graphengine cannot read"):
        read_state(path)


def test_checkpoint_without_what_it_was_trained_on_is_refused(dataset, tmp_path):
    path = tmp_path / "old.pt"
    trainer(dataset, path).fit(1, eval_every=0)
    state = read_state(path)
    del state["trained_on"]
    write_state(path, state)
    with pytest.raises(ValueError, match=r"old\.pt does not say what it was trained on"):
        trainer(dataset, path)


class _TwoRanks(SingleProcess):
    """A stand-in strategy whose rank 1 does not see the checkpoint file."""

    def gather_objects(self, value) -> list:
        return [value, False]


def test_workers_that_disagree_about_the_checkpoint_are_refused(dataset, tmp_path):
    path = tmp_path / "local.pt"
    trainer(dataset, path).fit(1, eval_every=0)
    torch.manual_seed(0)
    model = build_model("sage", dataset.num_features, 16, dataset.num_classes, 2)
    with pytest.raises(ValueError, match=r"exists for some workers but not for ranks \[1\]"):
        Trainer(model, dataset, [3, 3], 800, checkpoint=path, strategy=_TwoRanks(), progress=False)


def test_fit_refuses_negative_counts(dataset, tmp_path):
    run = trainer(dataset, None)
    with pytest.raises(ValueError, match=r"'epochs' must be >= 0 \(got -1\)"):
        run.fit(-1)
    with pytest.raises(ValueError, match=r"'eval_every' must be >= 0, 0 for never \(got -2\)"):
        run.fit(1, eval_every=-2)


def test_a_killed_writes_temporary_file_is_removed_by_the_next_write(tmp_path):
    path = tmp_path / "ckpt.pt"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    stale = [tmp_path / f"ckpt.pt.{int(dead.stdout)}.tmp", tmp_path / "ckpt.pt.tmp"]
    for leftover in stale:
        leftover.write_bytes(b"half a checkpoint")
    running = tmp_path / f"ckpt.pt.{os.getppid()}.tmp"  # a live process: a write in progress
    running.write_bytes(b"being written")
    others = [tmp_path / "other.pt.1.tmp", tmp_path / "ckpt.pt5.tmp", tmp_path / "ckpt.pt.x.tmp"]
    for other in others:
        other.write_bytes(b"not this checkpoint's")
    write_state(path, state())
    assert not any(leftover.exists() for leftover in stale)
    assert running.exists() and all(other.exists() for other in others)
    assert read_state(path)["epoch"] == 3


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"

    def no_room(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_room)
    with pytest.raises(WriteError, match=f"checkpoint '{path}': cannot write it \\(No space left"):
        write_state(path, state())
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_keeps_the_previous_checkpoint_and_no_temporary_file(tmp_path):
    with tmpfs(tmp_path / "small", size="256k") as small:
        path = small / "ckpt.pt"
        write_state(path, {"epoch": 1})
        fill(small)
        with pytest.raises(
            WriteError, match=f"checkpoint '{path}': cannot write it \\(No space left"
        ):
            write_state(path, state())
        (small / "filler").unlink()
        assert sorted(p.name for p in small.iterdir()) == ["ckpt.pt"]
        assert read_state(path) == {"epoch": 1}


def test_a_symlinked_checkpoint_replaces_its_target_and_stays_a_link(tmp_path):
    target = tmp_path / "runs" / "ckpt.pt"
    target.parent.mkdir()
    write_state(target, {"epoch": 1})
    link = tmp_path / "latest.pt"
    link.symlink_to(target)
    write_state(link, state())
    assert link.is_symlink() and read_state(target)["epoch"] == 3
    assert sorted(p.name for p in target.parent.iterdir()) == ["ckpt.pt"]


def test_a_device_at_the_checkpoint_path_is_neither_written_nor_replaced(tmp_path):
    device = char_device(tmp_path / "full")
    with pytest.raises(ValueError, match="is a character device: expected a regular file"):
        write_state(device, state())
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def test_resuming_with_another_lr_and_weight_decay_uses_them_and_says_so(dataset, tmp_path, caplog):
    path = tmp_path / "ckpt.pt"
    trainer(dataset, path).fit(1, eval_every=0)
    resumed = trainer(dataset, path, lr=0.01, weight_decay=0.001)
    groups = resumed.optimizer.param_groups
    assert all(g["lr"] == 0.01 and g["weight_decay"] == 0.001 for g in groups)
    assert resumed.optimizer.state  # Adam's moments still come from the checkpoint
    assert "lr=0.01 (the checkpoint was trained with 0.003)" in caplog.text
    assert "weight_decay=0.001 (the checkpoint was trained with 0)" in caplog.text


@pytest.fixture(scope="module")
def saved_state(dataset, tmp_path_factory):
    """The state a one-epoch run saved, to edit into bad checkpoints."""
    path = tmp_path_factory.mktemp("saved") / "ckpt.pt"
    trainer(dataset, path).fit(1, eval_every=0)
    return read_state(path)


def _moment(state, name, value):
    state["optimizer"]["state"][0][name] = value


BAD_FIELDS = [
    # (what to change, the field and value the error names)
    (lambda s: s.update(epoch=-3), r"'epoch' \(got -3\), expected an int >= 0"),
    (lambda s: s.update(epoch=1.5), r"'epoch' \(got 1\.5\)"),
    (lambda s: s.update(epoch=True), r"'epoch' \(got True\)"),
    (lambda s: s.pop("model"), r"fields \(got none of \['model'\]\)"),
    (lambda s: s.update(torch_rng=[]), r"'torch_rng' \(got a list of 0\), expected a non-empty"),
    (
        lambda s: s.update(torch_rng=[torch.zeros(8, dtype=torch.uint8)]),
        r"'torch_rng'\[0\] \(got a torch.uint8 tensor of shape \[8\]\), expected a uint8 tensor",
    ),
    (
        lambda s: s["model"].update({"convs.0.lin_l.weight": [1.0]}),
        r"'model' entry 'convs.0.lin_l.weight' \(got a list of 1\), expected a tensor",
    ),
    (lambda s: s["model"].pop("convs.0.lin_l.bias"), r"'model' does not fit the model: .*Missing"),
    (lambda s: s.update(optimizer={"state": {}}), r"'optimizer' \(got a dict of 1\)"),
    (
        lambda s: s["optimizer"]["param_groups"][0].update(params=[0]),
        r"'optimizer' does not fit this model's optimizer",
    ),
    (
        lambda s: _moment(s, "exp_avg", torch.zeros(1)),
        r"'optimizer' state 'exp_avg' of a parameter of shape \[16, 32\] \(got a torch.float32 "
        r"tensor holding 0\.0\), expected a tensor of that shape",
    ),
    (lambda s: _moment(s, "step", torch.tensor(-1.0)), r"'optimizer' state 'step'.*holding -1\.0"),
    (lambda s: s.update(trained_on=[]), r"'trained_on' \(got a list of 0\)"),
]


@pytest.mark.parametrize("change, message", BAD_FIELDS)
def test_a_field_of_the_wrong_type_or_range_is_refused_naming_it(
    dataset, saved_state, tmp_path, change, message
):
    """Checkpoints framed by the writer (a valid checksum) around edited states: each field
    a resume reads is checked (epoch -3 trained 5 epochs of 2, an empty RNG list divided by
    zero, a missing model was a KeyError)."""
    state = copy.deepcopy(saved_state)
    change(state)
    path = tmp_path / "edited.pt"
    write_state(path, state)
    with pytest.raises(ValueError, match=f"checkpoint '{re.escape(str(path))}': {message}"):
        trainer(dataset, path)


def test_a_payload_that_is_not_a_dict_is_refused(dataset, tmp_path):
    path = tmp_path / "list.pt"
    write_state(path, [1, 2])
    with pytest.raises(ValueError, match=r"its contents \(got list\), expected a dict"):
        trainer(dataset, path)


def test_an_edited_checkpoint_that_still_fits_resumes(dataset, saved_state, tmp_path):
    """The checks refuse no valid state: the saved one, rewritten, resumes at its epoch."""
    path = tmp_path / "same.pt"
    write_state(path, copy.deepcopy(saved_state))
    assert trainer(dataset, path).epoch == 1


def test_reading_a_fifo_is_refused_without_opening_it(tmp_path):
    """A FIFO with no writer blocked the read forever (here: past the thread's wait)."""
    path = fifo(tmp_path / "fifo")
    errors = []

    def read():
        try:
            read_state(path)
        except ValueError as error:
            errors.append(str(error))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading the FIFO blocked"
    assert errors == [f"checkpoint '{path}' is a FIFO, expected a regular file"]


def test_reading_a_symlink_loop_or_nothing_names_the_checkpoint(tmp_path):
    """A symlink loop once ended in a raw OSError (ELOOP) from the read: a traceback."""
    loop = tmp_path / "loop.pt"
    loop.symlink_to(loop)
    with pytest.raises(ValueError, match=f"checkpoint '{loop}' is a symlink loop"):
        read_state(loop)
    with pytest.raises(FileNotFoundError, match=f"missing checkpoint '{tmp_path / 'none.pt'}'"):
        read_state(tmp_path / "none.pt")
