"""``LinkNeighborLoader``: a drop-in for PyG's loader of the same name (link prediction) on
homogeneous graphs: seed edges, negatives as PyG draws them, the neighborhoods of both ends."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import BaseSampler as PyGBaseSampler

from graphengine.loader.adapters import as_numpy, check_input_ids
from graphengine.loader.neighbor_loader import NeighborLoader
from graphengine.loader.seeds import BatchRequest
from graphengine.loader.sources import LoaderParts, LoaderRequest, loader_parts
from samplers import BaseSampler, EdgeSamplerInput
from samplers.link import (
    EdgeSet,
    LinkSamplerOutput,
    NegativeSampling,
    NodesByTime,
    sample_from_edges,
)
from samplers.neighbor import check_times


class SampleEdges:
    """Sampling for link loaders: a :class:`BatchRequest` (positions into the seed edges) ->
    :func:`samplers.link.sample_from_edges`' :class:`~samplers.link.LinkSamplerOutput`.

    Args:
        sampler: the node sampler run on the edges' ends.
        row, col: int64 ``[num_edges]``, the seed edges' ends.
        label: optional ``[num_edges]`` labels; time: optional int64 ``[num_edges]`` times.
        input_id: int64 ``[num_edges]``, each seed edge's ``input_id``.
        num_nodes: the graph's nodes (negatives are drawn among them).
        negative: how to draw negatives, or ``None``.
        disjoint: each edge's ends their own trees.
        nodes_by_time: the nodes in time order (temporal negatives), or ``None``.
        edges: the graph's edges, for negatives that exclude them, or ``None``.
    """

    def __init__(
        self,
        sampler: BaseSampler,
        row: np.ndarray,
        col: np.ndarray,
        label,
        time: np.ndarray | None,
        input_id: np.ndarray,
        num_nodes: int,
        negative: NegativeSampling | None,
        disjoint: bool,
        nodes_by_time: NodesByTime | None,
        edges: EdgeSet | None,
    ):
        self.sampler = sampler
        self.row, self.col, self.label, self.time = row, col, label, time
        self.input_id = input_id
        self.num_nodes = num_nodes
        self.negative = negative
        self.disjoint = disjoint
        self.nodes_by_time = nodes_by_time
        self.edges = edges

    def __call__(self, request: BatchRequest) -> LinkSamplerOutput:
        index = request.index
        inputs = EdgeSamplerInput(
            row=self.row[index],
            col=self.col[index],
            input_id=self.input_id[index],
            seed=request.seed,
            label=None if self.label is None else self.label[index],
            time=None if self.time is None else self.time[index],
        )
        return sample_from_edges(
            self.sampler,
            inputs,
            self.num_nodes,
            self.negative,
            self.disjoint,
            self.nodes_by_time,
            self.edges,
        )


class GatherLinks:
    """Gathering for link loaders: the subgraph's batch, as the node loader's gathering makes
    it, with PyG's link fields instead of the node seeds' ones: ``input_id`` (the seed
    edges'), then ``edge_label_index``, ``edge_label`` and ``edge_label_time`` (binary or no
    negatives) or ``src_index``, ``dst_pos_index``, ``dst_neg_index`` and ``seed_time``
    (triplet); no ``batch_size``."""

    def __init__(self, gather, triplet: bool):
        self.gather = gather
        self.triplet = triplet

    def __call__(self, out: LinkSamplerOutput) -> Data:
        data = self.gather(out.subgraph)
        for key in ("batch_size", "seed_time", "input_id"):
            if key in data:
                del data[key]
        data.input_id = torch.from_numpy(out.input_id)
        if self.triplet:
            data.src_index = torch.from_numpy(out.src_index)
            data.dst_pos_index = torch.from_numpy(out.dst_pos_index)
            data.dst_neg_index = torch.from_numpy(np.ascontiguousarray(out.dst_neg_index))
            if out.edge_label_time is not None:
                data.seed_time = torch.from_numpy(out.edge_label_time)
            return data
        data.edge_label_index = torch.from_numpy(out.edge_label_index)
        if out.edge_label is not None:
            data.edge_label = torch.as_tensor(out.edge_label)
        if out.edge_label_time is not None:
            data.edge_label_time = torch.from_numpy(out.edge_label_time)
        return data


class LinkNeighborLoader(NeighborLoader):
    """Mini-batches of seed edges and the sampled neighborhoods of their ends, as PyG's
    ``LinkNeighborLoader``, for homogeneous graphs.

    Each batch is the node loader's ``Data`` for the edges' ends (``x``, ``edge_index``,
    ``n_id``, ``e_id``, per-hop counts, ``batch`` when disjoint) with ``input_id`` (the seed
    edges' positions, or the given ``input_id``) and, for binary or no negative sampling,
    ``edge_label_index`` (``[2, num_pos + num_neg]``, the labelled edges' ends as positions in
    the batch) and ``edge_label`` (the given labels shifted by one when they hold 0, as PyG
    does, or ones; zeros for negatives), ``edge_label_time`` when temporal; for triplet
    sampling ``src_index``, ``dst_pos_index``, ``dst_neg_index`` (``[num_pos]`` or
    ``[num_pos, amount]``) and ``seed_time`` when temporal.

    Args (PyG's, with PyG's meaning; the rest as :class:`NeighborLoader`'s):
        edge_label_index: int ``[2, num_edges]`` seed edges; all of ``data``'s by default.
        edge_label: ``[num_edges]`` labels of the seed edges.
        edge_label_time: int ``[num_edges]`` times of the seed edges (needs ``time_attr``):
            the edges' ends sample nothing later, and temporal negatives no later node.
        neg_sampling: ``'binary'``, ``'triplet'``, PyG's ``NegativeSampling`` (uniform: node
            weights are refused), or :class:`samplers.link.NegativeSampling`, whose
            ``exclude_edges`` never draws a true edge as a negative (PyG may).
        neg_sampling_ratio: PyG's deprecated spelling of binary negatives at this ratio.

    Heterogeneous data, PyG store pairs, PyG samplers and ``transform_sampler_output`` are
    not supported for links yet and raise ``NotImplementedError``.
    """

    def __init__(
        self,
        data: Data,
        num_neighbors: Sequence[int],
        edge_label_index=None,
        edge_label=None,
        edge_label_time=None,
        replace: bool = False,
        subgraph_type: str = "directional",
        disjoint: bool = False,
        temporal_strategy: str = "uniform",
        neg_sampling=None,
        neg_sampling_ratio: float | None = None,
        time_attr: str | None = None,
        weight_attr: str | None = None,
        transform=None,
        transform_sampler_output=None,
        is_sorted: bool = False,
        filter_per_worker: bool | None = None,
        neighbor_sampler: BaseSampler | None = None,
        directed: bool = True,
        input_id=None,
        **kwargs,
    ):
        if (edge_label_time is None) != (time_attr is None):
            raise ValueError(
                "'edge_label_time' and 'time_attr' go together: temporal link sampling needs "
                f"both (got edge_label_time {'set' if edge_label_time is not None else 'unset'}, "
                f"time_attr {time_attr!r})"
            )
        if isinstance(data, HeteroData) or not isinstance(data, Data):
            raise NotImplementedError(
                "LinkNeighborLoader takes a homogeneous PyG Data for now (got "
                f"{type(data).__name__}); heterogeneous link sampling is not built yet"
            )
        if isinstance(neighbor_sampler, PyGBaseSampler) and not isinstance(
            neighbor_sampler, BaseSampler
        ):
            raise NotImplementedError("LinkNeighborLoader does not take PyG samplers yet")
        if transform_sampler_output is not None:
            raise NotImplementedError(
                "LinkNeighborLoader does not take 'transform_sampler_output' yet; use 'transform'"
            )
        if neg_sampling_ratio is not None and neg_sampling_ratio != 0:
            neg_sampling = NegativeSampling("binary", neg_sampling_ratio)
        self._negative = NegativeSampling.cast(neg_sampling)
        self._link = (edge_label_index, edge_label, edge_label_time, input_id)
        super().__init__(
            data,
            num_neighbors,
            replace=replace,
            subgraph_type=subgraph_type,
            disjoint=disjoint,
            temporal_strategy=temporal_strategy,
            time_attr=time_attr,
            weight_attr=weight_attr,
            transform=transform,
            is_sorted=is_sorted,
            filter_per_worker=filter_per_worker,
            neighbor_sampler=neighbor_sampler,
            directed=directed,
            **kwargs,
        )

    def _loader_parts(self, data, request: LoaderRequest) -> LoaderParts:
        parts = loader_parts(data, dataclasses.replace(request, edge_seeds=True))
        edge_label_index, edge_label, edge_label_time, input_id = self._link
        num_nodes = int(data.num_nodes)
        if edge_label_index is None:
            edge_label_index = data.edge_index
        seeds = as_numpy(edge_label_index)
        if seeds.ndim != 2 or seeds.shape[0] != 2:
            raise ValueError(
                f"'edge_label_index' must have shape [2, num_edges] (got {tuple(seeds.shape)})"
            )
        num_seeds = seeds.shape[1]
        negative = self._negative
        label = None
        if edge_label is not None:
            label = as_numpy(edge_label)
            if label.shape[:1] != (num_seeds,):
                raise ValueError(
                    f"'edge_label' must have one entry per seed edge ({num_seeds}) "
                    f"(got shape {tuple(label.shape)})"
                )
            if negative is not None and negative.mode == "triplet":
                raise ValueError(
                    "'edge_label' must be None for 'triplet' negative sampling: the batch's "
                    "src_index, dst_pos_index and dst_neg_index tell positives from negatives"
                )
            if negative is not None and label.size and label.min() == 0:
                label = label + 1  # as PyG: 0 now means "negative"
        time = None
        if edge_label_time is not None:
            time = check_times(as_numpy(edge_label_time), num_seeds, "edge_label_time")
        ids = (
            np.arange(num_seeds, dtype=np.int64)
            if input_id is None
            else check_input_ids(input_id, num_seeds)
        )
        sampler = parts.sampler
        node_time = getattr(sampler, "node_time", None)
        edges = None
        if negative is not None and negative.exclude_edges:
            edges = EdgeSet(*as_numpy(data.edge_index), num_nodes)
        sample = SampleEdges(
            sampler,
            seeds[0].astype(np.int64),
            seeds[1].astype(np.int64),
            label,
            time,
            ids,
            num_nodes,
            negative,
            bool(request.options["disjoint"] or getattr(sampler, "disjoint", False)),
            None if node_time is None else NodesByTime(node_time),
            edges,
        )
        triplet = negative is not None and negative.mode == "triplet"
        return LoaderParts(
            sample, GatherLinks(parts.gather, triplet), num_seeds, sampler, parts.graph
        )
