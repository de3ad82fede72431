"""Edge splits for link prediction, with the semantics of PyG's ``RandomLinkSplit``, seeded.

The positive edges of each split are exactly those PyG's transform picks after
``torch.manual_seed(seed)`` (the same permutation, drawn from a generator of that seed, so the
caller's random state is left alone). The negatives differ in how they are drawn: PyG
over-samples node pairs and keeps, in three rounds at most, those that are neither edges
nor self loops nor drawn before; here pairs are drawn until enough are found, uniform over
all pairs ``(i, j)``, ``i != j``, that are not edges of the graph, all distinct.
"""

from __future__ import annotations

import copy
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

from samplers.link import EdgeSet

# Rounds of drawing negative pairs before concluding that the graph has too few.
MAX_DRAW_ROUNDS = 64


@dataclass(frozen=True)
class LinkSplit:
    """The three splits of :func:`random_link_split`, each a ``Data`` with the graph's node
    attributes, ``edge_index`` (the edges messages pass along: the training edges for
    training and validation, training and validation edges for testing), and
    ``edge_label_index`` (int64 ``[2, num_labelled]``, positives first) with ``edge_label``
    (float32 ``[num_labelled]``, 1 for positives, 0 for negatives)."""

    train: Data
    val: Data
    test: Data


def random_link_split(
    data: Data,
    num_val: float | int = 0.1,
    num_test: float | int = 0.2,
    is_undirected: bool = False,
    neg_sampling_ratio: float = 1.0,
    add_negative_train_samples: bool = True,
    disjoint_train_ratio: float | int = 0.0,
    seed: int = 0,
) -> LinkSplit:
    """Split ``data``'s edges into training, validation and test edges, as PyG's
    ``RandomLinkSplit(num_val, num_test, is_undirected, neg_sampling_ratio=...,
    add_negative_train_samples=..., disjoint_train_ratio=...)`` does under
    ``torch.manual_seed(seed)``.

    With ``is_undirected``, each edge is taken once (as ``i <= j``) and both directions of
    the chosen ones pass messages. A float ``num_val``/``num_test`` is a share of the edges,
    an int a count. ``disjoint_train_ratio`` keeps that share of the training edges for
    supervision only (they pass no messages). Negatives: ``neg_sampling_ratio`` per
    positive of each split (of the training one only with ``add_negative_train_samples``),
    node pairs that are not edges (see the module's notes).

    Args:
        data: a homogeneous PyG ``Data`` with ``edge_index`` (int ``[2, num_edges]``);
            edge attributes (``[num_edges, ...]``) follow their edges.
        seed: the split's seed.

    Raises:
        ValueError: malformed ``edge_index``, shares out of range, or no training edge left.
    """
    edge_index = _check_edge_index(data)
    num_nodes = int(data.num_nodes)
    _check_share(num_val, "num_val")
    _check_share(num_test, "num_test")
    _check_share(disjoint_train_ratio, "disjoint_train_ratio")
    if not neg_sampling_ratio >= 0:
        raise ValueError(f"'neg_sampling_ratio' must be >= 0 (got {neg_sampling_ratio})")
    generator = torch.Generator().manual_seed(seed)
    if is_undirected:
        candidates = (edge_index[0] <= edge_index[1]).nonzero().view(-1)
        perm = candidates[torch.randperm(candidates.numel(), generator=generator)]
    else:
        perm = torch.randperm(edge_index.size(1), generator=generator)
    val_count = int(num_val * perm.numel()) if isinstance(num_val, float) else num_val
    test_count = int(num_test * perm.numel()) if isinstance(num_test, float) else num_test
    train_count = perm.numel() - val_count - test_count
    if train_count <= 0:
        raise ValueError(
            f"too few edges to split: {perm.numel()} edges leave none for training after "
            f"{val_count} for validation and {test_count} for testing"
        )
    train_edges = perm[:train_count]
    val_edges = perm[train_count : train_count + val_count]
    test_edges = perm[train_count + val_count :]
    disjoint = disjoint_train_ratio
    if isinstance(disjoint, float):
        disjoint = int(disjoint * train_count)
    if train_count - disjoint <= 0:
        raise ValueError(
            f"'disjoint_train_ratio' {disjoint_train_ratio} leaves no training edge to pass "
            "messages"
        )

    neg_train = 0
    if add_negative_train_samples:
        neg_train = int((disjoint or train_count) * neg_sampling_ratio)
    neg_val = int(val_count * neg_sampling_ratio)
    neg_test = int(test_count * neg_sampling_ratio)
    rng = np.random.default_rng(seed)
    negatives = _negative_pairs(rng, edge_index.numpy(), num_nodes, neg_train + neg_val + neg_test)
    found = negatives.shape[1]
    wanted = neg_train + neg_val + neg_test
    if found < wanted:
        warnings.warn(
            f"the graph has only {found} node pairs that are not edges, fewer than the "
            f"{wanted} negatives asked for: the ratio becomes {found / wanted:.2f}",
            stacklevel=2,
        )
        neg_train = int(neg_train / wanted * found)
        neg_val = int(neg_val / wanted * found)
        neg_test = found - neg_train - neg_val
    negatives = torch.from_numpy(negatives)

    train = _with_edges(data, train_edges[disjoint:], is_undirected)
    val = _with_edges(data, train_edges, is_undirected)
    test = _with_edges(data, perm[: train_count + val_count], is_undirected)
    supervised = train_edges[:disjoint] if disjoint > 0 else train_edges
    _label(train, edge_index[:, supervised], negatives[:, neg_val + neg_test :])
    _label(val, edge_index[:, val_edges], negatives[:, :neg_val])
    _label(test, edge_index[:, test_edges], negatives[:, neg_val : neg_val + neg_test])
    return LinkSplit(train, val, test)


