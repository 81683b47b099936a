"""The one module map (docs/guide/layout.md, "Modules") lists exactly the package's modules.

The map is a tree: four spaces of indentation per level, a name ending in ``/`` is a subpackage
and a name ending in ``.py`` a module, each followed by its one-line description. The test
reads the tree, rebuilds the paths it names and compares them with the files of ``ppa_dask``:
a module added without a line, or a line left behind by a module moved or removed, fails it.
"""

from __future__ import annotations

import ast
import re

import paths

PACKAGE = paths.ROOT / "ppa_dask"
ROOT = paths.ROOT
LAYOUT = ROOT / "docs" / "guide" / "layout.md"
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[\w.]+/?)(?: {2,}(?P<text>\S.*))?$")


def _map_block(text):
    """The fenced text block that follows the "## Modules" heading."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```text\n(.*?)\n```", section, re.S)
    assert match, "docs/guide/layout.md: no ```text block under ## Modules"
    return match.group(1).splitlines()


def parse_map(lines):
    """The paths the map names, relative to the repository, and the lines it cannot read."""
    named, problems, parents = [], [], []
    for number, line in enumerate(lines, 1):
        match = ENTRY.match(line)
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


def package_paths():
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
    named, problems = parse_map(_map_block(LAYOUT.read_text()))
    assert problems == []
    duplicates = sorted({p for p in named if named.count(p) > 1})
    assert duplicates == [], f"named twice in the module map: {duplicates}"
    actual = package_paths()
    missing = sorted(set(actual) - set(named))
    stale = sorted(set(named) - set(actual))
    assert missing == [], f"modules missing from the map in docs/guide/layout.md: {missing}"
    assert stale == [], f"the map in docs/guide/layout.md names what does not exist: {stale}"


def test_the_map_reader_catches_what_it_guards():
    # the reader itself, on a small tree: nesting, a package's children, a misplaced line
    named, problems = parse_map(
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
    _, problems = parse_map(["ppa_dask/   the package", "        deep.py   skips a level"])
    assert len(problems) == 1 and "indentation" in problems[0]
    _, problems = parse_map(["ppa_dask/   the package", "    nodesc.py"])
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
