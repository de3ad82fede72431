"""The stages every loader composes: seeds -> sample -> gather -> transform -> copy.

Each stage is a small callable with one job, taking the previous stage's item and returning
the next; :class:`~graphengine.loader.pipeline.Pipeline` runs them in threads, or a loader
calls them in turn in the caller's thread. A new loader (link prediction, subgraphs,
distributed sampling) reuses these and adds its own where it differs.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine import ops
from graphengine.data.arrays import as_tensor
from graphengine.data.feature_dtype import as_batch_dtype, check_batch_feature_dtype
from graphengine.data.feature_store import FeatureStore
from graphengine.data.memory import available_memory
from graphengine.loader.device_sampling import as_device_tensor
from graphengine.loader.seeds import BatchRequest
from samplers import BaseSampler, SamplerInput, SamplerOutput, as_edge_index

# Batches whose host-gathered rows take less than this are gathered without asking how much
# memory is left.
CHECKED_BATCH_BYTES = 256 << 20


class SampleNodes:
    """Sampling: a :class:`BatchRequest` -> the sampler's :class:`SamplerOutput`.

    Args:
        sampler: any :class:`samplers.BaseSampler`.
        input_nodes: int64 ``[num_seeds]``, the loader's seed node ids.
        input_ids: int64 ``[num_seeds]``, each seed's ``input_id``.
        input_times: optional int64 ``[num_seeds]``, each seed's time (temporal sampling).
        input_type: the seeds' node type (heterogeneous graphs), else ``None``.
    """

    def __init__(
        self,
        sampler: BaseSampler,
        input_nodes: np.ndarray,
        input_ids: np.ndarray,
        input_times: np.ndarray | None = None,
        input_type: str | None = None,
    ):
        self.sampler = sampler
        self.input_nodes = input_nodes
        self.input_ids = input_ids
        self.input_times = input_times
        self.input_type = input_type

    def __call__(self, request: BatchRequest) -> SamplerOutput:
        return self.sampler.sample_from_nodes(
            SamplerInput(
                node=self.input_nodes[request.index],
                input_id=self.input_ids[request.index],
                seed=request.seed,
                time=None if self.input_times is None else self.input_times[request.index],
                input_type=self.input_type,
            )
        )


class InWorkerThreads:
    """``stage`` as a pipeline's worker threads run it: each thread first takes its share of
    torch's intra-op threads (:func:`graphengine.ops.set_intraop_threads`), so that several
    gathering threads share the cores instead of each sizing its parallel gathers to all of
    them; the caller's thread and torch's process-wide count are left alone.

    Args:
        stage: the stage function.
        torch_threads: intra-op threads for each worker thread (>= 1).
    """

    def __init__(self, stage: Callable[[Any], Any], torch_threads: int):
        self.stage = stage
        self.torch_threads = torch_threads
        self._ready = threading.local()

    def __call__(self, item: Any) -> Any:
        if not getattr(self._ready, "done", False):
            ops.set_intraop_threads(self.torch_threads)
            self._ready.done = True
        return self.stage(item)


class Transform:
    """The user's ``transform`` on each batch. Loaders run it in the caller's thread as each
    batch is handed over, so that its random draws interleave with the caller's exactly as
    they would without threads."""

    def __init__(self, function: Callable[[Data], Any]):
        if not callable(function):
            raise TypeError(f"'transform' must be callable (got {type(function).__name__})")
        self.function = function

    def __call__(self, data: Data) -> Any:
        return self.function(data)


class CopyToDevice:
    """Copying: moves a batch to a CUDA device on a side stream, in its own thread.

    Tensors already on ``device`` (rows gathered there from a GPU cache or by zero-copy, see
    :class:`GatherFeatures`) are not copied; they are made safe to use on the consumer's
    stream like the copied ones. The batch given is left as it was (PyG's ``Data.to`` moves
    its tensors in place, so a shallow copy of the batch is moved).
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"CopyToDevice: 'device' must be a CUDA device (got {self.device})")
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.stream = torch.cuda.Stream(self.device)
        self.consumer_stream = torch.cuda.default_stream(self.device)

    def __call__(self, data: Data) -> Data:
        # Whatever the gather stage queued on this device (zero-copy or cached gathers on the
        # current stream) must be done before this stream reads it.
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            moved = copy.copy(data).to(self.device, non_blocking=True)
        self.stream.synchronize()
        for store in moved.stores:  # one for a Data, one per type for a HeteroData
            for value in store.values():
                if isinstance(value, torch.Tensor) and value.is_cuda:
                    value.record_stream(self.consumer_stream)
        return moved


