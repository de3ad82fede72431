"""Interoperability with PyG's remote backends and samplers.

PyG's ``NeighborLoader`` accepts three things this module bridges to the loader's stages
(:mod:`graphengine.loader.stages`):

- a ``(FeatureStore, GraphStore)`` pair of any user implementation of PyG's abstract classes
  (a "remote backend"): :class:`PyGRemoteGraph` reads its graph as NumPy CSC arrays per edge
  type, exactly as PyG's ``NeighborSampler`` does (``graph_store.csc()``), so that our samplers
  can sample it; :class:`GatherRemoteFeatures` turns our samplers' output into the ``Data`` /
  ``HeteroData`` batch PyG's ``NodeLoader`` would build from that pair;
- a user's ``torch_geometric.sampler.BaseSampler`` (PyG's ``neighbor_sampler=``):
  :class:`SamplePyGNodes` calls its ``sample_from_nodes`` for each batch, and
  :class:`GatherPyGOutput` joins the PyG output with a ``Data``, a ``HeteroData`` or a pair.

Every gather here follows PyG's ``NodeLoader.filter_fn`` (``torch_geometric/loader/
node_loader.py``, PyG 2.8): node attributes come from ``filter_data`` / ``filter_hetero_data``
(in-memory data, PyG's own functions) or, for a pair, from one ``multi_get_tensor`` call per
batch with a ``TensorAttr(group_name, attr_name, index=n_id)`` per attribute the feature store
lists (``filter_custom_store`` / ``filter_custom_hetero_store``); then the batch gets
``edge_index``, ``n_id``, ``e_id`` (through the edge permutation), ``batch`` (disjoint),
``num_sampled_nodes``, ``num_sampled_edges``, ``input_id``, ``seed_time`` and ``batch_size``
(on the input node type for heterogeneous batches; PyG 2.8 sets no ``input_type`` on a node
batch, so neither do we).

Where this differs from PyG (each documented where it happens): node and edge types are
listed in first-seen order instead of PyG's ``list(set(...))``; a homogeneous graph store
whose edge attribute has no ``size`` gets a node count from the feature store or the graph
(PyG's ``max(None)`` raises); a pair given as ``(node_type, None)`` seeds every node of that
type (PyG queries the node count of ``None``); a PyG sampler output without ``metadata`` is
given PyG's ``(input_id, time)`` (PyG raises ``TypeError``); PyG's distributed-sampler
special case (``DistNeighborSampler``) is not reproduced.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData, remote_backend_utils
from torch_geometric.data import FeatureStore as PyGFeatureStore
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.loader.utils import filter_data, filter_hetero_data, get_input_nodes
from torch_geometric.sampler import BaseSampler as PyGBaseSampler
from torch_geometric.sampler import HeteroSamplerOutput as PyGHeteroSamplerOutput
from torch_geometric.sampler import NodeSamplerInput
from torch_geometric.sampler import SamplerOutput as PyGSamplerOutput

from graphengine.data.arrays import as_tensor
from graphengine.data.graph_store import Graph
from graphengine.loader.seeds import BatchRequest
from samplers.base import BaseSampler, HeteroSamplerOutput, SamplerOutput

EdgeType = tuple[str, str, str]
PyGOutput = PyGSamplerOutput | PyGHeteroSamplerOutput
EdgePermutation = torch.Tensor | dict[EdgeType, torch.Tensor | None] | None

__all__ = [
    "EdgeCSC",
    "GatherPyGOutput",
    "GatherRemoteFeatures",
    "PyGRemoteGraph",
    "SamplePyGNodes",
    "check_store_pair",
    "filter_hetero_store",
    "filter_sampler_output",
    "filter_store",
    "to_pyg_sampler_output",
]


def check_store_pair(data: Any, name: str = "data") -> tuple[PyGFeatureStore, PyGGraphStore]:
    """``data`` as a ``(FeatureStore, GraphStore)`` pair of PyG's abstract classes, or a
    ``TypeError`` saying what is wrong with it."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(
            f"'{name}' must be a (torch_geometric.data.FeatureStore, "
            f"torch_geometric.data.GraphStore) pair (got {describe(data)})"
        )
    feature_store, graph_store = data
    if not isinstance(feature_store, PyGFeatureStore):
        raise TypeError(
            f"'{name}' as a pair must hold a torch_geometric.data.FeatureStore first (got "
            f"{type(feature_store).__name__}); implement PyG's FeatureStore interface "
            "(e.g. graphengine.FeatureStore, torch_geometric.testing.MyFeatureStore)"
        )
    if not isinstance(graph_store, PyGGraphStore):
        raise TypeError(
            f"'{name}' as a pair must hold a torch_geometric.data.GraphStore second (got "
            f"{type(graph_store).__name__}); implement PyG's GraphStore interface "
            "(e.g. graphengine.data.graph_store.Graph, torch_geometric.testing.MyGraphStore)"
        )
    return feature_store, graph_store


