"""xarray in, xarray out: a cube's sample dimensions are stacked, the model is the plain-array
model of the valid samples, masked samples come back NaN with every coordinate intact, and
Dask-backed cubes stay lazy."""

import warnings

import dask
import numpy as np
import pytest
import xarray as xr

from ppa_dask import PPA
from ppa_dask.datasets import make_cube

N_BANDS = 9
PARAMS = dict(degree=(1, 2, 3), random_state=0)


@pytest.fixture(scope="module")
def cube():
    return make_cube(n_bands=N_BANDS, ny=30, nx=36, cloud_fraction=0.2, random_state=4)


def _rows(a, feature_dim="band"):
    """The cube as a (pixels, bands) numpy matrix, stacked independently of the adapter."""
    sample_dims = [d for d in a.dims if d != feature_dim]
    v = a.transpose(*sample_dims, feature_dim).values
    return v.reshape(-1, v.shape[-1]).astype(np.float64)


def _no_compute(*args, **kwargs):
    raise AssertionError("something was computed")


# -------------------------------------------------------------------------------------------
# the round trip
# -------------------------------------------------------------------------------------------


def test_round_trip_returns_the_input_where_valid_and_nan_where_masked(cube):
    refl = cube["reflectance"]
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    comps = model.transform(refl)
    assert comps.dims == ("component", "y", "x")
    assert comps.sizes["component"] == N_BANDS == model.n_components_
    assert comps["component"].values.tolist() == list(range(1, N_BANDS + 1))
    for c in ("y", "x"):
        assert comps[c].equals(refl[c])
    cloudy = cube["cloud"].values
    assert np.isnan(comps.values[:, cloudy]).all() and np.isfinite(comps.values[:, ~cloudy]).all()

    back = model.inverse_transform(comps)
    assert back.dims == refl.dims and back.name == refl.name
    for c in refl.coords:
        assert back[c].equals(refl[c]), c
    assert back.isnull().equals(refl.isnull())
    np.testing.assert_allclose(back.values[:, ~cloudy], refl.values[:, ~cloudy], atol=1e-6)


def test_the_model_is_the_plain_array_model_of_the_valid_samples(cube):
    """Independent check: stack with numpy, drop NaN rows, fit the numpy path."""
    refl = cube["reflectance"]
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    X = _rows(refl)
    valid = ~np.isnan(X).any(axis=1)
    reference = PPA(**PARAMS).fit(X[valid])
    assert np.array_equal(model.degrees_, reference.degrees_)
    R = model.transform(refl).transpose("y", "x", "component").values.reshape(X.shape[0], -1)
    np.testing.assert_allclose(R[valid], reference.transform(X[valid]), rtol=1e-12, atol=1e-12)
    summary = model.xarray_layout_["nan_summary"]
    assert summary["n_fitted"] == valid.sum() and summary["n_masked"] == (~valid).sum()
    # truncated reconstruction: the leading k components of the DataArray
    k = 2
    back = model.inverse_transform(model.transform(refl).isel(component=slice(0, k)))
    expected = reference.inverse_transform(reference.transform(X[valid])[:, :k])
    got = back.transpose("y", "x", "band").values.reshape(X.shape[0], -1)[valid]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_time_is_one_more_sample_dimension(tmp_path):
    cube = make_cube(n_bands=6, ny=12, nx=10, n_times=3, random_state=1)
    refl = cube["reflectance"]
    model = PPA(degree=2, random_state=0).fit(refl, feature_dim="band")
    comps = model.transform(refl)
    assert comps.dims == ("time", "component", "y", "x")
    assert comps["time"].equals(refl["time"])
    assert model.xarray_layout_["nan_summary"]["n_samples"] == 3 * 12 * 10
    back = model.inverse_transform(comps)
    assert back.dims == refl.dims and back.isnull().equals(refl.isnull())
    np.testing.assert_allclose(back.values, refl.values, atol=1e-6)
    # a model fitted on the time series transforms one date (other sample dimensions)
    one = model.transform(refl.isel(time=1))
    np.testing.assert_allclose(one.values, comps.isel(time=1).values, rtol=1e-12, atol=1e-14)