def _check_edge_index(data: Data) -> torch.Tensor:
    """``data.edge_index`` as int64 ``[2, num_edges]``, checked against ``data.num_nodes``."""
    if not isinstance(data, Data) or getattr(data, "edge_index", None) is None:
        raise TypeError(
            f"'data' must be a torch_geometric Data with an 'edge_index' (got "
            f"{type(data).__name__})"
        )
    edge_index = torch.as_tensor(data.edge_index)
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(
            f"'edge_index' must have shape [2, num_edges] (got {tuple(edge_index.shape)})"
        )
    if edge_index.dtype.is_floating_point or edge_index.dtype == torch.bool:
        raise ValueError(f"'edge_index' must hold integer node ids (got {edge_index.dtype})")
    edge_index = edge_index.long()
    num_nodes = int(data.num_nodes)
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        bad = int(edge_index.min()) if edge_index.min() < 0 else int(edge_index.max())
        raise ValueError(f"'edge_index' holds node id {bad}, outside [0, {num_nodes})")
    return edge_index


def _check_share(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, float)):
        raise TypeError(f"'{name}' must be a float share or an int count (got {value!r})")
    if isinstance(value, float) and not 0.0 <= value < 1.0:
        raise ValueError(f"'{name}' as a share must be in [0, 1) (got {value})")
    if isinstance(value, numbers.Integral) and value < 0:
        raise ValueError(f"'{name}' as a count must be >= 0 (got {value})")


def _negative_pairs(rng: np.random.Generator, edge_index, num_nodes: int, count: int) -> np.ndarray:
    """Up to ``count`` distinct node pairs ``(i, j)``, ``i != j``, that are not edges, uniform
    over all such pairs: int64 ``[2, found]`` (fewer when the graph has fewer)."""
    if count == 0 or num_nodes < 2:
        return np.zeros((2, 0), dtype=np.int64)
    edges = EdgeSet(edge_index[0], edge_index[1], num_nodes)
    chosen = np.zeros(0, dtype=np.int64)  # pair keys i * num_nodes + j
    for _ in range(MAX_DRAW_ROUNDS):
        missing = count - chosen.shape[0]
        if missing == 0:
            break
        src = rng.integers(0, num_nodes, 2 * missing)
        dst = rng.integers(0, num_nodes - 1, 2 * missing)
        dst += dst >= src  # uniform over the other nodes
        fresh = ~edges.contains(src, dst)
        keys = (src * num_nodes + dst)[fresh]
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]  # distinct, in drawing order
        keys = keys[~np.isin(keys, chosen)]
        chosen = np.concatenate([chosen, keys[:missing]])
    return np.stack([chosen // num_nodes, chosen % num_nodes])


def _with_edges(data: Data, index: torch.Tensor, is_undirected: bool) -> Data:
    """A copy of ``data`` whose edges (and edge attributes) are those at ``index``, both ways
    when ``is_undirected``."""
    out = copy.copy(data)
    for key, value in data.items():
        if key != "edge_index" and data.is_edge_attr(key):
            value = value[index]
            out[key] = torch.cat([value, value]) if is_undirected else value
    edge_index = data.edge_index[:, index].long()
    if is_undirected:
        edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    out.edge_index = edge_index
    return out


def _label(out: Data, positive: torch.Tensor, negative: torch.Tensor) -> None:
    """Set ``out``'s ``edge_label_index`` (positives then negatives) and ``edge_label``."""
    out.edge_label_index = torch.cat([positive, negative], dim=1)
    out.edge_label = torch.cat(
        [torch.ones(positive.size(1)), torch.zeros(negative.size(1))]
    ).float()
