"""The dtype a batch's gathered feature rows are handed over in (``feature_dtype=``).

A store may hold its features as float16 (half the bytes a row read from disk or held in a
cache); models compute in float32. Every gather path of the loaders passes its rows through
:func:`as_batch_dtype` after the gather, on the device the rows were gathered to, so that the
bytes read from the table stay the half ones and the model still gets float32.
"""

from __future__ import annotations

import torch

from graphengine.data.format import FEATURE_DTYPE

# What a half table's rows become when the loader is not asked for another dtype.
DEFAULT_BATCH_DTYPE = getattr(torch, FEATURE_DTYPE)


def check_batch_feature_dtype(value) -> torch.dtype | None:
    """``value`` as a loader's ``feature_dtype``: ``None`` (float16 rows handed over as
    float32, other rows as gathered) or a floating-point ``torch.dtype`` (floating-point rows
    handed over in it, e.g. ``torch.float16`` to keep half rows half).

    Raises ``TypeError`` naming the value otherwise."""
    if value is None or (isinstance(value, torch.dtype) and value.is_floating_point):
        return value
    raise TypeError(
        f"'feature_dtype' must be None (float16 feature rows handed over as float32) or a "
        f"floating-point torch.dtype such as torch.float16 (got {value!r})"
    )


def as_batch_dtype(rows: torch.Tensor, feature_dtype: torch.dtype | None) -> torch.Tensor:
    """Gathered ``rows`` in the dtype a batch hands them over in, on their device.

    Rows of an integer or boolean table (labels, masks) are returned as they are. Floating
    rows: with ``feature_dtype=None`` float16 ones become float32 and others stay (a bfloat16
    table made for a bfloat16 model stays bfloat16); with a dtype, they are cast to it
    (no copy when they hold it already)."""
    if not rows.dtype.is_floating_point:
        return rows
    if feature_dtype is None:
        return rows.to(DEFAULT_BATCH_DTYPE) if rows.dtype == torch.float16 else rows
    return rows.to(feature_dtype)
