"""PyG (FeatureStore, GraphStore) pairs from PyG's own test stores, holding random graphs in
each edge layout (COO, CSR, CSC), with node features equal to node ids."""

import numpy as np
import torch
from torch_geometric.testing import MyFeatureStore, MyGraphStore

PAPER, AUTHOR = "paper", "author"
WRITES = (AUTHOR, "writes", PAPER)
CITES = (PAPER, "cites", PAPER)
WRITTEN = (PAPER, "written_by", AUTHOR)
NUM = {PAPER: 30, AUTHOR: 20}


def random_edges(num_src, num_dst, num_edges, seed):
    """Distinct (src, dst) pairs in random order: int64 row, col."""
    rng = np.random.default_rng(seed)
    key = rng.choice(num_src * num_dst, size=num_edges, replace=False)
    row, col = np.divmod(key, num_dst)
    return row.astype(np.int64), col.astype(np.int64)


def put_edges(graph_store, row, col, edge_type, size, layout):
    """Store the edges in ``layout``; returns the edges in the order the store holds them
    (the order original edge ids refer to)."""
    if layout == "coo":
        graph_store.put_edge_index(
            (torch.from_numpy(row), torch.from_numpy(col)),
            edge_type=edge_type,
            layout="coo",
            size=size,
        )
        return row, col
    if layout == "csr":
        order = np.lexsort((col, row))
        row, col = row[order], col[order]
        rowptr = np.zeros(size[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=size[0]), out=rowptr[1:])
        graph_store.put_edge_index(
            (torch.from_numpy(rowptr), torch.from_numpy(col)),
            edge_type=edge_type,
            layout="csr",
            size=size,
        )
        return row, col
    order = np.lexsort((row, col))
    row, col = row[order], col[order]
    colptr = np.zeros(size[1] + 1, dtype=np.int64)
    np.cumsum(np.bincount(col, minlength=size[1]), out=colptr[1:])
    graph_store.put_edge_index(
        (torch.from_numpy(row), torch.from_numpy(colptr)),
        edge_type=edge_type,
        layout="csc",
        size=size,
    )
    return row, col


def homogeneous_stores(num_nodes=50, num_edges=300, layout="coo", seed=0, with_size=True):
    """PyG's test (FeatureStore, GraphStore) pair holding a random graph in ``layout``, with
    ``x`` the node ids and ``y`` ten times them; also the stored edges (row, col)."""
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    feature_store.put_tensor(torch.arange(num_nodes), group_name=None, attr_name="x", index=None)
    feature_store.put_tensor(
        torch.arange(num_nodes) * 10, group_name=None, attr_name="y", index=None
    )
    row, col = random_edges(num_nodes, num_nodes, num_edges, seed)
    size = (num_nodes, num_nodes) if with_size else None
    row, col = put_edges(graph_store, row, col, None, size, layout)
    return feature_store, graph_store, (row, col)


def hetero_stores(seed=0):
    """PyG's test store pair holding papers and authors (``x`` the node ids, the papers' ``y``
    ten times them) and three edge types, one per layout; also the stored edges per type."""
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    for node_type, count in NUM.items():
        x = torch.arange(count)
        feature_store.put_tensor(x, group_name=node_type, attr_name="x", index=None)
    feature_store.put_tensor(
        torch.arange(NUM[PAPER]) * 10, group_name=PAPER, attr_name="y", index=None
    )
    edges = {}
    for i, (edge_type, layout, num_edges) in enumerate(
        [(WRITES, "coo", 80), (CITES, "csr", 120), (WRITTEN, "csc", 60)]
    ):
        size = (NUM[edge_type[0]], NUM[edge_type[2]])
        row, col = random_edges(*size, num_edges, seed + i)
        edges[edge_type] = put_edges(graph_store, row, col, edge_type, size, layout)
    return feature_store, graph_store, edges