# -------------------------------------------------------------------------------------------
# missing data
# -------------------------------------------------------------------------------------------


def test_features_nan_everywhere_are_dropped_and_restored_as_nan(cube):
    refl = cube["reflectance"].copy()
    refl[4] = np.nan  # a dead band (say, a water-vapour band masked by the provider)
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    assert model.n_features_in_ == N_BANDS - 1
    assert model.xarray_layout_["nan_summary"]["dropped_features"] == [4]
    reference = PPA(**PARAMS).fit(
        np.delete(_rows(cube["reflectance"]), 4, axis=1)[
            ~np.isnan(_rows(cube["reflectance"])).any(axis=1)
        ]
    )
    assert np.array_equal(model.degrees_, reference.degrees_)
    back = model.inverse_transform(model.transform(refl))
    assert back.sizes["band"] == N_BANDS and back["wavelength"].equals(refl["wavelength"])
    assert bool(back.isel(band=4).isnull().all())
    assert back.isnull().equals(refl.isnull())
    np.testing.assert_allclose(
        back.values[~np.isnan(back.values)], refl.values[~np.isnan(refl.values)], atol=1e-6
    )


def _with_isolated_nans(refl):
    out = refl.copy()
    clear = np.argwhere(~np.isnan(out.values).any(axis=0))
    spots = [(2, *clear[5]), (7, *clear[5]), (3, *clear[40])]  # 3 values in 2 pixels
    for b, i, j in spots:
        out[b, i, j] = np.nan
    return out, clear[5], clear[40]


def test_isolated_nans_are_reported_with_count_and_place(cube):
    refl, first, second = _with_isolated_nans(cube["reflectance"])
    with pytest.raises(ValueError) as info:
        PPA(**PARAMS).fit(refl, feature_dim="band")
    message = str(info.value)
    assert "3 isolated NaN value(s) in 2 sample(s)" in message
    y0, x0 = refl["y"].values[first[0]], refl["x"].values[first[1]]
    assert f"(y={y0}, x={x0})" in message
    assert "band 2 (1)" in message and "band 7 (1)" in message and "band 3 (1)" in message
    assert "nan_policy='drop_samples'" in message


def test_drop_samples_leaves_them_out_and_says_so(cube):
    refl, first, second = _with_isolated_nans(cube["reflectance"])
    with pytest.warns(UserWarning, match="3 isolated NaN value"):
        model = PPA(**PARAMS).fit(refl, feature_dim="band", nan_policy="drop_samples")
    X = _rows(refl)
    valid = ~np.isnan(X).any(axis=1)
    reference = PPA(**PARAMS).fit(X[valid])
    assert model.xarray_layout_["nan_summary"]["n_isolated_samples"] == 2
    comps = model.transform(refl)
    R = comps.transpose("y", "x", "component").values.reshape(X.shape[0], -1)
    np.testing.assert_allclose(R[valid], reference.transform(X[valid]), atol=1e-12)
    assert np.isnan(comps.values[:, first[0], first[1]]).all()
    assert np.isnan(comps.values[:, second[0], second[1]]).all()


