"""README's docs line, ``pip install -e ".[docs]"``, brings what the site's build runs: each
gallery script (examples/plot_*.py) runs in a child process where only the standard library, the
package and the distributions of ``ppa-dask[docs]`` (pyproject.toml's lists, followed through the
installed distributions' metadata) can be imported, as in a fresh environment with that extra
alone. The scripts' own imports are not enough to tell: ``open_cube`` reads GeoTIFFs with
rioxarray, which the script never names."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import paths
import pytest
from test_readme_commands import _requirement_closure

# the gallery scripts run in child processes (seconds each)
pytestmark = pytest.mark.slow

EXAMPLES = sorted((paths.ROOT / "examples").glob("plot_*.py"))

# the child: a finder refusing every top-level module that only distributions outside the
# allowed set provide (modules no distribution claims are let by), then the script
RUN_WITH_ONLY = """
import importlib.abc, runpy, sys
from importlib import metadata
from packaging.utils import canonicalize_name

allowed = set(sys.argv[2].split(","))
provided = metadata.packages_distributions()

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        dists = {canonicalize_name(d) for d in provided.get(top, [])}
        if dists and not dists & allowed:
            raise ModuleNotFoundError(f"No module named {top!r} (not brought by the extra)", name=top)
        return None

sys.meta_path.insert(0, Refuse())
runpy.run_path(sys.argv[1], run_name="__main__")
"""


def test_the_docs_extra_brings_every_module_the_gallery_runs(tmp_path):
    allowed = _requirement_closure("docs") | {"ppa-dask"}
    assert "sphinx-gallery" in allowed and "pytest" not in allowed  # the reading works
    env = {
        **os.environ,
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(paths.ROOT),
    }
    failed = {}
    for script in EXAMPLES:
        run = subprocess.run(
            [sys.executable, "-c", RUN_WITH_ONLY, str(script), ",".join(sorted(allowed))],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env=env,
        )
        if run.returncode != 0:
            failed[script.name] = run.stderr.strip().splitlines()[-1:]
    assert len(EXAMPLES) >= 7
    assert not failed, f"gallery scripts that need more than ppa-dask[docs]: {failed}"


def _readme_docs_command():
    """README's site build line (``python -m sphinx ... docs docs/_build/html``), as words."""
    text = (paths.ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [li for li in text.splitlines() if li.startswith("python -m sphinx")]
    words = line.split("#")[0].split()
    assert words[-2:] == ["docs", "docs/_build/html"], words
    return words[:-2]


def _gallery_conf_options(*names):
    """The values docs/conf.py gives ``names`` in ``sphinx_gallery_conf`` (read, not run)."""
    tree = ast.parse((paths.ROOT / "docs" / "conf.py").read_text(encoding="utf-8"))
    (node,) = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "sphinx_gallery_conf"
    ]
    conf = {ast.literal_eval(k): v for k, v in zip(node.keys, node.values)}
    return {name: ast.literal_eval(conf[name]) for name in names}


def test_an_example_that_fails_fails_readmes_docs_build(tmp_path):
    # a site of one gallery whose one script raises, built with README's flags and the
    # project's settings for a failing example
    options = _gallery_conf_options("abort_on_example_error", "only_warn_on_example_error")
    src, examples = tmp_path / "docs", tmp_path / "examples"
    src.mkdir()
    examples.mkdir()
    (examples / "README.rst").write_text("Gallery\n=======\n")
    (examples / "plot_fails.py").write_text(
        '"""\nFails\n=====\n"""\n\nraise RuntimeError("boom")\n'
    )
    (src / "index.rst").write_text("Home\n====\n\n.. toctree::\n\n   auto_examples/index\n")
    conf = {
        "examples_dirs": str(examples),
        "gallery_dirs": str(src / "auto_examples"),
        "filename_pattern": "/plot_",
        **options,
    }
    (src / "conf.py").write_text(
        f"extensions = ['sphinx_gallery.gen_gallery']\nsphinx_gallery_conf = {conf!r}\n"
    )
    readme = [sys.executable if w == "python" else w for w in _readme_docs_command()]
    # README's line, and the same without -W: the failure is the setting's, not only -W's
    for cmd in (readme, [w for w in readme if w != "-W"]):
        run = subprocess.run(
            [*cmd, str(src), str(tmp_path / "html")],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            # without colours (Sphinx colours its messages under CI=true, as in .ci/run)
            env={**os.environ, "MPLBACKEND": "Agg", "NO_COLOR": "1"},
        )
        assert run.returncode != 0, (cmd, run.stdout[-2000:])
        stderr = re.sub(r"\x1b\[[0-9;]*m", "", run.stderr)
        assert re.search(r"plot_fails\.py.* fail", stderr), stderr
        assert "RuntimeError: boom" in stderr, stderr
