"""Message-flow blocks: a sampled batch as one bipartite graph per layer (DGL's MFGs).

A batch from the :class:`~graphengine.loader.NeighborLoader` numbers its nodes hop by
hop (seeds first) and sorts its edges by destination, hop by hop. Layer ``l`` of an
``L``-layer GNN then only needs messages from the nodes of hops ``0..L-l`` to those of
hops ``0..L-l-1``: the first ``num_src`` nodes and the first ``num_dst`` of them, over
a prefix of the edges. :func:`to_blocks` cuts a batch into these :class:`Block` s; the
layers that run on them are in :mod:`graphengine.nn.blocks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Block:
    """Layer input: messages from the first ``num_src`` nodes to the first ``num_dst``.

    Attributes:
        edge_index: int64 ``[2, num_edges]`` (row = source, col = destination < num_dst),
            sorted by destination.
        rowptr: int64 ``[num_dst + 1]``: the edges into destination ``d`` are
            ``rowptr[d]:rowptr[d + 1]``.
        num_src, num_dst: node counts, ``num_dst <= num_src``.
    """

    edge_index: torch.Tensor
    rowptr: torch.Tensor
    num_src: int
    num_dst: int

    def csr(self, dtype: torch.dtype) -> torch.Tensor:
        """The ``[num_dst, num_src]`` sparse CSR adjacency with values 1 of ``dtype`` (the
        layout PyG's fused aggregations run on: ``torch.sparse.mm`` with a reduction)."""
        return torch.sparse_csr_tensor(
            self.rowptr,
            self.edge_index[0],
            torch.ones(self.edge_index.shape[1], dtype=dtype, device=self.rowptr.device),
            size=(self.num_dst, self.num_src),
            check_invariants=False,  # to_blocks checked them
        )

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Block:
        """This block with its tensors on ``device``."""
        return Block(
            self.edge_index.to(device, non_blocking=non_blocking),
            self.rowptr.to(device, non_blocking=non_blocking),
            self.num_src,
            self.num_dst,
        )


def to_blocks(
    edge_index: torch.Tensor,
    num_sampled_nodes: Sequence[int],
    num_sampled_edges: Sequence[int],
) -> list[Block]:
    """One :class:`Block` per layer (first layer first) of a batch of ``len(num_sampled_edges)``
    hops.

    Args:
        edge_index: integer ``[2, num_edges]`` local edges sorted by destination, hop by
            hop, as the loader gives them (the blocks hold them as int64).
        num_sampled_nodes: nodes per hop (seeds first), ``len(num_sampled_edges) + 1`` counts.
        num_sampled_edges: edges per hop.

    Raises ``ValueError`` when the counts do not match ``edge_index`` or its edges are not
    sorted by destination hop by hop (e.g. after a transform that reorders them).
    """
    hops = len(num_sampled_edges)
    if len(num_sampled_nodes) != hops + 1:
        raise ValueError(
            f"'num_sampled_nodes' needs {hops + 1} counts for {hops} hops "
            f"(got {len(num_sampled_nodes)})"
        )
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"'edge_index' must be [2, num_edges] (got {list(edge_index.shape)})")
    num_edges = sum(num_sampled_edges)
    if edge_index.shape[1] != num_edges:
        raise ValueError(
            f"'edge_index' has {edge_index.shape[1]} edges, the hop counts {num_edges}"
        )
    num_nodes = sum(num_sampled_nodes)
    edge_index = edge_index.long()
    col = edge_index[1]
    if num_edges and not bool((col[1:] >= col[:-1]).all()):
        raise ValueError("'edge_index' must be sorted by destination (its second row)")
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.int64, device=edge_index.device)
    torch.cumsum(torch.bincount(col, minlength=num_nodes), 0, out=rowptr[1:])
    blocks = []
    for layer in range(hops):
        num_src = sum(num_sampled_nodes[: hops - layer + 1])
        num_dst = sum(num_sampled_nodes[: hops - layer])
        layer_edges = sum(num_sampled_edges[: hops - layer])
        if int(rowptr[num_dst]) != layer_edges:
            raise ValueError(
                f"the first {layer_edges} edges must be exactly those into the first "
                f"{num_dst} nodes (hop by hop); {int(rowptr[num_dst])} are"
            )
        if layer_edges and int(edge_index[0, :layer_edges].max()) >= num_src:
            raise ValueError(f"layer {layer} has a source outside its first {num_src} nodes")
        blocks.append(Block(edge_index[:, :layer_edges], rowptr[: num_dst + 1], num_src, num_dst))
    return blocks