def test_bad_input_is_named(cube):
    refl = cube["reflectance"]
    with pytest.raises(ValueError, match="feature_dim is required"):
        PPA().fit(refl)
    with pytest.raises(ValueError, match="'wavelength' is not a dimension"):
        PPA().fit(refl, feature_dim="wavelength")
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        PPA().fit(refl, feature_dim="band", nan_policy="fill")
    with pytest.raises(ValueError, match="xarray input only"):
        PPA().fit(_rows(refl)[:50], feature_dim="band")
    infinite = refl.copy()
    i, j = np.argwhere(~cube["cloud"].values)[0]
    infinite[0, i, j] = np.inf
    with pytest.raises(ValueError, match="inf"):
        PPA(**PARAMS).fit(infinite, feature_dim="band")
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    with pytest.raises(ValueError, match="'band' coordinate of X differs"):
        model.transform(refl.assign_coords(band=refl["band"] + 100))
    with pytest.raises(ValueError, match="has 8 entries along 'band'"):
        model.transform(refl.isel(band=slice(0, 8)))
    with pytest.raises(ValueError, match="leading components 1..2"):
        model.inverse_transform(model.transform(refl).isel(component=[0, 2]))
    plain = PPA(**PARAMS).fit(_rows(refl)[~np.isnan(_rows(refl)).any(axis=1)])
    with pytest.raises(ValueError, match="fitted on a plain array"):
        plain.transform(refl)
    refit = (
        PPA(**PARAMS)
        .fit(refl, feature_dim="band")
        .fit(_rows(refl)[:300][~np.isnan(_rows(refl)[:300]).any(axis=1)])
    )
    assert not hasattr(refit, "xarray_layout_")  # a plain refit forgets the xarray layout


# -------------------------------------------------------------------------------------------
# Dask-backed cubes from Zarr
# -------------------------------------------------------------------------------------------


def test_dask_backed_cube_from_zarr_stays_lazy_until_computed(tmp_path, cube):
    lazy_cube = make_cube(
        n_bands=N_BANDS,
        ny=30,
        nx=36,
        cloud_fraction=0.2,
        random_state=4,
        chunks={"y": 8},
        path=tmp_path / "cube.zarr",
    )
    refl = xr.open_zarr(tmp_path / "cube.zarr", consolidated=False)["reflectance"]
    assert refl.chunks is not None and lazy_cube["reflectance"].chunks == refl.chunks
    with dask.config.set(scheduler="synchronous"):
        model = PPA(**PARAMS).fit(refl, feature_dim="band")
    in_memory = PPA(**PARAMS).fit(cube["reflectance"], feature_dim="band")
    assert np.array_equal(model.degrees_, in_memory.degrees_)

    with dask.config.set(scheduler=_no_compute):  # building the results computes nothing
        comps = model.transform(refl)
        back = model.inverse_transform(comps)
        first_two = model.inverse_transform(comps.isel(component=slice(0, 2)))
    for out in (comps, back, first_two):
        assert isinstance(out.data, dask.array.Array)
        assert not any(np.isnan(c) for chunks in out.data.chunks for c in chunks)
    assert comps.data.chunks[1] == refl.data.chunks[1]  # row chunks follow the store's

    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_allclose(
            comps.values, in_memory.transform(cube["reflectance"]).values, atol=1e-9
        )
        assert back.isnull().equals(cube["reflectance"].isnull())
        np.testing.assert_allclose(back.values, cube["reflectance"].values, atol=1e-6)


def test_masked_chunks_keep_known_chunk_sizes(tmp_path):
    """Rows masked by the fit's valid-sample mask: the Dask array keeps known chunks."""
    cube = make_cube(n_bands=6, ny=24, nx=20, random_state=2, chunks={"y": 6})
    refl = cube["reflectance"].where(cube["y"] > 200)  # whole chunks of clouds
    with dask.config.set(scheduler="synchronous"):
        model = PPA(degree=2, random_state=0).fit(refl, feature_dim="band")
        reference = PPA(degree=2, random_state=0).fit(refl.compute(), feature_dim="band")
        np.testing.assert_allclose(
            model.transform(refl).values, reference.transform(refl.compute()).values, atol=1e-9
        )


# -------------------------------------------------------------------------------------------
# Datasets: variables as features
# -------------------------------------------------------------------------------------------


