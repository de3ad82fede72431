"""A deterministic synthetic heterogeneous graph: papers, authors and institutions.

The node-classification target is the papers' class. As in :mod:`~graphengine.datasets.synthetic`,
classes are planted and the structure is correlated with them:

* every paper, author and institution gets a class from the same skewed (Zipf-like) class
  distribution, and a log-normal weight: papers' citation appeal, authors' productivity,
  institutions' size, so that degrees have a long tail;
* ``citations * num_papers`` citation pairs pick one paper by weight and the other, with
  probability ``homophily``, from the same class (by weight), else from all papers; they are
  stored in both directions (``('paper', 'cites', 'paper')``, as PyG's ``ToUndirected``
  makes it), without self loops or duplicates;
* each paper has ``1 + Poisson(authors_per_paper - 1)`` authors, each drawn by productivity
  from the authors of the paper's class with probability ``author_homophily``, else from all
  (``('author', 'writes', 'paper')`` and its reverse ``('paper', 'rev_writes', 'author')``);
* each author has ``1 + Poisson(affiliations_per_author - 1)`` institutions, drawn by size
  from its class's with probability ``affiliation_homophily``, else from all
  (``('author', 'affiliated_with', 'institution')`` and
  ``('institution', 'rev_affiliated_with', 'author')``);
* every node type's features are ``centroid[type][class] + noise``: a paper's own features
  predict its class only partly, its cited papers and its authors add information.

Papers are split at random into train, val and test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import HeteroData

from graphengine.data.format import (
    array_listing,
    check_feature_dtype,
    is_count,
    load_listed,
    manifest_count,
    manifest_mapping,
    manifest_string,
    read_manifest,
    save_arrays,
)
from graphengine.datasets.dataset import check_distinct_ids, check_features, check_labels
from samplers import check_node_ids

FORMAT = "graphengine.hetero-dataset"
FORMAT_VERSION = 1
_MANIFEST = "dataset.json"
SPLITS = ("train", "val", "test")

EdgeType = tuple[str, str, str]

NODE_TYPES = ("paper", "author", "institution")
CITES: EdgeType = ("paper", "cites", "paper")
WRITES: EdgeType = ("author", "writes", "paper")
REV_WRITES: EdgeType = ("paper", "rev_writes", "author")
AFFILIATED: EdgeType = ("author", "affiliated_with", "institution")
REV_AFFILIATED: EdgeType = ("institution", "rev_affiliated_with", "author")
EDGE_TYPES = (CITES, WRITES, REV_WRITES, AFFILIATED, REV_AFFILIATED)


@dataclass(frozen=True)
class HeteroSpec:
    """The parameters of one synthetic papers-authors-institutions graph.

    ``citations`` is the mean number of citation pairs per paper (each stored in both
    directions); ``*_features`` the feature columns and ``*noise`` the feature noise's
    standard deviation of each node type (the class centroids are standard normal).
    """

    num_papers: int
    num_authors: int
    num_institutions: int
    num_classes: int
    num_train: int
    num_val: int
    paper_features: int = 64
    author_features: int = 16
    institution_features: int = 8
    citations: float = 5.0
    authors_per_paper: float = 3.0
    affiliations_per_author: float = 1.3
    homophily: float = 0.55
    author_homophily: float = 0.6
    affiliation_homophily: float = 0.6
    noise: float = 3.5
    author_noise: float = 2.0
    institution_noise: float = 1.0
    degree_sigma: float = 0.9
    seed: int = 0

    def __post_init__(self):
        counts = (self.num_papers, self.num_authors, self.num_institutions, self.num_classes)
        if min(counts) < 1:
            raise ValueError(f"node and class counts must be >= 1 (got {counts})")
        splits = (self.num_train, self.num_val)
        if min(splits) < 0 or sum(splits) > self.num_papers:
            raise ValueError(
                f"'num_train' + 'num_val' ({self.num_train} + {self.num_val}) must be within "
                f"the {self.num_papers} papers"
            )
        for name in ("authors_per_paper", "affiliations_per_author"):
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be >= 1 (got {getattr(self, name)})")


@dataclass
class HeteroGraphDataset:
    """A heterogeneous graph with node features of every type, and labels and a
    train/val/test split of the ``target`` node type.

    Attributes:
        name: catalog name.
        num_nodes: nodes per node type, in the data's node-type order.
        x: per node type, float32 ``[num_nodes[type], num_features[type]]`` (a numpy array or a
            read-only memmap).
        edge_index: per ``(src, relation, dst)`` edge type, int64 ``[2, num_edges]``: row 0 the
            source ids (of type ``src``), row 1 the destination ids (of type ``dst``).
        y: int64 ``[num_nodes[target]]`` class labels in ``[0, num_classes)``.
        train_idx, val_idx, test_idx: int64 ids of ``target`` nodes of each split.
        num_classes: number of classes.
        target: the node type that is classified.
    """

    name: str
    num_nodes: dict[str, int]
    x: dict[str, np.ndarray]
    edge_index: dict[EdgeType, np.ndarray]
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    num_classes: int
    target: str = "paper"

    def __post_init__(self):
        self.num_nodes = {t: int(n) for t, n in self.num_nodes.items()}
        if set(self.x) != set(self.num_nodes):
            raise ValueError(
                f"'x' must hold features of every node type {sorted(self.num_nodes)} "
                f"(got {sorted(self.x)})"
            )
        for node_type, count in self.num_nodes.items():
            x = self.x[node_type]
            if x.ndim != 2 or x.shape[0] != count:
                raise ValueError(
                    f"'x' of {node_type!r} must have shape [{count}, num_features] "
                    f"(got {tuple(x.shape)})"
                )
            check_features(self.name, f"'x' of {node_type!r}", x)
        self.edge_index = {tuple(t): e for t, e in self.edge_index.items()}
        for edge_type, edges in self.edge_index.items():
            src, _, dst = edge_type
            if src not in self.num_nodes or dst not in self.num_nodes:
                raise ValueError(f"edge type {edge_type} names a node type without nodes")
            if edges.ndim != 2 or edges.shape[0] != 2:
                raise ValueError(
                    f"'edge_index' of {edge_type} must have shape [2, num_edges] "
                    f"(got {tuple(edges.shape)})"
                )
            check_node_ids(edges[0], self.num_nodes[src], f"edge_index of {edge_type}, row")
            check_node_ids(edges[1], self.num_nodes[dst], f"edge_index of {edge_type}, col")
        if self.target not in self.num_nodes:
            raise ValueError(f"'target' {self.target!r} is not a node type of the data")
        count = self.num_nodes[self.target]
        if self.y.shape != (count,):
            raise ValueError(f"'y' must have shape [{count}] (got {tuple(self.y.shape)})")
        for split in SPLITS:
            setattr(
                self, f"{split}_idx", check_node_ids(getattr(self, f"{split}_idx"), count, split)
            )
        splits = {split: getattr(self, f"{split}_idx") for split in SPLITS}
        check_labels(self.name, self.y, self.num_classes, splits)

    @property
    def node_types(self) -> list[str]:
        return list(self.num_nodes)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.edge_index)

    def metadata(self) -> tuple[list[str], list[EdgeType]]:
        """``(node types, edge types)``, as PyG's ``HeteroData.metadata()``."""
        return self.node_types, self.edge_types

    @property
    def num_features(self) -> dict[str, int]:
        """Feature columns per node type."""
        return {t: int(x.shape[1]) for t, x in self.x.items()}

    @property
    def num_edges(self) -> dict[EdgeType, int]:
        """Edges per edge type."""
        return {t: int(e.shape[1]) for t, e in self.edge_index.items()}

    def split(self, name: str) -> np.ndarray:
        """The ``target`` node ids of split ``name`` (``'train'``, ``'val'`` or ``'test'``)."""
        if name not in SPLITS:
            raise ValueError(f"'split' must be one of {SPLITS} (got {name!r})")
        return getattr(self, f"{name}_idx")

    def to_hetero_data(self) -> HeteroData:
        """A PyG ``HeteroData``: ``x`` (float32) of every node type, ``edge_index`` (int64) of
        every edge type, and on the target type ``y`` (int64) and boolean
        ``train_mask``/``val_mask``/``test_mask``. The arrays are copied into tensors."""
        data = HeteroData()
        for node_type, count in self.num_nodes.items():
            data[node_type].x = torch.from_numpy(np.array(self.x[node_type], dtype=np.float32))
            data[node_type].num_nodes = count
        for edge_type, edges in self.edge_index.items():
            data[edge_type].edge_index = torch.from_numpy(np.array(edges, dtype=np.int64))
        target = data[self.target]
        target.y = torch.from_numpy(np.array(self.y, dtype=np.int64))
        for split in SPLITS:
            mask = torch.zeros(self.num_nodes[self.target], dtype=torch.bool)
            mask[torch.from_numpy(np.array(self.split(split)))] = True
            target[f"{split}_mask"] = mask
        return data

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}={n}" for t, n in self.num_nodes.items())
        edges = ", ".join(f"{'__'.join(t)}={e.shape[1]}" for t, e in self.edge_index.items())
        return (
            f"HeteroGraphDataset('{self.name}', nodes: {nodes}; edges: {edges}; "
            f"target={self.target!r}, num_classes={self.num_classes}, train/val/test="
            f"{len(self.train_idx)}/{len(self.val_idx)}/{len(self.test_idx)})"
        )

    def save(self, path: str | Path) -> None:
        """Write the dataset under ``path``: an ``.npy`` per array (``x.<node type>``,
        ``edge_index.<src>.<relation>.<dst>``, ``y``, ``<split>_idx``) and ``dataset.json``,
        which lists the node and edge types in order and every array's dtype and shape.

        Raises ``ValueError`` for a type name that is not a Python identifier (it names
        files)."""
        for name in [*self.node_types, *(part for t in self.edge_types for part in t)]:
            if not name.isidentifier():
                raise ValueError(f"type name {name!r} must be an identifier to be saved")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        fields = {
            "name": self.name,
            "num_classes": self.num_classes,
            "target": self.target,
            "num_nodes": self.num_nodes,
            "edge_types": [list(t) for t in self.edge_types],
        }
        save_arrays(path, _MANIFEST, FORMAT, FORMAT_VERSION, self._arrays(), fields)

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> HeteroGraphDataset:
        """Open a dataset written by :meth:`save`, memory-mapped unless ``mmap=False``.

        Raises ``FileNotFoundError`` for a missing dataset or file, ``ValueError`` naming the
        manifest or file for a manifest of another format or with a malformed field (an edge
        type of a node type without nodes included), a file name leading outside the store,
        features neither float32 nor float16, a split listing a node twice, or a truncated or
        mismatched array.
        """
        path = Path(path)
        manifest_path = path / _MANIFEST
        keys = ("name", "num_nodes", "edge_types", "num_classes", "target", "arrays")
        manifest = read_manifest(path, _MANIFEST, FORMAT, FORMAT_VERSION, "hetero dataset", keys)
        name = manifest_string(manifest, "name", manifest_path)
        num_classes = manifest_count(manifest, "num_classes", manifest_path, minimum=1)
        num_nodes = _node_counts(manifest, manifest_path)
        edge_types = _edge_types(manifest, manifest_path, num_nodes)
        target = manifest_string(manifest, "target", manifest_path)
        if target not in num_nodes:
            raise ValueError(
                f"corrupt manifest '{manifest_path}': 'target' {target!r} is not one of the "
                f"node types {sorted(num_nodes)}"
            )
        features = {t: f"x.{t}" for t in num_nodes}
        edges = {t: f"edge_index.{'.'.join(t)}" for t in edge_types}
        names = [*features.values(), *edges.values(), "y", *(f"{s}_idx" for s in SPLITS)]
        listing = array_listing(manifest, manifest_path, names)
        for key in features.values():
            check_feature_dtype(path / f"{key}.npy", listing[key][0], manifest_path)
        arrays = load_listed(path, manifest_path, listing, mmap)
        for split in SPLITS:
            check_distinct_ids(arrays[f"{split}_idx"], path / f"{split}_idx.npy")
        try:
            return cls(
                name=name,
                num_nodes=num_nodes,
                x={t: arrays[key] for t, key in features.items()},
                edge_index={t: arrays[key] for t, key in edges.items()},
                y=arrays["y"],
                train_idx=arrays["train_idx"],
                val_idx=arrays["val_idx"],
                test_idx=arrays["test_idx"],
                num_classes=num_classes,
                target=target,
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"corrupt dataset '{manifest_path}': {error}") from None

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"x.{t}": x for t, x in self.x.items()}
        arrays.update({f"edge_index.{'.'.join(t)}": e for t, e in self.edge_index.items()})
        arrays.update(
            y=self.y, train_idx=self.train_idx, val_idx=self.val_idx, test_idx=self.test_idx
        )
        return arrays


