"""Sphinx configuration of the ppa-dask documentation site.

Build (from the repository root, with ``pip install -e ".[docs]"``)::

    sphinx-build -W --keep-going -b html docs docs/_build/html
    python docs/check_site.py docs/_build/html

Generated (git-ignored): ``docs/generated/`` (autosummary stubs), ``docs/auto_examples/``
(sphinx-gallery pages of ``examples/plot_*.py``), ``docs/sg_execution_times.rst`` and
``docs/_build/``. ``-D plot_gallery=0`` builds the gallery pages without running the scripts
(no figures then: ``check_site.py`` would fail, as it should).

Everything here works offline: no intersphinx, no theme or asset fetched at build time.
"""

import os
import pkgutil
import re
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# the package is installed (editable) in the development environment; a plain checkout is
# found through the path
try:
    import ppa_dask
except ModuleNotFoundError:
    sys.path.insert(0, ROOT)
    import ppa_dask

# gallery scripts and autodoc draw with the non-interactive backend
os.environ.setdefault("MPLBACKEND", "Agg")
# the gallery scripts run in this process; one BLAS thread keeps them polite on shared machines
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# -- project ----------------------------------------------------------------------------------

project = "ppa-dask"
author = "the ppa-dask developers"
copyright = "the ppa-dask developers"  # noqa: A001 (Sphinx's name)
release = ppa_dask.__version__
version = ".".join(release.split(".")[:2])

# -- extensions -------------------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    # sphinx-gallery's own pages are included through the gallery index; the execution-times
    # page it writes at the top is an orphan we do not link
    "sg_execution_times.rst",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.codeobj.json",
]

# -- autodoc / autosummary / numpydoc ---------------------------------------------------------

autosummary_generate = True
autosummary_imported_members = True
# scikit-learn's metadata-routing setters (set_fit_request, ...) are generated per class and
# their docstrings point into scikit-learn's own glossary: not documented here
SKLEARN_GENERATED = r"set_\w+_request"
autodoc_default_options = {"members": True}  # not inherited members, no "Bases:" line
autodoc_typehints = "none"  # the numpydoc "Parameters" sections carry the types
autodoc_member_order = "bysource"
# signatures show the evaluated defaults (block_rows=8192, not kernels.SUB_BLOCK_ROWS)
autodoc_preserve_defaults = False

numpydoc_show_class_members = False  # autosummary's class template lists the members
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
# numpydoc's docstring validation stays off (numpydoc_validation_checks = set(), the default)
# and no warning is suppressed: the two docstring problems the build still meets are worked
# around below, by name, until the docstrings are fixed

# -- MyST -------------------------------------------------------------------------------------

myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

# -- sphinx-gallery ---------------------------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "examples"),
    "gallery_dirs": os.path.join(HERE, "auto_examples"),
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "show_memory": False,
    "plot_gallery": "True",
    # a script that raises fails the build, with or without -W: sphinx-gallery raises at the
    # end of the build with every failing script's traceback (not a warning, which only -W
    # would make an error); not aborting at the first one lets --keep-going report them all
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    # links from the API pages to the examples that use a name
    "doc_module": ("ppa_dask",),
    "backreferences_dir": os.path.join(HERE, "generated", "backreferences"),
    "reference_url": {"ppa_dask": None},
    "min_reported_time": 1,
}

# -- HTML -------------------------------------------------------------------------------------

# pydata-sphinx-theme, the theme of the ecosystem's sites (numpy, scipy, xarray, Dask): its
# content column is as wide as the window allows and its code blocks stay inside it at the
# default width (alabaster's fixed 1100 px page let long lines run off); it ships its fonts and
# icons, so the build fetches nothing. tests/docs/test_site.py checks the code blocks in Chromium.
html_theme = "pydata_sphinx_theme"
html_title = f"ppa-dask {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}

# matplotlib's font cache message and the like must not turn into build errors
warnings.filterwarnings(
    "ignore", category=UserWarning, message="Matplotlib is currently using agg"
)

# -- the API page covers every __all__ --------------------------------------------------------

API_PACKAGES = (
    "ppa_dask",
    "ppa_dask.nlpca",
    "ppa_dask.geometry",
    "ppa_dask.information",
    "ppa_dask.ensemble",
    "ppa_dask.stability",
    "ppa_dask.vsk",
    "ppa_dask.store",
    "ppa_dask.datasets",
    "ppa_dask.cluster",
    "ppa_dask.plotting",
)
# names of an __all__ that are not objects to document
API_SKIP = {"__version__"}


def _api_entries(path):
    """Fully qualified names listed in the autosummary blocks of ``api.rst``."""
    names, module, in_block = [], None, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if stripped.startswith(".. currentmodule::"):
                module, in_block = stripped.split("::", 1)[1].strip(), False
            elif stripped.startswith(".. autosummary::"):
                in_block = True
            elif in_block and line.startswith("   ") and stripped and not stripped.startswith(":"):
                name = stripped.lstrip("~")
                names.append(name if name.startswith("ppa_dask.") else f"{module}.{name}")
            elif in_block and stripped and not line.startswith(" "):
                in_block = False
    return names


def check_api_page(app):
    """Warn (an error under ``-W``) for every public name that ``api.rst`` does not list."""
    import importlib

    from sphinx.util import logging

    logger = logging.getLogger("ppa_dask.docs")
    entries = _api_entries(os.path.join(app.srcdir, "api.rst"))
    documented = {}
    for name in entries:
        try:
            documented[id(pkgutil.resolve_name(name))] = name
        except (ImportError, AttributeError):
            logger.warning("api.rst lists %s, which does not exist", name)
    for package in API_PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            if name in API_SKIP or f"{package}.{name}" in entries:
                continue
            obj = getattr(module, name)
            # a re-export is covered by its documented original; plain values (ints, tuples)
            # are identified by name only
            if isinstance(obj, (type, type(check_api_page))) and id(obj) in documented:
                continue
            logger.warning("%s.%s is public (in __all__) but missing from api.rst", package, name)


def skip_generated_members(app, what, name, obj, skip, options):
    if re.fullmatch(SKLEARN_GENERATED, name):
        return True
    return None


def draw_reproduction_figures(app):
    """The figures of docs/reproductions.md, drawn from the saved records in results/ at each
    build (into the git-ignored docs/generated/reproductions/), never committed as images."""
    from ppa_dask.app.reproductions import draw_all_figures

    draw_all_figures(
        os.path.join(ROOT, "results"), os.path.join(app.srcdir, "generated", "reproductions")
    )


def setup(app):
    app.connect("builder-inited", check_api_page)
    app.connect("builder-inited", draw_reproduction_figures)
    app.connect("autodoc-skip-member", skip_generated_members)
