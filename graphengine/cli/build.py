"""``graphengine build``: compile the C++/CUDA extension (cached) and say what was built."""

from __future__ import annotations

import json
import logging

import torch

from .options import add_command

log = logging.getLogger("graphengine")


def add_parser(commands) -> None:
    build = add_command(commands, "build", "compile the C++/CUDA extension (cached)")
    build.add_argument("--verbose", action="store_true", help="show the compiler's output")
    build.set_defaults(run=run)


def run(args) -> int:
    """Exit code 1 when the extension does not build (the log says why and how to fix it)."""
    from graphengine import ops

    if not ops.build_extension(verbose=args.verbose):
        log.error("the extension did not build: %s\n%s", ops.build_error(), ops.INSTALL_HINT)
        return 1
    if ops.with_cuda():
        kernels = "CPU and CUDA"
    elif torch.version.cuda is None:
        kernels = "CPU only (this torch has no CUDA)"
    else:
        kernels = "CPU only (no CUDA toolkit found: set CUDA_HOME to build the CUDA kernels)"
    result = {
        "extension": "built",
        "kernels": kernels,
        "library": ops.library_path(),
        "sources": str(ops.sources_dir()),
        "torch": torch.__version__,
    }
    print(json.dumps(result))
    return 0
