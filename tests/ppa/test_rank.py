"""Rank-deficient input: its numerical rank, linear steps past it, one warning, tables that stop.

Three dates of one 4-band image, the second and third rescaled as a change of units would
(reflectance gains), are 12 features of rank 4: the residual after 4 steps is rounding. The
rank is checked against ``numpy.linalg.matrix_rank`` (of the centred data, and of the
covariance with its own tolerance), the steps past it are linear whatever the cross-validation
or a fixed degree says, the model still inverts exactly, numpy, Dask and a LocalCluster give
the same model and one warning each, and the reconstruction-error tables show ``-`` from
``k = rank`` on. Full-rank input is the model fitted without the rule (tolerance 0), to 1e-12,
without a warning.
"""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import loopback_cluster, noisy_helix, random_nonlinear

from ppa_dask import PPA, RankDeficientWarning
from ppa_dask.app.experiments import paper_split
from ppa_dask.app.pipeline import error_rows, format_error_table, write_error_markdown
from ppa_dask.ppa import algebra
from ppa_dask.store import load_model, save_model


def image(n=1500, seed=0):
    """A curved 4-band "image" of n pixels, in integer counts."""
    rng = np.random.default_rng(seed)
    t, s = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    bands = np.column_stack(
        [t, t**2 + 0.3 * s, np.sin(2 * t) + 0.2 * s**2, 0.5 * s]
    ) + 0.02 * rng.normal(size=(n, 4))
    return np.round(1000 * bands + 3000)


def three_dates(n=1500, seed=0):
    """The same image on three dates, rescaled (as reflectance gains): rank 4 of 12."""
    counts = image(n, seed)
    reflectance = counts * 2.75e-5 - 0.2
    return np.hstack([reflectance, reflectance * 1.1, counts * 3e-5])


def rank_warnings(caught):
    return [w for w in caught if issubclass(w.category, RankDeficientWarning)]


def fit_recording(model, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X)
    return model, rank_warnings(caught)


def without_rule(monkeypatch):
    """The fit as it was before the rank rule: a tolerance of 0 never applies it."""
    monkeypatch.setattr(algebra, "rank_rtol", lambda n_features, dtype=None: 0.0)


def test_three_dates_have_the_rank_of_one_and_warn_once():
    X = three_dates()
    Xc = X - X.mean(axis=0)
    assert np.linalg.matrix_rank(Xc) == 4
    model, caught = fit_recording(PPA(random_state=0), X)
    assert model.rank_ == 4
    assert len(caught) == 1
    message = str(caught[0].message)
    tolerance = algebra.rank_rtol(12) * model.residual_variance_[0]
    assert "numerical rank 4 of 12 features" in message and f"{tolerance:.3g}" in message
    assert caught[0].filename == __file__  # attributed to the caller's line
    # the steps past the rank are linear, and their residual is rounding
    assert (model.degrees_[4:] == 1).all()
    assert (model.residual_variance_[4:] <= tolerance).all()
    assert model.residual_variance_[3] > 1e6 * tolerance
    # the model still inverts exactly
    R = model.transform(X)
    np.testing.assert_allclose(model.inverse_transform(R), X, rtol=0, atol=1e-12 * np.abs(X).max())


def test_a_fixed_degree_is_linear_past_the_rank(monkeypatch):
    X = three_dates()
    model, caught = fit_recording(PPA(degree=3, random_state=0), X)
    assert len(caught) == 1 and model.rank_ == 4
    assert model.degrees_.tolist() == [3] * 4 + [1] * 7
    assert np.abs(model.coefficients_[4:, :, 2:]).max() == 0  # no polynomial on rounding
    model.check_fitted_state()  # degree 1 past the rank is a valid state for degree=3
    R = model.transform(X)
    np.testing.assert_allclose(model.inverse_transform(R), X, rtol=0, atol=1e-12 * np.abs(X).max())
    # before the rule, degree 3 was fitted on the rounding (on the steps whose residual is
    # rounding but not exactly 0: how many there are depends on the CPU's rounding)
    without_rule(monkeypatch)
    before, _ = fit_recording(PPA(degree=3, random_state=0), X)
    assert (before.degrees_[4:] == 3).any()


def test_cross_validation_on_rounding_no_longer_picks_a_polynomial(monkeypatch):
    # Segmentation (paper split 0) holds four exact formulas between its 16 attributes, kept
    # to the file's rounding: rank 12, which matrix_rank finds from the covariance with its
    # own tolerance (largest eigenvalue x size x eps)
    train, _ = paper_split("segmentation", 0)
    covariance = np.cov(train.T, bias=True)
    assert np.linalg.matrix_rank(covariance, hermitian=True) == 12
    model, caught = fit_recording(PPA(random_state=0), train)
    assert model.rank_ == 12 and len(caught) == 1
    assert (model.degrees_[12:] == 1).all()
    without_rule(monkeypatch)
    before, _ = fit_recording(PPA(random_state=0), train)
    assert (before.degrees_[12:] > 1).any()  # a polynomial fitted on rounding
    np.testing.assert_array_equal(before.degrees_[:12], model.degrees_[:12])
    np.testing.assert_allclose(before.coefficients_[:12], model.coefficients_[:12], rtol=1e-12)


def test_a_truncated_fit_finds_the_rank_beyond_its_steps():
    X = three_dates()
    model, caught = fit_recording(PPA(n_components=2, random_state=0), X)
    assert model.rank_ == 4 and len(caught) == 1
    assert "no fitted step" not in str(caught[0].message)


