"""Wide data (PPA(solver="gram")): the PPA of many features, fitted in the span of the samples.

The claims: the Gram path is the covariance path's model to rounding (numpy and Dask, any
chunking, with cross-validated degrees), it agrees with a PPA computed step by step from the
SVD of each residual, it never allocates anything of d x d elements, its model files grow with
k d, and a model of wide data is applied along feature slabs on Dask.
"""

from __future__ import annotations

import os
import tracemalloc
import warnings

import dask.array as da
import numpy as np
import pytest

from ppa_dask import PPA
from ppa_dask.ppa import wide
from ppa_dask.utils.warnings import RankDeficientWarning


def curved_field(n, d, seed=0, scales=(6.0, 4.0, 3.0, 2.0, 1.5, 1.0), noise=0.01):
    """``n`` samples of ``d`` features: latent factors of decreasing spread, the first with a
    quadratic echo in another pattern (a curved leading mode), plus a little noise."""
    rng = np.random.default_rng(seed)
    patterns = rng.normal(size=(len(scales) + 1, d)) / np.sqrt(d)
    factors = rng.normal(size=(n, len(scales))) * scales
    X = factors @ patterns[: len(scales)]
    X += np.outer(factors[:, 0] ** 2 / scales[0], patterns[-1]) * 0.5
    return X + noise * rng.normal(size=(n, d)) / np.sqrt(d) + 5.0


def fitted_pair(X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficientWarning)
        covariance = PPA(solver="covariance", random_state=0, **params).fit(X)
        gram = PPA(solver="gram", random_state=0, **params).fit(X)
    return covariance, gram


