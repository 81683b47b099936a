"""One data-I/O layer: the formats are declared in ``ppa_dask/store/sources.py`` and written by
``ppa_dask/store/sinks.py``, and nothing else in the package names a format's suffix or lists
the formats (a new format is one reader and one writer there, plus its entry in ``FORMATS``).

The scan reads every module's string constants (docstrings excepted: they show examples) and
its collection literals. Report files the application writes for people (the evaluation
tables as CSV beside their Markdown) and the names of bundled data files are not data I/O;
they are listed below, each with its reason.
"""

from __future__ import annotations

import ast
import pathlib
import re

import numpy as np
import pytest

import ppa_dask
from ppa_dask.store.sources import FORMATS

PACKAGE = pathlib.Path(ppa_dask.__file__).parent
LAYER = {PACKAGE / "store" / "sources.py", PACKAGE / "store" / "sinks.py"}
SUFFIXES = sorted({s.lstrip(".") for f in FORMATS.values() for s in f.suffixes})
SUFFIX = re.compile(r"\S*\.(?:" + "|".join(SUFFIXES) + r")\b", re.IGNORECASE)
# (module, word): report files and bundled data names, which are not the data I/O layer's
ALLOWED = {
    # the evaluation tables, written as CSV for spreadsheets beside their Markdown (the paper
    # scripts' app/scripts/output.py)
    ("app/scripts/output.py", ".csv"),
    ("app/pipeline/stages.py", ".csv"),
    ("app/demo.py", "05-evaluate/reconstruction_error.csv"),
    ("app/demo.py", "reconstruction_error.csv"),
    ("app/cli.py", "(DIR/reconstruction_error.csv"),
    # the bundled data files' own names (ppa_dask/datasets/data/PROVENANCE.md)
    ("datasets/loaders.py", "dpc-covid19-ita-andamento-nazionale-2020-02-24_2020-04-30.csv"),
    ("datasets/loaders.py", ".TIF"),
}


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def suffix_constants(tree):
    """The words of string constants (not docstrings) naming a format's suffix: (line, word)."""
    skip = _docstrings(tree)
    return [
        (node.lineno, word)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        for word in SUFFIX.findall(node.value)
    ]


def format_lists(tree):
    """Collection literals (tuples, lists, sets, dict keys) naming two or more formats."""
    names = set(FORMATS)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        named = [e.value for e in items if isinstance(e, ast.Constant) and e.value in names]
        if len(named) >= 2:
            found.append((node.lineno, tuple(named)))
    return found


