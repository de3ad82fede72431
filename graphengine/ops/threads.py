"""``set_intraop_threads``: a thread's own share of torch's intra-op threads
(``csrc/thread_budget.cpp``, ``csrc/cpu/thread_budget_kernel.cpp``). It takes no tensor, so it
has no fake kernel."""

from __future__ import annotations

import torch

from graphengine.ops.build import build_extension


def set_intraop_threads(num_threads: int) -> bool:
    """Give the calling thread ``num_threads`` of torch's intra-op threads (its CPU gathers and
    other parallel torch ops), leaving every other thread's count and the process-wide
    default alone, unlike ``torch.set_num_threads``. Returns ``False`` where that cannot be
    done (no extension, or torch without OpenMP): the thread then keeps torch's count.

    The thread budget serves torch's own ops too, so the ``"torch"`` backend does not turn it
    off: it only needs the extension built.

    Raises ``ValueError`` unless ``num_threads`` is an int >= 1.
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"'num_threads' must be an int >= 1 (got {num_threads!r})")
    if not build_extension():
        return False
    return bool(torch.ops.graphengine.set_intraop_threads(num_threads))
