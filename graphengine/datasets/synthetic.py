"""A deterministic synthetic node-classification graph with real-graph degrees and homophily.

The model is degree-weighted (Chung-Lu) random graph with planted classes:

* node ``i`` gets a class from a skewed (Zipf-like) class distribution and a
  log-normal weight ``w_i``, its expected degree, so degrees have a long tail
  (median near ``median_degree``, few isolated nodes);
* each of ``num_edges / 2`` undirected edges picks one end with probability
  proportional to ``w``, and the other end, with probability ``homophily`` from
  the same class (again by weight) and otherwise from all nodes;
* edges are stored in both directions, without self loops or duplicates;
* features are ``centroid[class] + noise``, so they predict the class only
  weakly on their own and neighbors' features add information.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset


@dataclass(frozen=True)
class SyntheticSpec:
    """The parameters of one synthetic graph; ``num_edges`` counts directed edges."""

    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    num_train: int
    num_val: int
    median_degree: float = 15.0
    degree_sigma: float = 0.9
    homophily: float = 0.8
    noise: float = 4.0
    seed: int = 0


def generate(name: str, spec: SyntheticSpec) -> GraphDataset:
    """Generate the dataset ``spec`` describes; the same spec always gives the same data."""
    rng = np.random.default_rng(spec.seed)
    n, c = spec.num_nodes, spec.num_classes
    class_weight = 1.0 / np.arange(1, c + 1) ** 0.7
    y = rng.choice(c, size=n, p=class_weight / class_weight.sum()).astype(np.int64)
    weight = np.exp(rng.normal(np.log(spec.median_degree), spec.degree_sigma, size=n))

    by_class = np.argsort(y, kind="stable")
    cum_weight = np.cumsum(weight[by_class])
    class_end = np.searchsorted(y[by_class], np.arange(c + 1), side="left")
    class_cum_lo = np.where(class_end[:-1] > 0, cum_weight[class_end[:-1] - 1], 0.0)
    class_cum_hi = cum_weight[class_end[1:] - 1]

    # Oversample a little: self loops and repeated pairs are dropped below.
    num_pairs = int(spec.num_edges / 2 * 1.01)
    first = by_class[draw_weighted(rng, cum_weight, 0.0, cum_weight[-1], num_pairs)]
    same = rng.random(num_pairs) < spec.homophily
    lo = np.where(same, class_cum_lo[y[first]], 0.0)
    hi = np.where(same, class_cum_hi[y[first]], cum_weight[-1])
    second = by_class[draw_weighted(rng, cum_weight, lo, hi, num_pairs)]

    keep = first != second
    src = np.concatenate([first[keep], second[keep]])
    dst = np.concatenate([second[keep], first[keep]])
    key = np.sort(dst * np.int64(n) + src)
    key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    dst, src = np.divmod(key, np.int64(n))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    graph = Graph(indptr, src.astype(np.int32 if n < 2**31 else np.int64), validate=False)

    centroid = rng.normal(size=(c, spec.num_features)).astype(np.float32)
    x = rng.standard_normal(size=(n, spec.num_features), dtype=np.float32)
    x *= np.float32(spec.noise)
    x += centroid[y]

    order = rng.permutation(n)
    train_end = spec.num_train
    val_end = train_end + spec.num_val
    return GraphDataset(
        name=name,
        graph=graph,
        x=x,
        y=y,
        train_idx=np.sort(order[:train_end]),
        val_idx=np.sort(order[train_end:val_end]),
        test_idx=np.sort(order[val_end:]),
        num_classes=c,
    )


def draw_weighted(
    rng: np.random.Generator,
    cum_weight: np.ndarray,
    lo: float | np.ndarray,
    hi: float | np.ndarray,
    size: int,
) -> np.ndarray:
    """``size`` positions (int64) in ``cum_weight``, each drawn with probability proportional
    to its weight among the positions whose cumulative weight falls in ``[lo, hi)``.

    Args:
        rng: the generator the draws come from.
        cum_weight: float ``[n]``, ascending: the running sum of the positions' weights.
        lo, hi: a float each, or float ``[size]`` arrays: each draw's range of cumulative
            weight (a class's range, for draws within one class when positions are grouped
            by class, as :func:`generate` and :func:`graphengine.datasets.papers.write_papers`
            group them).
        size: the number of draws.

    The targets are searched in sorted order, which keeps the binary search in cache.
    """
    target = lo + rng.random(size) * (hi - lo)
    order = np.argsort(target)
    position = np.empty(size, dtype=np.int64)
    position[order] = np.searchsorted(cum_weight, target[order], side="right")
    return np.minimum(position, cum_weight.shape[0] - 1)
