"""How a command's outcome becomes the exit code: 0 done, 2 the user's to fix (bad
options or input: one log line, no traceback), 3 a worker of several lost another (one log
line naming the worker that stopped answering; the launcher's for a worker a signal ended),
130 interrupted; any other exception keeps its traceback, as a bug should."""

from __future__ import annotations

import argparse
import logging

from graphengine import distributed
from graphengine.data.output_files import WriteError

from .paths import check_data_root

log = logging.getLogger("graphengine")

USAGE = 2
LOST_WORKER = distributed.LOST_WORKER
INTERRUPTED = distributed.INTERRUPTED
# Exceptions that are the user's to fix: one log line and exit code USAGE, no traceback. A
# PermissionError is a path the user may not write or read (a read-only --root a dataset
# must be generated in), whatever the command; its message names the path. A WriteError is
# an output file or a dataset that could not be written (a full disk, a read-only file
# system), named with the error.
USER_ERRORS = (ValueError, FileNotFoundError, PermissionError, NotImplementedError, WriteError)


def run_command(args: argparse.Namespace) -> int:
    """Run the command ``args.run`` names on ``args``; returns its exit code."""
    try:
        if getattr(args, "root", None) is not None:  # every command that opens a dataset
            check_data_root(args.root)
        return args.run(args)
    except USER_ERRORS as error:
        log.error("%s", error)
        return USAGE
    except KeyboardInterrupt:
        log.error("interrupted")
        return INTERRUPTED
