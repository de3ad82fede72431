"""The ``graphengine`` command: ``train``, ``plan``, ``build``, ``partition``, ``generate``,
``convert``, ``compact``, ``reorder``, ``datasets``, ``bench`` and ``plot``.

One module per command declares its options (those several commands share come from
:mod:`.options`, their value checks from :mod:`.values`) and runs it; :mod:`.errors` turns
the outcome into the exit code. JSON results go to stdout, logs to stderr. The work is done
by :mod:`graphengine.train`, :mod:`graphengine.data`, :mod:`graphengine.datasets` and
:mod:`graphengine.bench`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from . import (
    bench,
    build,
    compact,
    convert,
    datasets,
    generate,
    partition,
    plan,
    plot,
    reorder,
    train,
)
from .errors import run_command
from .options import HelpFormatter, apply_scale, join_negative_values

__all__ = ["build_parser", "main"]

DESCRIPTION = """\
Mini-batch GNN training on large graphs: node classification, graph partitioning, the
dataset catalog and benchmarks. Run 'graphengine build' once to compile the C++ gather
extension (without it, gathers fall back to torch.index_select). 'graphengine COMMAND
--help' shows each command's options."""

# In the order ``graphengine --help`` lists them.
COMMANDS = (
    train,
    plan,
    build,
    partition,
    generate,
    convert,
    compact,
    reorder,
    datasets,
    bench,
    plot,
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``graphengine``: each command's arguments, and in ``run`` the function
    that runs it."""
    parser = argparse.ArgumentParser(
        prog="graphengine", description=DESCRIPTION, formatter_class=HelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``graphengine <argv>`` (default: ``sys.argv[1:]``); returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(join_negative_values(argv))
    args.argv = argv  # what the workers torchrun starts are given
    apply_scale(parser, args)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_command(args)
