"""``LinkNeighborLoader``: a drop-in for PyG's loader of the same name (link prediction) on
homogeneous and heterogeneous graphs, in memory or in PyG store pairs: seed edges, negatives
as PyG draws them, the neighborhoods of both ends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.data import FeatureStore as PyGFeatureStore
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.loader.utils import filter_data, filter_hetero_data
from torch_geometric.sampler import BaseSampler as PyGBaseSampler
from torch_geometric.sampler import EdgeSamplerInput as PyGEdgeSamplerInput
from torch_geometric.sampler import HeteroSamplerOutput as PyGHeteroSamplerOutput
from torch_geometric.sampler import NegativeSampling as PyGNegativeSampling
from torch_geometric.sampler import SamplerOutput as PyGSamplerOutput

from graphengine.data.arrays import as_tensor
from graphengine.loader.adapters import as_numpy, check_input_ids
from graphengine.loader.config import SamplingConfig, loading_config, subgraph_type_of
from graphengine.loader.pipeline import StagedLoader
from graphengine.loader.pyg_interop import (
    PyGRemoteGraph,
    describe,
    filter_hetero_store,
    filter_store,
    to_pyg_sampler_output,
)
from graphengine.loader.seeds import BatchRequest
from graphengine.loader.sources import (
    GraphSource,
    graph_source,
    is_pyg_sampler,
    is_pyg_store_pair,
)
from graphengine.loader.threads import sampler_threads
from samplers import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroNeighborSampler,
    check_node_ids,
    check_times,
)
from samplers.link import (
    EdgeSet,
    LinkSamplerOutput,
    NegativeSampling,
    NodesByTime,
    check_amount,
    sample_from_edges,
)

EdgeType = tuple[str, str, str]


@dataclass(frozen=True)
class SeedEdges:
    """A link loader's seed edges, checked, with what PyG's ``EdgeSamplerInput`` holds for
    them.

    Attributes:
        edge_type: the edges' ``(src, relation, dst)`` type, ``None`` when homogeneous.
        src, dst: int64 ``[num_seeds]``, each edge's ends (ids of the source and the
            destination node type).
        label: ``[num_seeds]`` labels (shifted by one when negatives are drawn and they hold
            0, as PyG does), or ``None``.
        time: int64 ``[num_seeds]`` times, or ``None``.
        input_id: int64 ``[num_seeds]``, each edge's ``input_id``.
    """

    edge_type: EdgeType | None
    src: np.ndarray
    dst: np.ndarray
    label: np.ndarray | None
    time: np.ndarray | None
    input_id: np.ndarray

    @property
    def num_seeds(self) -> int:
        return int(self.src.shape[0])


class SampleEdges:
    """Sampling for link loaders: a :class:`BatchRequest` (positions into the seed edges) ->
    :func:`samplers.link.sample_from_edges`' :class:`~samplers.link.LinkSamplerOutput`.

    Args:
        sampler: the node sampler run on the edges' ends.
        seeds: the seed edges.
        num_nodes: the graph's nodes (negatives are drawn among them); heterogeneous: per
            node type.
        negative: how to draw negatives, or ``None``.
        disjoint: each edge's ends their own trees.
        nodes_by_time: the nodes in time order (temporal negatives; heterogeneous: per node
            type), or ``None``.
        edges: the graph's edges (of the seeds' edge type), for negatives that exclude them,
            or ``None``.
    """

    def __init__(
        self,
        sampler: BaseSampler,
        seeds: SeedEdges,
        num_nodes: int | dict[str, int],
        negative: NegativeSampling | None,
        disjoint: bool,
        nodes_by_time: NodesByTime | dict[str, NodesByTime] | None,
        edges: EdgeSet | None,
    ):
        self.sampler = sampler
        self.seeds = seeds
        self.num_nodes = num_nodes
        self.negative = negative
        self.disjoint = disjoint
        self.nodes_by_time = nodes_by_time
        self.edges = edges

    def __call__(self, request: BatchRequest) -> LinkSamplerOutput:
        index, seeds = request.index, self.seeds
        inputs = EdgeSamplerInput(
            row=seeds.src[index],
            col=seeds.dst[index],
            input_id=seeds.input_id[index],
            seed=request.seed,
            label=None if seeds.label is None else seeds.label[index],
            time=None if seeds.time is None else seeds.time[index],
            input_type=seeds.edge_type,
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
    (triplet); no ``batch_size``. Heterogeneous batches put them where PyG does: on the seed
    edge type, but ``src_index`` (and ``seed_time``) on the source type and
    ``dst_pos_index``/``dst_neg_index`` (and ``seed_time``) on the destination type; a field
    without a value is removed from its store, as PyG's assignment of ``None`` does."""

    def __init__(self, gather, triplet: bool, edge_type: EdgeType | None = None):
        self.gather = gather
        self.triplet = triplet
        self.edge_type = edge_type

    def __call__(self, out: LinkSamplerOutput) -> Data | HeteroData:
        data = self.gather(out.subgraph)
        if self.edge_type is None:
            seeds = src = dst = labels = data
        else:
            seeds = data[out.subgraph.input_type]
            src, dst = data[self.edge_type[0]], data[self.edge_type[-1]]
            labels = data[self.edge_type]
        for key in ("batch_size", "seed_time", "input_id"):
            if key in seeds:
                del seeds[key]
        if self.triplet:
            metadata = (
                out.input_id,
                out.src_index,
                out.dst_pos_index,
                np.ascontiguousarray(out.dst_neg_index),
                out.edge_label_time,
            )
        else:
            metadata = (out.input_id, out.edge_label_index, out.edge_label, out.edge_label_time)
        put_link_fields(labels, src, dst, self.triplet, metadata)
        return data