@dataclass(frozen=True)
class EdgeCSC:
    """One edge type of a graph in CSC layout: for each destination node, its in-neighbors.

    Attributes:
        indptr: int64 ``[num_dst + 1]``; the sources of destination ``v`` are
            ``indices[indptr[v]:indptr[v + 1]]``.
        indices: int64 ``[num_edges]``, source node ids (of the source node type), in
            ``[0, num_src)``.
        perm: int64 ``[num_edges]``, the original edge id of each CSC position (the position
            in the graph store's own COO/CSR order; PyG's ``perm`` from ``graph_store.csc()``),
            or ``None`` when the CSC order is the original order.
        num_src: nodes of the source type.
        num_dst: nodes of the destination type.

    ``indptr``/``indices``/``perm`` may share memory with the graph store's tensors.
    """

    indptr: np.ndarray
    indices: np.ndarray
    perm: np.ndarray | None
    num_src: int
    num_dst: int

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    def edge_ids(self) -> np.ndarray:
        """int64 ``[num_edges]``: the original edge id of each CSC position."""
        if self.perm is None:
            return np.arange(self.num_edges, dtype=np.int64)
        return self.perm


class PyGRemoteGraph:
    """The graph of a PyG ``(FeatureStore, GraphStore)`` pair as NumPy CSC arrays, read once.

    The edges come from ``graph_store.csc()``, the call PyG's ``NeighborSampler`` makes for a
    pair: ``(row, colptr, perm)`` for a homogeneous store, dicts of them keyed by edge type
    for a heterogeneous one; ``perm`` maps each CSC position to the edge's original id, as
    PyG's ``edge_permutation``. A store is heterogeneous as PyG decides in
    ``GraphStore._edges_to_layout``: every edge attribute has an edge type (or, for PyG's
    distributed ``LocalGraphStore``, ``graph_store.meta['is_hetero']``).

    Node counts are PyG's: homogeneous ``max(size)`` of the first edge attribute; per node
    type ``remote_backend_utils.size(feature_store, graph_store, node_type)``. Where PyG
    cannot count (no ``size`` and no feature table of that type), the count is the rows of
    the first node table (homogeneous) or the largest id the edges reach, plus one. Each
    ``indptr`` is padded to ``num_dst + 1`` entries (``graph_store.csc()`` of a COO store
    without ``size`` stops at the largest destination id).

    graphengine's own :class:`~graphengine.data.graph_store.Graph` answers ``csc()`` with
    ``perm=None`` (its ``edge_ids`` are not visible through PyG's interface), so read
    through here its ``e_id`` are CSC positions, as PyG would see them; ``NeighborLoader``
    takes a ``(FeatureStore, Graph)`` pair its own way, with ``edge_ids``.

    Args:
        feature_store: any ``torch_geometric.data.FeatureStore``.
        graph_store: any ``torch_geometric.data.GraphStore`` holding at least one edge index.

    Attributes:
        is_hetero: whether the store holds typed edges.
        node_types: ``[None]`` (homogeneous), else the string group names of the feature
            store's tables, then the types only edges name, in first-seen order.
        edge_types: ``[None]`` (homogeneous), else every ``(src, rel, dst)`` in first-seen
            order (PyG lists them from a ``set``).
        num_nodes: ``int`` (homogeneous) or ``{node_type: int}``.
        csc_dict: ``{edge_type: EdgeCSC}``, edge type ``None`` when homogeneous.
        edge_permutation: PyG's form of the permutations: an int64 tensor or ``None``
            (homogeneous), else ``{edge_type: tensor or None}``; what ``e_id`` is mapped through.

    Raises:
        TypeError: the stores are not PyG's, or an edge type is not a ``(str, str, str)``.
        ValueError: the graph store is empty, mixes typed and untyped edges, or its CSC is
            malformed (``indptr`` not non-decreasing from 0 to ``num_edges``, a source id out
            of range, a ``perm`` of another length or out of range).
    """

    def __init__(self, feature_store: PyGFeatureStore, graph_store: PyGGraphStore):
        self.feature_store, self.graph_store = check_store_pair(
            (feature_store, graph_store), "(feature_store, graph_store)"
        )
        edge_attrs = list(graph_store.get_all_edge_attrs())
        if not edge_attrs:
            raise ValueError(f"the graph store {type(graph_store).__name__} holds no edge index")
        typed = [attr.edge_type is not None for attr in edge_attrs]
        if hasattr(graph_store, "meta"):  # PyG's `LocalGraphStore`, as `_edges_to_layout`
            self.is_hetero = bool(graph_store.meta.get("is_hetero", False))
        else:
            self.is_hetero = all(typed)
            if any(typed) and not all(typed):
                raise ValueError(
                    "the graph store mixes edge indices of edge type None (homogeneous) with "
                    "typed ones; PyG would read only the first edge attribute "
                    f"({edge_attrs[0]}): store one kind"
                )
        row, colptr, perm = graph_store.csc()
        if self.is_hetero:
            self._read_hetero(edge_attrs, row, colptr, perm)
        else:
            self._read_homogeneous(edge_attrs[0], row, colptr, perm)
        self.edge_permutation: EdgePermutation = (
            {et: _opt_tensor(csc.perm) for et, csc in self.csc_dict.items()}
            if self.is_hetero
            else _opt_tensor(self.csc_dict[None].perm)
        )

    def _read_homogeneous(self, attr, row, colptr, perm) -> None:
        indices = _int64_array(row, "row from graph_store.csc()")
        indptr = _int64_array(colptr, "colptr from graph_store.csc()")
        if attr.size is not None:
            num_nodes = int(max(attr.size))  # as PyG's NeighborSampler
        else:
            num_nodes = max(indptr.shape[0] - 1, int(indices.max()) + 1 if indices.size else 0)
            tables = self.feature_store.get_all_tensor_attrs()
            if tables:
                size = self.feature_store.get_tensor_size(copy.copy(tables[0]))
                if size is not None:
                    num_nodes = max(num_nodes, int(size[0]))
        self.node_types = [None]
        self.edge_types = [None]
        self.num_nodes: int | dict[str, int] = num_nodes
        self.csc_dict = {None: _edge_csc(indptr, indices, perm, num_nodes, num_nodes, None)}

    def _read_hetero(self, edge_attrs, row_dict, colptr_dict, perm_dict) -> None:
        edge_types = list(dict.fromkeys(attr.edge_type for attr in edge_attrs))
        for edge_type in edge_types:
            if not (
                isinstance(edge_type, tuple)
                and len(edge_type) == 3
                and all(isinstance(part, str) for part in edge_type)
            ):
                raise TypeError(
                    f"edge types must be (src, relation, dst) tuples of strings (got {edge_type!r})"
                )
            if edge_type not in row_dict or edge_type not in colptr_dict:
                raise ValueError(f"graph_store.csc() returned no edges of type {edge_type}")
        node_types = dict.fromkeys(
            attr.group_name
            for attr in self.feature_store.get_all_tensor_attrs()
            if isinstance(attr.group_name, str)
        )
        for src, _, dst in edge_types:
            node_types.setdefault(src)
            node_types.setdefault(dst)
        arrays = {
            et: (
                _int64_array(colptr_dict[et], f"colptr of {et} from graph_store.csc()"),
                _int64_array(row_dict[et], f"row of {et} from graph_store.csc()"),
            )
            for et in edge_types
        }
        num_nodes = {}
        for node_type in node_types:
            try:
                num_nodes[node_type] = int(
                    remote_backend_utils.size(self.feature_store, self.graph_store, node_type)
                )
            except ValueError:  # PyG cannot tell: the largest id the edges reach, plus one
                reach = [0]
                for (src, _, dst), (indptr, indices) in arrays.items():
                    if dst == node_type:
                        reach.append(indptr.shape[0] - 1)
                    if src == node_type and indices.size:
                        reach.append(int(indices.max()) + 1)
                num_nodes[node_type] = max(reach)
        self.node_types = list(node_types)
        self.edge_types = edge_types
        self.num_nodes = num_nodes
        self.csc_dict = {
            et: _edge_csc(
                indptr,
                indices,
                perm_dict.get(et) if perm_dict is not None else None,
                num_nodes[et[0]],
                num_nodes[et[2]],
                et,
            )
            for et, (indptr, indices) in arrays.items()
        }

    def csc(self, edge_type: EdgeType | None = None) -> EdgeCSC:
        """The CSC arrays of ``edge_type`` (``None`` for a homogeneous graph)."""
        if edge_type not in self.csc_dict:
            raise KeyError(
                f"no edge type {edge_type!r} in this graph (edge types: {self.edge_types})"
            )
        return self.csc_dict[edge_type]

    def graph(self, edge_type: EdgeType | None = None) -> Graph:
        """One edge type as a :class:`~graphengine.data.graph_store.Graph` for the samplers
        (``edge_ids`` = the permutation; ``indices`` int32 when ids fit). Only for a
        homogeneous graph or an edge type whose source and destination types are the same."""
        csc = self.csc(edge_type)
        if edge_type is not None and edge_type[0] != edge_type[2]:
            raise ValueError(
                f"a Graph has one node set: edge type {edge_type} joins two node types; "
                "use csc(edge_type) for its bipartite CSC"
            )
        indices = csc.indices
        if csc.num_dst <= np.iinfo(np.int32).max:
            indices = indices.astype(np.int32)
        graph = Graph(csc.indptr, indices, csc.perm, validate=False)
        graph.validated = True  # checked by _edge_csc
        return graph

    def __repr__(self) -> str:
        if not self.is_hetero:
            csc = self.csc_dict[None]
            return f"{type(self).__name__}(num_nodes={self.num_nodes}, num_edges={csc.num_edges})"
        edges = {et: csc.num_edges for et, csc in self.csc_dict.items()}
        return f"{type(self).__name__}(num_nodes={self.num_nodes}, num_edges={edges})"


