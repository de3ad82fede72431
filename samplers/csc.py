"""Validation of CSC arrays, node ids, edge weights and times at the Python boundary of the
kernels."""

import numpy as np

from samplers._kernels.random import MAX_BOUND

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def check_csc(indptr: np.ndarray, indices: np.ndarray) -> None:
    """Raise ``ValueError``/``TypeError`` unless ``(indptr, indices)`` is a valid CSC graph.

    Valid means: ``indptr`` a 1-D int64 array of ``num_nodes + 1`` entries starting at 0,
    non-decreasing, ending at ``len(indices)``; ``indices`` a 1-D int32 or int64 array
    with every entry in ``[0, num_nodes)``.
    """
    if not isinstance(indptr, np.ndarray) or indptr.dtype != np.int64 or indptr.ndim != 1:
        raise TypeError(f"'indptr' must be a 1-D int64 numpy array (got {_describe(indptr)})")
    if not isinstance(indices, np.ndarray) or indices.dtype not in _INDEX_DTYPES:
        raise TypeError(
            f"'indices' must be a 1-D int32 or int64 numpy array (got {_describe(indices)})"
        )
    if indices.ndim != 1:
        raise TypeError(f"'indices' must be 1-D (got shape {indices.shape})")
    if indptr.shape[0] < 1:
        raise ValueError("'indptr' must have num_nodes + 1 >= 1 entries (got 0)")
    if indptr[0] != 0:
        raise ValueError(f"'indptr' must start at 0 (got {int(indptr[0])})")
    if indptr[-1] != indices.shape[0]:
        raise ValueError(
            f"'indptr' must end at len(indices) = {indices.shape[0]} (got {int(indptr[-1])})"
        )
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        at = int(np.argmax(steps < 0))
        raise ValueError(
            f"'indptr' must be non-decreasing (indptr[{at}] = {int(indptr[at])} > "
            f"indptr[{at + 1}] = {int(indptr[at + 1])})"
        )
    num_nodes = indptr.shape[0] - 1
    if indices.size:
        low, high = int(indices.min()), int(indices.max())
        if low < 0 or high >= num_nodes:
            bad = low if low < 0 else high
            raise ValueError(
                f"'indices' must lie in [0, {num_nodes}) for {num_nodes} nodes (found {bad})"
            )


def check_node_ids(ids, num_nodes: int, name: str) -> np.ndarray:
    """``ids`` as a contiguous 1-D int64 array, or ``ValueError`` naming the first bad id."""
    array = np.asarray(ids)
    if array.ndim != 1:
        raise ValueError(f"'{name}' must be 1-D (got shape {array.shape})")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"'{name}' must hold integer node ids (got dtype {array.dtype})")
    array = np.ascontiguousarray(array, dtype=np.int64)
    if array.size:
        bad = (array < 0) | (array >= num_nodes)
        if bad.any():
            first = int(array[np.argmax(bad)])
            raise ValueError(
                f"'{name}' holds node id {first}, outside [0, {num_nodes}) for {num_nodes} nodes"
            )
    return array


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


def check_max_degree(indptr: np.ndarray) -> None:
    """Raise if an in-degree passes what the kernels' draws cover (``2**32``)."""
    if indptr.shape[0] > 1:
        largest = int(np.diff(indptr).max())
        if largest > MAX_BOUND:
            raise ValueError(f"in-degrees above {MAX_BOUND} are not supported (got {largest})")


def check_times(times, length: int, name: str) -> np.ndarray:
    """``times`` as a contiguous int64 ``[length]`` array, or an error naming ``name``."""
    array = np.asarray(times)
    if array.shape != (length,):
        raise ValueError(f"'{name}' must have shape ({length},) (got {array.shape})")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"'{name}' must hold integer times (got dtype {array.dtype}); cast them to int64"
        )
    return np.ascontiguousarray(array, dtype=np.int64)


def check_weights(weights, num_edges: int) -> np.ndarray:
    """Edge weights as a contiguous float64 ``[num_edges]`` array, finite and ``>= 0``."""
    array = np.asarray(weights)
    if array.shape != (num_edges,):
        raise ValueError(f"edge weights must have shape ({num_edges},) (got {array.shape})")
    if array.size and not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise TypeError(f"edge weights must be real numbers (got dtype {array.dtype})")
    array = np.ascontiguousarray(array, dtype=np.float64)
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        at = int(np.argmax(bad))
        raise ValueError(
            f"edge weights must be finite and >= 0 (weight of edge {at} in CSC order is "
            f"{array[at]})"
        )
    return array
