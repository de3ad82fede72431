"""The API reference from the packages' ``__all__``, and cross-references that resolve to it.

``.. public-names:: graphengine.loader`` documents the package: its docstring, then every name
in its ``__all__``. A name exported by several packages (``graphengine.NeighborLoader`` is
``graphengine.loader.NeighborLoader``) is documented in full once, under the most specific
package listed in :data:`PACKAGES`, and everywhere else as an entry that links there.

Docstrings refer to objects where they are defined (``graphengine.loader.config.SamplingConfig``),
while the reference documents them where users import them (``graphengine.loader.SamplingConfig``).
A reference Sphinx cannot find is resolved here to the documented name of the same object; a
reference to an object that exists but is not public is shown as code without a link. A reference
to nothing (a typo, a renamed function) stays unresolved, and the nitpicky build fails on it.
"""

from __future__ import annotations

import functools
import importlib
import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode, nested_parse_with_titles

#: The packages whose public names the reference documents. An object exported by several
#: is documented in full under the first of them that exports it (most specific first).
PACKAGES = (
    "graphengine.loader",
    "graphengine.train",
    "graphengine.parallel",
    "graphengine.distributed",
    "graphengine.plan",
    "graphengine.nn",
    "graphengine.datasets",
    "graphengine.data",
    "graphengine.data.partition",
    "graphengine.batch",
    "graphengine.ops",
    "samplers",
    "graphengine",
)


PACKAGE_ROOTS = {"graphengine", "samplers"}


def _public(package: str) -> list[str]:
    names = getattr(importlib.import_module(package), "__all__", None)
    if names is None:
        raise ValueError(f"{package} has no __all__: the reference documents only its __all__")
    return list(names)


@functools.cache
def _canonical() -> dict[int, str]:
    """``id(object) -> 'package.name'`` of the entry that documents each public object."""
    where: dict[int, str] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in _public(package):
            where.setdefault(id(getattr(module, name)), f"{package}.{name}")
    return where


def _kind(obj: object) -> str:
    """The autodoc directive and the Python domain role for ``obj``."""
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    if inspect.ismodule(obj):
        return "module"
    return "data"


class PublicNames(SphinxDirective):
    """``.. public-names:: package``: the package's docstring and every name of its
    ``__all__``, in the order listed there."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        package = self.arguments[0]
        if package not in PACKAGES:
            raise self.error(f"{package} is not in public_names.PACKAGES")
        self.env.note_dependency(__file__)
        canonical = _canonical()
        module = importlib.import_module(package)
        lines = [f".. automodule:: {package}", "   :no-members:", ""]
        for name in _public(package):
            obj = getattr(module, name)
            kind = _kind(obj)
            full = f"{package}.{name}"
            home = canonical[id(obj)]
            if kind == "module":
                lines += [f".. py:module:: {full}", "", f"   Module :mod:`{obj.__name__}`.", ""]
            elif home == full:
                auto = "exception" if kind == "exception" else kind
                lines += [f".. auto{auto}:: {full}", ""]
            else:
                role = "func" if kind == "function" else kind
                role = "exc" if kind == "exception" else role
                lines += [
                    f".. py:{kind}:: {full}",
                    "   :no-index-entry:",
                    "",
                    f"   The same object as :{role}:`{home}`.",
                    "",
                ]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=package), container)
        return container.children


def _import(path: str) -> object | None:
    """The object at dotted ``path`` (a module, or attributes below one), or ``None``."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _candidates(target: str, node: pending_xref) -> list[str]:
    """The dotted paths a reference may mean: as written, then relative to the module and
    class it was written in (as Sphinx's own lookup tries them)."""
    module = node.get("py:module") or ""
    klass = node.get("py:class") or ""
    if target.startswith("."):
        target = target.lstrip(".")
        scopes = [f"{module}.{klass}" if klass else module, module]
        package = module
        while "." in package:
            package = package.rsplit(".", 1)[0]
            scopes.append(package)
        return [f"{scope}.{target}" for scope in scopes if scope]
    paths = [target]
    if module:
        paths += [f"{module}.{klass}.{target}" if klass else "", f"{module}.{target}"]
    return [path for path in paths if path]


def _documented_name(path: str, canonical: dict[int, str], documented) -> str | None:
    """The documented name of the object at ``path``, or of a member of it: the longest prefix
    of ``path`` that is a public object, under its entry's name, with the rest appended."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        obj = _import(".".join(parts[:split]))
        home = None if obj is None else canonical.get(id(obj))
        if home is not None:
            name = ".".join([home, *parts[split:]])
            if name in documented:
                return name
    return None


def _resolve(app: Sphinx, env, node: pending_xref, contnode: nodes.Element):
    """A Python reference Sphinx did not find, written in or to graphengine's packages: to the
    documented name of the same object, or as plain code when the object exists but is not
    documented."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    module = node.get("py:module") or ""
    if target.lstrip(".").split(".")[0] not in PACKAGE_ROOTS and (
        module.split(".")[0] not in PACKAGE_ROOTS
    ):
        return None
    documented = env.get_domain("py").objects
    canonical = _canonical()
    for path in _candidates(target, node):
        if _import(path) is None:
            continue
        name = _documented_name(path, canonical, documented)
        if name is None:
            return contnode
        entry = documented[name]
        return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode)
    return None


def setup(app: Sphinx) -> dict:
    app.add_directive("public-names", PublicNames)
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