def assert_same_model(a, b, rtol=1e-10):
    assert a.rank_ == b.rank_
    np.testing.assert_array_equal(a.degrees_, b.degrees_)
    np.testing.assert_allclose(
        a.leading_vectors_[: a.rank_], b.leading_vectors_[: b.rank_], atol=1e-8
    )
    X = three_dates(300, seed=1)
    np.testing.assert_allclose(
        a.transform(X)[:, : a.rank_], b.transform(X)[:, : b.rank_], rtol=rtol, atol=1e-10
    )


@pytest.mark.cluster
def test_dask_and_a_local_cluster_give_the_numpy_model_and_one_warning_each():
    X = three_dates()
    reference, _ = fit_recording(PPA(random_state=0), X)
    with dask.config.set(scheduler="threads"):
        lazy, caught = fit_recording(PPA(random_state=0), da.from_array(X, chunks=(400, 12)))
    assert len(caught) == 1
    assert_same_model(lazy, reference)
    from distributed import Client

    with loopback_cluster(2) as cluster, Client(cluster):
        remote, caught = fit_recording(PPA(random_state=0), da.from_array(X, chunks=(400, 12)))
    assert len(caught) == 1
    assert_same_model(remote, reference)


@pytest.mark.parametrize(
    "X", [noisy_helix(), random_nonlinear(), image()], ids=["helix", "nonlinear6", "4 bands"]
)
def test_full_rank_input_is_the_model_without_the_rule(monkeypatch, X):
    model, caught = fit_recording(PPA(random_state=0), X)
    assert not caught and model.rank_ == X.shape[1] == np.linalg.matrix_rank(X - X.mean(0))
    without_rule(monkeypatch)
    before, _ = fit_recording(PPA(random_state=0), X)
    for name in ("degrees_", "leading_vectors_", "coefficients_", "residual_variance_"):
        np.testing.assert_allclose(getattr(model, name), getattr(before, name), rtol=1e-12, atol=0)


def test_float32_input_counts_its_own_rounding():
    # a band that is the sum of two others, rounded to float32: a dependency at float32's
    # rounding, above float64's tolerance and below float32's
    rng = np.random.default_rng(3)
    B = rng.uniform(0.05, 0.4, size=(2000, 3)).astype(np.float32)
    X = np.column_stack([B, (B[:, 0] + B[:, 1]).astype(np.float32)])
    Xc = X.astype(np.float64) - X.astype(np.float64).mean(axis=0)
    fit = np.linalg.lstsq(Xc[:, :3], Xc[:, 3], rcond=None)[0]
    left = np.mean((Xc[:, 3] - Xc[:, :3] @ fit) ** 2) / np.mean(np.sum(Xc**2, axis=1))
    assert algebra.rank_rtol(4) < left < algebra.rank_rtol(4, np.float32)
    model, caught = fit_recording(PPA(degree=2, random_state=0), X)
    assert model.rank_ == 3 and len(caught) == 1
    as_float64, caught = fit_recording(PPA(degree=2, random_state=0), X.astype(np.float64))
    assert as_float64.rank_ == 4 and not caught


def test_the_rank_is_saved_and_derived_for_files_without_it(tmp_path):
    X = three_dates()
    model, _ = fit_recording(PPA(random_state=0), X)
    save_model(model, tmp_path / "m.zarr")
    assert load_model(tmp_path / "m.zarr").rank_ == 4
    del model.rank_  # a file written before the rank rule holds no rank_
    save_model(model, tmp_path / "old.zarr")
    assert load_model(tmp_path / "old.zarr").rank_ == 4
    full, _ = fit_recording(PPA(n_components=2, random_state=0), noisy_helix())
    del full.rank_
    save_model(full, tmp_path / "old-full.zarr")
    assert load_model(tmp_path / "old-full.zarr").rank_ == 3


def test_a_state_with_a_polynomial_past_the_rank_is_refused():
    model, _ = fit_recording(PPA(random_state=0), three_dates())
    model.degrees_ = model.degrees_.copy()
    model.degrees_[6] = 2
    with pytest.raises(ValueError, match="degrees_ must be 1 past the rank"):
        model.check_fitted_state()


def test_the_tables_show_a_dash_from_the_rank_on(tmp_path):
    X = three_dates()
    model, _ = fit_recording(PPA(random_state=0), X)
    ppa = model.reconstruction_errors(X)
    # PCA's errors from the eigenvalues (independent of PPA)
    values = np.sort(np.linalg.eigvalsh(np.cov(X.T, bias=True)))[::-1]
    pca = np.array([np.abs(values[k:]).sum() for k in range(12)])  # rounding past the rank
    assert (pca > 0).all() and pca[4] < 1e-12 * pca[0]
    rows = error_rows(pca, ppa, range(1, 12), rank=model.rank_)
    assert [r[3] is None for r in rows] == [k >= 4 for k in range(1, 12)]
    for _k, p, q, pct in rows[:3]:
        assert pct == pytest.approx(100 * q / p)
    text = format_error_table(rows).splitlines()
    assert [line.split()[-1] == "-" for line in text[2:]] == [k >= 4 for k in range(1, 12)]
    write_error_markdown(tmp_path / "t.md", rows, pca[0], "caption")
    cells = [
        line.split("|")[-2].strip() for line in (tmp_path / "t.md").read_text().splitlines()[2:13]
    ]
    assert cells[3:] == ["-"] * 8 and all(c != "-" for c in cells[:3])