def to_pyg_sampler_output(
    out: SamplerOutput | HeteroSamplerOutput,
) -> PyGSamplerOutput | PyGHeteroSamplerOutput:
    """Our NumPy :class:`samplers.SamplerOutput` / :class:`samplers.base.HeteroSamplerOutput`
    as PyG's torch ``SamplerOutput`` / ``HeteroSamplerOutput`` (zero-copy ``torch.from_numpy``
    views; tuples of counts become lists): ``node``, ``row``, ``col``, ``edge`` (CSC
    positions, as PyG's), ``batch``, ``num_sampled_nodes``, ``num_sampled_edges`` and
    ``metadata = (input_id, seed_time)`` as PyG's ``node_sample`` sets it. Our
    ``edge_weight`` (LABOR) has no place in PyG's output and is left out; a heterogeneous
    output's ``input_type`` is not part of PyG's either (pass it to the gather)."""
    if isinstance(out, SamplerOutput):
        return PyGSamplerOutput(
            node=as_tensor(out.node),
            row=as_tensor(out.row),
            col=as_tensor(out.col),
            edge=_opt_tensor(out.edge),
            batch=_opt_tensor(out.batch),
            num_sampled_nodes=_opt_list(out.num_sampled_nodes),
            num_sampled_edges=_opt_list(out.num_sampled_edges),
            metadata=(as_tensor(out.input_id), _opt_tensor(out.seed_time)),
        )
    if isinstance(out, HeteroSamplerOutput):
        return PyGHeteroSamplerOutput(
            node={k: as_tensor(v) for k, v in out.node.items()},
            row={k: as_tensor(v) for k, v in out.row.items()},
            col={k: as_tensor(v) for k, v in out.col.items()},
            edge={k: _opt_tensor(v) for k, v in out.edge.items()},
            batch=None if out.batch is None else {k: as_tensor(v) for k, v in out.batch.items()},
            num_sampled_nodes=_opt_list_dict(out.num_sampled_nodes),
            num_sampled_edges=_opt_list_dict(out.num_sampled_edges),
            metadata=(as_tensor(out.input_id), _opt_tensor(out.seed_time)),
        )
    raise TypeError(
        "expected a samplers.SamplerOutput or samplers.base.HeteroSamplerOutput "
        f"(got {type(out).__name__})"
    )