def _node_counts(manifest: dict, path: Path) -> dict[str, int]:
    """The manifest's ``num_nodes``: node type (an identifier: it names files) -> count."""
    counts = manifest_mapping(manifest, "num_nodes", path)
    for node_type, count in counts.items():
        if not node_type.isidentifier() or not is_count(count):
            raise ValueError(
                f"corrupt manifest '{path}': 'num_nodes' must map node type names "
                f"(identifiers) to non-negative integers (got {node_type!r}: {count!r})"
            )
    return dict(counts)


def _edge_types(manifest: dict, path: Path, num_nodes: dict[str, int]) -> list[EdgeType]:
    """The manifest's ``edge_types``: distinct ``[src, relation, dst]`` triples of identifiers
    whose ``src`` and ``dst`` are node types of ``num_nodes``."""
    listed = manifest["edge_types"]
    if not isinstance(listed, list):
        raise ValueError(
            f"corrupt manifest '{path}': 'edge_types' must be a list of [src, relation, dst] "
            f"(got {listed!r})"
        )
    edge_types = []
    for entry in listed:
        if (
            not isinstance(entry, list)
            or len(entry) != 3
            or not all(isinstance(name, str) and name.isidentifier() for name in entry)
        ):
            raise ValueError(
                f"corrupt manifest '{path}': edge type {entry!r} must be [src, relation, dst], "
                "three identifiers"
            )
        for end in (entry[0], entry[2]):
            if end not in num_nodes:
                raise ValueError(
                    f"corrupt manifest '{path}': edge type {tuple(entry)} names node type "
                    f"{end!r}, which has no store ('num_nodes' lists {sorted(num_nodes)})"
                )
        edge_types.append(tuple(entry))
    if len(set(edge_types)) != len(edge_types):
        raise ValueError(f"corrupt manifest '{path}': 'edge_types' lists an edge type twice")
    return edge_types