def assert_same_model(a, b, rtol=1e-10):
    scale = np.sqrt(a.residual_variance_[0])
    assert np.array_equal(a.degrees_, b.degrees_)
    np.testing.assert_allclose(b.leading_vectors_, a.leading_vectors_, rtol=0, atol=rtol)
    np.testing.assert_allclose(b.mean_, a.mean_, rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(b.coefficients_, a.coefficients_, rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(b.basis_intervals_, a.basis_intervals_, rtol=rtol, atol=0)
    np.testing.assert_allclose(b.alpha_ranges_, a.alpha_ranges_, rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(b.explained_variance_, a.explained_variance_, rtol=rtol)
    np.testing.assert_allclose(b.residual_variance_, a.residual_variance_, rtol=rtol)
    if a.cv_scores_ is not None:
        np.testing.assert_allclose(b.cv_scores_, a.cv_scores_, rtol=rtol)


# --------------------------------------------------------------------------------------------
# the Gram path is the covariance path's model
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_the_gram_path_fits_the_covariance_paths_model_with_cv_degrees(k):
    X = curved_field(90, 240, seed=k)
    covariance, gram = fitted_pair(X, n_components=k, degree=range(1, 4))
    assert covariance.solver_ == "covariance" and gram.solver_ == "gram"
    assert covariance.degrees_[0] > 1  # the curved leading mode is fitted curved
    assert_same_model(covariance, gram)
    np.testing.assert_allclose(gram.transform(X), covariance.transform(X), atol=1e-9)


@pytest.mark.parametrize("chunks", [(90, 60), (30, 240), (40, 70)], ids=["feature", "row", "both"])
def test_the_gram_path_on_dask_is_the_in_memory_model_whatever_the_chunking(chunks):
    X = curved_field(90, 240, seed=7)
    covariance, gram = fitted_pair(X, n_components=3, degree=range(1, 4))
    on_dask = PPA(solver="gram", n_components=3, degree=range(1, 4), random_state=0)
    on_dask.fit(da.from_array(X, chunks=chunks))
    assert_same_model(covariance, on_dask)
    assert_same_model(gram, on_dask, rtol=1e-11)
    assert on_dask.n_passes_ == 2  # the Gram matrix and the projection, whatever k


def test_a_model_of_wide_data_is_applied_along_feature_slabs_on_dask():
    X = curved_field(90, 240, seed=3)
    _, gram = fitted_pair(X, n_components=3, degree=range(1, 4), whiten=True)
    Xd = da.from_array(X, chunks=(40, 70))  # no task holds a whole sample
    R = gram.transform(X)
    np.testing.assert_allclose(gram.transform(Xd).compute(), R, atol=1e-10)
    for m in (1, 3):
        Rd = da.from_array(R[:, :m], chunks=(40, m))
        np.testing.assert_allclose(
            gram.inverse_transform(Rd).compute(), gram.inverse_transform(R[:, :m]), atol=1e-10
        )
    errors = gram.reconstruction_errors(X, per_sample=True)
    np.testing.assert_allclose(
        gram.reconstruction_errors(Xd, per_sample=True).compute(), errors, rtol=1e-10
    )
    np.testing.assert_allclose(gram.reconstruction_errors(Xd), errors.mean(axis=0), rtol=1e-10)
    # the errors are those of the reconstructions (paper eq. 7), and of the training residual
    for m in (1, 3):
        rebuilt = gram.inverse_transform(gram.transform(X)[:, :m])
        np.testing.assert_allclose(((X - rebuilt) ** 2).sum(axis=1), errors[:, m], rtol=1e-8)
    np.testing.assert_allclose(errors.mean(axis=0), gram.residual_variance_, rtol=1e-9)


# --------------------------------------------------------------------------------------------
# an independent computation: each step from the SVD of the residual
# --------------------------------------------------------------------------------------------


def test_a_wide_fit_agrees_with_a_ppa_made_from_the_svd_of_each_residual():
    n, d, degree = 200, 50_000, 2
    X = curved_field(n, d, seed=11).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficientWarning)
        model = PPA(n_components=3, degree=degree, random_state=0).fit(X)  # auto
    assert model.solver_ == "gram" and model.residual_basis_ is None
    Y = X - X.mean(axis=0)
    alphas = model.transform(X)
    residual = [float((Y * Y).sum()) / n]
    for p in range(3):
        e = np.linalg.svd(Y, full_matrices=False)[2][0]  # the residual's leading direction
        sign = np.sign(e @ model.leading_vectors_[p])
        assert abs(e @ model.leading_vectors_[p]) == pytest.approx(1.0, abs=1e-12)
        alpha = Y @ e
        np.testing.assert_allclose(sign * alpha, alphas[:, p], atol=1e-9 * np.abs(alpha).max())
        Z = Y - np.outer(alpha, e)
        scale = np.abs(alpha).max()
        V = np.polynomial.polynomial.polyvander(alpha / scale, degree)
        Y = Z - V @ np.linalg.lstsq(V, Z, rcond=None)[0]
        residual.append(float((Y * Y).sum()) / n)
    np.testing.assert_allclose(model.residual_variance_, residual, rtol=1e-9)


# --------------------------------------------------------------------------------------------
# linear in d: no d x d object, model files of k d numbers
# --------------------------------------------------------------------------------------------


def test_a_wide_fit_allocates_nothing_of_d_by_d():
    n, d = 100, 20_000  # a d x (d - k) basis would be 3.2 GB
    X = curved_field(n, d, seed=5)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RankDeficientWarning)
            model = PPA(n_components=3, degree=range(1, 4), random_state=0).fit(X)
            model.transform(X)
            model.reconstruction_errors(X)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert model.solver_ == "gram"
    assert peak < 4 * X.nbytes + 2**24, peak  # a few copies of the data, not d^2 * 8
    assert peak < d * (d - 3) * 8 / 50  # a fiftieth of the residual basis it does not make


def test_a_wide_model_file_holds_k_d_numbers_and_round_trips(tmp_path):
    n, d = 60, 30_000
    X = curved_field(n, d, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficientWarning)
        model = PPA(n_components=2, degree=2, random_state=0).fit(X)
    path = model.save(tmp_path / "wide.zarr")
    size = sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )
    # the mean, 2 leading vectors and 2 coefficient blocks of d x 3: 9 d float64 at most
    assert size < 9 * d * 8 + 2**16, size
    loaded = PPA.load(path)
    assert loaded.solver_ == "gram" and loaded.residual_basis_ is None
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


