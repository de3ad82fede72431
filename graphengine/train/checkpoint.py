"""Checkpoints: model, optimizer, epoch and RNG states in one file, written atomically.

Saving and restoring the training state is here; what the file looks like on disk (and how
it is checked when read) is :func:`write_state` / :func:`read_state`.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import torch

log = logging.getLogger(__name__)


def write_state(path: str | Path, state: dict) -> None:
    """Write ``state`` (tensors, numbers, strings, lists and dicts of them) to ``path``,
    through a temporary file so that a crash leaves the previous checkpoint whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_bytes(buffer.getvalue())
    temporary.replace(path)


def read_state(path: str | Path) -> dict:
    """What :func:`write_state` wrote to ``path``, on the CPU."""
    return torch.load(Path(path), map_location="cpu", weights_only=True)
