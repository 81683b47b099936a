"""The synthetic cube: spectra are smooth nonlinear functions of three latent fields (a curved
3-dimensional manifold in band space), clouds are NaN in every band, and every value depends on
the seed and the pixel only."""

import dask
import numpy as np
import pytest
import zarr
from sklearn.decomposition import PCA

from ppa_dask import PPA
from ppa_dask.datasets import make_cube
from ppa_dask.store import open_dataset


def _clear_rows(cube):
    v = cube["reflectance"].transpose("y", "x", "band").values.astype(np.float64)
    X = v.reshape(-1, v.shape[-1])
    keep = ~np.isnan(X).any(axis=1)
    latents = np.column_stack(
        [cube[n].values.ravel() for n in ("vegetation", "moisture", "illumination")]
    )
    return X[keep], latents[keep]


def test_layout_coordinates_and_types():
    cube = make_cube(n_bands=12, ny=10, nx=14, random_state=0)
    refl = cube["reflectance"]
    assert refl.dims == ("band", "y", "x") and refl.shape == (12, 10, 14)
    assert refl.dtype == np.float32
    assert cube["band"].values.tolist() == list(range(12))
    wl = cube["wavelength"].values
    assert wl[0] == 400 and wl[-1] == 2400 and np.all(np.diff(wl) > 0)
    assert np.allclose(np.diff(cube["x"].values), 30.0)
    for name in ("vegetation", "moisture", "illumination", "cloud"):
        assert cube[name].dims == ("y", "x")
    f, m = cube["vegetation"].values, cube["moisture"].values
    assert ((f > 0) & (f < 1)).all() and ((m > 0) & (m < 1)).all()
    series = make_cube(n_bands=4, ny=5, nx=6, n_times=4, random_state=0)
    assert series["reflectance"].dims == ("time", "band", "y", "x")
    assert series["time"].values[1] - series["time"].values[0] == np.timedelta64(31, "D")
    assert series["cloud"].dims == ("time", "y", "x")


@pytest.mark.slow
def test_seeded_and_independent_of_chunking():
    a = make_cube(n_bands=8, ny=20, nx=18, n_times=2, random_state=5)
    b = make_cube(
        n_bands=8, ny=20, nx=18, n_times=2, random_state=5, chunks={"y": 7, "x": 5, "band": 3}
    )
    other = make_cube(n_bands=8, ny=20, nx=18, n_times=2, random_state=6)
    assert isinstance(b["reflectance"].data, dask.array.Array)
    for name in a.data_vars:
        np.testing.assert_array_equal(a[name].values, b[name].values)
    assert not np.array_equal(a["vegetation"].values, other["vegetation"].values)
    # a bigger image holds the same pixels where they overlap: values depend on the pixel only
    big = make_cube(n_bands=8, ny=25, nx=18, n_times=2, random_state=5, field_scale=20 / 6)
    np.testing.assert_array_equal(big["reflectance"].values[:, :, :20], a["reflectance"].values)


def test_clouds_are_nan_in_every_band_and_nothing_else_is():
    cube = make_cube(n_bands=10, ny=48, nx=48, n_times=6, cloud_fraction=0.25, random_state=1)
    nan = cube["reflectance"].isnull()
    assert nan.any("band").equals(cube["cloud"]) and nan.all("band").equals(cube["cloud"])
    fraction = float(cube["cloud"].mean())
    assert 0.1 < fraction < 0.4  # a smooth random field: the fraction is about the target
    clear = make_cube(n_bands=10, ny=16, nx=16, cloud_fraction=0.0, random_state=1)
    assert not clear["reflectance"].isnull().any()