def generate_hetero(name: str, spec: HeteroSpec) -> HeteroGraphDataset:
    """Generate the papers-authors-institutions dataset ``spec`` describes (see the module's
    docstring); the same spec always gives the same data."""
    rng = np.random.default_rng(spec.seed)
    c = spec.num_classes
    class_weight = 1.0 / np.arange(1, c + 1) ** 0.7
    class_p = class_weight / class_weight.sum()
    counts = {
        "paper": spec.num_papers,
        "author": spec.num_authors,
        "institution": spec.num_institutions,
    }
    label = {t: rng.choice(c, size=n, p=class_p).astype(np.int64) for t, n in counts.items()}
    weight = {t: np.exp(rng.normal(0.0, spec.degree_sigma, size=n)) for t, n in counts.items()}
    pick = {t: _ByClass(label[t], weight[t], c) for t in counts}

    num_pairs = round(spec.citations * spec.num_papers)
    first = pick["paper"].draw(rng, np.zeros(num_pairs, dtype=np.int64), same=None)
    second = pick["paper"].draw(
        rng, label["paper"][first], same=rng.random(num_pairs) < spec.homophily
    )
    keep = first != second
    cites = _unique_edges(
        np.concatenate([first[keep], second[keep]]),
        np.concatenate([second[keep], first[keep]]),
        spec.num_papers,
    )

    per_paper = 1 + rng.poisson(spec.authors_per_paper - 1, size=spec.num_papers)
    papers = np.repeat(np.arange(spec.num_papers, dtype=np.int64), per_paper)
    same = rng.random(len(papers)) < spec.author_homophily
    authors = pick["author"].draw(rng, label["paper"][papers], same=same)
    writes = _unique_edges(authors, papers, spec.num_authors)

    per_author = 1 + rng.poisson(spec.affiliations_per_author - 1, size=spec.num_authors)
    members = np.repeat(np.arange(spec.num_authors, dtype=np.int64), per_author)
    same = rng.random(len(members)) < spec.affiliation_homophily
    institutions = pick["institution"].draw(rng, label["author"][members], same=same)
    affiliated = _unique_edges(members, institutions, spec.num_authors)

    widths = {
        "paper": (spec.paper_features, spec.noise),
        "author": (spec.author_features, spec.author_noise),
        "institution": (spec.institution_features, spec.institution_noise),
    }
    x = {}
    for node_type, (width, noise) in widths.items():
        centroid = rng.normal(size=(c, width)).astype(np.float32)
        features = rng.standard_normal(size=(counts[node_type], width), dtype=np.float32)
        features *= np.float32(noise)
        features += centroid[label[node_type]]
        x[node_type] = features

    order = rng.permutation(spec.num_papers)
    train_end = spec.num_train
    val_end = train_end + spec.num_val
    return HeteroGraphDataset(
        name=name,
        num_nodes=counts,
        x=x,
        edge_index={
            CITES: cites,
            WRITES: writes,
            REV_WRITES: writes[::-1].copy(),
            AFFILIATED: affiliated,
            REV_AFFILIATED: affiliated[::-1].copy(),
        },
        y=label["paper"],
        train_idx=np.sort(order[:train_end]),
        val_idx=np.sort(order[train_end:val_end]),
        test_idx=np.sort(order[val_end:]),
        num_classes=c,
    )