def test_dataset_variables_are_the_features(cube):
    refl = cube["reflectance"]
    bands = refl.drop_vars("wavelength")
    ds = xr.Dataset({f"b{int(b)}": bands.sel(band=b, drop=True) for b in refl["band"].values})
    model = PPA(**PARAMS).fit(ds)
    reference = PPA(**PARAMS).fit(refl, feature_dim="band")
    comps = model.transform(ds)
    assert comps.dims == ("component", "y", "x")
    np.testing.assert_array_equal(comps.values, reference.transform(refl).values)
    back = model.inverse_transform(comps)
    assert isinstance(back, xr.Dataset) and list(back.data_vars) == list(ds.data_vars)
    for name in ds.data_vars:
        assert back[name].dims == ("y", "x")
        assert back[name].isnull().equals(ds[name].isnull())
        np.testing.assert_allclose(back[name].values, ds[name].values, atol=1e-6)
    # the variables are found by name, whatever their order in the Dataset
    shuffled = ds[list(ds.data_vars)[::-1]]
    np.testing.assert_array_equal(model.transform(shuffled).values, comps.values)


def test_dataset_variables_must_share_sample_dimensions(cube):
    ds = xr.Dataset({"vegetation": cube["vegetation"], "spectra": cube["reflectance"]})
    with pytest.raises(ValueError, match="'vegetation' has dims \\('y', 'x'\\), 'spectra' has"):
        PPA().fit(ds)
    with pytest.raises(ValueError, match="feature_dim must be None"):
        PPA().fit(cube[["vegetation", "moisture"]], feature_dim="y")


