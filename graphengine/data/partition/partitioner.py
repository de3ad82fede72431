"""Assign every node to one of K parts (METIS or seeded random) and renumber the nodes so that
each part owns one contiguous range of new ids.

METIS (through ``pymetis``) minimizes the number of cut edges of the *undirected* graph; the
CSC is symmetrized (self loops and repeated edges dropped) for the partitioning only.

pymetis 2025.2.2 passes ``ncon = 1`` to METIS (its ``wrapper.cpp`` fixes it), so METIS's
multi-constraint balancing is not reachable from Python. One vertex weight balances the three
loads at once: ``w_v = 1 + in_degree_v * N / E + is_train_v * N / T`` (scaled to integers), so
every term sums to ``N`` over the graph and a part holding a ``1/K`` share of the total weight
holds about ``1/K`` of each when the three are not strongly correlated. The balance that each
part actually gets is measured and reported by :func:`graphengine.data.partition.partition_dataset`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from graphengine.data.graph_store import Graph
from graphengine.data.partition.book import node_ids

#: How :func:`assign_parts` assigns nodes to parts: ``"metis"`` (pymetis, few cut edges)
#: or ``"random"``.
METHODS = ("metis", "random")
_WEIGHT_SCALE = 16  # integer resolution of the combined METIS vertex weight
#: The largest seed METIS takes: it keeps 32 bits of it (an int32 ``idx_t``), so a larger
#: seed would silently repeat a smaller one's parts (2^32 gave seed 0's).
METIS_MAX_SEED = 2**31 - 1


def assign_parts(
    graph: Graph,
    num_parts: int,
    method: str = "metis",
    train_idx: np.ndarray | None = None,
    seed: int = 0,
) -> np.ndarray:
    """The part of every node: int32 ``[num_nodes]`` with values in ``[0, num_parts)``.

    ``method='random'`` shuffles the nodes with ``seed`` and cuts the shuffled order into
    ``num_parts`` slices whose sizes differ by at most one; it needs two ``[num_nodes]``
    arrays. ``method='metis'`` runs METIS k-way on the symmetrized graph, weighting the nodes
    to balance nodes, in-edges and the training nodes ``train_idx`` (int64 ids) together.

    Raises:
        ValueError: ``num_parts`` outside ``[1, num_nodes]``, an unknown ``method`` or a
            ``train_idx`` id outside ``[0, num_nodes)``.
        TypeError: ``train_idx`` not integers.
    """
    num_nodes = graph.num_nodes
    check_num_parts(num_parts, num_nodes)
    if train_idx is not None:
        train_idx = node_ids(train_idx, num_nodes, "train_idx")
    if method not in METHODS:
        raise ValueError(f"'method' must be one of {METHODS} (got {method!r})")
    if method == "random":
        return random_parts(num_nodes, num_parts, seed)
    return metis_parts(graph, num_parts, train_idx, seed)


def check_num_parts(num_parts: int, num_nodes: int) -> None:
    """``ValueError`` unless ``num_parts`` is an integer in ``[1, num_nodes]``."""
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise TypeError(f"'num_parts' must be an integer (got {type(num_parts).__name__})")
    if not 1 <= num_parts <= num_nodes:
        raise ValueError(f"'num_parts' must be in [1, num_nodes={num_nodes}] (got {num_parts})")


def random_parts(num_nodes: int, num_parts: int, seed: int) -> np.ndarray:
    """A seeded random, exactly balanced assignment: int32 ``[num_nodes]``; part ``p`` gets
    ``num_nodes // num_parts`` or one more nodes."""
    order = np.random.default_rng(seed).permutation(num_nodes)
    part = np.empty(num_nodes, dtype=np.int32)
    part[order] = (np.arange(num_nodes, dtype=np.int64) * num_parts // num_nodes).astype(np.int32)
    return part


def metis_parts(
    graph: Graph,
    num_parts: int,
    train_idx: np.ndarray | None = None,
    seed: int = 0,
    balanced: bool = True,
    recursive: bool = False,
) -> np.ndarray:
    """METIS parts of the symmetrized graph: int32 ``[num_nodes]``. ``balanced`` weights the
    nodes to balance nodes, in-edges and ``train_idx`` (:func:`vertex_weights`); otherwise
    every node weighs the same (Cluster-GCN's clusters). ``recursive``: recursive bisection
    instead of k-way.

    Raises:
        ValueError: ``seed`` outside ``[0, METIS_MAX_SEED]``.
    """
    import pymetis  # imported here: only METIS partitioning needs it

    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"'seed' must be an integer (got {type(seed).__name__})")
    if not 0 <= seed <= METIS_MAX_SEED:
        raise ValueError(
            f"'seed' of METIS must be in [0, 2^31 - 1] (got {seed}): METIS keeps 32 bits of "
            "it, so a larger seed would repeat a smaller one's parts"
        )

    num_nodes = graph.num_nodes
    if num_parts == 1:
        return np.zeros(num_nodes, dtype=np.int32)
    xadj, adjncy = symmetric_adjacency(graph)
    weights = vertex_weights(graph, train_idx) if balanced else None
    options = pymetis.Options(seed=int(seed))
    _, membership = pymetis.part_graph(
        num_parts,
        adjacency=pymetis.CSRAdjacency(xadj, adjncy),
        vweights=weights,
        options=options,
        recursive=bool(recursive),
    )
    del xadj, adjncy
    return np.asarray(membership, dtype=np.int32)