class _ByClass:
    """Draws nodes with probability proportional to ``weight``, among all nodes or among
    those of a given class (a class without nodes falls back to all)."""

    def __init__(self, labels: np.ndarray, weight: np.ndarray, num_classes: int):
        self.by_class = np.argsort(labels, kind="stable")
        self.cum_weight = np.cumsum(weight[self.by_class])
        end = np.searchsorted(labels[self.by_class], np.arange(num_classes + 1), side="left")
        self.lo = np.where(end[:-1] > 0, self.cum_weight[np.maximum(end[:-1] - 1, 0)], 0.0)
        self.hi = np.where(end[1:] > 0, self.cum_weight[np.maximum(end[1:] - 1, 0)], 0.0)
        self.populated = end[1:] > end[:-1]

    def draw(self, rng, classes: np.ndarray, same: np.ndarray | None) -> np.ndarray:
        """One int64 node id per entry of ``classes``: of that class where ``same`` is true
        (and the class has nodes), else of any class."""
        total = self.cum_weight[-1]
        if same is None:
            lo, hi = 0.0, total
        else:
            same = same & self.populated[classes]
            lo = np.where(same, self.lo[classes], 0.0)
            hi = np.where(same, self.hi[classes], total)
        target = lo + rng.random(len(classes)) * (hi - lo)
        position = np.searchsorted(self.cum_weight, target, side="right")
        return self.by_class[np.minimum(position, len(self.cum_weight) - 1)].astype(np.int64)


def _unique_edges(src: np.ndarray, dst: np.ndarray, num_src: int) -> np.ndarray:
    """int64 ``[2, num_edges]``: the distinct ``(src, dst)`` pairs, sorted by ``dst`` then
    ``src``."""
    key = np.unique(dst.astype(np.int64) * np.int64(num_src) + src)
    dst, src = np.divmod(key, np.int64(num_src))
    return np.stack([src, dst])