# --------------------------------------------------------------------------------------------
# the choice and the refusals
# --------------------------------------------------------------------------------------------


def test_auto_takes_the_gram_path_for_wide_data_with_a_number_of_components():
    assert wide.choose_solver("auto", 500, 20_000, 3) == "gram"
    assert wide.choose_solver("auto", 500, 999, 3) == "covariance"  # small d: as before
    assert wide.choose_solver("auto", 5_000, 2_000, 3) == "covariance"  # more samples
    assert wide.choose_solver("auto", 500, 20_000, None) == "covariance"
    small = PPA(degree=2, random_state=0).fit(curved_field(100, 6))
    assert small.solver_ == "covariance" and small.residual_basis_.shape == (6, 1)


def test_the_gram_path_refuses_what_it_cannot_fit():
    X = curved_field(20, 300)
    with pytest.raises(ValueError, match="solver='gram' fits a given number of components"):
        PPA(solver="gram").fit(X)
    with pytest.raises(ValueError, match=r"n_components=19 needs at least 20 dimensions.*span 19"):
        PPA(solver="gram", n_components=19, degree=1).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficientWarning)
        model = PPA(solver="gram", n_components=2, degree=2).fit(X)
    with pytest.raises(ValueError, match="jacobian needs 300 x 300 values per sample"):
        model.jacobian(X[:2])
    with pytest.raises(ValueError, match="solver='gram'"):
        model.metric(X[:2])
    with pytest.raises(MemoryError, match=r"solver='gram' on 10000000 samples needs"):
        PPA(solver="gram", n_components=2)._solver_for(10_000_000, 20_000_000)


# --------------------------------------------------------------------------------------------
# a field from xarray and from the command line
# --------------------------------------------------------------------------------------------


def make_field(n_times=80, n_lat=25, n_lon=48, seed=0):
    """A (time, latitude, longitude) field with land cells NaN at every date."""
    import xarray as xr

    X = curved_field(n_times, n_lat * n_lon, seed=seed)
    values = X.reshape(n_times, n_lat, n_lon)
    land = np.zeros((n_lat, n_lon), dtype=bool)
    land[:6, :10] = land[20:, 30:] = True
    values[:, land] = np.nan
    field = xr.DataArray(
        values,
        dims=("time", "latitude", "longitude"),
        coords=dict(
            time=np.arange(n_times),
            latitude=np.linspace(-30, 30, n_lat),
            longitude=np.linspace(120, 280, n_lon),
        ),
        name="sst",
        attrs={"units": "K"},
    )
    return field, land


def test_a_field_is_fitted_on_its_sea_cells_and_the_land_comes_back_nan():
    field, land = make_field()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficientWarning)
        model = PPA(n_components=3, degree=range(1, 4), random_state=0)
        model.fit(field, feature_dim=("latitude", "longitude"))
        sea = field.values[:, ~land]  # the same cells as a plain array, in the same order
        plain = PPA(n_components=3, degree=range(1, 4), random_state=0).fit(sea)
    assert model.solver_ == "gram" and model.n_features_in_ == int((~land).sum())
    assert_same_model(plain, model, rtol=1e-12)
    components = model.transform(field)
    assert components.dims == ("time", "component")
    np.testing.assert_allclose(components.values, plain.transform(sea), atol=1e-10)
    rebuilt = model.inverse_transform(components)
    assert rebuilt.dims == field.dims
    assert np.isnan(rebuilt.values[:, land]).all()
    np.testing.assert_allclose(
        rebuilt.values[:, ~land], plain.inverse_transform(plain.transform(sea)), atol=1e-10
    )


