"""Small conversions every loader shares: tensors, arrays and lists as NumPy arrays, PyG's
``input_nodes`` and ``input_id`` checked, a ``Data``'s per-node and per-edge attributes
checked, rows of an attribute selected."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import HeteroData

from samplers import check_node_ids


def as_numpy(value) -> np.ndarray:
    """A tensor (moved to the CPU), array or list as a NumPy array."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def check_input_ids(input_id, num_seeds: int) -> np.ndarray:
    """PyG's ``input_id`` (one int per seed) as int64 ``[num_seeds]``."""
    ids = as_numpy(input_id)
    if ids.shape != (num_seeds,) or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(
            f"'input_id' must hold one integer per seed, shape ({num_seeds},) "
            f"(got {ids.dtype} of shape {ids.shape})"
        )
    return ids.astype(np.int64)


def seed_ids(nodes, count: int, node_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The seeds ``input_nodes`` (array-like, a CPU tensor too) give among ``count`` nodes
    (of ``node_type``, for heterogeneous data), as PyG's ``get_input_nodes`` reads them: a
    bool mask ``[count]`` seeds its true nodes, whose input ids are their node ids; integer
    ids are seeds whose input ids are their positions. Returns int64 (seeds, input ids).

    Raises:
        TypeError: a uint8 array (torch's old masks were uint8: whether it holds ids or a mask
            cannot be told, and PyG refuses it), or one of neither ints nor bools.
        ValueError: a mask not of ``count`` entries, or an id outside ``[0, count)``.
    """
    of_type = "" if node_type is None else f" of {node_type!r}"
    array = as_numpy(nodes)
    _refuse_uint8(array, f"'input_nodes'{of_type}", "a bool mask or integer node ids")
    if array.dtype == np.bool_:
        if array.shape != (count,):
            raise ValueError(
                f"'input_nodes'{of_type} as a mask must have shape ({count},) (got {array.shape})"
            )
        nodes = np.flatnonzero(array).astype(np.int64)
        return nodes, nodes
    nodes = check_node_ids(array, count, "input_nodes")
    return nodes, np.arange(nodes.shape[0], dtype=np.int64)


def input_node_ids(nodes, count: int) -> np.ndarray:
    """``input_nodes`` of a loader that takes ids only (the distributed and hybrid loaders):
    int64 ids among ``count`` nodes.

    Raises:
        TypeError: a uint8 array (torch's old masks were uint8), or one of other than ints.
        ValueError: an id outside ``[0, count)``.
    """
    array = as_numpy(nodes)
    _refuse_uint8(array, "'input_nodes'", "integer node ids")
    return check_node_ids(array, count, "input_nodes")


def _refuse_uint8(array: np.ndarray, name: str, expected: str) -> None:
    """Refuse seeds given as uint8: torch's old masks were uint8, so whether they are ids or a
    mask cannot be told (PyG refuses them too)."""
    if array.dtype == np.uint8:
        raise TypeError(
            f"{name} has dtype uint8, expected {expected} (int64): uint8 could be ids or a "
            "mask (torch's old masks were uint8)"
        )


# Attributes that PyG's datasets and models hold one row per node or per edge. PyG takes an
# attribute whose row count matches neither for a graph-level one and copies it whole into
# every batch; for these names that is a malformed Data, refused instead. ``y`` may also be a
# graph's one label.
NODE_KEYS = ("x", "pos", "y", "train_mask", "val_mask", "test_mask")
EDGE_KEYS = ("edge_attr", "edge_weight")


def check_attribute_rows(data) -> None:
    """Refuse a PyG ``Data`` whose per-node (:data:`NODE_KEYS`) or per-edge
    (:data:`EDGE_KEYS`) attribute has a row count other than its ``num_nodes`` or
    ``num_edges``; for a ``HeteroData``, the same of every node type's and edge type's
    attributes against that type's count (PyG would hand every batch all of their rows).

    Raises:
        ValueError: naming the attribute (and its type), its rows and the count expected.
    """
    if isinstance(data, HeteroData):
        stores = [
            (f"data[{t!r}]", data[t], NODE_KEYS, f"node type {t!r} has", "node")
            for t in data.node_types
        ]
        stores += [
            (f"data[{e!r}]", data[e], EDGE_KEYS, f"edge type {e!r} has", "edge")
            for e in data.edge_types
        ]
    else:
        stores = [
            ("data", data, NODE_KEYS, "the data has", "node"),
            ("data", data, EDGE_KEYS, "the data has", "edge"),
        ]
    for label, store, keys, owner, level in stores:
        count = store.num_nodes if level == "node" else store.num_edges
        for key in keys:
            value = getattr(store, key, None)
            rows = getattr(value, "shape", (count,))[:1] or (count,)
            if rows[0] == count or (key == "y" and rows[0] == 1):
                continue
            raise ValueError(
                f"'{label}.{key}' has {rows[0]} rows, but {owner} {count} {level}s: a "
                f"{level}-level attribute needs one row per {level}"
            )


def select_rows(value, dim: int, index: torch.Tensor):
    """``value`` indexed by ``index`` (int64) along ``dim``: tensors, arrays and lists; any
    other value as it is."""
    if isinstance(value, torch.Tensor):
        return value.index_select(dim, index.to(value.device))
    if isinstance(value, np.ndarray):
        return np.take(value, index.numpy(), axis=dim)
    if isinstance(value, list):
        return [value[i] for i in index.tolist()]
    return value
