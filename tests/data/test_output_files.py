"""Output files (metrics lines, checkpoints): a device, FIFO or socket at the path is never
opened or replaced, a symlink is followed and stays, a full disk leaves the file as it was."""

import os
import re
import stat
import threading

import pytest

from graphengine.data import output_files
from graphengine.data.output_files import WriteError, append_line, output_target
from tests.helpers.special_files import char_device, fifo, fill, tmpfs, unix_socket


def test_append_line_creates_and_appends_whole_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    append_line(path, '{"epoch": 1}')
    append_line(path, '{"epoch": 2}')
    assert path.read_text() == '{"epoch": 1}\n{"epoch": 2}\n'


def test_a_symlink_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "real.jsonl"
    target.write_text("a\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    append_line(link, "b")
    assert link.is_symlink() and target.read_text() == "a\nb\n"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "made.jsonl")
    append_line(dangling, "c")
    assert dangling.is_symlink() and (tmp_path / "made.jsonl").read_text() == "c\n"


def test_devices_fifos_sockets_and_loops_are_refused_unopened(tmp_path):
    device = char_device(tmp_path / "full")  # a write to it would fail with ENOSPC instead
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    to_device = tmp_path / "to-device"
    to_device.symlink_to(device)
    with unix_socket(tmp_path / "sock") as sock:
        for path, kind in [
            (device, "a character device"),
            (fifo(tmp_path / "fifo"), "a FIFO"),  # opened, it would block without a reader
            (sock, "a socket"),
            (to_device, f"a character device (a link to '{device}')"),
            (loop, "a symlink loop"),
        ]:
            with pytest.raises(ValueError, match=re.escape(f"'{path}' is {kind}")):
                append_line(path, "line")
    assert stat.S_ISCHR(os.lstat(device).st_mode) and stat.S_ISFIFO(
        os.lstat(tmp_path / "fifo").st_mode
    )


def test_a_fifo_swapped_in_after_the_check_fails_instead_of_blocking(tmp_path, monkeypatch):
    """The path may change between the check and the open: opening never blocks, so a FIFO
    without a reader is an error, not a training stalled forever."""
    path = fifo(tmp_path / "fifo")
    monkeypatch.setattr(output_files, "output_target", lambda path, name: path)
    errors = []

    def append():
        try:
            append_line(path, "line")
        except (WriteError, ValueError) as error:
            errors.append(error)

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    writer.join(timeout=10)
    assert not writer.is_alive(), "opening the FIFO blocked"
    assert len(errors) == 1 and f"'{path}'" in str(errors[0])


def test_a_full_disk_leaves_no_partial_line(tmp_path):
    with tmpfs(tmp_path / "small") as small:
        path = small / "m.jsonl"
        append_line(path, '{"epoch": 1}')
        fill(small)
        # Longer than what is left of the file's page: part of it fits, the rest does not.
        with pytest.raises(WriteError, match=f"'{path}': cannot append a line \\(No space left"):
            append_line(path, '{"epoch": 2, "pad": "' + "x" * 10000 + '"}')
        assert path.read_text() == '{"epoch": 1}\n'


def test_output_target_of_a_missing_or_plain_file_is_itself(tmp_path):
    assert output_target(tmp_path / "new", "x") == tmp_path / "new"
    (tmp_path / "plain").write_text("")
    assert output_target(tmp_path / "plain", "x") == tmp_path / "plain"
