"""Sphinx configuration of graphengine's documentation site.

Built by ``.ci/build-docs`` (``sphinx-build -W -n``): every warning, an unresolved
cross-reference included, fails the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "graphengine"
author = "graphengine developers"
copyright = "2026, graphengine developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
    "sphinxarg.ext",
    "public_names",
    "grouped_fields",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Types only for the parameters a docstring describes: those it groups (``lo, hi: ...``) keep
# their types in the signature.
autodoc_typehints_description_target = "documented"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes sections as fields: autodoc documents the attributes themselves as well.
napoleon_use_ivar = True

html_theme = "furo"
html_title = "graphengine"
html_static_path = ["_static"]

# Types from other libraries: no inventory of theirs can be fetched where the site is built,
# so they are shown as code. A reference into graphengine that resolves nowhere still fails.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|torch|torch_geometric|scipy|numba|pathlib|collections|typing|os|io)\..*"),
    ("py:.*", r"(Data|HeteroData|Tensor|Module|Path|EdgeType|NodeType|Sequence|Iterable|Iterator)"),
]
