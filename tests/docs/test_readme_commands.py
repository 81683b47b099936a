"""README's two commands are what CI runs, and its set-up installs everything the tests import.

* README's set-up block (read here with a Markdown reading of our own) holds exactly the two
  commands that ``.ci/run --print-commands`` says it runs; ``.ci/run`` runs them with ``eval`` and
  installs nothing before the tests run (the lint tools come after).
* Every module that the tests, the package (its optional imports included), the pipelines and
  notebooks the tests run, the gallery scripts and the site's configuration import (by name,
  or through ``import_module("name")`` and the like) is the standard library, the repository's
  own, or provided by a distribution in the dependency closure of ``ppa-dask[test]``
  (pyproject.toml's own lists, followed through the installed distributions' metadata).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata

import paths
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = paths.ROOT
CI = ROOT / ".ci" / "run"


def _setup_block():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## Set-up"))
    fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    return lines[fence + 1 : end]


def test_ci_runs_readmes_two_commands():
    block = _setup_block()
    assert len(block) == 2, block
    setup, tests = (line.split("#")[0].strip() for line in block)
    assert setup.startswith('pip install -e ".[test]"'), setup
    assert tests.startswith("python -m pytest"), tests
    printed = subprocess.run(
        ["bash", str(CI), "--print-commands"], capture_output=True, text=True, timeout=60
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == block


def test_ci_installs_nothing_before_the_tests():
    script = CI.read_text(encoding="utf-8").splitlines()
    code = [line.split("#")[0] for line in script]
    setup = code.index('eval "$setup"')
    tests = next(i for i, line in enumerate(code) if line.startswith('eval "$tests"'))
    assert setup < tests
    # the only install before the tests is README's own; the fresh environment is made first
    assert any("python3 -m venv" in line for line in code[:setup])
    assert not [line for line in code[:tests] if re.search(r"pip\b.*\binstall", line)]
    # lint tools after the tests; pytest's exit 5 (no tests) is a failure
    lint = next(i for i, line in enumerate(code) if '".[dev]"' in line)
    assert lint > tests and "-eq 5" in "\n".join(code[tests : tests + 4])


def _requirement_closure(extra="test"):
    """Canonical names of every distribution ``pip install -e ".[EXTRA]"`` brings in."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name = canonicalize_name(project["name"])
    extras = project["optional-dependencies"]
    todo = [Requirement(r) for r in [*project["dependencies"], *extras[extra]]]
    seen = {name}
    while todo:
        req = todo.pop()
        key = canonicalize_name(req.name)
        if key == name:  # the project's own extras, read from pyproject.toml
            todo += [Requirement(r) for extra in req.extras for r in extras[extra]]
            continue
        if key in seen:
            continue
        seen.add(key)
        for text in metadata.requires(req.name) or []:
            dep = Requirement(text)
            if dep.marker is None or any(
                dep.marker.evaluate({"extra": extra}) for extra in ("", *req.extras)
            ):
                todo.append(dep)
    return seen


# calls that import the module named by their first argument
IMPORTERS = {"import_module", "find_spec", "importorskip", "anchor"}


def _imports(source):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            func = node.func.id if isinstance(node.func, ast.Name) else func
            if func in IMPORTERS and isinstance(node.args[0].value, str):
                yield node.args[0].value.split(".")[0]
        elif isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def _imported_modules():
    # the package too: its optional imports (the bench's anchors, the formats) are what tests use
    sources = [
        *ROOT.glob("tests/**/*.py"),
        *ROOT.glob("examples/*.py"),
        *ROOT.glob("pipelines/*.py"),
    ]
    sources += [
        *ROOT.glob("ppa_dask/**/*.py"),
        ROOT / "docs" / "conf.py",
        ROOT / "docs" / "check_site.py",
    ]
    modules = {m for path in sources for m in _imports(path.read_text(encoding="utf-8"))}
    for nb in ROOT.glob("notebooks/*.ipynb"):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                code = "".join(cell["source"])
                code = "\n".join(line for line in code.splitlines() if not line.startswith("%"))
                modules.update(_imports(code))
    # the site's extensions and theme are imported by Sphinx
    conf = ast.parse((ROOT / "docs" / "conf.py").read_text(encoding="utf-8"))
    for node in conf.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "extensions":
                modules.update(e.split(".")[0] for e in ast.literal_eval(node.value))
            elif node.targets[0].id == "html_theme":
                modules.add(ast.literal_eval(node.value))
    return modules


@pytest.mark.slow
def test_the_test_extra_brings_every_module_the_tests_import():
    own = {p.stem for folder in ("tests", "pipelines") for p in (ROOT / folder).rglob("*.py")}
    own |= {"ppa_dask"}
    third_party = _imported_modules() - own - set(sys.stdlib_module_names)
    assert {"pytest", "sklearn", "sphinx", "xeofs"} <= third_party  # the reading works
    provided = metadata.packages_distributions()
    closure = _requirement_closure()
    missing = {
        module: provided.get(module, ["(not installed)"])
        for module in sorted(third_party)
        if not any(canonicalize_name(d) in closure for d in provided.get(module, []))
    }
    assert not missing, f"imported by the tests but not brought by ppa-dask[test]: {missing}"