def put_link_fields(labels, src, dst, triplet: bool, metadata: tuple) -> None:
    """Put PyG's link fields where PyG's ``LinkLoader`` puts them: ``metadata`` is PyG's
    (``input_id``, ``edge_label_index``, ``edge_label``, ``edge_label_time``) for binary or no
    negatives, on ``labels`` (the seed edges' store); (``input_id``, ``src_index``,
    ``dst_pos_index``, ``dst_neg_index``, ``seed_time``) for triplet ones, ``input_id`` on
    ``labels``, the others on the source store ``src`` or the destination store ``dst``
    (``seed_time`` on both), and no binary fields left on ``labels``. A field without a
    value (``None``) is removed from its store, as PyG's assignment of ``None`` does."""
    fields = [(labels, "input_id", metadata[0])]
    if triplet:
        fields += [
            (src, "src_index", metadata[1]),
            (dst, "dst_pos_index", metadata[2]),
            (dst, "dst_neg_index", metadata[3]),
            (src, "seed_time", metadata[4]),
            (dst, "seed_time", metadata[4]),
            (labels, "edge_label_index", None),
            (labels, "edge_label_time", None),
        ]
    else:
        fields += [
            (labels, "edge_label_index", metadata[1]),
            (labels, "edge_label", metadata[2]),
            (labels, "edge_label_time", metadata[3]),
        ]
    for store, key, value in fields:
        if value is not None:
            store[key] = torch.as_tensor(value)
        elif key in store:
            del store[key]


class SamplePyGEdges:
    """Sampling with a user's PyG sampler: a :class:`BatchRequest` -> what its
    ``sample_from_edges(EdgeSamplerInput(...)[index], neg_sampling)`` returns, as PyG's
    ``LinkLoader.collate_fn`` calls it (a PyG ``SamplerOutput`` or ``HeteroSamplerOutput``
    whose ``metadata`` holds the link fields). PyG's samplers draw from torch's global
    random state: ``request.seed`` is not passed on.

    Args:
        sampler: a ``torch_geometric.sampler.BaseSampler``.
        input_data: PyG's ``EdgeSamplerInput`` of all seed edges.
        neg_sampling: PyG's ``NegativeSampling``, or ``None``.
    """

    def __init__(
        self,
        sampler: PyGBaseSampler,
        input_data: PyGEdgeSamplerInput,
        neg_sampling: PyGNegativeSampling | None,
    ):
        self.sampler = sampler
        self.input_data = input_data
        self.neg_sampling = neg_sampling

    def __call__(self, request: BatchRequest) -> PyGSamplerOutput | PyGHeteroSamplerOutput:
        index = torch.from_numpy(np.asarray(request.index, dtype=np.int64))
        out = self.sampler.sample_from_edges(self.input_data[index], self.neg_sampling)
        if not isinstance(out, (PyGSamplerOutput, PyGHeteroSamplerOutput)):
            raise TypeError(
                f"{type(self.sampler).__name__}.sample_from_edges must return a "
                "torch_geometric.sampler.SamplerOutput or HeteroSamplerOutput (got "
                f"{type(out).__name__})"
            )
        return out


