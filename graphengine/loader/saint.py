"""GraphSAINT (Zeng et al., ICLR 2020): loaders of subgraphs induced by sampled nodes, with
the normalization coefficients ``node_norm`` and ``edge_norm``, as drop-ins for PyG's
``GraphSAINTNodeSampler``, ``GraphSAINTEdgeSampler`` and ``GraphSAINTRandomWalkSampler``."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from tqdm import tqdm

from graphengine.data.computed_cache import cache_key, read_cached, write_cached
from graphengine.loader.adapters import as_numpy, check_attribute_rows
from graphengine.loader.config import loading_config
from graphengine.loader.pipeline import Stage, StagedLoader, copy_stages
from graphengine.loader.seeds import BatchRequest, SeedBatches
from samplers.saint import (
    SaintGraph,
    cumulative_probabilities,
    edge_probabilities,
    edge_selection,
    node_selection,
    walk_selection,
)

logger = logging.getLogger(__name__)


class GraphSAINTSampler(StagedLoader):
    """``num_steps`` subgraphs an epoch, each induced by a sampled set of nodes, as PyG's
    ``GraphSAINTSampler``: a ``Data`` with the nodes (ascending original ids) and every edge
    between them (row-major: by source, then in original order), every tensor attribute with
    ``num_nodes`` rows sliced by the nodes and every one with ``num_edges`` rows by the edges,
    others kept; with ``sample_coverage``, also ``node_norm`` (float32, the loss weight of
    each node) and ``edge_norm`` (float32, the aggregation weight of each edge), estimated as
    PyG does from subgraphs drawn until the nodes were sampled ``sample_coverage`` times on
    average.

    Subclasses say how the nodes are drawn (:meth:`_select`). A batch's draws follow from its
    seed (``seed`` and the step), whatever the threads.

    Args:
        data: a PyG ``Data`` with ``edge_index``.
        batch_size: the sampling budget (edges, or walks' roots; see the subclasses).
        num_steps: subgraphs per epoch.
        sample_coverage: samples per node for the coefficients (0: none).
        save_dir: a directory to cache the coefficients in, and read them from, in a file
            named by the sampler, ``sample_coverage`` and a digest of the edges and every
            argument the coefficients depend on (another graph or other arguments never read
            it). A cache file that is damaged or not this graph's is logged as a warning and
            overwritten with coefficients computed again.
        log: show the coefficients' progress.
        seed: the base seed; ``None`` draws one per epoch from torch's global generator.
        num_workers: threads building subgraphs; 0 builds them in the caller's thread.
        prefetch: subgraphs in flight per thread (also as ``prefetch_factor``).
        device: where batches go; a CUDA device adds a copy stage on a side stream.
    """

    def __init__(
        self,
        data: Data,
        batch_size: int,
        num_steps: int = 1,
        sample_coverage: int = 0,
        save_dir: str | Path | None = None,
        log: bool = True,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        device: str | torch.device | None = None,
        **kwargs,
    ):
        if not isinstance(data, Data) or getattr(data, "edge_index", None) is None:
            raise TypeError(
                f"'data' must be a torch_geometric Data with an 'edge_index' "
                f"(got {type(data).__name__})"
            )
        check_attribute_rows(data)
        for name in ("node_norm", "edge_norm"):
            if name in data:
                raise ValueError(f"'data' already has '{name}', which GraphSAINT writes")
        for name, value, low in (
            ("batch_size", batch_size, 1),
            ("num_steps", num_steps, 1),
            ("sample_coverage", sample_coverage, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"'{name}' must be an int >= {low} (got {value!r})")
        loading = loading_config(
            type(self).__name__,
            {**kwargs, "seed": seed, "num_workers": num_workers, "prefetch": prefetch},
        )
        copy = copy_stages(device)
        self.data = data
        self.N = int(data.num_nodes)
        self.E = int(data.num_edges)
        self.graph = SaintGraph(as_numpy(data.edge_index), self.N)
        self.budget = batch_size
        self.num_steps = num_steps
        self.sample_coverage = sample_coverage
        self.num_workers = num_workers
        self.seed = seed
        self.node_norm = self.edge_norm = None
        if sample_coverage > 0:
            path = None if save_dir is None else Path(save_dir) / self._cache_name()
            if path is not None:
                self.node_norm, self.edge_norm = _read_norms(path, self.N, self.E)
            if self.node_norm is None:
                self.node_norm, self.edge_norm = self._compute_norm(log)
                if path is not None:
                    write_cached(path, node_norm=self.node_norm, edge_norm=self.edge_norm)
        batches = SeedBatches(num_steps, 1, False, False, seed)
        stage = Stage("subgraph", self._subgraph, loading.threads)
        self._set_stages(batches, [stage, *copy], loading.in_flight)

    def _cache_name(self) -> str:
        """The coefficients' cache file name: the sampler's, then a digest of all they are
        computed from (the edges in their order, which ``edge_norm`` follows, and every
        argument of the draws)."""
        key = cache_key(self._draw_arguments(), as_numpy(self.data.edge_index))
        return f"{type(self).__name__.lower()}_{self.sample_coverage}_{key}.npz"

    def _draw_arguments(self) -> dict:
        """What the coverage draws depend on besides the edges (subclasses add theirs)."""
        return {
            "sampler": type(self).__name__,
            "num_nodes": self.N,
            "batch_size": self.budget,
            "num_steps": self.num_steps,
            "sample_coverage": self.sample_coverage,
            "seed": 0 if self.seed is None else self.seed,  # as _compute_norm draws them
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _select(self, rng: np.random.Generator) -> np.ndarray:
        """The nodes of one subgraph (int64, ascending, distinct)."""
        raise NotImplementedError

    def _subgraph(self, request: BatchRequest) -> Data:
        nodes = self._select(np.random.default_rng(request.seed))
        row, col, edges = self.graph.induced(nodes)
        out = Data(num_nodes=int(nodes.shape[0]))
        out.edge_index = torch.from_numpy(np.stack([row, col]))
        node_index, edge_index = torch.from_numpy(nodes), torch.from_numpy(edges)
        for key, value in self.data.items():  # PyG's rule: rows counted, not attribute levels
            if key in ("edge_index", "num_nodes"):
                continue
            if isinstance(value, torch.Tensor) and value.dim() and value.size(0) == self.N:
                out[key] = value[node_index]
            elif isinstance(value, torch.Tensor) and value.dim() and value.size(0) == self.E:
                out[key] = value[edge_index]
            else:
                out[key] = value
        if self.node_norm is not None:
            out.node_norm = torch.from_numpy(self.node_norm[nodes])
            out.edge_norm = torch.from_numpy(self.edge_norm[edges])
        return out

    def _compute_norm(self, log: bool) -> tuple[np.ndarray, np.ndarray]:
        """PyG's estimate: draw subgraphs (``num_steps`` at a time) until ``sample_coverage *
        num_nodes`` nodes were drawn; ``node_norm[v] = samples / count(v) / num_nodes``
        (counts of 0 taken as 0.1) and ``edge_norm[e] = count(source of e) / count(e)``
        (clamped to ``[0, 1e4]``; 0.1 for an edge never drawn)."""
        node_count = np.zeros(self.N, dtype=np.float64)
        edge_count = np.zeros(self.E, dtype=np.float64)
        base = 0 if self.seed is None else self.seed
        progress = tqdm(
            total=self.N * self.sample_coverage,
            desc="Compute GraphSAINT normalization",
            disable=not log,
        )
        num_samples = drawn = 0
        while drawn < self.N * self.sample_coverage:
            before = drawn
            for _ in range(self.num_steps):
                rng = np.random.default_rng([base, 1 << 40, num_samples])
                nodes = self._select(rng)
                _, _, edges = self.graph.induced(nodes)
                node_count[nodes] += 1
                edge_count[edges] += 1
                drawn += nodes.shape[0]
                progress.update(nodes.shape[0])
                num_samples += 1
            if drawn == before:
                progress.close()
                raise ValueError(
                    f"sample_coverage={self.sample_coverage}: {self.num_steps} subgraphs drew "
                    f"no node of this graph ({self.N} nodes, {self.E} edges), so the coverage "
                    "is never reached; use sample_coverage=0 for a graph without edges"
                )
        progress.close()
        with np.errstate(divide="ignore", invalid="ignore"):
            edge_norm = np.clip(node_count[self.graph.row] / edge_count, 0, 1e4)
        edge_norm[np.isnan(edge_norm)] = 0.1
        node_count[node_count == 0] = 0.1
        node_norm = num_samples / node_count / self.N
        return node_norm.astype(np.float32), edge_norm.astype(np.float32)


class GraphSAINTNodeSampler(GraphSAINTSampler):
    """GraphSAINT's node sampler, as PyG's: the sources of ``batch_size`` edges drawn
    uniformly with replacement (a node in proportion to its out-degree)."""

    def _select(self, rng: np.random.Generator) -> np.ndarray:
        return node_selection(self.graph, self.budget, rng)


class GraphSAINTEdgeSampler(GraphSAINTSampler):
    """GraphSAINT's edge sampler, as PyG's: both ends of ``batch_size`` edges drawn with
    replacement in proportion to PyG's weights (:func:`samplers.saint.edge_probabilities`)."""

    def __init__(self, data: Data, batch_size: int, *args, **kwargs):
        self._cumulative = None
        super().__init__(data, batch_size, *args, **kwargs)
        self._edge_cumulative()  # now, not in each of the loader's threads

    def _edge_cumulative(self) -> np.ndarray:
        """The edges' cumulative probabilities (float64 ``[num_edges]``), summed once."""
        if self._cumulative is None:
            self._cumulative = cumulative_probabilities(edge_probabilities(self.graph))
        return self._cumulative

    def _select(self, rng: np.random.Generator) -> np.ndarray:
        return edge_selection(self.graph, self.budget, rng, self._edge_cumulative())


class GraphSAINTRandomWalkSampler(GraphSAINTSampler):
    """GraphSAINT's random-walk sampler, as PyG's: every node of ``batch_size`` walks of
    ``walk_length`` steps along out-edges from uniformly drawn roots (a node without
    out-edges stays put).

    Args:
        walk_length: steps per walk (>= 0).
    """

    def __init__(self, data: Data, batch_size: int, walk_length: int, *args, **kwargs):
        if isinstance(walk_length, bool) or not isinstance(walk_length, int) or walk_length < 0:
            raise ValueError(f"'walk_length' must be an int >= 0 (got {walk_length!r})")
        self.walk_length = walk_length
        super().__init__(data, batch_size, *args, **kwargs)

    def _draw_arguments(self) -> dict:
        return {**super()._draw_arguments(), "walk_length": self.walk_length}

    def _select(self, rng: np.random.Generator) -> np.ndarray:
        return walk_selection(self.graph, self.budget, self.walk_length, rng)


def _read_norms(path: Path, num_nodes: int, num_edges: int) -> tuple:
    """The cached coefficients of ``path`` (float32 ``[num_nodes]`` and ``[num_edges]``, finite
    and >= 0), or ``(None, None)`` when there are none or they cannot be this graph's
    (logged)."""

    def why_not(saved: dict[str, np.ndarray]) -> str | None:
        for name, size in (("node_norm", num_nodes), ("edge_norm", num_edges)):
            norm = saved[name]
            if norm.shape != (size,) or norm.dtype != np.float32:
                return f"{name} of {norm.dtype} {norm.shape}, expected float32 ({size},)"
            if norm.size and not (np.isfinite(norm).all() and norm.min() >= 0):
                return f"{name} holds values outside [0, inf)"
        return None

    saved = read_cached(path, ("node_norm", "edge_norm"), why_not)
    return (None, None) if saved is None else (saved["node_norm"], saved["edge_norm"])
