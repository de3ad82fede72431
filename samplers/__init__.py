"""Numba sampling kernels and sampler classes: which nodes and edges a mini-batch needs.

Plain NumPy in, plain NumPy out: nothing here knows torch or PyG. :mod:`samplers.base` is the
contract every sampler implements and :mod:`samplers.hop` the contract of one hop, which a
sampler drawing its neighbors elsewhere (e.g. across the parts of a partition) implements by
subclassing :class:`MultiHopSampler`; the kernels under ``samplers/_kernels`` trust their
input, so the sampler classes validate it first (:mod:`samplers.csc`).
"""

from samplers.base import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    SamplerInput,
    SamplerOutput,
    as_edge_index,
)
from samplers.csc import (
    check_csc,
    check_max_degree,
    check_node_ids,
    check_times,
    check_weights,
)
from samplers.hetero import HeteroNeighborSampler
from samplers.hop import REPEAT_SHIFT, HopEdges, HopSlots, tag_repeats, untag
from samplers.labor import LaborSampler
from samplers.neighbor import MultiHopSampler, NeighborSampler, check_fanouts

__all__ = [
    "REPEAT_SHIFT",
    "BaseSampler",
    "EdgeSamplerInput",
    "HeteroNeighborSampler",
    "HeteroSamplerOutput",
    "HopEdges",
    "HopSlots",
    "LaborSampler",
    "MultiHopSampler",
    "NeighborSampler",
    "SamplerInput",
    "SamplerOutput",
    "as_edge_index",
    "check_csc",
    "check_fanouts",
    "check_max_degree",
    "check_node_ids",
    "check_times",
    "check_weights",
    "tag_repeats",
    "untag",
]
