"""The dataset catalog: names, where each dataset's files live, and how to open it."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from graphengine.data.format import feature_rows
from graphengine.datasets import npz, planetoid
from graphengine.datasets.dataset import GraphDataset
from graphengine.datasets.hetero import HeteroGraphDataset, HeteroSpec, generate_hetero
from graphengine.datasets.ogb import OGB, convert_ogb
from graphengine.datasets.papers import PapersSpec, store_name, write_papers
from graphengine.datasets.synthetic import SyntheticSpec, generate
from graphengine.datasets.writing import writing_store

log = logging.getLogger(__name__)

ROOT_ENV = "GRAPHENGINE_DATA"
PAPERS_SCALE = 20  # synthetic-papers' default size: 2^20 nodes

SYNTHETIC = {
    "synthetic-small": SyntheticSpec(
        num_nodes=8192,
        num_edges=160_000,
        num_features=32,
        num_classes=8,
        num_train=1600,
        num_val=800,
        median_degree=15.0,
        noise=3.0,
    ),
    "synthetic-products": SyntheticSpec(
        num_nodes=2**20,
        num_edges=24_000_000,
        num_features=100,
        num_classes=47,
        num_train=196_615,
        num_val=39_323,
    ),
}

# Heterogeneous (papers, authors, institutions; the papers classified): load_hetero_dataset.
HETERO = {
    "synthetic-hetero": HeteroSpec(
        num_papers=50_000,
        num_authors=30_000,
        num_institutions=2_000,
        num_classes=16,
        num_train=20_000,
        num_val=5_000,
    ),
    "synthetic-hetero-s": HeteroSpec(
        num_papers=2_000,
        num_authors=1_200,
        num_institutions=100,
        num_classes=4,
        num_train=800,
        num_val=400,
        paper_features=16,
        author_features=8,
        institution_features=4,
    ),
}


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    kind: str
    description: str

    def location(self, root: Path) -> Path:
        """Where this dataset's files are (or will be cached) under ``root``
        (``synthetic-papers``: at its default scale)."""
        if self.kind == "synthetic-papers":
            return root / store_name(PAPERS_SCALE)
        if self.kind in ("synthetic", "synthetic-hetero"):
            return root / self.name
        if self.kind == "planetoid":
            return root / planetoid.NAMES[self.name] / "raw"
        if self.kind == "ogb":
            return root / self.name  # converted from root / OGB[name].folder
        return root / npz.FILES[self.name]


#: Every dataset :func:`load_dataset` knows, by name: a
#: :class:`~graphengine.datasets.catalog.CatalogEntry` each (its kind and a one-line
#: description); ``graphengine datasets`` lists them.
CATALOG = {
    "synthetic-small": CatalogEntry(
        "synthetic-small", "synthetic", "8,192 nodes, 8 classes: the quick default"
    ),
    "synthetic-products": CatalogEntry(
        "synthetic-products",
        "synthetic",
        "2^20 nodes, ~24M edges, 100 features, 47 classes: ogbn-products-like",
    ),
    "synthetic-hetero": CatalogEntry(
        "synthetic-hetero",
        "synthetic-hetero",
        "heterogeneous: 50K papers (16 classes), 30K authors, 2K institutions",
    ),
    "synthetic-hetero-s": CatalogEntry(
        "synthetic-hetero-s",
        "synthetic-hetero",
        "heterogeneous: 2K papers (4 classes), 1.2K authors, 100 institutions: for tests",
    ),
    "synthetic-papers": CatalogEntry(
        "synthetic-papers",
        "synthetic-papers",
        "2^S nodes (--scale S, default 20), ~14 in-edges a node, 128 features, 172 classes, "
        "1.1% train: ogbn-papers100M-like, written to disk in chunks (larger than memory)",
    ),
    "ogbn-arxiv": CatalogEntry(
        "ogbn-arxiv", "ogb", "OGB arxiv: 169K papers, 1.2M citations (directed), 128 features"
    ),
    "ogbn-products": CatalogEntry(
        "ogbn-products", "ogb", "OGB products: 2.4M nodes, 124M edges (both ways), 100 features"
    ),
    "ogbn-papers100M": CatalogEntry(
        "ogbn-papers100M", "ogb", "OGB papers100M: 111M papers, 1.6B citations, 128 features"
    ),
    "cora": CatalogEntry("cora", "planetoid", "Planetoid Cora, public split"),
    "citeseer": CatalogEntry("citeseer", "planetoid", "Planetoid CiteSeer, public split"),
    "pubmed": CatalogEntry("pubmed", "planetoid", "Planetoid PubMed, public split"),
    "amazon-computers": CatalogEntry("amazon-computers", "npz", "Amazon Computers (gnn-benchmark)"),
    "amazon-photo": CatalogEntry("amazon-photo", "npz", "Amazon Photo (gnn-benchmark)"),
    "coauthor-cs": CatalogEntry("coauthor-cs", "npz", "Coauthor CS (gnn-benchmark)"),
    "coauthor-physics": CatalogEntry("coauthor-physics", "npz", "Coauthor Physics (gnn-benchmark)"),
    "cora-full": CatalogEntry("cora-full", "npz", "Cora-Full (gnn-benchmark)"),
}


def default_root() -> Path:
    """``$GRAPHENGINE_DATA`` if set, else the checkout's ``datasets/`` folder when it exists,
    else ``~/.cache/graphengine/datasets``."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    checkout = Path(__file__).resolve().parents[2] / "datasets"
    if checkout.is_dir():
        return checkout
    return Path.home() / ".cache" / "graphengine" / "datasets"