def symmetric_adjacency(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """The undirected simple graph METIS needs: ``(xadj, adjncy)``, int64 ``[num_nodes + 1]``
    and int64 ``[2 * num_undirected_edges]``; each edge ``u - v`` (``u != v``) is listed once
    under ``u`` and once under ``v``, whatever its direction and multiplicity in ``graph``."""
    n = graph.num_nodes
    ones = np.ones(graph.num_edges, dtype=np.bool_)
    # Entry (source, destination) of a CSC matrix: column = destination, row = source.
    adjacency = sp.csc_matrix(
        (ones, np.asarray(graph.indices, dtype=np.int64), np.asarray(graph.indptr)),
        shape=(n, n),
        copy=True,
    )
    del ones
    adjacency.sum_duplicates()
    symmetric = (adjacency.tocsr() + adjacency.T.tocsr()).tocsr()  # bool: duplicates merge
    del adjacency
    symmetric.sum_duplicates()
    indptr = symmetric.indptr.astype(np.int64, copy=False)
    indices = symmetric.indices.astype(np.int64, copy=False)
    del symmetric
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    keep = indices != rows
    loops = np.bincount(rows[~keep], minlength=n)
    del rows
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.diff(indptr) - loops, out=xadj[1:])
    return xadj, indices[keep]


def vertex_weights(graph: Graph, train_idx: np.ndarray | None) -> np.ndarray:
    """The combined METIS vertex weight (module docstring): int64 ``[num_nodes]``, each >= 1."""
    n, e = graph.num_nodes, max(graph.num_edges, 1)
    weight = 1.0 + graph.in_degree() * (n / e)
    if train_idx is not None and len(train_idx):
        train = np.zeros(n, dtype=np.float64)
        train[np.asarray(train_idx)] = n / len(train_idx)
        weight += train
    return np.maximum(np.rint(weight * _WEIGHT_SCALE), 1).astype(np.int64)


def renumber(part: np.ndarray, num_parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """New ids that give each part one contiguous range, nodes of a part in original order.

    Args:
        part: integer ``[num_nodes]``, the part of every node, in ``[0, num_parts)``.

    Returns:
        ``(new_to_orig, orig_to_new, bounds)``: int64 ``[num_nodes]`` each, inverse
        permutations; int64 ``[num_parts + 1]``, part ``p`` owns new ids
        ``[bounds[p], bounds[p + 1])``.
    """
    part = np.asarray(part)
    if part.size and (part.min() < 0 or part.max() >= num_parts):
        bad = int(part.min()) if part.min() < 0 else int(part.max())
        raise ValueError(f"'part' must hold values in [0, {num_parts}) (got {bad})")
    new_to_orig = np.argsort(part, kind="stable").astype(np.int64, copy=False)
    orig_to_new = np.empty_like(new_to_orig)
    orig_to_new[new_to_orig] = np.arange(part.size, dtype=np.int64)
    bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(part, minlength=num_parts), out=bounds[1:])
    return new_to_orig, orig_to_new, bounds