class GatherFeatures:
    """Gathering: a :class:`SamplerOutput` -> a ``Data`` with node attributes gathered by
    ``n_id`` and edge attributes by ``e_id``.

    Each table takes one of three paths (:meth:`placement`):

    - cached on a device (``FeatureStore.enable_cache``): the ids go to the cache's device and
      the cached gather writes the rows there (hot rows from the cache, the others read by
      zero-copy from the pinned table); no host buffer;
    - pinned (``FeatureStore.pin_memory_``) while the batch goes to the CUDA ``device``: the ids
      go to that GPU and the zero-copy gather writes the rows straight into its memory;
    - otherwise on the host, into pinned memory when ``pin_memory``.

    Ids are checked on the host before they are copied to a GPU, so that a bad id is an
    ``IndexError``, not the CUDA kernels' device-side assertion. The output of a sampler on
    the GPU (``SamplerOutput.on_device``) is read where it is, without a copy: its ids are on
    that GPU already, valid by construction, and gathered there (the loader pins the tables
    for it); for a batch that does not go to a GPU it is copied to the host first.

    Args:
        nodes: the node-level tables, gathered through the extension.
        edges: the edge-level tables (indexed by original edge id), or ``None``.
        other_attrs: name -> value copied into every batch unchanged.
        edge_ids: optional int64 ``[num_edges]``: the original edge id of each CSC position.
        odd_attrs: name -> (value, dim, "node" or "edge") for attributes indexed along a
            dimension other than 0, gathered with ``index_select``.
        pin_memory: gather the host-path tables into pinned memory (needs CUDA), for fast
            copies.
        device: where the batch goes (the loader's ``device``), or ``None``: pinned tables
            are gathered on the GPU only when this is a CUDA device.
        feature_dtype: the dtype the node and edge tables' floating rows are handed over in,
            cast after the gather on its device (so a float16 table's half bytes are what
            is read): ``None`` hands float16 rows over as float32
            (:func:`graphengine.data.feature_dtype.as_batch_dtype`).
    """

    def __init__(
        self,
        nodes: FeatureStore | None,
        edges: FeatureStore | None = None,
        other_attrs: dict | None = None,
        edge_ids: np.ndarray | None = None,
        odd_attrs: dict | None = None,
        pin_memory: bool = False,
        device: torch.device | str | None = None,
        feature_dtype: torch.dtype | None = None,
    ):
        self.nodes = nodes
        self.edges = edges
        self.other_attrs = other_attrs or {}
        self.edge_ids = None if edge_ids is None else as_tensor(edge_ids)
        self._edge_ids_by_device: dict[torch.device, torch.Tensor] = {}
        self.odd_attrs = odd_attrs or {}
        self.pin_memory = pin_memory
        self.device = device
        self.feature_dtype = check_batch_feature_dtype(feature_dtype)
        self.tables_pinned = False

    def pin_tables(self) -> None:
        """Page-lock the node and edge tables (``FeatureStore.pin_memory_``), so that a GPU
        gathers them by zero-copy with ids it holds (a loader sampling on the GPU does)."""
        self.tables_pinned = True
        for store in (self.nodes, self.edges):
            if store is not None:
                store.pin_memory_()

    @property
    def device(self) -> torch.device | None:
        return self._device

    @device.setter
    def device(self, device: torch.device | str | None) -> None:
        self._device = None if device is None else torch.device(device)

    def placement(self, store: FeatureStore, key: str) -> torch.device | None:
        """The device table ``key`` of ``store`` is gathered on, or ``None`` for the host path.

        A cached table: its cache's device when that is a GPU (the cached gather only runs
        there). A pinned table: the CUDA ``device`` the batch goes to. Otherwise ``None``.
        """
        cache_device = store.cache_device(key)
        if cache_device is not None:
            return cache_device if cache_device.type == "cuda" else None
        if self.device is not None and self.device.type == "cuda" and store[key].is_pinned():
            return self.device
        return None

    def __call__(self, out: SamplerOutput) -> Data:
        if out.on_device and not (self.device is not None and self.device.type == "cuda"):
            out = out.to_host()  # sampled on a GPU for a batch that goes elsewhere
        n_id = as_device_tensor(out.node)
        edge = as_device_tensor(out.edge)
        e_id = edge if self.edge_ids is None else self._edge_ids_on(edge.device)[edge]
        if out.on_device:
            edge_index = torch.stack([as_device_tensor(out.row), as_device_tensor(out.col)])
        else:
            edge_index = torch.from_numpy(as_edge_index(out.row, out.col))
        data = Data(edge_index=edge_index)
        self._check_fits(out.batch_size, n_id.shape[0], e_id.shape[0])
        for store, index in ((self.nodes, n_id), (self.edges, e_id)):
            on_device = {index.device: index}  # index copied once per device
            for key in store.keys() if store is not None else ():
                device = self.placement(store, key) or torch.device("cpu")
                if device not in on_device:
                    if index.device.type == "cpu":  # an IndexError here, not a device assert
                        ops.check_index(index, store.num_nodes)
                    on_device[device] = index.to(device, non_blocking=device.type == "cuda")
                ids = on_device[device]
                if device.type == "cpu":
                    rows = store.gather(key, ids, self._pinned(store[key], ids))
                else:
                    rows = store.gather(key, ids)
                data[key] = as_batch_dtype(rows, self.feature_dtype)
        for key, (value, dim, level) in self.odd_attrs.items():
            value = as_tensor(value)
            index = n_id if level == "node" else e_id
            data[key] = value.index_select(dim, index.to(value.device))
        for key, value in self.other_attrs.items():
            data[key] = value
        data.num_nodes = int(out.node.shape[0])
        data.n_id = n_id
        data.e_id = e_id
        add_batch_fields(data, out)
        return data

    def _check_fits(self, batch_size: int, num_nodes: int, num_edges: int) -> None:
        """Refuse a batch whose host-gathered rows would take more memory than this process
        can still take (:func:`graphengine.data.memory.available_memory`), naming its size,
        instead of an allocation failing inside the gather (``std::bad_alloc``). Batches
        under :data:`CHECKED_BATCH_BYTES` are not checked (the check reads ``/proc``)."""
        needed = 0
        for store, rows in ((self.nodes, num_nodes), (self.edges, num_edges)):
            for key in store.keys() if store is not None else ():
                if self.placement(store, key) is None:
                    table = store[key]
                    needed += rows * table[0:1].numel() * table.element_size()
        if needed < CHECKED_BATCH_BYTES:
            return
        available = available_memory()
        if available is not None and needed > available:
            gib = 1 << 30
            raise MemoryError(
                f"a batch of {batch_size} seeds reached {num_nodes} nodes and {num_edges} "
                f"edges, whose rows take {needed / gib:.1f} GiB, more than the "
                f"{available / gib:.1f} GiB this process can still take: lower the fanouts "
                "(-1 takes every neighbor) or the batch size"
            )

    def _edge_ids_on(self, device: torch.device) -> torch.Tensor:
        """``edge_ids`` on ``device``, copied there once."""
        if device == self.edge_ids.device:
            return self.edge_ids
        if device not in self._edge_ids_by_device:
            self._edge_ids_by_device[device] = self.edge_ids.to(device)
        return self._edge_ids_by_device[device]

    def _pinned(self, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor | None:
        """A pinned output buffer for ``table``'s rows at ``index`` (torch caches pinned
        allocations), or ``None`` to let the gather allocate."""
        if not self.pin_memory:
            return None
        shape = (index.shape[0], *table.shape[1:])
        return torch.empty(shape, dtype=table.dtype, pin_memory=True)


def add_batch_fields(data, out: SamplerOutput) -> None:
    """The fields PyG's ``NodeLoader`` adds to a homogeneous batch beside the attributes:
    ``input_id``, ``batch_size``, and where the sampler gives them ``batch`` (disjoint trees),
    ``seed_time`` (temporal), ``num_sampled_nodes``/``num_sampled_edges`` (per-hop counts,
    absent for bidirectional and induced subgraphs, as in PyG) and ``sampling_weight`` (each
    sampled edge's weight for a mean over the kept neighbors, from LABOR with importance
    sampling; PyG has no such field)."""
    data.input_id = torch.from_numpy(out.input_id)
    data.batch_size = out.batch_size
    if out.batch is not None:
        data.batch = as_device_tensor(out.batch)
    if out.seed_time is not None:
        data.seed_time = torch.from_numpy(out.seed_time)
    if out.num_sampled_nodes is not None:
        data.num_sampled_nodes = list(out.num_sampled_nodes)
        data.num_sampled_edges = list(out.num_sampled_edges)
    if out.edge_weight is not None:
        data.sampling_weight = torch.from_numpy(out.edge_weight)
