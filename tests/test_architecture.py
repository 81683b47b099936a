"""The layout is the architecture: checks that read the package's source, not its behaviour.

The layering itself (application above the concept packages, those above the engine, the
engine above I/O, the shared leaf at the bottom, no cycles) is import-linter's contract in
pyproject.toml, run by .ci/run; these tests hold the rules import-linter cannot express.
"""

from __future__ import annotations

import ast
import importlib
import json
import pathlib
import re
import subprocess
import sys

import pytest

import ppa_dask

PACKAGE = pathlib.Path(ppa_dask.__file__).parent
ROOT = PACKAGE.parent
MODULES = sorted(PACKAGE.rglob("*.py"))
# private names of the standard library's namedtuple API, which are public despite the underscore
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make"}


def _module_name(path):
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _tree(path):
    return ast.parse(path.read_text(), filename=str(path))


def _ppa_dask_imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith("ppa_dask")
        ):
            yield node
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ppa_dask"):
                    yield node


def _private_uses(tree):
    """``from x import _name`` of the package, and ``obj._name`` on anything but self/cls."""
    found = []
    for node in _ppa_dask_imports(tree):
        if isinstance(node, ast.ImportFrom):
            found += [
                f"line {node.lineno}: imports {node.module}.{a.name}"
                for a in node.names
                if a.name.startswith("_") and a.name != "__version__"
            ]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            continue
        if node.attr.startswith("__") or node.attr in NAMEDTUPLE_API:
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            continue
        if isinstance(base, ast.Call) and getattr(base.func, "id", None) == "super":
            continue
        found.append(f"line {node.lineno}: uses {ast.unparse(node)}")
    return found


def _function_local_imports(tree):
    found = []

    class Visitor(ast.NodeVisitor):
        depth = 0

        def visit_FunctionDef(self, node):
            self.depth += 1
            self.generic_visit(node)
            self.depth -= 1

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_ImportFrom(self, node):
            if self.depth and (node.level or (node.module or "").startswith("ppa_dask")):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")

        def visit_Import(self, node):
            if self.depth and any(a.name.startswith("ppa_dask") for a in node.names):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")

    Visitor().visit(tree)
    return found


def _built_getattr(tree):
    """``getattr(obj, <a name built from pieces>)``: an f-string, a ``+`` or a ``%``/``format``
    of strings, which no reader or tool can follow to the attribute it reaches."""
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
        ):
            continue
        name = node.args[1]
        built = isinstance(name, ast.JoinedStr) or (
            isinstance(name, ast.BinOp) and isinstance(name.op, (ast.Add, ast.Mod))
        )
        built = built or (
            isinstance(name, ast.Call) and getattr(name.func, "attr", None) == "format"
        )
        if built:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_no_dispatch_by_a_built_attribute_name(path):
    # each stage, command and loader is named where it is used (an object in an explicit
    # order, a mapping), never reached through a name put together at run time
    assert _built_getattr(_tree(path)) == []


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_no_module_uses_another_modules_private_names(path):
    assert _private_uses(_tree(path)) == []


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_the_package_is_imported_at_module_level_only(path):
    # a function-local import of the package hides a cycle or a layer violation from the
    # import-linter contract; the layers make every import possible at module level
    assert _function_local_imports(_tree(path)) == []


def test_the_scanners_find_what_they_look_for():
    # the two checks above would pass vacuously if they matched nothing: feed them violations
    bad = ast.parse(
        "from ppa_dask.ppa.kernels import _gram\n"
        "def f(model):\n"
        "    from ppa_dask import store\n"
        "    return model._model_params(), self._ok, namedtuple_value._replace()\n"
    )
    assert len(_private_uses(bad)) == 2
    assert _function_local_imports(bad) == ["line 3: from ppa_dask import store"]
    built = ast.parse(
        'getattr(self, f"_run_{stage}")()\n'
        'getattr(datasets, "load_" + name)\n'
        'getattr(x, "{}".format(n))\n'
        'getattr(x, name), getattr(x, "fixed")\n'
    )
    assert sorted(line.split(":")[0] for line in _built_getattr(built)) == [
        "line 1",
        "line 2",
        "line 3",
    ]


