"""NetCDF inputs are placed by their headers, and file and variable errors come before any
cluster starts.

A small NetCDF file (netCDF-3 or -4, one variable or bands as variables) is computed in this
process without ``--scheduler``: its size is known from its header, whichever variables
``--variable`` names. A missing file or variable ends ``fit``, ``transform`` and ``inverse``
with exit 2 and one line before a cluster is asked for: the local cluster's start is replaced
by one that raises, so a command that asks for one fails the test.
"""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest
import xarray as xr

from ppa_dask.app import placement
from ppa_dask.app.cli import main
from ppa_dask.cluster import client as cluster

IN_PROCESS = "computing in this process"


class _ClusterAsked(Exception):
    pass


@pytest.fixture
def no_cluster(monkeypatch):
    """A local cluster's start raises: a command that asks for one raises _ClusterAsked."""

    @contextlib.contextmanager
    def refuse(**options):
        raise _ClusterAsked(f"a local cluster was asked for: {options}")
        yield  # pragma: no cover

    monkeypatch.setattr(cluster, "local_client", refuse)


def _first_line(out):
    return re.sub(r"^\[\s*[\d.]+ s\] ", "", out.splitlines()[0])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A netCDF-3 file of a (band, y, x) variable beside a 2-D one, and a netCDF-4 file of
    bands as variables (blue, green, red) beside a scalar crs."""
    base = tmp_path_factory.mktemp("nc")
    t = np.random.default_rng(0).uniform(0.1, 1.0, size=(20, 30))
    refl = xr.DataArray(np.stack([t, t**2, np.sin(3 * t)]), dims=("band", "y", "x"))
    classic = str(base / "classic.nc")
    xr.Dataset({"refl": refl, "mask": refl.isel(band=0) > 0.5}).to_netcdf(classic, engine="scipy")
    bands = str(base / "bands.nc")
    named = {name: refl.isel(band=i) for i, name in enumerate(["blue", "green", "red"])}
    xr.Dataset({**named, "crs": ((), 0)}).to_netcdf(bands, engine="h5netcdf")
    (base / "cube.dat").write_bytes(bytes(3 * 20 * 30 * 4))  # an ENVI cube and its header
    (base / "cube.hdr").write_text("ENVI\nsamples = 30\nlines = 20\nbands = 3\n")
    return base, classic, bands, refl


def test_netcdf_sizes_come_from_the_headers(files):
    _, classic, bands, refl = files
    assert placement.input_nbytes(classic, "refl") == refl.nbytes
    assert placement.input_nbytes(classic) == refl.nbytes + refl.isel(band=0).size  # + mask
    assert placement.input_nbytes(bands, "blue,green,red") == refl.nbytes
    assert placement.input_nbytes(bands, "all") == refl.nbytes
    assert placement.input_nbytes(bands) == refl.nbytes + 8  # every data variable, crs too
    assert placement.input_nbytes(bands, "nope") is None  # reported when the input is opened


def test_small_netcdf_inputs_are_computed_here(files, no_cluster, capsys):
    base, classic, bands, _ = files
    model = str(base / "m.zarr")
    fit = ["fit", classic, model, "--feature-dim", "band", "--variable", "refl", "--degree", "2"]
    assert main(fit) == 0
    assert _first_line(capsys.readouterr().out).startswith(IN_PROCESS)
    comps = str(base / "c.nc")
    assert main(["transform", model, classic, comps, "--variable", "refl"]) == 0
    assert _first_line(capsys.readouterr().out).startswith(IN_PROCESS)
    assert main(["inverse", model, comps, str(base / "r.nc")]) == 0
    assert _first_line(capsys.readouterr().out).startswith(IN_PROCESS)
    stacked = str(base / "s.zarr")
    assert main(["fit", bands, stacked, "--variable", "blue,green,red", "--degree", "2"]) == 0
    assert _first_line(capsys.readouterr().out).startswith(IN_PROCESS)
    assert main(["transform", stacked, bands, str(base / "sc.nc")]) == 0
    assert _first_line(capsys.readouterr().out).startswith(IN_PROCESS)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "{base}/absent.nc", "{out}/x.zarr", "--feature-dim", "band"], "no such file"),
        (
            ["fit", "{classic}", "{out}/x.zarr", "--feature-dim", "band", "--variable", "nope"],
            "has no variable 'nope'",
        ),
        (["transform", "{model}", "{base}/absent.nc", "{out}/c.nc"], "no such file"),
        (
            ["transform", "{model}", "{classic}", "{out}/c.nc", "--variable", "nope"],
            "has no variable 'nope'",
        ),
        (["inverse", "{model}", "{base}/absent.nc", "{out}/r.nc"], "no such file"),
        (["inverse", "{model}", "{classic}", "{out}/r.nc"], "has no variable 'components'"),
        (["fit", "{base}/cube.dat", "{out}/x.zarr"], "a format ppa-dask does not read (suffix"),
    ],
    ids=["fit-file", "fit-variable", "transform-file", "transform-variable", "inverse-file",
         "inverse-variable", "fit-envi"],
)  # fmt: skip
def test_file_and_variable_errors_come_before_any_cluster(
    files, no_cluster, capsys, tmp_path, argv, message
):
    base, classic, _, _ = files
    model = str(base / "fitted.zarr")
    if not (base / "fitted.zarr").exists():
        fit = [
            "fit", classic, model, "--feature-dim", "band", "--variable", "refl", "--degree", "2",
            "--scheduler", "threads",
        ]  # fmt: skip
        assert main(fit) == 0
        capsys.readouterr()
    names = {"base": str(base), "out": str(tmp_path), "classic": classic, "model": model}
    code = main([a.format(**names) for a in argv])  # no --scheduler: a cluster would be asked
    captured = capsys.readouterr()
    assert code == 2
    err = captured.err.strip()
    assert err.startswith("ppa-dask: error: ") and len(err.splitlines()) == 1, err
    assert message in err
    assert "local cluster" not in captured.out
