"""Output paths over every kind of thing a path can name: the check either refuses it with a
``ValueError`` naming the option and the path, or accepts it, and then the writer puts the
right bytes at the right place (a symlink's target) or fails naming the path and leaves
the file as it was (a full disk). A device, FIFO or socket is never replaced."""

import os
import re
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphengine.cli.paths import check_output_file
from graphengine.data.output_files import WriteError, append_line
from graphengine.train.checkpoint import read_state, write_state
from tests.helpers.special_files import char_device, fifo, fill, tmpfs, unix_socket

# What a path can name; "link" puts a symlink to it at the path instead.
KINDS = (
    "regular",
    "missing",
    "directory",
    "device",
    "fifo",
    "socket",
    "dangling",
    "loop",
    "under-file",
    "read-only",
    "full-missing",
    "full-existing",
)
# Refused by the check, through a link too.
REFUSED = {"directory", "device", "fifo", "socket", "loop", "under-file", "read-only"}
OPTIONS = {"--metrics": False, "--checkpoint": True}  # option -> the writer replaces the file
OLD = {"metrics": b'{"epoch": 0}\n', "checkpoint": {"epoch": 0}}


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A folder for each example's paths, a read-only tmpfs, and a full one holding a
    metrics file and a checkpoint written before it filled up."""
    base = tmp_path_factory.mktemp("outputs")
    with tmpfs(base / "ro", read_only=True) as read_only, tmpfs(base / "full") as full:
        (full / "old.jsonl").write_bytes(OLD["metrics"])
        write_state(full / "old.pt", OLD["checkpoint"])
        fill(full)
        yield {"base": base, "read-only": read_only, "full": full}


def make(kind: str, option: str, folder: Path, places: dict) -> Path:
    """A path naming ``kind`` (its old contents, if any, are :data:`OLD`'s)."""
    path = folder / "out"
    if kind == "regular":
        if option == "--metrics":
            path.write_bytes(OLD["metrics"])
        else:
            write_state(path, OLD["checkpoint"])
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        char_device(path)
    elif kind == "fifo":
        fifo(path)
    elif kind == "socket":
        with unix_socket(path):
            pass  # the socket's file stays once it is closed
    elif kind == "dangling":
        path.symlink_to(folder / "not-yet")
    elif kind == "loop":
        path.symlink_to(folder / "loop2")
        (folder / "loop2").symlink_to(path)
    elif kind == "under-file":
        (folder / "plain").write_text("a file")
        path = folder / "plain" / "out"
    elif kind == "read-only":
        path = places["read-only"] / "out"
    elif kind == "full-missing":
        path = places["full"] / f"new-{folder.name}"
    elif kind == "full-existing":
        path = places["full"] / ("old.jsonl" if option == "--metrics" else "old.pt")
    return path


def snapshot(path: Path):
    """What is at ``path`` (not followed) and, for a regular file, its bytes."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    kind = stat.S_IFMT(info.st_mode)
    return (kind, path.read_bytes() if stat.S_ISREG(info.st_mode) else None)


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    linked=st.booleans(),
    option=st.sampled_from(sorted(OPTIONS)),
    epoch=st.integers(1, 10**6),
)
def test_an_output_path_is_refused_or_written_whole(places, kind, linked, option, epoch):
    folder = Path(tempfile.mkdtemp(dir=places["base"]))
    target = make(kind, option, folder, places)
    path = target
    if linked and kind not in ("dangling", "loop", "under-file"):
        path = folder / "link"
        path.symlink_to(target)
    before = snapshot(target)
    try:
        check_output_file(option, path, replaced=OPTIONS[option])
    except ValueError as error:
        assert kind in REFUSED, f"{kind} refused: {error}"
        assert re.match(re.escape(f"{option} '{path}'"), str(error)), str(error)
        assert snapshot(target) == before  # nothing written, nothing replaced
        return
    assert kind not in REFUSED, f"{kind} accepted"
    written = target.resolve()  # a dangling link's target, made by the write
    try:
        if option == "--metrics":
            append_line(path, f'{{"epoch": {epoch}}}')
        else:
            write_state(path, {"epoch": epoch})
    except WriteError as error:
        assert kind.startswith("full"), f"{kind}: {error}"
        assert f"'{path}'" in str(error)
        after = snapshot(target)
        assert after == before or (before is None and after[1] == b""), (before, after)
        leftovers = [p.name for p in places["full"].iterdir() if p.name.endswith(".tmp")]
        assert leftovers == []
        return
    if linked or kind == "dangling":
        assert path.is_symlink()  # followed, not replaced
    if option == "--metrics":
        old = OLD["metrics"] if kind in ("regular", "full-existing") else b""
        assert written.read_bytes() == old + f'{{"epoch": {epoch}}}\n'.encode()
        if kind == "full-existing":  # it fit in the file's last page: keep it as it was
            written.write_bytes(old)
    else:
        assert read_state(written) == {"epoch": epoch}
        if kind == "full-existing":
            write_state(written, OLD["checkpoint"])
    if kind == "full-missing":
        written.unlink()


def test_every_refused_kind_is_refused_through_a_link_and_left_as_it_was(places, tmp_path):
    """The examples above draw the kinds at random; here each refused kind once, linked."""
    for kind in sorted(REFUSED - {"loop", "under-file"}):
        folder = tmp_path / kind
        folder.mkdir()
        target = make(kind, "--checkpoint", folder, places)
        before = snapshot(target)
        link = folder / "link"
        link.symlink_to(target)
        for option, replaced in OPTIONS.items():
            with pytest.raises(ValueError, match=re.escape(f"{option} '{link}'")):
                check_output_file(option, link, replaced=replaced)
        assert snapshot(target) == before and link.is_symlink()