def load_dataset(
    name: str,
    root: str | Path | None = None,
    mmap: bool = True,
    num_features: int | None = None,
    scale: int | None = None,
) -> GraphDataset:
    """Open a catalog dataset by name, a gnn-benchmark ``.npz`` file by path, or the folder of
    a graphengine store (``dataset.json``; e.g. one ``graphengine reorder`` wrote).

    Synthetic datasets are generated on first use and cached under ``root``; real
    datasets are read in place from the files the user put under ``root``, OGB's converted
    once into a store beside them (``ogbn-arxiv``, ``ogbn-products``, ``ogbn-papers100M``:
    :mod:`graphengine.datasets.ogb`).
    ``num_features`` generates a synthetic dataset with that many feature columns instead
    (the same graph, other features and splits), named and cached as ``NAME-xF``.
    ``scale`` sizes ``synthetic-papers`` (``2^scale`` nodes; default :data:`PAPERS_SCALE`),
    which is also opened by its cache's name ``synthetic-papers-sS``; it is generated
    straight to disk (see :mod:`graphengine.datasets.papers`) and always memory-mapped.

    Heterogeneous datasets (:func:`is_heterogeneous`) open with :func:`load_hetero_dataset`.

    Raises:
        ValueError: an unknown name, a heterogeneous dataset, ``num_features`` for a
            dataset that is not synthetic, or ``scale`` for one that is not
            ``synthetic-papers``.
        FileNotFoundError: the dataset's files are not under ``root``.
    """
    root = Path(root) if root is not None else default_root()
    if is_heterogeneous(name):
        raise ValueError(
            f"{name!r} is a heterogeneous dataset (papers, authors, institutions): open it "
            f"with load_hetero_dataset({name!r}); of the commands, only 'graphengine train' "
            "takes it"
        )
    named_scale = papers_scale(name)
    if scale is not None and named_scale is None:
        raise ValueError(f"'scale' sizes synthetic-papers only (got it for {name!r})")
    if named_scale is not None:
        if num_features is not None:
            raise ValueError("synthetic-papers has 128 features; 'num_features' is not for it")
        return load_papers(root, named_scale if scale is None else scale)
    if num_features is not None:
        return _with_features(name, root, mmap, num_features)
    if name.endswith(".npz"):
        return npz.load_npz(name)
    # A store's folder (e.g. a reordered one): whatever its manifest is, the store's reader
    # says what is wrong with it (a FIFO, a symlink loop) rather than "unknown dataset".
    if os.path.lexists(Path(name) / "dataset.json"):
        return GraphDataset.load(name, mmap=mmap)
    if name not in CATALOG:
        raise ValueError(
            f"unknown dataset {name!r}: expected one of {sorted(CATALOG)} or a path to a .npz file"
        )
    entry = CATALOG[name]
    if entry.kind == "planetoid":
        return planetoid.load_planetoid(name, root)
    if entry.kind == "npz":
        return npz.load_npz(entry.location(root), name=name)
    if entry.kind == "ogb":
        return load_ogb(name, root)
    cache = entry.location(root)
    try:
        return GraphDataset.load(cache, mmap=mmap)
    except FileNotFoundError:
        pass
    log.info("generating %s under %s", name, cache)
    with writing_store(name, cache):
        generate(name, SYNTHETIC[name]).save(cache)
    return GraphDataset.load(cache, mmap=mmap)


