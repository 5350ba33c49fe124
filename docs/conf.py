"""Sphinx configuration of the jax_gridsample site (`sphinx-build -W docs OUT` or `.ci/docs`).

The pages are Markdown (myst-parser); the API page takes the public functions' numpy-style
docstrings through autodoc and napoleon. The performance page includes benchmarks/RESULTS.md as
it is, and the changelog page CHANGELOG.md, so that neither is copied.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# autodoc imports the package: the installed one, or else the source tree's (the native modules
# are then missing, which only native_status() notices; the docstrings are the same).
if importlib.util.find_spec("jax_gridsample") is None:
    sys.path.insert(0, str(ROOT))

project = "jax_gridsample"
author = "the jax_gridsample authors"
copyright = "the jax_gridsample authors; Apache-2.0"
# One place for the version: jax_gridsample/__init__.py (read, not imported, as pyproject does).
release = re.search(r'^__version__ = "([^"]+)"',
                    (ROOT / "jax_gridsample" / "__init__.py").read_text(), re.M)[1]
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# Only the pages: not the build's output, and nothing else that is not one.
exclude_patterns = ["_build", "_static", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]

# Markdown: headings get anchors down to level 3, so that a link such as
# "ascend.md#determinism" resolves here as it does on GitHub.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc and napoleon: numpy-style docstrings, signatures as written, members in source order.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True

html_theme = "sphinx_book_theme"
html_title = f"jax_gridsample {release}"
html_static_path = ["_static"]
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
}