def test_spectra_follow_the_latent_fields():
    """Vegetation raises the red edge; moisture deepens the 1450 nm water band."""
    cube = make_cube(n_bands=64, ny=60, nx=60, noise=0.0, cloud_fraction=0.0, random_state=2)
    refl = cube["reflectance"].astype(np.float64)
    wl = cube["wavelength"]
    red = refl.sel(band=int(np.abs(wl.values - 670).argmin()))
    nir = refl.sel(band=int(np.abs(wl.values - 860).argmin()))
    ndvi = (nir - red) / (nir + red)
    assert np.corrcoef(ndvi.values.ravel(), cube["vegetation"].values.ravel())[0, 1] > 0.9
    water = refl.sel(band=int(np.abs(wl.values - 1450).argmin()))
    shoulder = refl.sel(band=int(np.abs(wl.values - 1250).argmin()))
    depth = 1 - water / shoulder
    assert np.corrcoef(depth.values.ravel(), cube["moisture"].values.ravel())[0, 1] > 0.8


def test_noise_free_spectra_lie_on_a_curved_three_dimensional_manifold():
    cube = make_cube(n_bands=24, ny=64, nx=64, noise=0.0, cloud_fraction=0.0, random_state=3)
    X, latents = _clear_rows(cube)
    # locally (the 20 pixels with latent values nearest the mean) three directions carry
    # nearly everything ...
    z = (latents - latents.mean(0)) / latents.std(0)
    centre = np.argmin(np.linalg.norm(z, axis=1))
    near = np.argsort(np.linalg.norm(z - z[centre], axis=1))[:20]
    local = np.linalg.svd(X[near] - X[near].mean(0), compute_uv=False) ** 2
    assert local[2] > 100 * local[3]
    # ... while over the whole image the manifold bends into a fourth direction
    global_ = np.linalg.svd(X - X.mean(0), compute_uv=False) ** 2
    assert local[3] / local[0] < 0.05 * global_[3] / global_[0]
    # which is what PPA's curved axes are for: three of them beat three straight ones
    ppa = PPA(degree=(1, 2, 3, 4), random_state=0).fit(X)
    pca_error = np.sum(global_[3:]) / X.shape[0]
    assert ppa.reconstruction_errors(X)[3] < 0.7 * pca_error
    pca = PCA(3).fit(X)
    assert np.isclose(
        np.mean(np.sum((X - pca.inverse_transform(pca.transform(X))) ** 2, 1)),
        pca_error,
        rtol=1e-6,
    )


@pytest.mark.slow
def test_written_to_zarr_and_opened_lazily(tmp_path):
    path = tmp_path / "cube.zarr"
    in_memory = make_cube(n_bands=6, ny=20, nx=16, n_times=2, random_state=4)
    lazy = make_cube(
        n_bands=6, ny=20, nx=16, n_times=2, random_state=4, chunks={"y": 5}, path=path
    )
    assert isinstance(lazy["reflectance"].data, dask.array.Array)
    z = zarr.open_group(path, mode="r")
    assert z["reflectance"].chunks == (1, 6, 5, 16)
    assert z.attrs["ppa_dask"]["complete"] is True
    for name in in_memory.data_vars:
        np.testing.assert_array_equal(lazy[name].values, in_memory[name].values)
    assert lazy["time"].equals(in_memory["time"])
    assert lazy["wavelength"].equals(in_memory["wavelength"])
    reopened = open_dataset(path)
    assert reopened["reflectance"].chunks == lazy["reflectance"].chunks
    with pytest.raises(FileExistsError):
        make_cube(n_bands=6, ny=20, nx=16, random_state=4, path=path)
    make_cube(n_bands=6, ny=8, nx=8, random_state=4, path=path, overwrite=True)
    assert open_dataset(path).sizes["y"] == 8


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_bands=1), "n_bands must be an int >= 2, got 1"),
        (dict(cloud_fraction=1.0), r"cloud_fraction must be a finite number in \[0, 1\), got 1.0"),
        (dict(noise=-0.1), "noise must be a finite number >= 0"),
        (dict(dtype="int16"), "dtype must be"),
        (dict(chunks={"z": 4}), "unknown dimension"),
        (dict(field_scale=0), "field_scale must be None or a finite number > 0"),
    ],
)
def test_bad_parameters_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_cube(**{"ny": 4, "nx": 4, **kwargs})