class AsPyGLinkOutput:
    """Our :class:`~samplers.link.LinkSamplerOutput` as the PyG output PyG's link sampler
    returns: the subgraph as PyG's ``SamplerOutput`` / ``HeteroSamplerOutput`` with
    ``metadata`` ``(input_id, edge_label_index, edge_label, edge_label_time)`` (binary or no
    negatives) or ``(input_id, src_index, dst_pos_index, dst_neg_index, seed_time)``
    (triplet), torch tensors or ``None``, for PyG's ``transform_sampler_output``."""

    def __init__(self, triplet: bool):
        self.triplet = triplet

    def __call__(self, out: LinkSamplerOutput) -> PyGSamplerOutput | PyGHeteroSamplerOutput:
        pyg = to_pyg_sampler_output(out.subgraph)
        if self.triplet:
            fields = (out.src_index, out.dst_pos_index, out.dst_neg_index)
        else:
            fields = (out.edge_label_index, out.edge_label)
        fields = (out.input_id, *fields, out.edge_label_time)
        pyg.metadata = tuple(
            None if value is None else torch.as_tensor(np.ascontiguousarray(value))
            for value in fields
        )
        return pyg


class GatherPyGLinks:
    """Gathering of a PyG link sampler's output (see :class:`SamplePyGEdges` and
    :class:`AsPyGLinkOutput`), as PyG's ``LinkLoader.filter_fn``: ``transform_sampler_output``
    first, then node and edge attributes by PyG's own ``filter_data`` /
    ``filter_hetero_data`` (node attributes of a store pair by one ``multi_get_tensor``, as
    PyG's ``filter_custom_store`` / ``filter_custom_hetero_store``), ``n_id``, ``e_id``,
    ``batch``, the per-hop counts and the link fields from ``metadata``, where PyG puts them.

    Args:
        data: the loader's ``Data``, ``HeteroData`` or PyG ``(FeatureStore, GraphStore)``
            pair.
        edge_permutation: what maps the output's ``edge`` to edge ids: an int64 tensor or
            ``None``, or per edge type.
        edge_type: the seed edges' type (heterogeneous), else ``None``.
        triplet: triplet negatives (else binary or none).
        transform_sampler_output: PyG's ``transform_sampler_output``, or ``None``.
        convert: what makes the sampler's output PyG's (:class:`AsPyGLinkOutput`), or
            ``None`` when it is PyG's already.
        custom_cls: the class of each batch built from a store pair (PyG's ``custom_cls``).
    """

    def __init__(
        self,
        data: Data | HeteroData | tuple[PyGFeatureStore, PyGGraphStore],
        edge_permutation,
        edge_type: EdgeType | None,
        triplet: bool,
        transform_sampler_output: Callable | None,
        convert: Callable | None = None,
        custom_cls: type | None = None,
    ):
        if transform_sampler_output is not None and not callable(transform_sampler_output):
            raise TypeError(
                "'transform_sampler_output' must be callable (got "
                f"{type(transform_sampler_output).__name__})"
            )
        self.data = data
        self.edge_permutation = edge_permutation
        self.edge_type = edge_type
        self.triplet = triplet
        self.transform_sampler_output = transform_sampler_output
        self.convert = convert
        self.custom_cls = custom_cls

    def __call__(self, out) -> Data | HeteroData:
        if self.convert is not None:
            out = self.convert(out)
        if self.transform_sampler_output is not None:
            out = self.transform_sampler_output(out)
        perm = self.edge_permutation
        if self.edge_type is None:
            if isinstance(self.data, Data):
                batch = filter_data(self.data, out.node, out.row, out.col, out.edge, perm)
            else:
                batch = filter_store(*self.data, out.node, out.row, out.col, self.custom_cls)
            batch.n_id = out.node
            if out.edge is not None:
                edge = out.edge.to(torch.long)
                batch.e_id = perm[edge] if perm is not None else edge
            batch.batch = out.batch
            batch.num_sampled_nodes = out.num_sampled_nodes
            batch.num_sampled_edges = out.num_sampled_edges
            src = dst = labels = batch
        else:
            if isinstance(self.data, HeteroData):
                batch = filter_hetero_data(self.data, out.node, out.row, out.col, out.edge, perm)
            else:
                batch = filter_hetero_store(*self.data, out.node, out.row, out.col, self.custom_cls)
            for key, node in out.node.items():
                batch[key].n_id = node
            for key, edge in (out.edge or {}).items():
                if edge is not None:
                    edge = edge.to(torch.long)
                    if perm is not None and perm.get(key) is not None:
                        edge = perm[key][edge]
                    batch[key].e_id = edge
            batch.set_value_dict("batch", out.batch)
            batch.set_value_dict("num_sampled_nodes", out.num_sampled_nodes)
            batch.set_value_dict("num_sampled_edges", out.num_sampled_edges)
            src, dst = batch[self.edge_type[0]], batch[self.edge_type[-1]]
            labels = batch[self.edge_type]
        put_link_fields(labels, src, dst, self.triplet, out.metadata)
        return batch


