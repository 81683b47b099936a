"""``ppa-dask fit field.nc model.zarr --feature-dim latitude,longitude --n-components 3``: a
climate field in NetCDF (land NaN) fitted from the command line, with and without
``--coslat``, is the Python fit of the same field; transform and inverse restore the grid."""

import numpy as np
import pytest
import xarray as xr

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.datasets import make_enso_field

THREADS = ["--scheduler", "threads"]
FEATURES = ("latitude", "longitude")


@pytest.fixture(scope="module")
def field_file(tmp_path_factory):
    base = tmp_path_factory.mktemp("field")
    field = make_enso_field(n_times=150, n_lat=24, n_lon=72)  # 1350 ocean cells: wide
    path = base / "field.nc"
    field.to_netcdf(path)
    return base, str(path), field


@pytest.mark.parametrize("coslat", [False, True])
def test_fit_transform_inverse_of_a_netcdf_field(field_file, capsys, coslat):
    base, path, field = field_file
    model_path = str(base / f"m{coslat}.zarr")
    comps, rec = str(base / f"c{coslat}.nc"), str(base / f"r{coslat}.nc")
    extra = ["--coslat"] if coslat else []
    fit = ["fit", path, model_path, "--feature-dim", "latitude,longitude", "--n-components", "3"]
    assert main([*fit, "--degree", "1-3", *extra, *THREADS]) == 0
    saved = store.load_model(model_path)
    direct = PPA(n_components=3, degree=[1, 2, 3], random_state=0)
    direct.fit(field, feature_dim=FEATURES, coslat=coslat)
    assert saved.solver_ == direct.solver_ == "gram"
    assert np.allclose(saved.leading_vectors_, direct.leading_vectors_, atol=1e-10)
    info = capsys.readouterr() and (main(["info", model_path]), capsys.readouterr().out)[1]
    assert ("weighted by sqrt(cos(latitude))" in info) == coslat

    assert main(["transform", model_path, path, comps, *THREADS]) == 0
    with xr.open_dataset(comps) as ds:
        R = ds["components"].load()
    assert R.dims == ("time", "component")
    assert np.allclose(R.values, direct.transform(field).values, atol=1e-10)
    assert main(["inverse", model_path, comps, rec, *THREADS]) == 0
    with xr.open_dataset(rec) as ds:
        back = ds["sst_anomaly"].load()
    assert back.dims == field.dims and bool(back.isnull().equals(field.isnull()))
    expected = direct.inverse_transform(direct.transform(field))
    assert np.allclose(back.values, expected.values, atol=1e-9, equal_nan=True)


def test_coslat_needs_a_feature_dimension(field_file, capsys):
    base, path, _ = field_file
    assert main(["fit", path, str(base / "x.zarr"), "--coslat", *THREADS]) == 2
    assert "--coslat weights the features of an xarray cube" in capsys.readouterr().err