def filter_store(
    feature_store: PyGFeatureStore,
    graph_store: PyGGraphStore,
    node: torch.Tensor,
    row: torch.Tensor,
    col: torch.Tensor,
    custom_cls: type | None = None,
) -> Data:
    """PyG's ``filter_custom_store``: a ``Data`` (or ``custom_cls()``) with
    ``edge_index = [row; col]`` and every table the feature store lists, its rows at ``node``,
    fetched by one ``multi_get_tensor`` call with ``TensorAttr(group_name, attr_name,
    index=node)`` each (copies of the store's attributes: PyG sets ``index`` on the store's
    own objects). ``num_nodes`` is set when there is a table. Edge features are not fetched
    (PyG neither). ``graph_store`` is unused, as in PyG.

    Args:
        node: int64 ``[num_nodes]``, global node ids.
        row, col: int64 ``[num_edges]``, local source/destination of each edge.
    """
    data = custom_cls() if custom_cls is not None else Data()
    data.edge_index = torch.stack([row, col], dim=0)
    attrs = []
    for attr in feature_store.get_all_tensor_attrs():
        attr = copy.copy(attr)
        attr.index = node
        attrs.append(attr)
        data.num_nodes = node.size(0)
    for attr, tensor in zip(attrs, _multi_get(feature_store, attrs), strict=True):
        data[attr.attr_name] = tensor
    return data


def filter_hetero_store(
    feature_store: PyGFeatureStore,
    graph_store: PyGGraphStore,
    node_dict: dict[str, torch.Tensor],
    row_dict: dict[EdgeType, torch.Tensor],
    col_dict: dict[EdgeType, torch.Tensor],
    custom_cls: type | None = None,
) -> HeteroData:
    """PyG's ``filter_custom_hetero_store``: a ``HeteroData`` (or ``custom_cls()``) with, for
    every table of a node type in ``node_dict``, its rows at that type's ids (one
    ``multi_get_tensor`` call for all; ``num_nodes`` per such type), and ``edge_index`` for
    every edge type the graph store lists that ``row_dict``/``col_dict`` hold.

    Args:
        node_dict: node type -> int64 ``[num_nodes]`` global ids.
        row_dict, col_dict: edge type -> int64 ``[num_edges]`` local source/destination ids.
    """
    data = custom_cls() if custom_cls is not None else HeteroData()
    attrs = []
    for attr in feature_store.get_all_tensor_attrs():
        if attr.group_name in node_dict:
            attr = copy.copy(attr)
            attr.index = node_dict[attr.group_name]
            attrs.append(attr)
            data[attr.group_name].num_nodes = attr.index.size(0)
    for attr, tensor in zip(attrs, _multi_get(feature_store, attrs), strict=True):
        data[attr.group_name][attr.attr_name] = tensor
    for attr in graph_store.get_all_edge_attrs():
        key = attr.edge_type
        if key in row_dict and key in col_dict:
            data[key].edge_index = torch.stack([row_dict[key], col_dict[key]], dim=0)
    return data