# the scripts under pipelines/ share code only through the package (ppa_dask.app.scripts,
# experiments, reproductions): a script importing a sibling runs only with pipelines/ on
# sys.path, and ties the two scripts' options and outputs together unseen (issue 24)
SCRIPTS = sorted((ROOT / "pipelines").glob("*.py"))


def _script_imports(tree, scripts):
    """Imports of a module named like one of ``scripts`` (the stems of pipelines/*.py)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(name.split(".")[0] in scripts for name in names):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.name)
def test_no_script_imports_another_script(path):
    assert _script_imports(_tree(path), {script.stem for script in SCRIPTS}) == []


def test_the_script_import_scanner_finds_what_it_looks_for():
    # the check above passes vacuously without scripts or with a scanner that matches nothing
    assert len(SCRIPTS) >= 14
    bad = ast.parse(
        "import numpy\n"
        "from paper_dimensionality_reduction import split_seed\n"
        "import os, paper_metric_knn as knn\n"
        "from ppa_dask.app.experiments import DATASET_LABELS\n"
    )
    assert _script_imports(bad, {"paper_dimensionality_reduction", "paper_metric_knn"}) == [
        "line 2: from paper_dimensionality_reduction import split_seed",
        "line 3: import os, paper_metric_knn as knn",
    ]


# the one place that tests whether an input is an xarray object (besides the test's definition
# in utils): the seam every estimator's methods go through (issue 24)
XARRAY_SEAM = {"ppa_dask/store/seam.py", "ppa_dask/utils/arrays.py"}
# packages of estimators and the functions of fitted models: arrays only, xarray via the seam
ESTIMATOR_PACKAGES = ("ppa", "ensemble", "geometry", "vsk", "information", "nlpca", "stability")


def _xarray_tests(tree):
    """Uses of ``is_xarray`` and of ``xarray`` itself (an import, ``xr.DataArray`` ...)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "is_xarray":
            found.append(f"line {node.lineno}: is_xarray")
        elif isinstance(node, ast.Attribute) and node.attr == "is_xarray":
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "is_xarray" for a in node.names):
            found.append(f"line {node.lineno}: imports is_xarray")
        elif isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "xarray" for a in node.names
        ):
            found.append(f"line {node.lineno}: imports xarray")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "xarray":
            found.append(f"line {node.lineno}: imports from xarray")
    return found


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_only_the_seam_tests_for_xarray_input(path):
    rel = path.relative_to(ROOT).as_posix()
    if rel in XARRAY_SEAM:
        return
    found = _xarray_tests(_tree(path))
    if path.relative_to(PACKAGE).parts[0] in ESTIMATOR_PACKAGES:
        assert found == [], "an estimator handles xarray itself; use ppa_dask.store.seam"
    else:
        assert [f for f in found if "is_xarray" in f] == []


def test_the_xarray_scanner_finds_what_it_looks_for():
    bad = ast.parse(
        "import xarray as xr\n"
        "from ppa_dask.utils.arrays import is_xarray\n"
        "def f(X):\n"
        "    return arrays.is_xarray(X) or is_xarray(X)\n"
    )
    assert len(_xarray_tests(bad)) == 4
    # and the seam itself is what it exempts
    assert _xarray_tests(_tree(ROOT / "ppa_dask/store/seam.py"))


def test_the_shared_leaf_imports_nothing_else_of_the_package():
    for path in sorted((PACKAGE / "utils").rglob("*.py")):
        for node in _ppa_dask_imports(_tree(path)):
            module = getattr(node, "module", None) or ""
            assert module.startswith("ppa_dask.utils"), f"{path.name} line {node.lineno}"


def test_every_subpackage_says_what_it_holds():
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(_tree(init))
        assert doc and len(doc.split()) >= 12, f"{init.parent.name} has no real docstring"


