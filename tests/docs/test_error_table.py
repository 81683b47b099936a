"""Every row of the error table (docs/guide/errors.md) is true.

Each row is run as written: a ``cli`` row through the command line's entry point (exit status
and the one line on stderr), a ``python`` row as a statement that must raise. ``{name}`` in a
row stands for a file or address the test makes first (the page's legend lists them); the
message column must be part of what the user is told, after the same substitution.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
from pathlib import Path

import dask.array as da
import numpy as np
import paths
import pytest
import zarr

from ppa_dask import PPA
from ppa_dask.app import cli
from ppa_dask.store import save_model, write_array

PAGE = paths.ERRORS_PAGE
ROW = re.compile(r"^\|\s*(cli|python)\s*\|\s*`(.+?)`\s*\|\s*`(.+?)`\s*\|\s*(\S+)\s*\|\s*$")


def _rows():
    rows = []
    for number, line in enumerate(PAGE.read_text().splitlines(), 1):
        match = ROW.match(line)
        if match:
            kind, given, told, status = match.groups()
            rows.append(pytest.param(kind, given, told, status, id=f"line{number}-{kind}"))
    return rows


ROWS = _rows()


class Fixtures(dict):
    """Builds each ``{name}`` of the table on first use, in one temporary folder."""

    def __init__(self, root):
        super().__init__()
        self.root = root
        self.sockets = []

    def __missing__(self, name):
        value = str(getattr(self, f"make_{name}")())
        self[name] = value
        return value

    def close(self):
        for s in self.sockets:
            s.close()

    # inputs ---------------------------------------------------------------------------------
    def make_data(self):
        path = self.root / "data.zarr"
        write_array(np.random.default_rng(0).normal(size=(200, 4)), path)
        return path

    def make_vector(self):
        path = self.root / "vector.zarr"
        write_array(np.arange(100.0), path)
        return path

    def make_strings(self):
        path = self.root / "strings.zarr"
        zarr.create_array(str(path), shape=(10, 3), dtype=str).__setitem__(
            slice(None), np.full((10, 3), "a")
        )
        return path

    def make_model(self):
        path = self.root / "model.zarr"
        X = np.random.default_rng(1).normal(size=(200, 4))
        save_model(PPA(degree=2, random_state=0).fit(X), path)
        return path

    def make_missing(self):
        return self.root / "missing.zarr"

    def make_out(self):
        return self.root / "out.zarr"

    def make_tmp(self):
        return self.root

    def make_table(self):
        # a CSV table with a text column and three numeric ones
        path = self.root / "table.csv"
        rows = ["id,a,b,c"] + [f"s{i},{i},{np.sin(i)},{np.cos(i)}" for i in range(50)]
        path.write_text("\n".join(rows) + "\n")
        return path

    def make_grids(self):
        # two single-band GeoTIFFs one pixel apart: a glob of them is refused, naming both
        import rasterio
        from rasterio.transform import from_origin

        for name, x0 in (("B2", 500000), ("B3", 500030)):
            with rasterio.open(
                self.root / f"grid_{name}.tif",
                "w",
                driver="GTiff",
                width=8,
                height=8,
                count=1,
                dtype="uint16",
                crs="EPSG:32621",
                transform=from_origin(x0, 4000000, 30, 30),
            ) as dst:
                dst.write(np.ones((1, 8, 8), np.uint16))
        return self.root / "grid_B*.tif"

    def make_two_bands(self):
        # the two files of {grids} as two arguments
        self["grids"]
        return f"{self.root / 'grid_B2.tif'} {self.root / 'grid_B3.tif'}"

    def make_series(self):
        # two dated GeoTIFFs of 2 and 3 bands: not one series
        import rasterio
        from rasterio.transform import from_origin

        for date, count in (("20200101", 2), ("20200201", 3)):
            with rasterio.open(
                self.root / f"ser_{date}.tif",
                "w",
                driver="GTiff",
                width=8,
                height=8,
                count=count,
                dtype="uint16",
                crs="EPSG:32621",
                transform=from_origin(500000, 4000000, 30, 30),
            ) as dst:
                dst.write(np.ones((count, 8, 8), np.uint16))
        return self.root / "ser_*.tif"

    def make_dates(self):
        # two dated 2-band GeoTIFFs on one grid: one series (time, band, y, x)
        import rasterio
        from rasterio.transform import from_origin

        for k, date in enumerate(("20200101", "20200201")):
            with rasterio.open(
                self.root / f"dat_{date}.tif",
                "w",
                driver="GTiff",
                width=8,
                height=8,
                count=2,
                dtype="uint16",
                crs="EPSG:32621",
                transform=from_origin(500000, 4000000, 30, 30),
            ) as dst:
                dst.write(np.arange(128, dtype=np.uint16).reshape(2, 8, 8) + k)
        return self.root / "dat_*.tif"

    def make_season_dims(self):
        path = self.root / "season.yaml"
        path.write_text(
            "pipeline: 1\nname: season\n"
            f"data: {{source: geotiff, path: '{self['dates']}', feature_dim: [time, season]}}\n"
        )
        return path

    def make_bands_nc(self):
        # a NetCDF file of bands as variables (blue, green) beside a scalar crs variable
        import h5netcdf

        path = self.root / "bands.nc"
        with h5netcdf.File(path, "w") as f:
            f.dimensions = {"y": 4, "x": 5}
            for name in ("blue", "green"):
                f.create_variable(name, ("y", "x"), np.uint16)[...] = np.ones((4, 5))
            f.create_variable("crs", (), np.int32)
        return path

    def make_foreign(self):
        # a user's folder: not empty, not a run folder, one of its folders named like a stage
        path = self.root / "mine"
        (path / "01-load").mkdir(parents=True)
        (path / "01-load" / "notes.txt").write_text("keep me")
        (path / "summary.json").write_text("{}")
        return path

    def make_user_html(self):
        # a user's own report: no --performance-report may replace it
        path = self.root / "report.html"
        path.write_text("<html>mine</html>")
        return path

    def make_linked_log(self):
        # a folder whose pipeline.log links to a user's file: no log is appended through it
        path = self.root / "linked"
        path.mkdir()
        (self.root / "diary.txt").write_text("mine\n")
        (path / "pipeline.log").symlink_to(self.root / "diary.txt")
        return path

    def make_holed(self):
        # a store zarr wrote, one chunk file deleted: an error naming it, never zeros
        path = self.root / "holed.zarr"
        z = zarr.create_array(str(path), shape=(200, 4), chunks=(50, 4), dtype="f8")
        z[...] = np.random.default_rng(2).normal(size=(200, 4))
        (path / "c" / "1" / "0").unlink()
        return path

    def make_cut_tif(self):
        # a tiled GeoTIFF cut short: its last tiles are not in the file
        import rasterio
        from rasterio.transform import from_origin

        whole = self.root / "whole.tif"
        with rasterio.open(
            whole,
            "w",
            driver="GTiff",
            width=128,
            height=128,
            count=4,
            dtype="uint16",
            crs="EPSG:32621",
            transform=from_origin(500000, 4000000, 30, 30),
            tiled=True,
            blockxsize=64,
            blockysize=64,
        ) as dst:
            dst.write(np.random.default_rng(3).integers(0, 999, (4, 128, 128), np.uint16))
        path = self.root / "cut.tif"
        path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
        return path

    def make_fifo_csv(self):
        # a FIFO: opening it to read would wait for a writer for ever
        path = self.root / "fifo.csv"
        os.mkfifo(path)
        return path

    def make_zero_csv(self):
        # a character device: reading it never ends
        path = self.root / "zero.csv"
        path.symlink_to("/dev/zero")
        return path

    def make_fifo_yaml(self):
        path = self.root / "fifo.yaml"
        os.mkfifo(path)
        return path

    def make_pipeline(self):
        path = self.root / "ok.yaml"
        path.write_text(
            "pipeline: 1\nname: ok\noutput: run\n"
            "data: {source: generated, n_samples: 1000, n_features: 5}\n"
        )
        return path

    def make_duplicate_key(self):
        path = self.root / "twice.yaml"
        path.write_text("pipeline: 1\nname: twice\nmodel:\n  degree: 2\n  degree: 3\n")
        return path

    def make_bogus_params(self):
        path = self.root / "bogus.yaml"
        path.write_text(
            "pipeline: 1\nname: bogus\n"
            "data: {source: generated, n_samples: 1000, n_features: 5, params: {bogus: 3}}\n"
        )
        return path

    def make_huge_generated(self):
        path = self.root / "huge.yaml"
        path.write_text(
            "pipeline: 1\nname: huge\n"
            "data: {source: generated, n_samples: 100000000000, n_features: 6}\n"
        )
        return path

    def make_huge_degree(self):
        path = self.root / "degree.yaml"
        path.write_text(
            f"pipeline: 1\nname: degree\ndata: {{source: zarr, path: '{self['data']}'}}\n"
            "model: {degree: [1, 2, 3000000]}\n"
        )
        return path

    def make_extra_components(self):
        path = self.root / "components.yaml"
        path.write_text(
            f"pipeline: 1\nname: components\ndata: {{source: zarr, path: '{self['data']}'}}\n"
            "transform: {components: 9}\n"
        )
        return path

    # cluster files of one mistake each (checked before anything is started) ---------------
    def _cluster_file(self, name, kind, options, extra=""):
        path = self.root / f"{name}.yaml"
        path.write_text(f"type: {kind}\noptions:\n  cores: 1\n  memory: 1GiB\n{options}{extra}")
        return path

    def make_slurm_prologue(self):
        lines = "  job_script_prologue:\n    - module load python/3.12\n    - false\n"
        return self._cluster_file("prologue", "slurm", lines)

    def make_slurm_walltime(self):
        return self._cluster_file("walltime", "slurm", "  walltime: 2:00:00\n")

    def make_slurm_typo(self):
        return self._cluster_file("typo", "slurm", "  walltme: '02:00:00'\n")

    def make_pbs_restarts(self):
        return self._cluster_file("restarts", "pbs", "", "max_job_restarts: -1\n")

    # addresses ------------------------------------------------------------------------------
    def make_closed_port(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        return port

    def make_silent_port(self):
        # accepts connections and never says a word
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        self.sockets.append(s)
        return s.getsockname()[1]


@pytest.fixture
def fixtures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = Fixtures(tmp_path)
    yield made
    made.close()


def test_the_table_has_rows_of_both_kinds():
    kinds = [row.values[0] for row in ROWS]
    assert kinds.count("cli") >= 10 and kinds.count("python") >= 5


@pytest.mark.parametrize("kind,given,told,status", ROWS)
def test_each_row_is_what_the_user_sees(kind, given, told, status, fixtures, capsys):
    given = given.format_map(fixtures)
    told = told.format_map(fixtures)
    if kind == "cli":
        code = cli.main(shlex.split(given))
        err = capsys.readouterr().err.strip().splitlines()
        assert code == int(status), err
        assert len(err) == 1, err
        assert err[0].startswith("ppa-dask: error: ") and told in err[0], (told, err[0])
        if "foreign" in fixtures:  # the user's folder was left as it was
            folder = Path(fixtures["foreign"])
            assert sorted(p.name for p in folder.rglob("*")) == [
                "01-load",
                "notes.txt",
                "summary.json",
            ]
    else:
        X = np.random.default_rng(1).normal(size=(200, 4))
        namespace = {"np": np, "da": da, "X": X, "model": PPA(degree=2, random_state=0).fit(X)}
        exec(
            "from ppa_dask import *; from ppa_dask.store import *; from ppa_dask.geometry import *",
            namespace,
        )
        with pytest.raises(Exception) as info:
            exec(given, namespace)
        assert info.type.__name__ == status, info.type
        assert told in str(info.value), (told, str(info.value))
