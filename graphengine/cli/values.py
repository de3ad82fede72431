"""argparse ``type=`` functions: each turns an option's text into its value or raises
``argparse.ArgumentTypeError`` naming the value, which argparse reports as
``argument --OPTION: ...`` with exit code 2."""

from __future__ import annotations

import argparse
import math
import re

from graphengine.data.sizes import BYTE_UNITS, parse_size
from graphengine.datasets.papers import MAX_SCALE
from samplers.hop import MAX_FANOUT
from samplers.seeds import MAX_SEED


def at_least(low: int):
    """An argparse type: an int >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer (got {text!r})") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low} (got {value})")
        return value

    return parse


def device(text: str) -> str:
    """``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    if text in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", text):
        return text
    raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda or cuda:N (got {text!r})")


def between(low: int, high: int, shown: str | None = None):
    """An argparse type: an int in ``[low, high]`` (``shown``: how errors write the range)."""
    shown = shown or f"[{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer (got {text!r})") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {shown} (got {value})")
        return value

    return parse


#: A random seed, an int in ``[0, MAX_SEED]``.
seed = between(0, MAX_SEED, "[0, 2^63 - 1]")


def ints(text: str) -> list[int]:
    """Comma-separated ints, as ``2,4,8``."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints (got {text!r})") from None


def fanouts(text: str) -> list[int]:
    """Neighbors per hop, comma-separated; ``-1`` takes all of them; at most the samplers'
    ``MAX_FANOUT``."""
    values = ints(text)
    if any(not -1 <= v <= MAX_FANOUT for v in values):
        raise argparse.ArgumentTypeError(
            f"fanouts must be >= -1 and at most {MAX_FANOUT} (got {text!r})"
        )
    return values


def finite_float(text: str) -> float:
    """A finite float."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number (got {text!r})") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number (got {text!r})")
    return value


def float_between(low: float, high: float, shown: str | None = None):
    """An argparse type: a finite float in ``[low, high]`` (``shown``: how errors write the
    range)."""
    shown = shown or f"[{low}, {high}]"

    def parse(text: str) -> float:
        value = finite_float(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {shown} (got {text})")
        return value

    return parse


#: How long a worker waits for the others, in seconds: a second at least (below, the
#: rendezvous itself times out, inside torch's TCPStore), a week at most.
dist_timeout = float_between(1, 7 * 24 * 3600, "[1, 604800] seconds")

#: A model's hidden channels: 2^20 makes a hidden layer of 2^40 weights (4 TiB), past any
#: machine; within it, the memory a model needs is checked as it is built
#: (:func:`graphengine.nn.models.check_training_memory`), and its counts stay in int64.
MAX_HIDDEN = 2**20
hidden = between(1, MAX_HIDDEN, "[1, 2^20]")


#: GraphSAINT's longest walk: each batch holds its walks' nodes, batch size x (length + 1)
#: int64s, which a billion steps made an allocation of terabytes.
MAX_WALK_LENGTH = 2**16

#: The most loading threads: each holds batches in flight, and a hundred thousand of them
#: took most of a minute to start for an epoch of one second.
MAX_THREADS = 1024


def positive_float(text: str) -> float:
    """A finite float > 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {value})")
    return value


def nonnegative_float(text: str) -> float:
    """A finite float >= 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (got {value})")
    return value


def probability_below_one(text: str) -> float:
    """A float in [0, 1), as a dropout probability."""
    value = finite_float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1) (got {value})")
    return value


#: synthetic-papers' size S (2^S nodes), in ``[10, MAX_SCALE]``.
papers_scale = between(10, MAX_SCALE)


def cache_size(text: str) -> int | str:
    """A cache size as rows (``100000``: an int), a share (``5%``) or bytes (``64MB``): the
    text itself, checked by :func:`graphengine.distributed.features.cache_rows`."""
    from graphengine.distributed.features import cache_rows

    try:
        cache_rows(text, 1, 1)  # checks the form and the sign
    except ValueError:
        # cache_rows names the Trainer's argument; argparse puts the option before this.
        raise argparse.ArgumentTypeError(
            f"expected rows (an integer >= 0: 100000), a share of the nodes (5%) or bytes "
            f"(64MB, 1GiB) (got {text!r})"
        ) from None
    return int(text) if text.strip().isdigit() else text


def cache_sizes(text: str) -> list[int | str]:
    """Comma-separated :func:`cache_size` values."""
    return [cache_size(part) for part in text.split(",")]


def byte_size(text: str) -> int:
    """A memory size in bytes: a number with an optional unit (``64GB``, ``1.5GiB``,
    ``800MB``, ``1000000``)."""
    parsed = parse_size(text)
    if parsed is None or parsed[1] == "%":
        raise argparse.ArgumentTypeError(
            f"must be a size such as 64GB, 1.5GiB or 800MB (got {text!r})"
        )
    value, unit = parsed
    return int(value * BYTE_UNITS.get(unit, 1))


def host_counts(text: str) -> list[int]:
    """Comma-separated worker counts of at least 2 (``8,16,32,64``)."""
    counts = ints(text)
    if any(c < 2 for c in counts):
        raise argparse.ArgumentTypeError(f"must be counts of 2 or more hosts (got {text!r})")
    return counts


def memory_limits(text: str) -> list[str]:
    """Comma-separated memory limits, each ``none``, a share of the store (``40%``) or bytes
    (``4GiB``), as :func:`graphengine.bench.memory_limits.parse_limit` checks them."""
    from graphengine.bench.memory_limits import parse_limit

    try:
        return [parse_limit(part) for part in text.split(",")]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