@pytest.mark.parametrize(
    "module, names",
    [
        (
            "ppa_dask",
            [
                "PPA",
                "FeatureBaggingRegressor",
                "FeatureBaggingClassifier",
                "FeatureBaggingPPA",
                "make_ppa_knn",
                "__version__",
            ],
        ),
        (
            "ppa_dask.datasets",
            [
                "make_helix",
                "make_curved_manifold",
                "make_cube",
                "write_zarr",
                "load_paper_dataset",
                "make_parabolas",
                "PAPER_DATASETS",
            ],
        ),
        (
            "ppa_dask.store",
            [
                "save_model",
                "load_model",
                "model_info",
                "ModelFileError",
                "write_array",
                "open_array",
                "open_input",
                "register_estimator",
            ],
        ),
        (
            "ppa_dask.cluster",
            ["local_client", "dashboard_link", "open_client", "read_cluster_config"],
        ),
        (
            "ppa_dask.geometry",
            [
                "frenet_serret",
                "axis_derivatives",
                "coefficient_variances",
                "metric_from_jacobian",
                "make_ppa_knn",
                "make_mahalanobis_knn",
            ],
        ),
        ("ppa_dask.information", ["multi_information_reduction", "marginal_entropies"]),
        ("ppa_dask.stability", ["feature_instability", "instance_instability", "bagging_rounds"]),
        (
            "ppa_dask.vsk",
            ["VariablyScaled", "PPAScaling", "make_svm_vsk", "make_krn_vsk", "condition_number"],
        ),
        ("ppa_dask.ensemble", ["FeatureBaggingRegressor", "FeatureBaggingPPA"]),
        ("ppa_dask.plotting", ["principal_grids"]),
    ],
)
def test_documented_import_paths_keep_working(module, names):
    imported = importlib.import_module(module)
    for name in names:
        assert hasattr(imported, name), f"{module}.{name}"
    if hasattr(imported, "__all__"):
        assert set(names) <= set(imported.__all__) | {"__version__"}


