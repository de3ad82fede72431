"""How many Numba threads a sampling call takes when several threads sample at once (the
gathering threads' share of torch's threads is
:func:`graphengine.loader.pipeline.share_torch_threads`)."""

from __future__ import annotations

import numba


def sampler_threads(num_workers: int) -> int:
    """Numba threads per sampling call when ``num_workers`` threads sample at once: the
    threads Numba may use in the calling thread (``numba.get_num_threads()``: all cores
    unless set lower) shared among them."""
    return max(1, numba.get_num_threads() // max(num_workers, 1))
