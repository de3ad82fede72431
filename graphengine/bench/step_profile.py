"""Where a training step's time goes: dense matrix products against everything else.

The dense products (``aten::mm``, ``addmm``, ``addmm_``, ``bmm``, oneDNN's) are the floor of a
GNN step on a CPU: the work no reordering removes. Everything else is grouped as aggregation
(sparse and scatter kernels, graphengine's CSR and attention kernels), elementwise passes and
the rest (autograd bookkeeping, the optimizer, small ops). Times are torch.profiler's self
CPU times of the calling thread, so they add up to the profiled wall time; the profiler's own
overhead lands mostly in "other".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.profiler import ProfilerActivity, profile

DENSE = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm")
AGGREGATION_MARKS = (
    "sparse",
    "scatter",
    "segment",
    "index_add",
    "spmm",
    "graphengine::csr_sum",
    "graphengine::csr_transpose",
    "graphengine::input_gradient",
    "graphengine::gat_attention",
)
ELEMENTWISE = (
    "aten::add",
    "aten::add_",
    "aten::mul",
    "aten::mul_",
    "aten::div",
    "aten::div_",
    "aten::relu",
    "aten::relu_",
    "aten::clamp_min",
    "aten::clamp_min_",
    "aten::threshold_backward",
    "aten::fill_",
    "aten::zero_",
    "aten::copy_",
    "aten::sum",
    "aten::where",
    "aten::masked_fill",
    "aten::native_dropout",
    "aten::native_dropout_backward",
    "aten::leaky_relu",
    "aten::leaky_relu_backward",
    "aten::exp",
    "aten::_softmax",
    "aten::_log_softmax",
    "aten::_to_copy",
    "graphengine::relu_backward_sum",
    "graphengine::bias_relu_",
)
CATEGORIES = ("dense_products", "aggregation", "elementwise", "other")


def category(name: str) -> str:
    """The category of profiler event ``name`` (one of :data:`CATEGORIES`)."""
    if name in DENSE or name.startswith("mkldnn::"):
        return "dense_products"
    if any(mark in name for mark in AGGREGATION_MARKS):
        return "aggregation"
    if name in ELEMENTWISE:
        return "elementwise"
    return "other"


def profile_steps(step: Callable[[object], object], batches: Iterable) -> dict:
    """Runs ``step`` on each of ``batches`` under torch.profiler: seconds per step by
    :data:`CATEGORIES`, their total (``profiled_s``), and the five costliest ops by self time
    (``top_ops``: name, seconds per step)."""
    batches = list(batches)
    if not batches:
        raise ValueError("'batches' must hold at least one batch")
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for batch in batches:
            step(batch)
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    by_op = {}
    for event in profiler.key_averages():
        spent = event.self_cpu_time_total / 1e6 / len(batches)
        seconds[category(event.key)] += spent
        by_op[event.key] = by_op.get(event.key, 0.0) + spent
    top = sorted(by_op.items(), key=lambda item: -item[1])[:5]
    return {
        **{f"{name}_s": value for name, value in seconds.items()},
        "profiled_s": sum(seconds.values()),
        "top_ops": [[name, value] for name, value in top],
        "threads": torch.get_num_threads(),
    }
