"""Sphinx configuration of buddylib's documentation site (``make docs``).

The pages are MyST Markdown; the notebooks are rendered from their committed outputs, never executed here; the API
pages are generated from the docstrings (autosummary, their sections read by numpydoc) and the CLI page from the
``buddy`` command's argparse parsers (sphinx-argparse). ``make docs`` builds with warnings as errors: a broken
cross-reference, a public name without a docstring or a notebook that does not render fails the build.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

import buddylib  # noqa: E402

project = "buddylib"
author = "the buddylib developers"
copyright = "2026, the buddylib developers"
version = release = buddylib.__version__

templates_path = ["_templates"]
extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
    "buddylib_docs",
]
sys.path.insert(0, str(DOCS / "_ext"))

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

# the notebooks as committed: rendered from their outputs, never executed while building
nb_execution_mode = "off"
nb_render_markdown_format = "myst"

autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "member-order": "bysource", "undoc-members": True,
                           "show-inheritance": False}
autodoc_typehints = "signature"  # types once, in the signature; numpydoc sections describe
autodoc_preserve_defaults = True
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# a name documented twice (a package re-exporting its module's, as buddylib.timing does) links to either
suppress_warnings = ["ref.python"]
# every reference to one of ours must resolve; references into other projects are not checked (building must not
# fetch their inventories from the network)
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(np|numpy|xr|xarray|pd|pandas|torch|nn|dask|distributed|zarr|numcodecs|numba|nb|zstandard|lz4|"
               r"matplotlib|plt|ipywidgets|safetensors|collections|typing|pathlib|argparse|os|io|abc|enum|"
               r"dataclasses|concurrent|subprocess|tempfile|types|ml_dtypes|papermill|nbformat|json)\b.*"),
    (r"py:class", r"(Path|Any|Callable|Iterable|Iterator|Mapping|Sequence|MutableMapping|Hashable|Self|Literal|"
                  r"NoReturn|TypeVar|Generator|ArrayLike|NDArray|DTypeLike|Figure|Axes|Dataset|DataArray|"
                  r"DataFrame|Series|Client|Future|Delayed|Module|Optimizer|Tensor|Generator|Buffer|"
                  r"optional|callable|array-like|array_like|default|ndarray|bool|int|float|str|bytes|dict|list|"
                  r"tuple|set|None|object|type|memoryview|bytearray|numpy scalar|sequence|mapping|iterable)"),
    (r"py:obj", r"(optional|None|True|False)"),
    # a builtin generic in a signature (``tuple[int, ...]``) reaches Sphinx split at its commas
    (r"py:class", r"(tuple|dict|list|set|type)\[.*"),
    # a private name (a leading underscore) is not part of the reference: a docstring may name it, unlinked
    (r"py:.*", r"(.*\.)?_\w+(\..*)?"),
]

html_theme = "pydata_sphinx_theme"
html_title = "buddylib"
html_static_path = ["_static"]
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2, "secondary_sidebar_items": ["page-toc"]}
html_sidebars = {"**": ["sidebar-nav-bs"]}
html_show_sourcelink = False


def _copy_notebooks() -> None:
    """The committed notebooks into the source tree (``docs/notebooks/``, gitignored): Sphinx reads sources from
    under its own folder only."""
    out = DOCS / "notebooks"
    out.mkdir(exist_ok=True)
    for nb in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        target = out / nb.name
        if not target.exists() or target.read_bytes() != nb.read_bytes():
            shutil.copyfile(nb, target)


_copy_notebooks()
