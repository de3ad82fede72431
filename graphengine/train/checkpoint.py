"""Checkpoint files: a training state in one file, written atomically, checked when read.

What goes into the state is :class:`~graphengine.train.Trainer`'s business
(``save_checkpoint``); this module writes and reads the file (:func:`write_state`,
:func:`read_state`) and says what a state was trained on (:func:`trained_on`).

A file is one ASCII header line, then the ``torch.save`` payload::

    GRAPHENGINE-CHECKPOINT 1 sha256=<64 hex digits> length=<payload bytes>\\n
    <payload>

The header's checksum and length are verified before the payload is unpickled (with
``weights_only=True``), so a truncated or damaged file is refused instead of resuming with
wrong weights. :func:`trained_on` describes what a checkpoint was trained on and
:func:`check_trained_on` refuses to resume a different model or dataset.

What reading a checkpoint trusts: nothing in it runs code (``weights_only=True`` unpickles
tensors, numbers, strings, lists and dicts only), and the checksum catches damage, not
tampering (whoever can write the file can write a matching header). So every field a
resume reads is checked for its type and range first (:func:`check_resume_fields`; the
model's and optimizer's own loaders then check names and shapes), each refusal a
``ValueError`` naming the file and the field.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import pickle
from pathlib import Path

import torch

from graphengine.data.files import check_regular_file
from graphengine.data.output_files import output_target, replace_file, temporaries

log = logging.getLogger(__name__)

MAGIC = b"GRAPHENGINE-CHECKPOINT"
VERSION = 1
# The header is short; anything longer than this without a newline is not ours.
_MAX_HEADER = 256


def write_state(path: str | Path, state: dict) -> None:
    """Write ``state`` (tensors, numbers, strings, lists and dicts of them) to ``path``,
    through a temporary file beside it, renamed onto it once whole, so that a crash or a
    full disk leaves the previous checkpoint whole and no temporary file. A symlinked
    ``path`` is followed: its target is replaced and the link stays
    (:mod:`graphengine.data.output_files`).

    Raises:
        ValueError: ``path`` (or a link's target) exists and is not a regular file (a
            device, a FIFO, ...): it is neither opened nor replaced.
        WriteError: (an ``OSError``) the file cannot be written; the message names it and
            the error.
    """
    name = f"checkpoint '{path}'"
    target = output_target(path, name)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    digest = hashlib.sha256(payload).hexdigest()
    header = b"%s %d sha256=%s length=%d\n" % (MAGIC, VERSION, digest.encode(), len(payload))
    if target.parent.is_dir():
        remove_stale_temporaries(target)
    replace_file(target, lambda file: file.writelines((header, payload)), name)


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Delete the temporary files that writes of checkpoint ``path`` killed mid-way left
    beside it (:func:`~graphengine.data.output_files.temporaries` of a process no longer
    running); returns them. A kill that :func:`write_state`'s cleanup cannot catch (SIGKILL)
    leaves one the size of a checkpoint."""
    removed = []
    for temporary, pid in temporaries(Path(path)):
        if pid is None or not _running(pid):  # else a write in progress
            temporary.unlink(missing_ok=True)
            removed.append(temporary)
    return removed


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists (this one included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


def read_state(path: str | Path) -> dict:
    """What :func:`write_state` wrote to ``path``, on the CPU.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: ``path`` is not a regular file (a FIFO, a device, a symlink loop: never
            read), or the
            file is not a graphengine checkpoint (no header), has a format
            version this code does not read, or is corrupt (checksum or length mismatch).
    """
    path = Path(path)
    check_regular_file(path, "checkpoint")  # a FIFO would block the read, a device not end
    data = path.read_bytes()
    newline = data.find(b"\n", 0, _MAX_HEADER)
    if not data.startswith(MAGIC + b" ") or newline < 0:
        raise ValueError(
            f"{path} is not a graphengine checkpoint (it does not start with the "
            f"{MAGIC.decode()} header that graphengine writes)"
        )
    fields = data[len(MAGIC) + 1 : newline].split(b" ")
    try:
        version = int(fields[0])
        info = dict(field.split(b"=", 1) for field in fields[1:])
        digest, length = info[b"sha256"].decode(), int(info[b"length"])
    except (ValueError, KeyError, IndexError, UnicodeDecodeError):
        raise ValueError(f"{path} is a corrupt graphengine checkpoint (bad header)") from None
    if version != VERSION:
        raise ValueError(
            f"{path} is a graphengine checkpoint of format version {version}; "
            f"this graphengine reads version {VERSION}"
        )
    payload = data[newline + 1 :]
    if len(payload) != length:
        raise ValueError(
            f"{path} is a corrupt graphengine checkpoint: {len(payload)} bytes of data "
            f"where the header says {length} (truncated or appended to)"
        )
    if hashlib.sha256(payload).hexdigest() != digest:
        raise ValueError(
            f"{path} is a corrupt graphengine checkpoint: its contents do not match "
            "the checksum written with them"
        )
    try:
        return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError) as error:
        raise ValueError(f"{path} holds data graphengine cannot read: {error}") from None