def filter_sampler_output(
    data: Data | HeteroData | tuple[PyGFeatureStore, PyGGraphStore],
    out: PyGOutput,
    edge_permutation: EdgePermutation = None,
    input_type: str | None = None,
    custom_cls: type | None = None,
) -> Data | HeteroData:
    """PyG's ``NodeLoader.filter_fn`` without its ``transform``: joins a PyG sampler output
    with ``data``'s features and adds the batch fields.

    Args:
        data: a ``Data``, a ``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair.
        out: a PyG ``SamplerOutput`` (for a ``Data`` or a homogeneous pair) or
            ``HeteroSamplerOutput`` (for a ``HeteroData`` or a typed pair) whose ``metadata``
            is ``(input_id, seed_time)``.
        edge_permutation: what maps ``out.edge`` to original edge ids (a sampler's
            ``edge_permutation``): an int64 tensor or ``None``, or ``{edge_type: tensor or
            None}``.
        input_type: the seeds' node type, needed for a heterogeneous output.
        custom_cls: the class of the batch built from a pair (PyG's ``custom_cls``).

    Returns:
        The batch: node attributes at ``n_id`` (and, from a ``Data``/``HeteroData``, edge
        attributes at ``perm[edge]``), ``edge_index``, ``n_id``, ``e_id``, ``batch``,
        ``num_sampled_nodes``, ``num_sampled_edges``, ``input_id``, ``seed_time`` and
        ``batch_size`` (per node/edge type and on ``input_type`` when heterogeneous).
    """
    if out.metadata is None or len(out.metadata) < 2:
        raise ValueError(
            f"the sampler's output has no metadata (input_id, seed_time) (got "
            f"{out.metadata!r}); PyG's samplers set it in sample_from_nodes, and "
            "SamplePyGNodes fills it in when a sampler does not"
        )
    input_id, seed_time = out.metadata[0], out.metadata[1]
    if isinstance(out, PyGSamplerOutput):
        if isinstance(data, Data):
            batch = filter_data(data, out.node, out.row, out.col, out.edge, edge_permutation)
        elif isinstance(data, HeteroData):
            raise TypeError(
                "a homogeneous SamplerOutput cannot be joined with a HeteroData: the sampler "
                "must return a HeteroSamplerOutput"
            )
        else:
            batch = filter_store(*check_store_pair(data), out.node, out.row, out.col, custom_cls)
        if "n_id" not in batch:
            batch.n_id = out.node
        if out.edge is not None and "e_id" not in batch:
            edge = out.edge.to(torch.long)
            perm = edge_permutation
            batch.e_id = perm[edge] if perm is not None else edge
        batch.batch = out.batch
        batch.num_sampled_nodes = out.num_sampled_nodes
        batch.num_sampled_edges = out.num_sampled_edges
        if out.orig_row is not None and out.orig_col is not None:
            batch._orig_edge_index = torch.stack([out.orig_row, out.orig_col], dim=0)
        batch.input_id = input_id
        batch.seed_time = seed_time
        batch.batch_size = input_id.size(0)
        return batch

    if not isinstance(out, PyGHeteroSamplerOutput):
        raise TypeError(
            "expected a torch_geometric.sampler.SamplerOutput or HeteroSamplerOutput "
            f"(got {type(out).__name__})"
        )
    if input_type is None:
        raise ValueError("a heterogeneous sampler output needs the seeds' 'input_type'")
    if edge_permutation is not None and not isinstance(edge_permutation, dict):
        raise TypeError(
            "a heterogeneous output's 'edge_permutation' must be a dict edge type -> tensor "
            f"or None (got {type(edge_permutation).__name__})"
        )
    if isinstance(data, HeteroData):
        batch = filter_hetero_data(data, out.node, out.row, out.col, out.edge, edge_permutation)
    elif isinstance(data, Data):
        raise TypeError(
            "a HeteroSamplerOutput cannot be joined with a homogeneous Data: the sampler "
            "must return a SamplerOutput"
        )
    else:
        batch = filter_hetero_store(*check_store_pair(data), out.node, out.row, out.col, custom_cls)
    for key, node in out.node.items():
        if "n_id" not in batch[key]:
            batch[key].n_id = node
    for key, edge in (out.edge or {}).items():
        if edge is not None and "e_id" not in batch[key]:
            edge = edge.to(torch.long)
            perm = edge_permutation
            if perm is not None and perm.get(key, None) is not None:
                edge = perm[key][edge]
            batch[key].e_id = edge
    batch.set_value_dict("batch", out.batch)
    batch.set_value_dict("num_sampled_nodes", out.num_sampled_nodes)
    batch.set_value_dict("num_sampled_edges", out.num_sampled_edges)
    if out.orig_row is not None and out.orig_col is not None:
        for key in out.orig_row:
            batch[key]._orig_edge_index = torch.stack([out.orig_row[key], out.orig_col[key]])
    batch[input_type].input_id = input_id
    batch[input_type].seed_time = seed_time
    batch[input_type].batch_size = input_id.size(0)
    return batch