def load_ogb(
    name: str, root: Path, progress: bool = False, feature_dtype: str | None = None
) -> GraphDataset:
    """OGB dataset ``name`` from its store under ``root``, converted from the ``ogb``
    package's files there on first use (:func:`~graphengine.datasets.ogb.convert_ogb`) with
    features in ``feature_dtype`` (float32 by default; an existing store of another dtype is
    refused, :func:`check_store_features`)."""
    try:
        dataset = GraphDataset.load(CATALOG[name].location(root))
    except FileNotFoundError:
        pass
    else:
        return check_store_features(dataset, feature_dtype, CATALOG[name].location(root))
    log.info("converting %s from %s", name, root / OGB[name].folder)
    with writing_store(name, CATALOG[name].location(root)):
        return convert_ogb(name, root, progress, feature_dtype or "float32")


def generate_store(
    name: str, root: Path, scale: int | None = None, feature_dtype: str | None = None
) -> GraphDataset | HeteroGraphDataset:
    """Synthetic catalog dataset ``name`` (``synthetic-papers`` at ``scale`` when given) under
    ``root``, generated unless there, with features in ``feature_dtype`` (float32 by default;
    float16 halves the bytes a row). An existing store of another feature dtype is refused
    (:func:`check_store_features`)."""
    if scale is not None:
        return load_papers(root, scale, progress=True, feature_dtype=feature_dtype)
    cache = CATALOG[name].location(root)
    hetero = is_heterogeneous(name)
    try:
        dataset = (HeteroGraphDataset if hetero else GraphDataset).load(cache)
    except FileNotFoundError:
        pass
    else:
        return check_store_features(dataset, feature_dtype, cache)
    log.info("generating %s under %s", name, cache)
    with writing_store(name, cache):
        if hetero:
            dataset = generate_hetero(name, HETERO[name])
            dtype = feature_dtype or "float32"
            x = {t: feature_rows(v, dtype, cache / f"x.{t}.npy") for t, v in dataset.x.items()}
            dataclasses.replace(dataset, x=x).save(cache)
        else:
            dataset = generate(name, SYNTHETIC[name])
            x = feature_rows(dataset.x, feature_dtype or "float32", cache / "x.npy")
            dataclasses.replace(dataset, x=x).save(cache)
    return (HeteroGraphDataset if hetero else GraphDataset).load(cache)


def check_store_features(dataset, feature_dtype: str | None, path: Path):
    """``dataset`` (the store at ``path``) when its features are in ``feature_dtype`` (any
    for ``None``), else ``ValueError``: a command asked for another dtype than the store
    on disk holds."""
    tables = dataset.x.values() if isinstance(dataset.x, dict) else [dataset.x]
    found = {str(x.dtype) for x in tables}
    if feature_dtype is not None and found != {feature_dtype}:
        raise ValueError(
            f"'{path}' holds {', '.join(sorted(found))} features, not the {feature_dtype} "
            f"asked for: make a {feature_dtype} copy with 'graphengine compact {path} --out "
            f"DST --feature-dtype {feature_dtype}', or remove the store to write it again"
        )
    return dataset


