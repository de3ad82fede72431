"""Small graphs for tests: a random CSC, and PyG graphs whose node features equal their node
ids and whose edge attributes equal their edge ids, so that every batch from them checks itself."""

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

EDGE_TYPES = [
    ("paper", "cites", "paper"),
    ("author", "writes", "paper"),
    ("paper", "rev_writes", "author"),
]


def random_csc(num_nodes: int, num_edges: int, seed: int, dtype=np.int32):
    """A random multigraph-free CSC graph: (indptr int64, indices ``dtype``)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    key = np.unique(dst * num_nodes + src)
    dst, src = np.divmod(key, num_nodes)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, src.astype(dtype)


def id_graph(num_nodes=300, num_edges=3000, seed=0, index_dtype=torch.int64) -> Data:
    """Node features equal node ids, edge features equal edge ids."""
    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    return Data(
        x=torch.arange(num_nodes, dtype=torch.float32).view(-1, 1).repeat(1, 3),
        y=torch.arange(num_nodes),
        edge_index=edge_index.to(index_dtype),
        edge_attr=torch.arange(num_edges, dtype=torch.float32),
        edge_weight=torch.rand(num_edges, generator=generator),
        mask=torch.arange(num_nodes) % 2 == 0,
        title="graph-level attribute",
        num_nodes=num_nodes,
    )


def id_hetero(seed=0, num_papers=120, num_authors=80) -> HeteroData:
    """Node features equal node ids (authors offset by 1000), edge attributes edge ids."""
    generator = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data["paper"].x = torch.arange(num_papers, dtype=torch.float32).view(-1, 1)
    data["paper"].y = torch.arange(num_papers) % 3
    data["paper"].time = torch.randint(0, 50, (num_papers,), generator=generator)
    data["author"].x = 1000 + torch.arange(num_authors, dtype=torch.float32).view(-1, 1)
    data["author"].time = torch.randint(0, 50, (num_authors,), generator=generator)
    sizes = {"paper": num_papers, "author": num_authors}
    for offset, (src, rel, dst) in enumerate(EDGE_TYPES):
        count = 600
        src_ids = torch.randint(0, sizes[src], (count,), generator=generator)
        dst_ids = torch.randint(0, sizes[dst], (count,), generator=generator)
        data[src, rel, dst].edge_index = torch.stack([src_ids, dst_ids])
        data[src, rel, dst].edge_attr = 10_000 * offset + torch.arange(count)
    return data