def check_resume_fields(state, path: str | Path, rng_size: int) -> None:
    """Refuse ``state``, read from checkpoint ``path``, unless the fields a resume reads are
    of their types and ranges: ``epoch`` an int >= 0, ``model`` a dict of tensors by name,
    ``optimizer`` a ``state_dict`` of a torch optimizer (``state`` and ``param_groups``) or a
    list of them (one per hybrid worker), ``torch_rng`` a non-empty list of uint8 tensors of
    ``rng_size`` bytes (:func:`torch.get_rng_state`'s), ``trained_on`` a dict whose
    ``parameters`` are shapes (lists of ints) by name.

    Raises ``ValueError`` naming ``path``, the field, its value and what was expected."""

    def refuse(field: str, got, expected: str):
        raise ValueError(f"checkpoint '{path}': {field} (got {got}), expected {expected}")

    if not isinstance(state, dict):
        refuse("its contents", type(state).__name__, "a dict of the training state")
    missing = [k for k in ("model", "optimizer", "epoch", "torch_rng") if k not in state]
    if missing:
        refuse("fields", f"none of {missing}", "model, optimizer, epoch and torch_rng")
    epoch = state["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        refuse("'epoch'", repr(epoch), "an int >= 0")
    model = state["model"]
    if not isinstance(model, dict):
        refuse("'model'", described(model), "a dict of tensors by parameter name")
    for name, tensor in model.items():
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            refuse(f"'model' entry {name!r}", described(tensor), "a tensor")
    optimizers = state["optimizer"]
    for optimizer in optimizers if isinstance(optimizers, list) else [optimizers]:
        if not _optimizer_state(optimizer):
            refuse("'optimizer'", described(optimizer), "a torch optimizer's state_dict")
    rng = state["torch_rng"]
    if not isinstance(rng, list) or not rng:
        refuse("'torch_rng'", described(rng), "a non-empty list of RNG states, one a worker")
    for rank, generator in enumerate(rng):
        if not _rng_state(generator, rng_size):
            refuse(
                f"'torch_rng'[{rank}]", described(generator), f"a uint8 tensor of {rng_size} bytes"
            )
    saved = state.get("trained_on")
    if saved is not None and not (
        isinstance(saved, dict)
        and isinstance(saved.get("parameters", {}), dict)
        and all(_shape(s) for s in saved.get("parameters", {}).values())
    ):
        refuse("'trained_on'", described(saved), "a dict with parameter shapes (lists of ints)")


def _optimizer_state(value) -> bool:
    """Whether ``value`` is shaped as ``torch.optim.Optimizer.state_dict()``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("state"), dict)
        and isinstance(value.get("param_groups"), list)
        and all(
            isinstance(group, dict) and _shape(group.get("params"))
            for group in value["param_groups"]
        )
        and all(isinstance(moments, dict) for moments in value["state"].values())
    )


def _rng_state(value, size: int) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.dtype == torch.uint8
        and value.dim() == 1
        and value.numel() == size
    )


def _shape(value) -> bool:
    """Whether ``value`` is a list of ints (a shape, a group's parameter ids)."""
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


def described(value) -> str:
    """``value`` in a one-line error: a number as itself, a tensor by its dtype and shape
    (its value where it holds one), a list or dict by its length."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 1:
            return f"a {value.dtype} tensor holding {value.item()!r}"
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    if isinstance(value, list | dict):
        return f"a {type(value).__name__} of {len(value)}"
    return repr(value)[:80]


def trained_on(model: torch.nn.Module, dataset) -> dict:
    """What ``model`` is trained on: ``dataset`` (name), ``num_nodes``, ``num_features`` (of a
    heterogeneous dataset, dicts by node type), ``num_classes``, ``model`` (class name) and
    ``parameters`` (name -> shape as a list)."""
    return {
        "dataset": dataset.name,
        "num_nodes": _counts(dataset.num_nodes),
        "num_features": _counts(dataset.num_features),
        "num_classes": int(dataset.num_classes),
        "model": type(model).__name__,
        "parameters": {name: list(p.shape) for name, p in model.named_parameters()},
    }


def _counts(value) -> int | dict[str, int]:
    """A count, or a dict of counts by node type, as plain ints."""
    if isinstance(value, dict):
        return {str(key): int(count) for key, count in value.items()}
    return int(value)


def check_trained_on(saved: dict | None, current: dict, path: str | Path) -> None:
    """Raise ``ValueError`` naming what differs when checkpoint ``path``, trained on
    ``saved`` (see :func:`trained_on`), is not of the ``current`` model and dataset."""
    if saved is None:
        raise ValueError(f"{path} does not say what it was trained on; it cannot be resumed")
    differences = [
        f"{key} {saved.get(key)!r} in the checkpoint, {current[key]!r} now"
        for key in ("dataset", "num_nodes", "num_features", "num_classes", "model")
        if saved.get(key) != current[key]
    ]
    before, now = saved.get("parameters", {}), current["parameters"]
    for name in sorted(set(before) | set(now)):
        if name not in now:
            differences.append(f"parameter {name} only in the checkpoint")
        elif name not in before:
            differences.append(f"parameter {name} not in the checkpoint")
        elif list(before[name]) != now[name]:
            differences.append(
                f"parameter {name} of shape {list(before[name])} in the checkpoint, {now[name]} now"
            )
    if differences:
        shown = "; ".join(differences[:5])
        more = f"; and {len(differences) - 5} more" if len(differences) > 5 else ""
        raise ValueError(
            f"{path} was trained on a different model or dataset: {shown}{more} "
            "(delete it or use another checkpoint file to start afresh)"
        )