@pytest.mark.parametrize("module", ["ppa_dask.cluster", "ppa_dask.plotting"])
@pytest.mark.slow
def test_the_library_paths_import_without_the_application(module):
    # the documented cluster and plotting helpers are real packages below the application: a
    # fresh interpreter importing one loads nothing of ppa_dask.app, and nothing beyond what
    # `import ppa_dask` loads but the package itself and the shared leaf
    code = (
        "import json, sys\n"
        "import ppa_dask\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        "print(json.dumps([sorted(m for m in sys.modules if m.startswith('ppa_dask.app')),\n"
        "                  sorted(m for m in set(sys.modules) - before\n"
        "                         if m.startswith('ppa_dask'))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    app, added = json.loads(done.stdout.splitlines()[-1])
    assert app == []
    assert added and all(
        m.split(".")[:2] in (module.split("."), ["ppa_dask", "utils"]) for m in added
    ), added


def test_every_file_the_code_and_docs_name_exists_in_the_repository():
    # references such as docs/design.md or ppa_dask/datasets/data/PROVENANCE.md must resolve in
    # a clone: nothing in the repository may point to a file outside it
    pattern = re.compile(r"\b((?:docs|ppa_dask|pipelines|cluster|notebooks|tests)/[\w./-]+\.\w+)")
    sources = MODULES + sorted(ROOT.glob("*.md")) + sorted((ROOT / "docs").rglob("*.md"))
    missing = []
    for path in sources:
        for ref in pattern.findall(path.read_text()):
            ref = ref.rstrip(".")
            if "*" not in ref and not (ROOT / ref).exists():
                missing.append(f"{path.relative_to(ROOT)} names {ref}")
    assert missing == []
    for path in MODULES:
        assert "DESIGN.md" not in path.read_text(), f"{path.relative_to(ROOT)} cites DESIGN.md"


# The one module map (docs/guide/layout.md, "Modules") lists exactly the package's modules. The
# map is a tree: four spaces of indentation per level, a name ending in "/" is a subpackage and a
# name ending in ".py" a module, each followed by its one-line description. A module added
# without a line, or a line left behind by a module moved or removed, fails here.

LAYOUT = ROOT / "docs" / "guide" / "layout.md"
MAP_ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[\w.]+/?)(?: {2,}(?P<text>\S.*))?$")


def _map_block(text):
    """The fenced text block that follows the "## Modules" heading."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```text\n(.*?)\n```", section, re.S)
    assert match, "docs/guide/layout.md: no ```text block under ## Modules"
    return match.group(1).splitlines()


def _parse_map(lines):
    """The paths the map names, relative to the repository, and the lines it cannot read."""
    named, problems, parents = [], [], []
    for number, line in enumerate(lines, 1):
        match = MAP_ENTRY.match(line)
        if not match:
            problems.append(f"line {number}: not 'name  description': {line!r}")
            continue
        depth, rest = divmod(len(match["indent"]), 4)
        name = match["name"]
        if rest or depth > len(parents) or (depth == 0 and named):
            problems.append(f"line {number}: indentation does not nest under a package: {line!r}")
            continue
        if not name.endswith(("/", ".py")):
            problems.append(f"line {number}: {name!r} is neither a package/ nor a module.py")
            continue
        if not match["text"]:
            problems.append(f"line {number}: {name!r} has no description")
        del parents[depth:]
        path = "".join(parents) + name
        named.append(path)
        if name.endswith("/"):
            parents.append(name)
    return named, problems


def _package_paths():
    """Every subpackage (as ``dir/``) and module of ppa_dask, ``__init__.py`` files aside."""
    paths = ["ppa_dask/"]
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py":
            if path.parent != PACKAGE:
                paths.append(rel.removesuffix("__init__.py"))
        else:
            paths.append(rel)
    return paths


def test_the_map_names_every_module_of_the_package_and_nothing_else():
    named, problems = _parse_map(_map_block(LAYOUT.read_text()))
    assert problems == []
    duplicates = sorted({p for p in named if named.count(p) > 1})
    assert duplicates == [], f"named twice in the module map: {duplicates}"
    actual = _package_paths()
    missing = sorted(set(actual) - set(named))
    stale = sorted(set(named) - set(actual))
    assert missing == [], f"modules missing from the map in docs/guide/layout.md: {missing}"
    assert stale == [], f"the map in docs/guide/layout.md names what does not exist: {stale}"


def test_the_map_reader_catches_what_it_guards():
    # the reader itself, on a small tree: nesting, a package's children, a misplaced line
    named, problems = _parse_map(
        [
            "ppa_dask/       the package",
            "    a.py        a module",
            "    sub/        a subpackage",
            "        b.py    in the subpackage",
            "    c.py        back at the first level",
        ]
    )
    assert named == ["ppa_dask/", "ppa_dask/a.py", "ppa_dask/sub/", "ppa_dask/sub/b.py"] + [
        "ppa_dask/c.py"
    ]
    assert problems == []
    _, problems = _parse_map(["ppa_dask/   the package", "        deep.py   skips a level"])
    assert len(problems) == 1 and "indentation" in problems[0]
    _, problems = _parse_map(["ppa_dask/   the package", "    nodesc.py"])
    assert len(problems) == 1 and "no description" in problems[0]


def test_the_other_module_lists_point_to_the_map_instead_of_restating_it():
    # design notes and the application's docstring used to keep their own lists, which drifted
    assert "guide/layout.md" in (ROOT / "docs" / "design.md").read_text()
    assert "docs/guide/layout.md" in ast.get_docstring(
        ast.parse((PACKAGE / "app" / "__init__.py").read_text())
    )


def test_every_module_a_package_docstring_names_exists():
    # ":mod:`.name`" in a subpackage's docstring must be one of its modules or subpackages
    stale = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for dots, name in re.findall(r":mod:`(\.+)([\w.]+)`", doc):
            base = init.parents[len(dots) - 1]  # one dot is the package itself
            target = base.joinpath(*name.split("."))
            if not (target.with_suffix(".py").exists() or (target / "__init__.py").exists()):
                stale.append(f"{init.relative_to(ROOT)} names {dots}{name}")
    assert stale == []