class GatherRemoteFeatures:
    """Gathering from a PyG ``(FeatureStore, GraphStore)`` pair: our sampler's output -> the
    batch PyG's ``NodeLoader`` builds from that pair.

    A :class:`samplers.SamplerOutput` (homogeneous pair) becomes a ``Data``; a
    :class:`samplers.base.HeteroSamplerOutput` (typed pair) a ``HeteroData``. Node
    attributes are read by one ``multi_get_tensor`` call per batch (:func:`filter_store` /
    :func:`filter_hetero_store`); ``e_id`` is the sampled CSC positions mapped through
    ``graph.edge_permutation``; ``n_id``, ``batch``, ``num_sampled_nodes``,
    ``num_sampled_edges``, ``input_id``, ``seed_time`` and ``batch_size`` as in
    :func:`filter_sampler_output` (on ``out.input_type`` when heterogeneous). Our NumPy
    arrays become tensors by ``torch.from_numpy`` (no copy).

    The outputs must come from a sampler over ``graph``'s CSC arrays (``graph.csc()`` /
    ``graph.graph()``), so that ``edge`` holds positions in them. The feature store's
    ``multi_get_tensor`` is called from the loader's gathering threads, several at once
    when there are several.

    Args:
        graph: the pair, read by :class:`PyGRemoteGraph`.
        custom_cls: the class of each batch (PyG's ``custom_cls``), ``Data``/``HeteroData``
            by default.
    """

    def __init__(self, graph: PyGRemoteGraph, custom_cls: type | None = None):
        if not isinstance(graph, PyGRemoteGraph):
            raise TypeError(f"'graph' must be a PyGRemoteGraph (got {type(graph).__name__})")
        self.graph = graph
        self.custom_cls = custom_cls

    def __call__(self, out: SamplerOutput | HeteroSamplerOutput) -> Data | HeteroData:
        input_type = None
        if isinstance(out, HeteroSamplerOutput):
            if not self.graph.is_hetero:
                raise TypeError(
                    "a HeteroSamplerOutput for a homogeneous (FeatureStore, "
                    "GraphStore) pair: its edges have no types"
                )
            if out.input_type not in self.graph.num_nodes:
                raise ValueError(
                    f"the output's input_type {out.input_type!r} is not a node type of the "
                    f"graph ({self.graph.node_types})"
                )
            input_type = out.input_type
        elif isinstance(out, SamplerOutput) and self.graph.is_hetero:
            raise TypeError(
                "a homogeneous SamplerOutput for a (FeatureStore, GraphStore) "
                "pair with typed edges: sample it heterogeneously"
            )
        return filter_sampler_output(
            (self.graph.feature_store, self.graph.graph_store),
            to_pyg_sampler_output(out),
            self.graph.edge_permutation,
            input_type,
            self.custom_cls,
        )


