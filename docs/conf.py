"""Sphinx configuration of the documentation site (``make docs``).

Sphinx rather than MkDocs: the API pages come from the docstrings through
autodoc/autosummary (the estimators' numpy-style sections through
napoleon), the gallery runs every example at build time (sphinx-gallery,
the form scikit-learn, dask-ml and xarray users know), and the Markdown
pages the repository already has (results, benchmarks, reliability,
architecture) are included as they are through MyST.
"""

import os
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

import infoclust_dask  # noqa: E402

project = "infoclust_dask"
author = "the infoclust_dask developers"
copyright = "2026, the infoclust_dask developers"
release = version = infoclust_dask.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "cli_reference",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "_templates", "_estimator_checks.md", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.json", "auto_examples/*.md5", "**.codeobj.json"]

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": False}
autodoc_typehints = "none"  # the signatures show the types; the docstrings say what they mean
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
intersphinx_mapping = {}  # no internet at build time: no inventories are fetched

myst_heading_anchors = 3
# the repository's own Markdown pages (BENCHMARKS, RESULTS, ...) link to scripts and tests
# by their repository paths and skip heading levels: those are not site errors
suppress_warnings = ["myst.header", "myst.xref_missing", "misc.highlighting_failure"]

html_theme = "pydata_sphinx_theme"
html_title = "infoclust_dask"
html_theme_options = {"navigation_with_keys": False, "show_prev_next": False}
html_static_path = []

sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    # an example that warns fails the build, as a test would
    "only_warn_on_example_error": False,
}

# the gallery's examples run here: their warnings are errors (as `sphinx-build -W` makes Sphinx's own)
warnings.filterwarnings("error", module=r"infoclust_dask(\..*)?$")
os.environ.setdefault("INFOCLUST_STORAGE", str(HERE / "_build" / "storage"))


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn adds a ``set_<method>_request`` for every method taking ``sample_weight``;
    their docstrings point into scikit-learn's own glossary, which this site does not hold."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
