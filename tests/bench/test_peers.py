"""The peers the benchmarks time sample what graphengine samples: DGL's fanouts in its order."""

import numpy as np
import pytest
import torch

from graphengine.bench.peers import Unavailable, dgl_fanouts, dgl_graph, dgl_module
from graphengine.data.graph_store import Graph


def test_dgl_lists_fanouts_input_layer_first():
    assert dgl_fanouts([15, 10, 5]) == [5, 10, 15]
    assert dgl_fanouts([7]) == [7]


def test_dgl_draws_the_first_hop_from_the_seeds_as_graphengine_does():
    try:
        dgl = dgl_module()
    except Unavailable as missing:
        pytest.skip(str(missing))
    # A star: every node but 0 points at 0, so seed 0 has 20 in-neighbors and the rest one.
    sources = np.arange(1, 21)
    graph = Graph.from_edge_index(np.stack([sources, np.zeros_like(sources)]), num_nodes=21)
    sampler = dgl.dataloading.NeighborSampler(dgl_fanouts([3, 1]))
    _, _, blocks = sampler.sample_blocks(dgl_graph(dgl, graph, {}), torch.tensor([0]))
    assert blocks[-1].num_edges() == 3  # the block into the seeds: the first hop's fanout