class SamplePyGNodes:
    """Sampling with a user's PyG sampler: a :class:`BatchRequest` -> what that sampler's
    ``sample_from_nodes`` returns (a PyG ``SamplerOutput`` or ``HeteroSamplerOutput``).

    Each batch calls ``sampler.sample_from_nodes(NodeSamplerInput(input_id, node, time,
    input_type)[index])`` with ``index = request.index`` (positions into the seeds) as PyG's
    ``NodeLoader.collate_fn`` does: ``input_id`` is ``input_ids[index]``, or ``index`` itself
    when ``input_ids`` is ``None``. An output without ``metadata`` gets PyG's
    ``(input_id, time)`` (PyG's own samplers set it in ``node_sample``; PyG's loader would
    raise ``TypeError`` on one that does not).

    Randomness: PyG's interface takes no seed, so ``request.seed`` is not passed on; PyG's
    samplers draw from torch's global random state (``torch.manual_seed`` makes a run
    repeatable with one sampling thread). With several sampling threads the draws interleave
    in no fixed order, and the sampler is called from several threads at once: it must be
    thread-safe, or the loader must sample in one thread.

    Args:
        sampler: a ``torch_geometric.sampler.BaseSampler``.
        input_nodes: int64 ``[num_seeds]`` (tensor, array or list), the seeds' node ids.
        input_ids: optional int64 ``[num_seeds]``, each seed's ``input_id``.
        input_time: optional ``[num_seeds]``, each seed's time (temporal sampling).
        input_type: the seeds' node type for a heterogeneous sampler, else ``None``.
    """

    def __init__(
        self,
        sampler: PyGBaseSampler,
        input_nodes,
        input_ids=None,
        input_time=None,
        input_type: str | None = None,
    ):
        if not isinstance(sampler, PyGBaseSampler):
            hint = (
                ": this is a graphengine sampler, use graphengine.loader.stages.SampleNodes"
                if isinstance(sampler, BaseSampler)
                else ""
            )
            raise TypeError(
                f"'sampler' must be a torch_geometric.sampler.BaseSampler (got "
                f"{type(sampler).__name__}){hint}"
            )
        if input_type is not None and not isinstance(input_type, str):
            raise TypeError(f"'input_type' must be a node type string or None (got {input_type!r})")
        node = _index_vector(input_nodes, "input_nodes")
        input_id = None if input_ids is None else _index_vector(input_ids, "input_ids")
        time = None if input_time is None else _vector(input_time, "input_time")
        for name, value in (("input_ids", input_id), ("input_time", time)):
            if value is not None and value.shape[0] != node.shape[0]:
                raise ValueError(
                    f"'{name}' must hold one entry per seed ({node.shape[0]}), got {value.shape[0]}"
                )
        self.sampler = sampler
        self.input_data = NodeSamplerInput(
            input_id=input_id, node=node, time=time, input_type=input_type
        )

    @classmethod
    def from_loader_args(
        cls,
        sampler: PyGBaseSampler,
        data: Data | HeteroData | tuple[PyGFeatureStore, PyGGraphStore],
        input_nodes=None,
        input_time=None,
        input_id=None,
    ) -> SamplePyGNodes:
        """The stage for PyG ``NodeLoader``'s ``input_nodes`` / ``input_time`` /
        ``input_id`` over ``data``, resolved as PyG's ``get_input_nodes``: ``None`` (all nodes
        of a ``Data``), ids, a boolean mask (``input_id`` = the ids), a node type, or
        ``(node_type, ids or mask or None)``. For a pair, ``(node_type, None)`` seeds all nodes
        of that type (PyG 2.8 asks the stores for the count of type ``None`` instead), and
        ``None`` is refused as PyG does, with a ``ValueError``."""
        if isinstance(input_nodes, np.ndarray):
            input_nodes = torch.from_numpy(input_nodes)
        if (
            isinstance(input_nodes, (tuple, list))
            and len(input_nodes) == 2
            and isinstance(input_nodes[1], np.ndarray)
        ):
            input_nodes = (input_nodes[0], torch.from_numpy(input_nodes[1]))
        if isinstance(data, (Data, HeteroData)):
            if isinstance(data, HeteroData) and input_nodes is None:
                raise ValueError("'input_nodes' must name the seeds' node type for a HeteroData")
            input_type, nodes, ids = get_input_nodes(data, input_nodes, input_id)
        else:
            feature_store, graph_store = check_store_pair(data)
            if input_nodes is None:
                raise ValueError(
                    "'input_nodes' is required for a (FeatureStore, GraphStore) pair (as in "
                    "PyG): ids, a mask, a node type or (node_type, ids)"
                )
            if (
                isinstance(input_nodes, (tuple, list))
                and len(input_nodes) == 2
                and isinstance(input_nodes[0], str)
                and input_nodes[1] is None
            ):
                input_type = input_nodes[0]
                count = remote_backend_utils.num_nodes(feature_store, graph_store, input_type)
                nodes, ids = torch.arange(count), None
            else:
                input_type, nodes, ids = get_input_nodes(data, input_nodes, input_id)
        return cls(sampler, nodes, ids, input_time, input_type)

    @property
    def input_type(self) -> str | None:
        return self.input_data.input_type

    def __call__(self, request: BatchRequest) -> PyGOutput:
        index = as_tensor(np.asarray(request.index, dtype=np.int64))
        inputs = self.input_data[index]
        out = self.sampler.sample_from_nodes(inputs)
        if not isinstance(out, (PyGSamplerOutput, PyGHeteroSamplerOutput)):
            raise TypeError(
                f"{type(self.sampler).__name__}.sample_from_nodes must return a "
                "torch_geometric.sampler.SamplerOutput or HeteroSamplerOutput (got "
                f"{type(out).__name__})"
            )
        if out.metadata is None:
            out.metadata = (inputs.input_id, inputs.time)
        return out


class GatherPyGOutput:
    """Gathering for a PyG sampler: its ``SamplerOutput`` / ``HeteroSamplerOutput`` -> the
    ``Data`` / ``HeteroData`` batch PyG's ``NodeLoader.filter_fn`` builds (see
    :func:`filter_sampler_output`).

    Over a ``Data``/``HeteroData``, node attributes are sliced by PyG's own ``filter_data`` /
    ``filter_hetero_data`` and edge attributes through ``edge_permutation``
    (``value[perm[edge]]``); over a pair, node attributes come from one
    ``multi_get_tensor`` call per batch. Then ``n_id``, ``e_id`` (``perm[edge]``), ``batch``,
    ``num_sampled_nodes``, ``num_sampled_edges``, ``input_id``, ``seed_time`` and
    ``batch_size`` (on ``input_type`` when heterogeneous).

    Args:
        data: the loader's ``Data``, ``HeteroData`` or ``(FeatureStore, GraphStore)`` pair.
        edge_permutation: the sampler's ``edge_permutation``: int64 tensor or ``None``, or
            ``{edge_type: tensor or None}`` for a heterogeneous sampler.
        input_type: the seeds' node type (:attr:`SamplePyGNodes.input_type`) for a
            heterogeneous sampler.
        custom_cls: the class of each batch built from a pair (PyG's ``custom_cls``).
        transform_sampler_output: PyG's ``transform_sampler_output``, applied to each output
            first.
    """

    def __init__(
        self,
        data: Data | HeteroData | tuple[PyGFeatureStore, PyGGraphStore],
        edge_permutation: EdgePermutation = None,
        input_type: str | None = None,
        custom_cls: type | None = None,
        transform_sampler_output: Callable[[PyGOutput], PyGOutput] | None = None,
    ):
        if not isinstance(data, (Data, HeteroData)):
            if isinstance(data, (tuple, list)):
                data = tuple(check_store_pair(data))
            else:
                raise TypeError(
                    "'data' must be a torch_geometric Data, HeteroData or a (FeatureStore, "
                    f"GraphStore) pair (got {type(data).__name__})"
                )
        if isinstance(data, HeteroData) and input_type is None:
            raise ValueError("a HeteroData needs the seeds' node type as 'input_type'")
        if transform_sampler_output is not None and not callable(transform_sampler_output):
            raise TypeError("'transform_sampler_output' must be callable")
        self.data = data
        self.edge_permutation = _permutation(edge_permutation)
        self.input_type = input_type
        self.custom_cls = custom_cls
        self.transform_sampler_output = transform_sampler_output

    def __call__(self, out: PyGOutput) -> Data | HeteroData:
        if self.transform_sampler_output is not None:
            out = self.transform_sampler_output(out)
        return filter_sampler_output(
            self.data, out, self.edge_permutation, self.input_type, self.custom_cls
        )