class LinkNeighborLoader(StagedLoader):
    """Mini-batches of seed edges and the sampled neighborhoods of their ends, as PyG's
    ``LinkNeighborLoader``, for homogeneous and heterogeneous graphs, in memory or in PyG
    store pairs.

    Each batch is the node loader's ``Data`` for the edges' ends (``x``, ``edge_index``,
    ``n_id``, ``e_id``, per-hop counts, ``batch`` when disjoint) with ``input_id`` (the seed
    edges' positions, or the given ``input_id``) and, for binary or no negative sampling,
    ``edge_label_index`` (``[2, num_pos + num_neg]``, the labelled edges' ends as positions in
    the batch) and ``edge_label`` (the given labels shifted by one when they hold 0, as PyG
    does, or ones; zeros for negatives), ``edge_label_time`` when temporal; for triplet
    sampling ``src_index``, ``dst_pos_index``, ``dst_neg_index`` (``[num_pos]`` or
    ``[num_pos, amount]``) and ``seed_time`` when temporal. A ``HeteroData`` gives
    ``HeteroData`` batches with these fields where PyG puts them: ``input_id``,
    ``edge_label_index`` (sources as positions among the source type's ``n_id``,
    destinations among the destination type's), ``edge_label`` and ``edge_label_time`` on
    the seed edge type; ``src_index`` on the source type, ``dst_pos_index`` and
    ``dst_neg_index`` on the destination type, ``seed_time`` on both.

    A PyG ``(FeatureStore, GraphStore)`` pair (homogeneous or with typed edges) is read as
    :class:`NeighborLoader` reads it: its ``csc()`` once (with a PyG sampler too, for the node
    counts), node attributes per batch by one ``multi_get_tensor`` (no edge attributes, as in
    PyG), batches of ``custom_cls``; all edges of a type and the edges ``exclude_edges``
    avoids come from that CSC, without another call to the graph store.

    Negatives are drawn as PyG draws them: binary ones ``ceil(num_pos * amount)`` pairs,
    both ends uniform over the nodes (heterogeneous: of the seed edge type's source and
    destination types), triplet ones ``amount`` uniform destinations per positive edge; with
    ``edge_label_time`` and node times, uniform over the nodes no later than the edge (PyG
    redraws later ones 5 times and then takes the earliest node; graphengine's draw is exactly
    uniform). PyG may draw a true edge as a negative; ``exclude_edges`` here never does. The
    draws run in Numba (:mod:`samplers._kernels.negative`), each from a random stream of the
    batch's seed, so batches are the same for a seed whatever the threads.

    Loading composes the node loader's stages around seed edges: the same
    :class:`~graphengine.loader.config.SamplingConfig` and
    :class:`~graphengine.loader.config.LoadingConfig`, the same sampler and gathering
    (:func:`~graphengine.loader.sources.graph_source`), then seed edges -> sample the edges
    and their ends (:class:`SampleEdges`) -> gather with the link fields
    (:class:`GatherLinks`) -> copy.

    The arguments are PyG's, with PyG's meaning; those not listed here are
    :class:`NeighborLoader`'s.

    Args:
        data: a PyG ``Data`` or ``HeteroData``, or a PyG ``(FeatureStore, GraphStore)`` pair.
        edge_label_index: int ``[2, num_edges]`` seed edges; all of ``data``'s by default.
            Heterogeneous: an edge type (``(src, relation, dst)``, or ``(src, dst)`` when one
            edge type links them) for all its edges, or ``(edge type, ids or None)``. For a
            store pair it is required, as in PyG: the seed edges or ``(None, ids or None)``
            (untyped edges), an edge type or ``(edge type, ids or None)`` (typed); all edges
            (of a type) are read from the CSC already read, in the order of their ids
            (``e_id``), as ``graph_store.coo()`` lists them.
        edge_label: ``[num_edges]`` labels of the seed edges.
        edge_label_time: int ``[num_edges]`` times of the seed edges (needs ``time_attr``):
            the edges' ends sample nothing later, and temporal negatives no later node.
        neg_sampling: ``'binary'``, ``'triplet'``, PyG's ``NegativeSampling`` or a tuple or
            dict of its arguments, as PyG casts them (uniform: node weights are refused), or
            :class:`samplers.link.NegativeSampling`, whose ``exclude_edges`` never draws a
            true edge (of the seed edge type) as a negative; a negative that finds none in
            100 draws raises ``ValueError``.
        neg_sampling_ratio: PyG's deprecated spelling of binary negatives at this ratio.

    ``neighbor_sampler`` may also be a PyG ``torch_geometric.sampler.BaseSampler``, called as
    PyG's ``LinkLoader`` calls it (``sample_from_edges`` with PyG's ``NegativeSampling``: its
    own draws, node weights included, from torch's global generator, and no
    ``exclude_edges``) and its output filtered by PyG's rules; ``transform_sampler_output``
    gets PyG's ``SamplerOutput`` / ``HeteroSamplerOutput`` with the link fields in
    ``metadata``, as PyG's loader gives it.
    """

    def __init__(
        self,
        data: Data | HeteroData | tuple[PyGFeatureStore, PyGGraphStore],
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
        if not isinstance(data, (Data, HeteroData)) and not is_pyg_store_pair(data):
            raise NotImplementedError(
                "LinkNeighborLoader takes a PyG Data, HeteroData or (FeatureStore, GraphStore) "
                f"pair for now (got {describe(data)}); link sampling over graphengine's own "
                "datasets and stores is not built yet"
            )
        if edge_label_index is None and is_pyg_store_pair(data):
            raise ValueError(
                "'edge_label_index' is required for a (FeatureStore, GraphStore) pair (as in "
                "PyG): the seed edges, an edge type, or (edge type or None, ids or None) for "
                "all edges (of a type)"
            )
        if "input_nodes" in kwargs:  # PyG's LinkLoader has no such argument either
            raise TypeError(
                "'input_nodes' is NeighborLoader's: LinkNeighborLoader seeds edges, given by "
                "'edge_label_index'"
            )
        if neg_sampling_ratio is not None:
            check_amount(neg_sampling_ratio, "'neg_sampling_ratio'", ">= 0")
            if neg_sampling_ratio != 0:
                neg_sampling = NegativeSampling("binary", neg_sampling_ratio)
        neg_sampling = _cast_negative(neg_sampling)
        self._pyg_negative = None
        if is_pyg_sampler(neighbor_sampler):
            self._pyg_negative = _pyg_negative(neg_sampling)
            if self._pyg_negative is not None:  # PyG's node weights are its sampler's business
                mode = self._pyg_negative.mode
                neg_sampling = NegativeSampling(mode, self._pyg_negative.amount)
        self._negative = NegativeSampling.cast(neg_sampling)
        self._link = (edge_label_index, edge_label, edge_label_time, input_id)
        self._transform_sampler_output = transform_sampler_output
        custom_cls = kwargs.pop("custom_cls", None)
        sampling = SamplingConfig(
            num_neighbors,
            replace=replace,
            disjoint=disjoint,
            subgraph_type=subgraph_type_of(subgraph_type, directed),
            temporal_strategy=temporal_strategy,
            time_attr=time_attr,
            weight_attr=weight_attr,
        )
        loading = loading_config(
            type(self).__name__, {**kwargs, "filter_per_worker": filter_per_worker}
        )
        if is_pyg_sampler(neighbor_sampler):  # it samples the edges itself
            seeds = self._seed_edges(graph_edges(data, None))
            sample = self._sample_pyg_edges(neighbor_sampler, seeds)
            gather = GatherPyGLinks(
                data,
                getattr(neighbor_sampler, "edge_permutation", None),
                seeds.edge_type,
                self._triplet,
                transform_sampler_output,
                custom_cls=custom_cls,
            )
            self.graph = None
        else:
            source = graph_source(
                data,
                sampling,
                sampler_threads(loading.num_workers),
                neighbor_sampler,
                loading.pin_memory,
                loading.device,
                custom_cls,
                feature_dtype=loading.feature_dtype,
            )
            edges = graph_edges(data, source.graph)
            if edges.is_hetero and not isinstance(source.sampler, HeteroNeighborSampler):
                raise TypeError(
                    "heterogeneous link sampling seeds several node types at once: "
                    "'neighbor_sampler' must be a samplers.HeteroNeighborSampler (got "
                    f"{type(source.sampler).__name__})"
                )
            seeds = self._seed_edges(edges)
            sample = self._sample_edges(source.sampler, seeds, edges, sampling.disjoint)
            gather = self._gather_links(data, source, seeds.edge_type, custom_cls)
            self.graph, neighbor_sampler = source.graph, source.sampler
        self.data = data
        self.sampling = sampling
        self.neighbor_sampler = neighbor_sampler
        self._run_seed_batches(seeds.num_seeds, loading, sample, gather, transform)

    @property
    def batch_size(self) -> int:
        return self.loading.batch_size

    def __call__(self, index) -> Any:
        """One batch for the given positions into the seed edges, loaded in this thread."""
        return self._load_positions(index)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"  # as PyG's loaders print

    @property
    def _triplet(self) -> bool:
        return self._negative is not None and self._negative.mode == "triplet"

    def _seed_edges(self, edges: GraphEdges) -> SeedEdges:
        """``edge_label_index``, ``edge_label``, ``edge_label_time`` and ``input_id``,
        resolved over ``edges`` and checked, in this order."""
        edge_label_index, edge_label, edge_label_time, input_id = self._link
        edge_type, pairs = edges.seed_edges(edge_label_index)
        src = check_node_ids(pairs[0], edges.count(edge_type, 0), "edge_label_index[0]")
        dst = check_node_ids(pairs[1], edges.count(edge_type, -1), "edge_label_index[1]")
        num_seeds = src.shape[0]
        label = self._seed_labels(edge_label, num_seeds)
        time = None
        if edge_label_time is not None:
            time = check_times(as_numpy(edge_label_time), num_seeds, "edge_label_time")
        if input_id is None:
            ids = np.arange(num_seeds, dtype=np.int64)
        else:
            ids = check_input_ids(input_id, num_seeds)
        return SeedEdges(edge_type, src, dst, label, time, ids)

    def _seed_labels(self, edge_label, num_seeds: int) -> np.ndarray | None:
        """``edge_label`` as ``[num_seeds]``, shifted by one when negatives are drawn and it
        holds 0 (as PyG: 0 then means "negative"); refused with triplet negatives."""
        if edge_label is None:
            return None
        label = as_numpy(edge_label)
        if label.shape[:1] != (num_seeds,):
            raise ValueError(
                f"'edge_label' must have one entry per seed edge ({num_seeds}) "
                f"(got shape {tuple(label.shape)})"
            )
        if label.dtype.kind not in "biuf":
            raise TypeError(f"'edge_label' must hold numbers (got {label.dtype} {label[:3]})")
        if self._triplet:
            raise ValueError(
                "'edge_label' must be None for 'triplet' negative sampling: the batch's "
                "src_index, dst_pos_index and dst_neg_index tell positives from negatives"
            )
        if self._negative is not None and label.size and label.min() == 0:
            label = label + 1
        return label

    def _sample_edges(
        self, sampler: BaseSampler, seeds: SeedEdges, edges: GraphEdges, disjoint: bool
    ) -> SampleEdges:
        """graphengine's sampling of the seed edges: negatives (never an edge of ``edges``
        with ``exclude_edges``; temporal ones by the sampler's node times), then the ends."""
        negative = self._negative
        exclude = None
        if negative is not None and negative.exclude_edges:
            exclude = edges.edge_set(seeds.edge_type)
        return SampleEdges(
            sampler,
            seeds,
            edges.num_nodes,
            negative,
            bool(disjoint or getattr(sampler, "disjoint", False)),
            _nodes_by_time(getattr(sampler, "node_time", None)),
            exclude,
        )

    def _gather_links(self, data, source: GraphSource, edge_type, custom_cls) -> Callable:
        """The node loader's gathering with the link fields, or PyG's filtering of our output
        as PyG's when there is a ``transform_sampler_output``."""
        if self._transform_sampler_output is None:
            return GatherLinks(source.gather, self._triplet, edge_type)
        return GatherPyGLinks(
            data,
            _edge_permutation(source.graph),
            edge_type,
            self._triplet,
            self._transform_sampler_output,
            AsPyGLinkOutput(self._triplet),
            custom_cls,
        )

    def _sample_pyg_edges(self, sampler: PyGBaseSampler, seeds: SeedEdges) -> SamplePyGEdges:
        inputs = PyGEdgeSamplerInput(
            torch.from_numpy(seeds.input_id),
            torch.from_numpy(seeds.src),
            torch.from_numpy(seeds.dst),
            None if seeds.label is None else torch.as_tensor(seeds.label),
            None if seeds.time is None else torch.from_numpy(seeds.time),
            seeds.edge_type,
        )
        return SamplePyGEdges(sampler, inputs, self._pyg_negative)


class GraphEdges:
    """What a link loader reads of a graph's edges and nodes, beyond the node loader's parts:
    node counts, edge types, every edge of a type (default seeds) and the edge set (negatives
    that exclude edges). This one reads a PyG ``Data`` or ``HeteroData``.

    Attributes:
        is_hetero: typed nodes and edges.
        edge_types: the ``(src, relation, dst)`` edge types (``[None]`` when homogeneous).
        num_nodes: ``int`` (homogeneous) or ``{node type: int}``.
        kind: what the data is, for error messages.
    """

    def __init__(self, data: Data | HeteroData):
        self.data = data
        self.is_hetero = isinstance(data, HeteroData)
        if self.is_hetero:
            self.edge_types = list(data.edge_types)
            self.num_nodes = {t: int(data[t].num_nodes) for t in data.node_types}
        else:
            self.edge_types = [None]
            self.num_nodes = int(data.num_nodes)
        self.kind = "a HeteroData" if self.is_hetero else "a Data"

    def edge_index(self, edge_type: EdgeType | None) -> np.ndarray:
        """int64 ``[2, num_edges]``, every edge of ``edge_type`` in the order of its id (none
        for a ``Data`` without ``edge_index``)."""
        store = self.data if edge_type is None else self.data[edge_type]
        if store.edge_index is None:
            return np.empty((2, 0), dtype=np.int64)
        return _edge_pairs(store.edge_index, "edge_index")

    def has_edge_index(self) -> bool:
        """Whether a homogeneous graph's edges are given (a ``Data`` may have none)."""
        return self.data.edge_index is not None

    def edge_set(self, edge_type: EdgeType | None) -> EdgeSet:
        """The edges of ``edge_type``, for negatives that exclude them."""
        return EdgeSet(*self.edge_index(edge_type), self.count(edge_type, -1))

    def count(self, edge_type: EdgeType | None, end: int) -> int:
        """The nodes of ``edge_type``'s source (``end`` 0) or destination (``end`` -1) type."""
        return self.num_nodes if edge_type is None else self.num_nodes[edge_type[end]]

    def seed_edges(self, edge_label_index) -> tuple[EdgeType | None, np.ndarray]:
        """PyG's ``edge_label_index`` as ``(edge type or None, int64 [2, num_seeds])``:
        ``None`` (all edges), ``[2, num_seeds]`` ids or ``(None, ids or None)`` when
        homogeneous; an edge type or ``(edge type, ids or None)`` when heterogeneous."""
        if self.is_hetero:
            return self._hetero_seed_edges(edge_label_index)
        if (
            isinstance(edge_label_index, (tuple, list))
            and len(edge_label_index) == 2
            and edge_label_index[0] is None
        ):
            edge_label_index = edge_label_index[1]
        if edge_label_index is None:
            if not self.has_edge_index():
                raise ValueError(
                    "'edge_label_index' is needed: the data has no 'edge_index' whose edges "
                    "would be the seed edges"
                )
            return None, self.edge_index(None)
        return None, _edge_pairs(edge_label_index, "edge_label_index")

    def _hetero_seed_edges(self, edge_label_index) -> tuple[EdgeType, np.ndarray]:
        """An edge type is ``(src, relation, dst)`` or, when only one edge type links them,
        ``(src, dst)``; ``None`` ids mean all the edge type's edges."""
        expected = (
            f"'edge_label_index' of {self.kind} must be an edge type or an (edge type, ids or "
            "None) pair"
        )
        if not isinstance(edge_label_index, (tuple, list)) or not edge_label_index:
            raise ValueError(f"{expected} (got {type(edge_label_index).__name__})")
        if isinstance(edge_label_index[0], str):
            edge_type, ids = tuple(edge_label_index), None
        elif len(edge_label_index) == 2:
            edge_type, ids = edge_label_index
            edge_type = tuple(edge_type) if isinstance(edge_type, (tuple, list)) else edge_type
        else:
            raise ValueError(f"{expected} (got {len(edge_label_index)} entries)")
        edge_type = self._canonical_edge_type(edge_type)
        if ids is None:
            return edge_type, self.edge_index(edge_type)
        return edge_type, _edge_pairs(ids, "edge_label_index")

    def _canonical_edge_type(self, edge_type) -> EdgeType:
        if edge_type in self.edge_types:
            return edge_type
        matches = []
        if isinstance(edge_type, tuple) and len(edge_type) == 2:
            matches = [t for t in self.edge_types if (t[0], t[-1]) == edge_type]
        if len(matches) == 1:
            return matches[0]
        raise ValueError(
            f"'edge_label_index' names edge type {edge_type!r}, which is not one edge type of "
            f"the data (edge types: {self.edge_types})"
        )


class StoreEdges(GraphEdges):
    """:class:`GraphEdges` of a PyG ``(FeatureStore, GraphStore)`` pair, from the CSC arrays
    :class:`~graphengine.loader.pyg_interop.PyGRemoteGraph` read once: no further call to
    the graph store.

    Args:
        remote: the pair, read.
    """

    def __init__(self, remote: PyGRemoteGraph):
        self.remote = remote
        self.is_hetero = remote.is_hetero
        self.edge_types = list(remote.edge_types)
        self.num_nodes = remote.num_nodes
        if self.is_hetero:
            self.kind = "a (FeatureStore, GraphStore) pair of typed edges"
        else:
            self.kind = "a (FeatureStore, GraphStore) pair"

    def edge_index(self, edge_type: EdgeType | None) -> np.ndarray:
        """int64 ``[2, num_edges]``, every edge of ``edge_type`` in the order of its id (the
        CSC's ``perm``), as ``graph_store.coo()`` lists them."""
        csc = self.remote.csc(edge_type)
        pairs = np.stack([csc.indices, _csc_destinations(csc.indptr)])
        return pairs if csc.perm is None else pairs[:, np.argsort(csc.perm, kind="stable")]

    def has_edge_index(self) -> bool:
        return True  # a graph store's edges, read as CSC

    def edge_set(self, edge_type: EdgeType | None) -> EdgeSet:
        csc = self.remote.csc(edge_type)
        return EdgeSet(csc.indices, _csc_destinations(csc.indptr), csc.num_dst)


def graph_edges(data, graph) -> GraphEdges:
    """The :class:`GraphEdges` of ``data``: a store pair through ``graph`` (its
    :class:`~graphengine.loader.pyg_interop.PyGRemoteGraph`, read here when ``None``)."""
    if isinstance(graph, PyGRemoteGraph):
        return StoreEdges(graph)
    if is_pyg_store_pair(data):
        return StoreEdges(PyGRemoteGraph(*data))
    return GraphEdges(data)


def _csc_destinations(indptr: np.ndarray) -> np.ndarray:
    """int64 ``[num_edges]``, the destination of each CSC position."""
    return np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))


