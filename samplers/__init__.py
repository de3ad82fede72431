"""Numba sampling kernels and sampler classes: which nodes and edges a mini-batch needs.

Plain NumPy in, plain NumPy out: nothing here knows torch or PyG.
"""

from samplers.csc import check_csc, check_node_ids
from samplers.neighbor import NeighborSampler
from samplers.types import SamplerInput, SamplerOutput

__all__ = ["NeighborSampler", "SamplerInput", "SamplerOutput", "check_csc", "check_node_ids"]