# Helpers ######################################################################


def describe(value: Any) -> str:
    """What ``value`` is, for error messages: its type, and for a tuple or list its items'."""
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__} of {', '.join(type(v).__name__ for v in value)}"
    return type(value).__name__


def _int64_array(value, what: str) -> np.ndarray:
    """A 1-D int64 NumPy view (or copy, for other integer dtypes) of a tensor or array."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if type(value) is not torch.Tensor:  # PyG's Index / EdgeIndex subclasses
            value = value.as_subclass(torch.Tensor)
        value = value.cpu().numpy()
    array = np.asarray(value)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise TypeError(f"{what} must be a 1-D integer tensor (got {array.dtype} {array.shape})")
    return array.astype(np.int64, copy=False)


def _edge_csc(indptr, indices, perm, num_src: int, num_dst: int, edge_type) -> EdgeCSC:
    """Check one edge type's CSC and pad ``indptr`` to ``num_dst + 1`` entries."""
    where = "the graph" if edge_type is None else f"edge type {edge_type}"
    num_edges = indices.shape[0]
    if indptr.shape[0] < 1 or indptr[0] != 0 or indptr[-1] != num_edges:
        raise ValueError(
            f"{where}: colptr must run from 0 to num_edges = {num_edges} (got "
            f"{indptr[:1].tolist()} ... {indptr[-1:].tolist()})"
        )
    if indptr.shape[0] - 1 > num_dst:
        raise ValueError(
            f"{where}: colptr covers {indptr.shape[0] - 1} destination nodes, more than the "
            f"{num_dst} nodes counted for its destination type"
        )
    if indptr.shape[0] - 1 < num_dst:
        indptr = np.concatenate([indptr, np.full(num_dst + 1 - indptr.shape[0], num_edges)])
    if indptr.shape[0] > 1 and np.diff(indptr).min() < 0:
        raise ValueError(f"{where}: colptr must be non-decreasing")
    if num_edges and (indices.min() < 0 or indices.max() >= num_src):
        bad = int(indices.min()) if indices.min() < 0 else int(indices.max())
        raise ValueError(
            f"{where}: source id {bad} is outside [0, {num_src}) for its source node type"
        )
    if perm is not None:
        perm = _int64_array(perm, f"{where}: perm from graph_store.csc()")
        if perm.shape[0] != num_edges:
            raise ValueError(f"{where}: perm has {perm.shape[0]} entries, not {num_edges}")
        if num_edges and (perm.min() < 0 or perm.max() >= num_edges):
            raise ValueError(f"{where}: perm holds an edge id outside [0, {num_edges})")
    return EdgeCSC(indptr, indices, perm, int(num_src), int(num_dst))


def _opt_tensor(value) -> torch.Tensor | None:
    return None if value is None else as_tensor(value)


def _opt_list(value) -> list | None:
    return None if value is None else list(value)


def _opt_list_dict(value) -> dict | None:
    return None if value is None else {k: list(v) for k, v in value.items()}


def _vector(value, name: str) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = as_tensor(value)
    elif not isinstance(value, torch.Tensor):
        value = torch.as_tensor(value)
    if value.dim() != 1:
        raise ValueError(f"'{name}' must be 1-D (got shape {tuple(value.shape)})")
    return value


def _index_vector(value, name: str) -> torch.Tensor:
    value = _vector(value, name)
    if value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
        raise TypeError(f"'{name}' must hold integer ids (got {value.dtype})")
    return value.to(torch.long)


def _permutation(value) -> EdgePermutation:
    if value is None or isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return as_tensor(value)
    if isinstance(value, dict):
        return {k: _permutation(v) for k, v in value.items()}
    raise TypeError(
        "'edge_permutation' must be a tensor, None, or a dict edge type -> tensor or None "
        f"(got {type(value).__name__})"
    )


def _multi_get(feature_store: PyGFeatureStore, attrs: list) -> list:
    tensors = feature_store.multi_get_tensor(attrs)
    if len(tensors) != len(attrs):
        raise ValueError(
            f"{type(feature_store).__name__}.multi_get_tensor returned {len(tensors)} tensors "
            f"for {len(attrs)} attributes"
        )
    return tensors