def papers_scale(name: str) -> int | None:
    """The scale ``name`` gives ``synthetic-papers`` (:data:`PAPERS_SCALE` for the bare name,
    ``S`` for ``synthetic-papers-sS``), or ``None`` for another dataset."""
    if name == "synthetic-papers":
        return PAPERS_SCALE
    match = re.fullmatch(r"synthetic-papers-s(\d+)", name)
    return int(match.group(1)) if match else None


def load_papers(
    root: Path, scale: int, progress: bool = False, feature_dtype: str | None = None
) -> GraphDataset:
    """``synthetic-papers`` of ``2^scale`` nodes under ``root``, generated on first use with
    features in ``feature_dtype`` (float32 by default; an existing store of another dtype is
    refused, :func:`check_store_features`)."""
    spec = PapersSpec(scale)
    cache = root / store_name(scale)
    try:
        dataset = GraphDataset.load(cache)
    except FileNotFoundError:
        pass
    else:
        return check_store_features(dataset, feature_dtype, cache)
    log.info(
        "generating synthetic-papers at scale %d under %s (about %.1f GB)",
        scale,
        cache,
        spec.disk_bytes() / 1e9,
    )
    with writing_store(store_name(scale), cache):
        return write_papers(spec, cache, progress, feature_dtype or "float32")


def is_heterogeneous(name: str) -> bool:
    """Whether ``name`` is a heterogeneous catalog dataset (open it with
    :func:`load_hetero_dataset`)."""
    entry = CATALOG.get(name)
    return entry is not None and entry.kind == "synthetic-hetero"


def load_hetero_dataset(
    name: str, root: str | Path | None = None, mmap: bool = True
) -> HeteroGraphDataset:
    """Open heterogeneous catalog dataset ``name`` (``synthetic-hetero``,
    ``synthetic-hetero-s``), generated on first use and cached under ``root`` (as
    ``.npy`` arrays and a manifest, memory-mapped unless ``mmap=False``).

    Raises:
        ValueError: ``name`` is not a heterogeneous catalog dataset.
    """
    if not is_heterogeneous(name):
        hetero = sorted(n for n in CATALOG if is_heterogeneous(n))
        hint = " (open it with load_dataset)" if name in CATALOG or name.endswith(".npz") else ""
        raise ValueError(f"{name!r} is not a heterogeneous dataset{hint}: expected one of {hetero}")
    root = Path(root) if root is not None else default_root()
    cache = CATALOG[name].location(root)
    try:
        return HeteroGraphDataset.load(cache, mmap=mmap)
    except FileNotFoundError:
        pass
    log.info("generating %s under %s", name, cache)
    with writing_store(name, cache):
        generate_hetero(name, HETERO[name]).save(cache)
    return HeteroGraphDataset.load(cache, mmap=mmap)


def _with_features(name: str, root: Path, mmap: bool, num_features: int) -> GraphDataset:
    """Synthetic dataset ``name`` generated with ``num_features`` feature columns."""
    if name not in SYNTHETIC:
        raise ValueError(
            f"'num_features' generates a synthetic dataset ({sorted(SYNTHETIC)}); "
            f"{name!r} is read from its files"
        )
    if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 1:
        raise ValueError(f"'num_features' must be an int >= 1 (got {num_features!r})")
    spec = SYNTHETIC[name]
    if num_features == spec.num_features:
        return load_dataset(name, root, mmap)
    variant = f"{name}-x{num_features}"
    cache = root / variant
    try:
        return GraphDataset.load(cache, mmap=mmap)
    except FileNotFoundError:
        pass
    log.info("generating %s under %s", variant, cache)
    with writing_store(variant, cache):
        generate(variant, dataclasses.replace(spec, num_features=num_features)).save(cache)
    return GraphDataset.load(cache, mmap=mmap)


def is_available(name: str, root: str | Path | None = None) -> bool:
    """Whether catalog dataset ``name`` is on disk under ``root`` (generated or provided)."""
    root = Path(root) if root is not None else default_root()
    return CATALOG[name].location(root).exists()
