"""Docstring fields that name several values at once, as ``rank, world_size: this worker's
place``, kept whole.

Napoleon turns such a line into ``:param rank, world_size:``, and Sphinx reads a field's
argument as ``type name``: ``rank,`` would show as the type of ``world_size``. Joining the names
with a zero-width space after each comma keeps them one argument, shown as written.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx

_ZERO_WIDTH_SPACE = "\u200b"
_FIELD = re.compile(r"^(\s*:(?:param|ivar|var|cvar|keyword)) ([\w*]+(?:, [\w*]+)+):")


def _join_names(app, what, name, obj, options, lines: list[str]) -> None:
    def joined(match: re.Match) -> str:
        return f"{match[1]} {match[2].replace(', ', ',' + _ZERO_WIDTH_SPACE)}:"

    for i, line in enumerate(lines):
        lines[i] = _FIELD.sub(joined, line)


def setup(app: Sphinx) -> dict:
    # After napoleon (priority 500), which writes the fields.
    app.connect("autodoc-process-docstring", _join_names, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
