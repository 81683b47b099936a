"""Check a built documentation site: gallery figures present, API signatures rendered.

Usage (after ``sphinx-build -W --keep-going -b html docs docs/_build/html``)::

    python docs/check_site.py [docs/_build/html]

Checks, with the standard library only (it imports ``ppa_dask`` for the expected signatures):

* every gallery script ``examples/plot_*.py`` has its page ``auto_examples/<name>.html``, and
  that page shows at least one figure: an ``<img>`` whose ``src`` is a PNG that exists in the
  build and is a real PNG file (not empty, PNG signature);
* the gallery index links every example with its thumbnail (an existing PNG);
* the API pages render the signatures of the main entry points (``PPA``, ``PPA.fit``,
  ``frenet_serret``, ...): the object's anchor exists and its parameter names appear in the
  order of :func:`inspect.signature` of the live object;
* the landing page, the user guide pages, the API index and the design notes exist.

Exit status 0 when everything holds, 1 otherwise (each failure printed on one line).
"""

from __future__ import annotations

import argparse
import inspect
import os
import pkgutil
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# (page under generated/, anchor id, object path) of signatures the API pages must show
SIGNATURES = [
    ("ppa_dask.PPA", "ppa_dask.PPA", "ppa_dask.PPA"),
    ("ppa_dask.PPA", "ppa_dask.PPA.fit", "ppa_dask.PPA.fit"),
    ("ppa_dask.PPA", "ppa_dask.PPA.transform", "ppa_dask.PPA.transform"),
    ("ppa_dask.PPA", "ppa_dask.PPA.inverse_transform", "ppa_dask.PPA.inverse_transform"),
    ("ppa_dask.PPA", "ppa_dask.PPA.jacobian", "ppa_dask.PPA.jacobian"),
    ("ppa_dask.PPA", "ppa_dask.PPA.metric", "ppa_dask.PPA.metric"),
    ("ppa_dask.PPA", "ppa_dask.PPA.reconstruction_errors", "ppa_dask.PPA.reconstruction_errors"),
    ("ppa_dask.PPA", "ppa_dask.PPA.save", "ppa_dask.PPA.save"),
    ("ppa_dask.PPA", "ppa_dask.PPA.load", "ppa_dask.PPA.load"),
    (
        "ppa_dask.geometry.frenet_serret",
        "ppa_dask.geometry.frenet_serret",
        "ppa_dask.geometry.frenet_serret",
    ),
    (
        "ppa_dask.information.multi_information_reduction",
        "ppa_dask.information.multi_information_reduction",
        "ppa_dask.information.multi_information_reduction",
    ),
    (
        "ppa_dask.ensemble.FeatureBaggingRegressor",
        "ppa_dask.ensemble.FeatureBaggingRegressor.fit",
        "ppa_dask.ensemble.FeatureBaggingRegressor.fit",
    ),
    (
        "ppa_dask.ensemble.FeatureBaggingPPA",
        "ppa_dask.ensemble.FeatureBaggingPPA",
        "ppa_dask.ensemble.FeatureBaggingPPA",
    ),
    (
        "ppa_dask.stability.feature_instability",
        "ppa_dask.stability.feature_instability",
        "ppa_dask.stability.feature_instability",
    ),
    ("ppa_dask.vsk.vsk_gram", "ppa_dask.vsk.vsk_gram", "ppa_dask.vsk.vsk_gram"),
    (
        "ppa_dask.vsk.condition_number",
        "ppa_dask.vsk.condition_number",
        "ppa_dask.vsk.condition_number",
    ),
    ("ppa_dask.store.save_model", "ppa_dask.store.save_model", "ppa_dask.store.save_model"),
    ("ppa_dask.store.write_array", "ppa_dask.store.write_array", "ppa_dask.store.write_array"),
    ("ppa_dask.datasets.make_cube", "ppa_dask.datasets.make_cube", "ppa_dask.datasets.make_cube"),
    (
        "ppa_dask.datasets.make_helix",
        "ppa_dask.datasets.make_helix",
        "ppa_dask.datasets.make_helix",
    ),
    (
        "ppa_dask.cluster.local_client",
        "ppa_dask.cluster.local_client",
        "ppa_dask.cluster.local_client",
    ),
    (
        "ppa_dask.plotting.principal_grids",
        "ppa_dask.plotting.principal_grids",
        "ppa_dask.plotting.principal_grids",
    ),
]

PAGES = [
    "index.html",
    "api.html",
    "design.html",
    "guide/index.html",
    "guide/fit.html",
    "guide/geometry.html",
    "guide/information.html",
    "guide/bagging.html",
    "guide/vsk.html",
    "guide/io.html",
    "guide/cli.html",
    "guide/clusters.html",
    "auto_examples/index.html",
]