def test_the_cli_fits_a_netcdf_field_on_the_gram_path(tmp_path, capsys):
    import xarray as xr

    from ppa_dask.app.cli import main

    field, land = make_field(seed=4)
    path = str(tmp_path / "field.nc")
    field.to_dataset().to_netcdf(path)
    model_path, comps = str(tmp_path / "m.zarr"), str(tmp_path / "c.nc")
    argv = ["fit", path, model_path, "--feature-dim", "latitude,longitude"]
    argv += ["--n-components", "3", "--degree", "1-3", "--scheduler", "threads"]
    assert main(argv) == 0
    assert "solver gram" in capsys.readouterr().out
    model = PPA.load(model_path)
    sea = field.values[:, ~land]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficientWarning)
        plain = PPA(n_components=3, degree=range(1, 4), random_state=0).fit(sea)
    assert model.solver_ == "gram"
    assert_same_model(plain, model, rtol=1e-12)
    assert main(["transform", model_path, path, comps, "--scheduler", "threads"]) == 0
    with xr.open_dataset(comps) as written:
        out = written["components"].load()
    assert out.dims == ("time", "component")
    np.testing.assert_allclose(out.values, plain.transform(sea), atol=1e-10)


# --------------------------------------------------------------------------------------------
# many samples and many features: leading vectors by Lanczos on the implicit residual
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
def test_the_krylov_path_fits_the_covariance_paths_model(k):
    X = curved_field(400, 120, seed=20 + k)  # more samples than features: no Gram path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankDeficientWarning)
        covariance = PPA(solver="covariance", n_components=k, degree=range(1, 4), random_state=0)
        krylov = PPA(solver="krylov", n_components=k, degree=range(1, 4), random_state=0)
        covariance.fit(X)
        krylov.fit(X)
    assert krylov.solver_ == "krylov" and krylov.residual_basis_ is None
    assert_same_model(covariance, krylov)
    np.testing.assert_allclose(krylov.transform(X), covariance.transform(X), atol=1e-9)


@pytest.mark.parametrize(
    "chunks", [(100, 120), (400, 50), (150, 70)], ids=["row", "feature", "both"]
)
def test_the_krylov_path_on_dask_is_the_in_memory_model(chunks):
    X = curved_field(400, 120, seed=9)
    params = dict(solver="krylov", n_components=3, degree=range(1, 4), random_state=0)
    in_memory = PPA(**params).fit(X)
    on_dask = PPA(**params).fit(da.from_array(X, chunks=chunks))
    assert_same_model(in_memory, on_dask, rtol=1e-11)
    assert on_dask.n_passes_ > in_memory.n_passes_  # a Lanczos product is two passes on Dask


def test_a_krylov_fit_allocates_nothing_of_d_by_d():
    n, d = 600, 10_000  # as many samples as the Gram path would hold, far fewer than d
    X = curved_field(n, d, seed=6)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RankDeficientWarning)
            PPA(solver="krylov", n_components=2, degree=2, random_state=0).fit(X)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a few row blocks of the data at a time, never a copy of it, far from d x d
    assert peak < 4 * wide_krylov().BLOCK_BYTES < X.nbytes * 2, peak
    assert peak < d * d * 8 / 10


def test_a_leading_vector_without_an_eigengap_is_warned_about():
    # two directions of exactly equal variance: any unit vector of their plane is a leading one
    square = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    alternating = np.array([[1.0], [-1.0], [1.0], [-1.0]])  # orthogonal to both columns
    X = np.tile(np.hstack([square * 3.0, alternating * 0.1, alternating * 0.05]), (50, 1))
    with pytest.warns(wide_krylov().LeadingVectorWarning, match="step 1 is not identifiable"):
        PPA(solver="krylov", n_components=1, degree=1).fit(X)


def wide_krylov():
    from ppa_dask.ppa import krylov

    return krylov


def test_auto_takes_the_krylov_path_where_neither_matrix_fits():
    assert wide.choose_solver("auto", 10**5, 10**5, 3) == "krylov"
    assert wide.choose_solver("auto", 10**5, 2 * 10**4, 3) == "krylov"
    assert wide.choose_solver("auto", 10**5, 5_000, 3) == "covariance"
    # the Gram path's matrices beyond half the memory: Krylov instead
    assert wide.choose_solver("auto", 30_000, 50_000, 3, memory_bytes=2**34) == "krylov"
    with pytest.raises(ValueError, match="solver='krylov' takes leading_vector='pca'"):
        PPA(solver="krylov", n_components=2, leading_vector="gd").fit(curved_field(50, 10))
