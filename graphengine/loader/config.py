"""The typed options every sampling loader is built from: :class:`SamplingConfig` (what is
drawn) and :class:`LoadingConfig` (how seeds are batched and batches loaded). Each public
loader turns its PyG-style keyword arguments into these two, validated here once, and
composes its stages from them."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch_geometric.sampler.base import NumNeighbors

from graphengine.data.feature_dtype import check_batch_feature_dtype
from graphengine.loader.seeds import check_seed
from samplers import check_fanouts
from samplers.neighbor import SUBGRAPH_TYPES, TEMPORAL_STRATEGIES

SAMPLER_KINDS = ("neighbor", "labor")

# DataLoader options of worker processes: accepted and ignored (threads cost nothing to keep).
DATALOADER_ARGS_IGNORED = ("persistent_workers", "timeout", "multiprocessing_context")


@dataclass(frozen=True)
class SamplingConfig:
    """What a neighbor-sampling loader draws for each seed.

    Attributes:
        num_neighbors: neighbors per node for each hop (``-1`` for all): a tuple of ints; for
            heterogeneous data also a dict ``{edge type: list}`` or PyG's ``NumNeighbors``,
            resolved against the data's edge types when the sampler is built.
        kind: ``"neighbor"`` (node-wise, :class:`samplers.NeighborSampler`) or ``"labor"``
            (layer-neighbor, :class:`samplers.LaborSampler`).
        replace: sample with replacement.
        disjoint: each seed its own tree.
        subgraph_type: ``"directional"``, ``"bidirectional"`` or ``"induced"``.
        temporal_strategy: ``"uniform"`` or ``"last"``.
        time_attr: the node- or edge-level attribute of times, or ``None``.
        weight_attr: the edge-level attribute of weights, or ``None``.
        importance_sampling: LABOR's fixed-point iterations (0 none, -1 until converged).
        layer_dependency: LABOR: every hop reuses the first hop's variates.

    Raises:
        ValueError: a field outside its values (named, with the value), or a node-wise option
            set for ``kind="labor"``.
        TypeError: ``num_neighbors`` is not a sequence of ints, a dict or ``NumNeighbors``.
    """

    num_neighbors: Any
    kind: str = "neighbor"
    replace: bool = False
    disjoint: bool = False
    subgraph_type: str = "directional"
    temporal_strategy: str = "uniform"
    time_attr: str | None = None
    weight_attr: str | None = None
    importance_sampling: int = 0
    layer_dependency: bool = False

    def __post_init__(self):
        # PyG's SubgraphType is an enum whose value is the name.
        subgraph_type = getattr(self.subgraph_type, "value", self.subgraph_type)
        object.__setattr__(self, "subgraph_type", subgraph_type)
        if not isinstance(self.num_neighbors, (Mapping, NumNeighbors)):
            fanouts = check_fanouts(self.num_neighbors, "num_neighbors")
            object.__setattr__(self, "num_neighbors", fanouts)
        _one_of("kind", self.kind, SAMPLER_KINDS)
        _one_of("subgraph_type", subgraph_type, SUBGRAPH_TYPES)
        _one_of("temporal_strategy", self.temporal_strategy, TEMPORAL_STRATEGIES)
        for name in ("time_attr", "weight_attr"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"'{name}' must be an attribute name or None (got {value!r})")
        if self.kind == "labor":
            self._check_layer_wise()

    def _check_layer_wise(self) -> None:
        """LABOR draws one variate per candidate and hop, shared by every seed: the
        node-wise options have no meaning for it."""
        for field in fields(self):
            if field.name in ("num_neighbors", "kind", "importance_sampling", "layer_dependency"):
                continue
            value = getattr(self, field.name)
            if value != field.default:
                raise ValueError(
                    f"LaborLoader does not take {field.name}={value!r}: it is an option of "
                    "node-wise sampling (kind='neighbor'); use NeighborLoader for it"
                )

    def fanouts(self, edge_types=None):
        """``num_neighbors`` as the sampler takes it: a tuple, or for ``edge_types`` (a
        heterogeneous graph's) a tuple or dict, PyG's ``NumNeighbors`` resolved by its own
        rules (its ``default`` for the edge types its dict lacks)."""
        if not isinstance(self.num_neighbors, NumNeighbors):
            return self.num_neighbors
        if edge_types is None:
            return check_fanouts(self.num_neighbors.values, "num_neighbors")
        return self.num_neighbors.get_values(edge_types)


@dataclass(frozen=True)
class LoadingConfig:
    """How a loader cuts its seeds into batches and loads them.

    Attributes:
        batch_size: seeds per batch.
        shuffle: reshuffle the seeds every epoch.
        drop_last: drop the last, incomplete batch.
        seed: base random seed, an int (NumPy's included); ``None`` draws one per epoch from
            torch's global generator.
        num_workers: sampling threads; 0 loads every batch in the caller's thread.
        prefetch: batches in flight per sampling thread.
        device: where batches go (the CPU or a CUDA GPU), or ``None``; a CUDA device needs
            CUDA.
        pin_memory: gather features into pinned memory.
        feature_dtype: the dtype gathered floating feature rows are handed over in; ``None``
            hands a float16 table's rows over as float32
            (:func:`graphengine.data.feature_dtype.as_batch_dtype`).
        rank, world_size: this rank's share of each epoch's seeds (data-parallel training).
        filter_per_worker: gather in the sampling threads (else in one thread of its own).

    Raises:
        ValueError: a field outside its values (named, with the value).
    """

    batch_size: int = 1
    shuffle: bool = False
    drop_last: bool = False
    seed: int | None = None
    num_workers: int = 1
    prefetch: int = 2
    device: torch.device | None = None
    pin_memory: bool = False
    feature_dtype: torch.dtype | None = None
    rank: int = 0
    world_size: int = 1
    filter_per_worker: bool = True

    def __post_init__(self):
        _int_at_least("batch_size", self.batch_size, 1, "a positive int")
        _int_at_least("num_workers", self.num_workers, 0, "an int >= 0")
        _int_at_least("prefetch", self.prefetch, 1, "an int >= 1")
        object.__setattr__(self, "seed", check_seed(self.seed))
        check_batch_feature_dtype(self.feature_dtype)
        if self.device is not None:
            object.__setattr__(self, "device", check_device(self.device))

    @property
    def threads(self) -> int:
        """Threads per stage of the pipeline (``num_workers``, at least one)."""
        return max(self.num_workers, 1)

    @property
    def in_flight(self) -> int:
        """Batches being loaded or waiting for the caller at any time."""
        return self.prefetch * self.threads

    @property
    def copies_to_cuda(self) -> bool:
        return self.device is not None and self.device.type == "cuda"


def loading_config(loader: str, options: dict) -> LoadingConfig:
    """The :class:`LoadingConfig` of a loader named ``loader`` from its keyword arguments
    ``options``: the fields of :class:`LoadingConfig` by name, ``filter_per_worker=None``
    as ``True`` (PyG's default on the CPU), ``pin_memory`` dropped with a warning where CUDA
    is not available (as torch's ``DataLoader`` does), torch ``DataLoader`` options as
    :func:`dataloader_options` takes them; any other is a ``TypeError`` naming it."""
    options = dict(options)
    chosen = {f.name: options.pop(f.name) for f in fields(LoadingConfig) if f.name in options}
    chosen["prefetch"] = dataloader_options(options, chosen.get("prefetch", 2), loader)
    if chosen.get("pin_memory") and not torch.cuda.is_available():
        warnings.warn(
            "'pin_memory=True' needs CUDA and torch.cuda.is_available() is False: batches "
            "are gathered into ordinary memory",
            UserWarning,
            stacklevel=3,
        )
        chosen["pin_memory"] = False
    if chosen.get("filter_per_worker") is None:
        chosen["filter_per_worker"] = True
    chosen["filter_per_worker"] = bool(chosen["filter_per_worker"])
    return LoadingConfig(**chosen)


def subgraph_type_of(subgraph_type, directed: bool) -> str:
    """``subgraph_type`` with PyG's deprecated ``directed=False`` (``"induced"``) applied."""
    if directed:
        return subgraph_type
    warnings.warn(
        "'directed' is deprecated (as in PyG): use subgraph_type='induced' instead",
        DeprecationWarning,
        stacklevel=3,
    )
    return "induced"


def dataloader_options(kwargs: dict, prefetch: int, loader: str) -> int:
    """The ``prefetch`` a thread loader runs with, from torch ``DataLoader`` options in
    ``kwargs``: ``prefetch_factor`` taken as ``prefetch``, the options of worker processes
    (:data:`DATALOADER_ARGS_IGNORED`) dropped; any other left is a ``TypeError`` naming it."""
    if "prefetch_factor" in kwargs:
        prefetch = kwargs.pop("prefetch_factor")
    for name in DATALOADER_ARGS_IGNORED:
        kwargs.pop(name, None)
    if kwargs:
        raise TypeError(
            f"{loader} got arguments it does not support: {sorted(kwargs)}; loading runs in "
            "threads, so worker-process options do not apply"
        )
    return prefetch


def _one_of(name: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"'{name}' must be one of {allowed} (got {value!r})")


def check_device(device) -> torch.device:
    """``device`` as a ``torch.device`` batches can be moved to and used on: the CPU (where
    they are built) or a CUDA GPU. Refused here rather than deep inside torch, or silently
    ignored: the loaders copy batches to a GPU only, so a ``"meta"`` (or any other) device
    would hand out CPU batches.

    Raises:
        ValueError: not a device, a device other than the CPU or CUDA, or a CUDA device
            without CUDA; naming ``device`` and its value.
    """
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"'device' must be a torch device or its name (got {device!r})") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(
            f"'device' must be 'cpu' or a CUDA device ('cuda', 'cuda:N') (got {str(device)!r}): "
            "batches are built on the CPU and copied to a GPU only"
        )
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={str(device)!r} needs CUDA, and torch.cuda.is_available() is False"
        )
    return device


def _int_at_least(name: str, value, low: int, description: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"'{name}' must be {description} (got {value!r})")