def _nodes_by_time(node_time) -> NodesByTime | dict[str, NodesByTime] | None:
    """A sampler's ``node_time`` (an array, per node type, or ``None``) in time order, for
    temporal negatives."""
    if node_time is None:
        return None
    if isinstance(node_time, dict):
        return {t: NodesByTime(times) for t, times in node_time.items()}
    return NodesByTime(node_time)


def _cast_negative(neg_sampling):
    """PyG's tuple or dict spellings of ``neg_sampling`` (its ``CastMixin``) as PyG's
    ``NegativeSampling``, or as graphengine's when the dict names ``exclude_edges``."""
    if isinstance(neg_sampling, dict) and "exclude_edges" in neg_sampling:
        return NegativeSampling(**neg_sampling)
    if isinstance(neg_sampling, (tuple, dict)):
        # PyG's own check of 'amount' fails on a str and lets inf through.
        if isinstance(neg_sampling, tuple):
            amount = neg_sampling[1] if len(neg_sampling) > 1 else 1
        else:
            amount = neg_sampling.get("amount", 1)
        check_amount(amount, "negative sampling 'amount'")
        return PyGNegativeSampling.cast(neg_sampling)
    return neg_sampling


def _pyg_negative(neg_sampling) -> PyGNegativeSampling | None:
    """``neg_sampling`` for a PyG sampler: PyG's own, or ours without ``exclude_edges``
    (which PyG's samplers cannot do)."""
    if isinstance(neg_sampling, NegativeSampling):
        if neg_sampling.exclude_edges:
            raise NotImplementedError(
                "'exclude_edges' negatives are drawn by graphengine's sampling; PyG's samplers "
                "draw true edges too: use graphengine's sampler (no 'neighbor_sampler')"
            )
        weights = {
            name: None if value is None else torch.from_numpy(value)
            for name, value in (
                ("src_weight", neg_sampling.src_weight),
                ("dst_weight", neg_sampling.dst_weight),
            )
        }
        return PyGNegativeSampling(neg_sampling.mode, neg_sampling.amount, **weights)
    return PyGNegativeSampling.cast(neg_sampling)


def _edge_permutation(graph):
    """A graph's edge ids as PyG's ``edge_permutation``: a tensor or ``None``, per edge type
    for a :class:`~graphengine.loader.hetero.HeteroGraph`; a store pair's own."""
    if isinstance(graph, PyGRemoteGraph):
        return graph.edge_permutation
    edge_ids = graph.edge_ids
    if isinstance(edge_ids, dict):
        return {t: None if p is None else as_tensor(p) for t, p in edge_ids.items()}
    return None if edge_ids is None else as_tensor(edge_ids)


def _edge_pairs(edge_index, name: str) -> np.ndarray:
    """``edge_index`` as an int64 ``[2, num_edges]`` array, or an error naming ``name``."""
    pairs = as_numpy(edge_index)
    if pairs.ndim != 2 or pairs.shape[0] != 2:
        raise ValueError(f"'{name}' must have shape [2, num_edges] (got {tuple(pairs.shape)})")
    if pairs.size and not np.issubdtype(pairs.dtype, np.integer):
        raise TypeError(f"'{name}' must hold integer node ids (got dtype {pairs.dtype})")
    return pairs.astype(np.int64)