def test_saved_xarray_model_transforms_identically(tmp_path, cube):
    refl = cube["reflectance"].copy()
    refl[1] = np.nan
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    loaded = PPA.load(model.save(tmp_path / "m.zarr"))
    assert (
        loaded.xarray_layout_["feature_coords"]["wavelength"].tolist()
        == refl["wavelength"].values.tolist()
    )
    assert loaded.transform(refl).identical(model.transform(refl))
    assert loaded.inverse_transform(model.transform(refl)).identical(
        model.inverse_transform(model.transform(refl))
    )
    ds = cube[["vegetation", "moisture", "illumination"]]
    ds_model = PPA(degree=2, random_state=0).fit(ds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds_loaded = PPA.load(ds_model.save(tmp_path / "ds.zarr"))
    assert ds_loaded.inverse_transform(ds_loaded.transform(ds)).identical(
        ds_model.inverse_transform(ds_model.transform(ds))
    )


# -------------------------------------------------------------------------------------------
# every method that takes samples: xarray in, xarray out (jacobian, metric, errors, frenet,
# the bagged reconstruction), equal to the plain-array results on the same values
# -------------------------------------------------------------------------------------------


def _cube_with_gaps(cube):
    refl = cube["reflectance"].copy()
    refl[4] = np.nan  # a dead band: dropped at fit, NaN in every feature-space result
    refl.attrs["units"] = "reflectance"
    return refl


def _valid_rows(refl):
    X = np.delete(_rows(refl), 4, axis=1)
    return X, ~np.isnan(X).any(axis=1)


def _per_sample(out, refl, *own_dims):
    """(pixels, *own dims) numpy values of a result, pixels in the order of _rows."""
    return out.transpose("y", "x", *own_dims).values.reshape(-1, *(out.sizes[d] for d in own_dims))


def _assert_labelled_like(out, refl):
    for c in ("y", "x"):
        assert out[c].equals(refl[c])
    assert out.attrs == refl.attrs


def test_jacobian_and_metric_of_a_cube_are_the_plain_array_ones(cube):
    refl = _cube_with_gaps(cube)
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    X, valid = _valid_rows(refl)
    J = model.jacobian(refl)
    assert J.dims == ("component", "band", "y", "x") and J.name == "jacobian"
    assert J["component"].values.tolist() == list(range(1, N_BANDS))
    assert J["wavelength"].equals(refl["wavelength"])
    _assert_labelled_like(J, refl)
    values = _per_sample(J, refl, "component", "band")
    assert np.array_equal(np.delete(values[valid], 4, axis=2), model.jacobian(X[valid]))
    assert np.isnan(values[~valid]).all() and np.isnan(values[:, :, 4]).all()

    M = model.metric(refl, whitened=False)
    assert M.dims == ("band", "band_2", "y", "x") and M.name == "metric"
    assert M["band_2"].values.tolist() == refl["band"].values.tolist()
    assert np.array_equal(M["wavelength_2"].values, refl["wavelength"].values)
    _assert_labelled_like(M, refl)
    values = _per_sample(M, refl, "band", "band_2")
    kept = np.delete(np.delete(values, 4, axis=1), 4, axis=2)
    assert np.array_equal(kept[valid], model.metric(X[valid], whitened=False))
    assert np.isnan(values[~valid]).all() and np.isnan(values[:, 4]).all()


def test_reconstruction_errors_of_a_cube_are_a_map_over_k(cube):
    refl = _cube_with_gaps(cube)
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    X, valid = _valid_rows(refl)
    errors = model.reconstruction_errors(refl)
    assert errors.dims == ("k", "y", "x") and errors["k"].values.tolist() == list(
        range(N_BANDS - 1)
    )
    _assert_labelled_like(errors, refl)
    values = _per_sample(errors, refl, "k")
    per_row = model.reconstruction_errors(X[valid], per_sample=True)
    assert np.array_equal(values[valid], per_row) and np.isnan(values[~valid]).all()
    # independent: the squared error of the k-component reconstruction
    R = model.transform(X[valid])
    for k in (1, 3):
        rebuilt = model.inverse_transform(R[:, :k])
        np.testing.assert_allclose(
            per_row[:, k], ((X[valid] - rebuilt) ** 2).sum(axis=1), atol=1e-10
        )
    mean = model.reconstruction_errors(refl, per_sample=False)
    assert mean.dims == ("k",)
    np.testing.assert_allclose(mean.values, model.reconstruction_errors(X[valid]), rtol=1e-10)


def test_dask_backed_cube_gives_the_same_matrices_lazily(cube):
    refl = _cube_with_gaps(cube)
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    lazy = refl.chunk({"y": 7})
    with dask.config.set(scheduler=_no_compute):
        J, M = model.jacobian(lazy), model.metric(lazy)
        errors = model.reconstruction_errors(lazy)
    for out in (J, M, errors):
        assert isinstance(out.data, dask.array.Array)
    with dask.config.set(scheduler="synchronous"):
        # the same kernels on row chunks: equal up to the BLAS summation order of a block size
        for out, ref in (
            (J, model.jacobian(refl)),
            (M, model.metric(refl)),
            (errors, model.reconstruction_errors(refl)),
        ):
            computed = out.compute()
            assert computed.dims == ref.dims and computed.attrs == ref.attrs
            for c in ref.coords:
                assert computed[c].identical(ref[c]), c
            # the summation order's error is relative to the largest entry of the matrix, not to
            # each entry: a metric entry near 0.06 beside entries near 4e4 carries 5e-13 of it
            scale = np.nanmax(np.abs(ref.values))
            np.testing.assert_allclose(
                computed.values, ref.values, rtol=1e-12, atol=1e-14 * max(scale, 1.0)
            )
            assert np.array_equal(np.isnan(computed.values), np.isnan(ref.values))


def test_frenet_frames_of_a_cube_are_the_plain_array_ones(cube):
    from ppa_dask.geometry import frenet_serret

    refl = _cube_with_gaps(cube)
    model = PPA(**PARAMS).fit(refl, feature_dim="band")
    X, valid = _valid_rows(refl)
    frames, chi = frenet_serret(model, refl, axis=1)
    assert frames.dims == ("frame", "band", "y", "x") and chi.dims == ("curvature", "y", "x")
    assert chi["curvature"].values.tolist() == list(range(1, N_BANDS - 1))
    _assert_labelled_like(frames, refl)
    _assert_labelled_like(chi, refl)
    ref_frames, ref_chi = frenet_serret(model, X[valid], axis=1)
    got = _per_sample(frames, refl, "frame", "band")
    assert np.array_equal(np.delete(got[valid], 4, axis=2), ref_frames)
    assert np.isnan(got[~valid]).all() and np.isnan(got[:, :, 4]).all()
    got_chi = _per_sample(chi, refl, "curvature")
    assert np.array_equal(got_chi[valid], ref_chi) and np.isnan(got_chi[~valid]).all()
    plain = PPA(**PARAMS).fit(X[valid])
    with pytest.raises(ValueError, match="fitted on a plain array"):
        frenet_serret(plain, refl)


def test_bagged_reconstruction_of_a_cube_is_the_plain_array_one(cube):
    from ppa_dask import FeatureBaggingPPA

    refl = _cube_with_gaps(cube)
    params = dict(estimator=PPA(degree=2), n_estimators=4, max_features=0.75, random_state=0)
    model = FeatureBaggingPPA(**params).fit(refl, feature_dim="band")
    X, valid = _valid_rows(refl)
    reference = FeatureBaggingPPA(**params).fit(X[valid])
    back = model.reconstruct(refl)
    assert back.dims == refl.dims and back["wavelength"].equals(refl["wavelength"])
    _assert_labelled_like(back, refl)
    got = _per_sample(back, refl, "band")
    assert np.array_equal(np.delete(got[valid], 4, axis=1), reference.reconstruct(X[valid]))
    assert np.isnan(got[~valid]).all() and np.isnan(got[:, 4]).all()
    errors = model.reconstruction_error(refl)
    assert errors.dims == ("y", "x")
    _assert_labelled_like(errors, refl)
    flat = errors.values.reshape(-1)
    assert np.array_equal(flat[valid], reference.reconstruction_error(X[valid]))
    assert np.isnan(flat[~valid]).all()
    assert model.score(refl) == pytest.approx(reference.score(X[valid]), rel=1e-12)
    with pytest.raises(ValueError, match="fitted on a plain array"):
        reference.reconstruct(refl)
    with pytest.raises(ValueError, match="xarray input only"):
        FeatureBaggingPPA(**params).fit(X[valid], feature_dim="band")


def test_the_seam_keeps_the_fit_signature_and_names_what_was_wanted(cube):
    # ppa_dask.store.seam adds the xarray-only options to the array fit: they stay in the
    # public signature (scikit-learn's metadata routing and the docs read it), and a model
    # fitted on a plain array names the estimator and what the xarray call wanted
    import inspect

    from ppa_dask import FeatureBaggingPPA
    from ppa_dask.geometry import frenet_serret

    for cls in (PPA, FeatureBaggingPPA):
        params = inspect.signature(cls.fit).parameters
        assert params["feature_dim"].kind is inspect.Parameter.KEYWORD_ONLY
        assert params["feature_dim"].default is None and params["nan_policy"].default == "raise"
    refl = cube["reflectance"]
    X = _rows(refl)
    X = X[~np.isnan(X).any(axis=1)]
    plain = PPA(**PARAMS).fit(X)
    bagged = FeatureBaggingPPA(n_estimators=2, max_features=0.75, random_state=0).fit(X)
    head = "fitted on a plain array; fit it on a DataArray or Dataset to "
    for call, message in [
        (lambda: plain.jacobian(refl), f"this PPA was {head}transform xarray input"),
        (lambda: frenet_serret(plain, refl), f"this PPA was {head}take xarray points"),
        (lambda: bagged.score(refl), f"this FeatureBaggingPPA was {head}reconstruct xarray input"),
    ]:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == message
    with pytest.raises(
        ValueError, match="^feature_dim, nan_policy and coslat apply to xarray input"
    ):
        PPA(**PARAMS).fit(X, nan_policy="drop_samples")
    # an unfitted ensemble says it is not fitted before looking for a layout
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        FeatureBaggingPPA().reconstruction_error(refl)
