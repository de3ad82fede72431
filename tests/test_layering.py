"""The package's folders import one way: no cycle between the folders of ``graphengine/`` and
``samplers/``, and no folder imports one above it in the layering below.

Every module is parsed with ``ast`` (nothing is imported), and every import counts: at the
top of a module, inside a function, or under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graphengine", "samplers")
# Bottom up: a folder may import the folders before it, never one after it. Folders not
# listed (bench/, the CLI, the package root) may import any folder but still join no cycle.
LAYERS = (
    "samplers",
    "ops",
    "data",
    "datasets",
    "batch",
    "distributed",
    "loader",
    "nn",
    "parallel",
    "plan",
    "train",
)
# samplers/ is plain NumPy and Numba.
SAMPLERS_FORBIDDEN = ("torch", "torch_geometric", "graphengine")

Edges = dict[tuple[str, str], set[str]]


def unit_of(module: str) -> str | None:
    """The folder a dotted module name belongs to: ``samplers`` for all of ``samplers``; for
    ``graphengine.<x>...``, ``<x>`` (a sub-package or a top-level module such as ``cli``);
    ``graphengine`` for the package root itself; ``None`` outside both packages."""
    parts = module.split(".")
    if parts[0] == "samplers":
        return "samplers"
    if parts[0] != "graphengine":
        return None
    if len(parts) == 1:
        return "graphengine"
    top = ROOT / "graphengine" / parts[1]
    if top.is_dir() or top.with_suffix(".py").is_file():
        return parts[1]
    return "graphengine"  # a name the package root exports


def module_name(path: Path) -> tuple[str, bool]:
    """The dotted name of the module at ``path`` and whether it is a package's ``__init__``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package under :data:`ROOT`."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def imported_modules(path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved: ``from m import a`` imports
    ``m.a`` where that is a module, else ``m`` (``a`` is a name ``m`` defines)."""
    name, is_package = module_name(path)
    package = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            for alias in node.names:
                found.append(
                    f"{module}.{alias.name}" if is_module(f"{module}.{alias.name}") else module
                )
    return found


def folder_imports() -> Edges:
    """``{(importing folder, imported folder): {importing files}}`` over both packages."""
    edges: Edges = defaultdict(set)
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = unit_of(module_name(path)[0])
            for module in imported_modules(path):
                target = unit_of(module)
                if target is not None and target != source:
                    edges[(source, target)].add(str(path.relative_to(ROOT)))
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one folder (Tarjan's algorithm),
    each sorted; a component holds every folder of the cycles through it."""
    graph = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def describe(edges: Edges, pairs) -> str:
    return "\n".join(
        f"  {source} -> {target}: {', '.join(sorted(edges[(source, target)]))}"
        for source, target in sorted(pairs)
    )


def test_cycle_finder_on_a_known_graph():
    edges = {
        ("a", "b"): {"a.py"},
        ("b", "c"): {"b.py"},
        ("c", "a"): {"c.py"},
        ("c", "d"): {"c.py"},
        ("d", "e"): {"d.py"},
        ("e", "d"): {"e.py"},
        ("f", "a"): {"f.py"},
    }
    assert sorted(cycles(edges)) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({("a", "b"): {"a.py"}, ("b", "c"): {"b.py"}}) == []


def test_imports_are_found_at_every_depth(tmp_path, monkeypatch):
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from graphengine.nn import blocks\n"
        "    from graphengine.nn import build_model\n"
        "def f():\n"
        "    from samplers.hop import untag\n"
    )
    (tmp_path / "graphengine" / "nn").mkdir(parents=True)
    (tmp_path / "graphengine" / "nn" / "blocks.py").touch()
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    found = imported_modules(module)
    # os and typing; blocks is a module, build_model a name graphengine.nn defines.
    assert sorted(found) == sorted(
        ["os", "typing", "graphengine.nn.blocks", "graphengine.nn", "samplers.hop"]
    )


def test_the_analysis_sees_the_package():
    edges = folder_imports()
    # Imports every reader knows of: a loader samples, a dataset is made of data stores.
    assert ("loader", "samplers") in edges
    assert ("datasets", "data") in edges
    assert "graphengine/loader/stages.py" in edges[("loader", "samplers")]


def test_no_import_cycle_between_folders():
    edges = folder_imports()
    found = cycles(edges)
    report = []
    for component in found:
        inside = [pair for pair in edges if pair[0] in component and pair[1] in component]
        report.append(f"cycle among {component}:\n{describe(edges, inside)}")
    assert not found, "folders import each other:\n" + "\n".join(report)


def test_no_folder_imports_upward():
    edges = folder_imports()
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [
        (source, target)
        for source, target in edges
        if source in rank and target in rank and rank[target] > rank[source]
    ]
    assert not upward, (
        f"imports against the layering {' -> '.join(LAYERS)}:\n{describe(edges, upward)}"
    )


def test_samplers_import_neither_torch_nor_graphengine():
    bad = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "samplers").rglob("*.py"))
        for module in imported_modules(path)
        if module.split(".")[0] in SAMPLERS_FORBIDDEN
    ]
    assert not bad, "samplers/ must stay NumPy and Numba only:\n" + "\n".join(bad)