class _Page(HTMLParser):
    """Collects ``<img>`` sources, links, and the parameter names of each signature.

    Sphinx renders a parameter as ``<em class="sig-param">`` holding a ``<span class="n">``
    with its name (after a ``<span class="o">`` star for ``*args``); a bare ``*`` separator has
    no name span and is skipped, as :func:`inspect.signature` lists no parameter for it.
    """

    VOID = {"img", "br", "hr", "meta", "link", "input", "wbr", "col", "area", "base", "source"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.images = []
        self.links = []
        self.signatures = {}  # anchor id -> list of parameter names
        self._stack = []  # (tag, role) of the open elements inside a signature
        self._sig = None
        self._name = None  # text of the parameter name being read
        self._named = False  # the current parameter already has its name

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in self.VOID:
            return
        if self._sig is None:
            if tag == "dt" and "sig" in classes and a.get("id"):
                self._sig, self._stack = a["id"], [("dt", "sig")]
                self.signatures[self._sig] = []
            return
        role = None
        if tag == "em" and "sig-param" in classes:
            role, self._named = "param", False
        elif tag == "span" and "n" in classes and self._in("param") and not self._named:
            role, self._name = "name", []
        self._stack.append((tag, role))

    def _in(self, role):
        return any(r == role for _, r in self._stack)

    def handle_endtag(self, tag):
        if self._sig is None or tag in self.VOID:
            return
        while self._stack:
            open_tag, role = self._stack.pop()
            if role == "name":
                self.signatures[self._sig].append("".join(self._name).strip())
                self._name, self._named = None, True
            if open_tag == tag:
                break
        if not self._stack:
            self._sig = None

    def handle_data(self, data):
        if self._name is not None:
            self._name.append(data)


def _parse(path):
    page = _Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    page.close()
    return page


def _local_target(html_root, page_path, src):
    """Filesystem path of a relative ``src``/``href`` of ``page_path`` (None if external)."""
    parsed = urlparse(src)
    if parsed.scheme or parsed.netloc or not parsed.path:
        return None
    base = os.path.dirname(page_path)
    return os.path.normpath(os.path.join(base, unquote(parsed.path)))


def _is_png(path):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return head == PNG_SIGNATURE and os.path.getsize(path) > 100


def expected_parameters(dotted):
    """Parameter names of the live object, as Sphinx shows them (``self``/``cls`` dropped)."""
    obj = pkgutil.resolve_name(dotted)
    sig = inspect.signature(obj)
    names = [p.name for p in sig.parameters.values()]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return names


def check_gallery(html_root, failures):
    examples = sorted(
        f[:-3]
        for f in os.listdir(os.path.join(ROOT, "examples"))
        if f.startswith("plot_") and f.endswith(".py")
    )
    if not examples:
        failures.append("no examples/plot_*.py found")
    index = os.path.join(html_root, "auto_examples", "index.html")
    index_page = _parse(index) if os.path.exists(index) else None
    if index_page is None:
        failures.append("auto_examples/index.html missing")
    for name in examples:
        path = os.path.join(html_root, "auto_examples", f"{name}.html")
        if not os.path.exists(path):
            failures.append(f"gallery page missing: auto_examples/{name}.html")
            continue
        page = _parse(path)
        figures = [
            src
            for src in page.images
            if f"sphx_glr_{name}_" in src and src.lower().endswith(".png") and "thumb" not in src
        ]
        if not figures:
            failures.append(
                f"auto_examples/{name}.html: no figure (<img> of sphx_glr_{name}_*.png)"
            )
        for src in figures:
            target = _local_target(html_root, path, src)
            if target is None or not _is_png(target):
                failures.append(
                    f"auto_examples/{name}.html: <img src={src!r}> is not an existing PNG"
                )
        if index_page is not None:
            if not any(h.split("#")[0].endswith(f"{name}.html") for h in index_page.links):
                failures.append(f"auto_examples/index.html does not link {name}.html")
            thumbs = [s for s in index_page.images if f"sphx_glr_{name}_thumb" in s]
            if not thumbs:
                failures.append(f"auto_examples/index.html: no thumbnail of {name}")
            for src in thumbs:
                target = _local_target(html_root, index, src)
                if target is None or not _is_png(target):
                    failures.append(f"auto_examples/index.html: thumbnail {src!r} is not a PNG")
    return len(examples)


def check_signatures(html_root, failures):
    pages = {}
    for page_name, anchor, dotted in SIGNATURES:
        path = os.path.join(html_root, "generated", f"{page_name}.html")
        if path not in pages:
            pages[path] = _parse(path) if os.path.exists(path) else None
        page = pages[path]
        if page is None:
            failures.append(f"API page missing: generated/{page_name}.html")
            continue
        if anchor not in page.signatures:
            failures.append(f"generated/{page_name}.html: no signature of {anchor}")
            continue
        shown = page.signatures[anchor]
        try:
            expected = expected_parameters(dotted)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            failures.append(f"{dotted}: cannot take its signature ({exc})")
            continue
        if shown != expected:
            failures.append(
                f"generated/{page_name}.html: {anchor} shows parameters {shown}, "
                f"the code has {expected}"
            )


def check_pages(html_root, failures):
    for rel in PAGES:
        if not os.path.exists(os.path.join(html_root, rel)):
            failures.append(f"page missing: {rel}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "html",
        nargs="?",
        default=os.path.join(HERE, "_build", "html"),
        help="the built HTML folder (default: docs/_build/html)",
    )
    args = parser.parse_args(argv)
    html_root = os.path.abspath(args.html)
    if not os.path.isdir(html_root):
        print(f"check_site: {html_root} is not a folder (build the site first)", file=sys.stderr)
        return 1
    failures = []
    check_pages(html_root, failures)
    n_examples = check_gallery(html_root, failures)
    check_signatures(html_root, failures)
    for line in failures:
        print(f"check_site: FAIL {line}")
    if failures:
        print(f"check_site: {len(failures)} problem(s) in {html_root}")
        return 1
    print(
        f"check_site: ok ({len(PAGES)} pages, {n_examples} gallery figures, "
        f"{len(SIGNATURES)} signatures) in {html_root}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
