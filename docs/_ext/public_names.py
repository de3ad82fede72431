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
import sys

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
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
    "graphengine.plot",
    "samplers",
    "graphengine",
)


logger = logging.getLogger(__name__)

PACKAGE_ROOTS = {"graphengine", "samplers"}


def _public(package: str) -> list[str]:
    names = getattr(importlib.import_module(package), "__all__", None)
    if names is None:
        raise ValueError(f"{package} has no __all__: the reference documents only its __all__")
    return list(names)


@functools.cache
def _canonical() -> dict[int, str]:
    """``id(object) -> 'package.name'`` of the entry that documents each public class,
    function and module. Constants are not in it: equal small ints or strings are one object
    in Python, and each constant is its own entry (:func:`_home`)."""
    where: dict[int, str] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in _public(package):
            obj = getattr(module, name)
            if _kind(obj) != "data":
                where.setdefault(id(obj), f"{package}.{name}")
    return where


def _home(package: str, name: str, obj: object) -> str:
    """The entry that documents ``package.name``: its own for a constant, else the first
    package's (in :data:`PACKAGES` order) that exports the same object."""
    return f"{package}.{name}" if _kind(obj) == "data" else _canonical()[id(obj)]


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
        _documented_packages(self.env).add(package)
        module = importlib.import_module(package)
        lines = [f".. automodule:: {package}", "   :no-members:", ""]
        for name in _public(package):
            obj = getattr(module, name)
            kind = _kind(obj)
            home = _home(package, name, obj)
            if kind == "module":
                body = [f"The module :mod:`{obj.__name__}`."]
            elif home != f"{package}.{name}":
                role = {"function": "func", "exception": "exc"}.get(kind, kind)
                body = [f"The same object as :{role}:`{home}`."]
            elif kind == "data":
                body = _constant_doc(package, name)
                if not body:
                    raise self.error(f"{package}.{name} has no #: comment where it is defined")
            else:
                lines += [f".. auto{kind}:: {package}.{name}", ""]
                continue
            directive = "py:data" if kind == "module" else f"py:{kind}"
            # No index of its own: a reference to the alias resolves to the object's full entry
            # (by identity, in _resolve), and an unqualified type hint is not ambiguous.
            lines += [f".. {directive}:: {name}", f"   :module: {package}", "   :no-index:", ""]
            lines += [f"   {line}" if line else "" for line in body] + [""]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=package), container)
        return container.children


def _constant_doc(package: str, name: str) -> list[str]:
    """The ``#:`` comment above ``name = ...`` in the module of ``package`` that defines it
    (constants have no docstring of their own), and its value when short."""
    obj = getattr(importlib.import_module(package), name)
    prefix = package + "."
    for module_name in sorted(sys.modules):
        if module_name != package and not module_name.startswith(prefix):
            continue
        module = sys.modules[module_name]
        if getattr(module, name, None) is not obj:
            continue
        docs = ModuleAnalyzer.for_module(module_name).find_attr_docs().get(("", name))
        if docs:
            value = repr(obj)
            shown = [f"Value: ``{value}``", ""] if len(value) <= 80 else []
            return [*shown, *(line for line in docs)]
    return []


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
    """The dotted paths a reference may mean: as written, then relative to the object whose
    docstring holds it (in the module that defines it: ``node.source`` names it, as
    ``"...: docstring of graphengine.loader.stages.SampleNodes"``), then to the module and class
    it is documented under, as Sphinx's own lookup tries them."""
    relative = target.startswith(".")
    target = target.lstrip(".")
    scopes = []
    _, _, owner = (node.source or "").partition("docstring of ")
    while owner:
        scopes.append(owner)
        owner = owner.rpartition(".")[0]
    module = node.get("py:module") or ""
    klass = node.get("py:class") or ""
    scopes += [f"{module}.{klass}" if klass else "", module]
    documented_in = getattr(_import(f"{module}.{klass}"), "__module__", None) if klass else None
    if isinstance(documented_in, str):
        scopes.append(documented_in)  # a type hint in the signature of a class defined there
    paths = [] if relative else [target]
    paths += [f"{scope}.{target}" for scope in scopes if scope]
    return paths


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
    name = None
    for path in _candidates(target, node):
        if _import(path) is not None:
            name = _documented_name(path, canonical, documented)
            if name is None:
                return contnode
            break
    if name is None and "." not in target:
        # A type hint imported only for type checking: the one public object of that name.
        same = {home for home in canonical.values() if home.rpartition(".")[2] == target}
        name = same.pop() if len(same) == 1 else None
    if name is None or name not in documented:
        return None
    entry = documented[name]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode)


def _documented_packages(env) -> set[str]:
    if not hasattr(env, "public_names_packages"):
        env.public_names_packages = set()
    return env.public_names_packages


def _merge(app: Sphinx, env, docnames, other) -> None:
    _documented_packages(env).update(_documented_packages(other))


def _check_every_package(app: Sphinx, env) -> None:
    """Warn (an error under ``-W``) for a package of :data:`PACKAGES` no page documents."""
    for package in sorted(set(PACKAGES) - _documented_packages(env)):
        logger.warning("no page has '.. public-names:: %s'", package)


def setup(app: Sphinx) -> dict:
    app.add_directive("public-names", PublicNames)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check_every_package)
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