MODULES = [p for p in sorted(PACKAGE.rglob("*.py")) if p not in LAYER]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_io_layer_names_a_format_suffix(path):
    rel = str(path.relative_to(PACKAGE))
    tree = ast.parse(path.read_text(), filename=str(path))
    found = [(line, text) for line, text in suffix_constants(tree) if (rel, text) not in ALLOWED]
    assert found == [], f"{rel}: a format suffix outside ppa_dask/store/sources.py / sinks.py"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_io_layer_lists_the_formats(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    assert format_lists(tree) == [], f"{path.relative_to(PACKAGE)}: formats listed outside"


def test_the_scanners_find_what_they_look_for():
    bad = ast.parse(
        '"""doc: cube.nc is fine here."""\n'
        'X = {".nc": "netcdf", ".TIFF": "geotiff"}\n'
        'NAME = "components.parquet"\n'
        'FORMATS = ("netcdf", "geotiff")\n'
        'BY = {"csv": 1, "parquet": 2}\n'
        'ONE = ("zarr", "netcdf")\n'
    )
    assert sorted(t for _, t in suffix_constants(bad)) == [".TIFF", ".nc", "components.parquet"]
    assert sorted(n for _, n in format_lists(bad)) == [("csv", "parquet"), ("netcdf", "geotiff")]


def test_the_layer_itself_declares_every_suffix():
    # what the other modules may not name is what the layer does name
    text = "\n".join(p.read_text() for p in LAYER)
    for fmt in FORMATS.values():
        for sfx in fmt.suffixes:
            assert f'"{sfx}"' in text


# -------------------------------------------------------------------------------------------
# the layer's one opener and one writer
# -------------------------------------------------------------------------------------------


def _geotiff(path, data, crs="EPSG:32633"):
    import rioxarray  # noqa: F401
    import xarray as xr

    bands, ny, nx = data.shape
    img = xr.DataArray(
        data,
        dims=("band", "y", "x"),
        coords={"band": np.arange(1, bands + 1), "y": 100.0 - np.arange(ny), "x": np.arange(nx)},
    ).rio.write_crs(crs)
    img.rio.to_raster(path)
    return path


def test_open_source_says_what_an_input_is(tmp_path):
    import pandas as pd
    import rasterio

    from ppa_dask.store import open_source, write_array

    t = np.random.default_rng(0).uniform(size=(3, 16, 16))
    t[:, 0, 0] = np.nan
    tif = open_source(_geotiff(str(tmp_path / "s.tif"), t))
    assert (tif.kind, tif.format, tif.feature_dim, tif.feature_names) == (
        "cube",
        "geotiff",
        "band",
        ["1", "2", "3"],
    )
    assert str(tif.georef["crs"]) == "EPSG:32633"
    with rasterio.open(tmp_path / "s.tif") as src:
        assert tif.georef["transform"] == src.transform
    mask = tif.mask.values
    assert mask.shape == (16, 16) and not mask[0, 0] and mask.sum() == 255

    pd.DataFrame({"a": [1.0, np.nan], "b": [3.0, 4.0]}).to_csv(tmp_path / "t.csv", index=False)
    table = open_source(str(tmp_path / "t.csv"), columns="b,a")
    assert (table.kind, table.format, table.feature_names, table.georef) == (
        "table",
        "csv",
        ["b", "a"],
        None,
    )
    np.testing.assert_array_equal(table.data.compute(), [[3.0, 1.0], [4.0, np.nan]])
    assert table.mask.compute().tolist() == [True, False]

    z = write_array(np.ones((5, 2)), str(tmp_path / "x.zarr"))
    zs = open_source(z)
    assert (zs.kind, zs.format, zs.data.shape) == ("table", "zarr", (5, 2))
    # the fingerprint changes with the file, not with reopening it
    before = tif.fingerprint()
    assert open_source(str(tmp_path / "s.tif")).fingerprint() == before
    _geotiff(str(tmp_path / "s.tif"), t[:, :, :8])
    assert open_source(str(tmp_path / "s.tif")).fingerprint() != before


def test_open_source_words_each_front_ends_options(tmp_path):
    import pandas as pd

    from ppa_dask.store import SourceError, open_source

    pd.DataFrame({"a": [1.0], "b": [2.0]}).to_csv(tmp_path / "t.csv", index=False)
    path = str(tmp_path / "t.csv")
    for front, option in (("cli", "--feature-dim"), ("python", "feature_dim=")):
        with pytest.raises(SourceError, match=re.escape(option)) as info:
            open_source(path, feature_dim="band", front=front)
        assert info.value.key == "feature_dim"


def test_write_result_writes_the_format_the_path_names(tmp_path):
    import xarray as xr

    from ppa_dask.store import open_array, open_cube, open_dataset, open_table, write_result

    X = np.arange(6.0).reshape(3, 2)
    write_result(X, str(tmp_path / "r.parquet"), columns=["p", "q"])
    assert list(open_table(str(tmp_path / "r.parquet")).columns) == ["p", "q"]
    write_result(X, str(tmp_path / "r.zarr"), attrs={"k": 1})
    np.testing.assert_array_equal(open_array(str(tmp_path / "r.zarr")).compute(), X)
    cube = xr.DataArray(
        np.ones((2, 16, 16)), dims=("component", "y", "x"), coords={"component": [1, 2]}
    )
    write_result(cube, str(tmp_path / "c.nc"), name="components")
    assert open_cube(str(tmp_path / "c.nc"), "components").dims == ("component", "y", "x")
    write_result(cube, str(tmp_path / "c.zarr"), name="components")
    assert "components" in open_dataset(str(tmp_path / "c.zarr")).data_vars
