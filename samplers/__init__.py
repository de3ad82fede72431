"""Numba sampling kernels and sampler classes: which nodes and edges a mini-batch needs.

Plain NumPy in, plain NumPy out: nothing here knows torch or PyG. :mod:`samplers.base` is the
contract every sampler implements; the kernels under ``samplers/_kernels`` trust their input,
so the sampler classes validate it first.
"""

from samplers.base import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    SamplerInput,
    SamplerOutput,
    as_edge_index,
)
from samplers.csc import check_csc, check_node_ids
from samplers.hetero import HeteroNeighborSampler
from samplers.labor import LaborSampler
from samplers.neighbor import MultiHopSampler, NeighborSampler, check_fanouts

__all__ = [
    "BaseSampler",
    "EdgeSamplerInput",
    "HeteroNeighborSampler",
    "HeteroSamplerOutput",
    "LaborSampler",
    "MultiHopSampler",
    "NeighborSampler",
    "SamplerInput",
    "SamplerOutput",
    "as_edge_index",
    "check_csc",
    "check_fanouts",
    "check_node_ids",
]
