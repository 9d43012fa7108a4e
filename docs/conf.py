"""Sphinx configuration of adaptlab's documentation site.

Build (strict: any warning, such as a broken link or reference, fails; no network needed)::

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html

Pages are Markdown (MyST). The reference pages are generated from the code at build time by the
local extension in docs/_ext (study file from the schema, CLI from the parsers, API from the
docstrings)."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT / "platform"), str(DOCS / "_ext")]  # document this working copy

from adaptlab._version import __version__  # noqa: E402

project = "adaptlab"
author = "adaptlab contributors"
copyright = "adaptlab contributors"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "adaptlab_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/README.md"]
templates_path: list[str] = []

# Markdown: headings get anchors (links like metrics.md#confidence-intervals are checked),
# ::: fences, definition lists and $math$.
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "amsmath"]
myst_heading_anchors = 4

# API reference: autodoc + napoleon (numpy-style Parameters / Returns / Examples sections).
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_numpy_docstring = True
napoleon_google_docstring = True
napoleon_use_rtype = False

# Strictness: -n (nitpicky) reports every cross-reference that does not resolve; references to
# other libraries cannot resolve without intersphinx (which would fetch their inventories over
# the network), so their names are exempt.
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|pandas|pd|pyarrow|pa|ray|torch|scipy|matplotlib|duckdb|deltalake|mteb|"
               r"sentence_transformers|transformers|collections|typing|pathlib|os|datetime|concurrent)(\..*)?"),
    (r"py:class", r"(Path|Any|Sequence|Mapping|Iterable|Iterator|Callable|ndarray|DataFrame|Table|Figure|Axes|"
                  r"optional|array-like|default .*|TextIO|IO)"),
]

# The study-file reference: a key without a help text in the code is a build warning (so an
# error under -W).
adaptlab_study_require_meaning = True

html_theme = "furo"
try:
    import furo  # noqa: F401
except ImportError:  # the build still works with Sphinx's own theme
    html_theme = "alabaster"
html_title = f"adaptlab {version}"
html_static_path: list[str] = []
html_show_sourcelink = False
smartquotes = False  # option names keep their two hyphens
