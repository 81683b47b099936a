"""The paper's properties of PPA (sections 2 and 3): PCA as a special case, better than PCA,
exact inverse, volume preservation, analytic Jacobian."""

import numpy as np
import pytest
from conftest import noisy_helix, random_nonlinear
from sklearn.decomposition import PCA

from ppa_dask import PPA

DATA = {"helix3d": noisy_helix(), "nonlinear6d": random_nonlinear()}


@pytest.fixture(params=sorted(DATA))
def X(request):
    return DATA[request.param]


# --- PPA generalises PCA ---------------------------------------------------------------------


def test_degree_one_is_pca(X):
    R = PPA(degree=1).fit(X).transform(X)
    scores = PCA().fit_transform(X)
    signs = np.sign(np.sum(R * scores, axis=0))
    np.testing.assert_allclose(R, scores * signs, atol=1e-9 * np.abs(scores).max())


def test_degree_one_whitened_is_whitened_pca(X):
    model = PPA(degree=1, whiten=True).fit(X)
    pca = PCA(whiten=True).fit(X)
    np.testing.assert_allclose(model.explained_variance_, pca.explained_variance_, rtol=1e-10)
    R, scores = model.transform(X), pca.transform(X)
    signs = np.sign(np.sum(R * scores, axis=0))
    np.testing.assert_allclose(R, scores * signs, atol=1e-9)


def test_degree_one_fits_no_curve(X):
    model = PPA(degree=1).fit(X)
    # the straight-line fit of a centred residual on its own projection is zero (W = 0)
    assert np.abs(model.coefficients_).max() < 1e-12 * np.abs(X).max()


@pytest.mark.parametrize("degree", [2, 3, 5, (1, 2, 3, 4, 5)])
def test_reconstruction_error_never_exceeds_pca(X, degree):
    model = PPA(degree=degree, random_state=0).fit(X)
    R = model.transform(X)
    pca = PCA().fit(X)
    P = pca.transform(X)
    for k in range(1, X.shape[1]):
        ppa_err = np.mean(np.sum((X - model.inverse_transform(R[:, :k])) ** 2, axis=1))
        pca_rec = pca.inverse_transform(
            np.column_stack([P[:, :k], np.zeros((len(X), X.shape[1] - k))])
        )
        pca_err = np.mean(np.sum((X - pca_rec) ** 2, axis=1))
        assert ppa_err <= pca_err * (1 + 1e-12), (k, ppa_err, pca_err)


def test_curved_data_are_reconstructed_much_better_than_by_pca():
    X = noisy_helix(noise=0.05)
    model = PPA(degree=7).fit(X)
    rec = model.inverse_transform(model.transform(X)[:, :1])
    pca = PCA(n_components=1).fit(X)
    pca_err = np.mean(np.sum((X - pca.inverse_transform(pca.transform(X))) ** 2, axis=1))
    assert np.mean(np.sum((X - rec) ** 2, axis=1)) < 0.5 * pca_err


def test_truncated_error_is_the_residual_left_after_k_steps(X):
    model = PPA(degree=3).fit(X)
    R = model.transform(X)
    errors = model.reconstruction_errors(X)
    for k in range(1, X.shape[1]):
        explicit = np.mean(np.sum((X - model.inverse_transform(R[:, :k])) ** 2, axis=1))
        np.testing.assert_allclose(errors[k], explicit, rtol=1e-10)
        np.testing.assert_allclose(model.residual_variance_[k], explicit, rtol=1e-8)


def test_explained_variance_is_the_variance_of_each_coefficient(X):
    model = PPA(degree=4).fit(X)
    np.testing.assert_allclose(
        model.explained_variance_, model.transform(X).var(axis=0, ddof=1), rtol=1e-9
    )


# --- invertibility ---------------------------------------------------------------------------


@pytest.mark.parametrize("whiten", [False, True])
def test_inverse_is_exact(X, whiten):
    model = PPA(degree=5, whiten=whiten, random_state=0).fit(X)
    rng = np.random.default_rng(5)
    new = X[rng.choice(len(X), 300)] + 0.1 * rng.normal(size=(300, X.shape[1]))
    for points in (X, new):
        np.testing.assert_allclose(
            model.inverse_transform(model.transform(points)), points, atol=1e-10
        )


def test_whitened_coefficients_have_unit_variance(X):
    R = PPA(degree=3, whiten=True).fit(X).transform(X)
    np.testing.assert_allclose(R.var(axis=0, ddof=1), 1.0, rtol=1e-9)


def test_partial_fit_uses_the_same_first_steps(X):
    full = PPA(degree=3).fit(X)
    part = PPA(n_components=2, degree=3).fit(X)
    assert part.n_components_ == 2 and part.n_passes_ == 3
    np.testing.assert_allclose(part.transform(X), full.transform(X)[:, :2], atol=1e-12)
    np.testing.assert_allclose(part.leading_vectors_, full.leading_vectors_[:2], atol=1e-14)


# --- Jacobian and volume preservation -------------------------------------------------------


def _central_differences(model, x, h=1e-6):
    d = x.shape[0]
    J = np.empty((d, d))
    for j in range(d):
        step = np.zeros(d)
        step[j] = h
        J[:, j] = (model.transform((x + step)[None])[0] - model.transform((x - step)[None])[0]) / (
            2 * h
        )
    return J


@pytest.fixture
def fitted(X):
    return PPA(degree=5, random_state=0).fit(X), X


def test_determinant_of_jacobian_is_one(fitted):
    model, X = fitted
    rng = np.random.default_rng(2)
    points = np.concatenate([X[rng.choice(len(X), 200)], X[:50] * 3.0])  # also far outside
    det = np.linalg.det(model.jacobian(points))
    np.testing.assert_allclose(det, 1.0, atol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_determinant_is_plus_one_for_any_data(seed):
    # the residual axes are oriented so the frame is a rotation, whatever eigh returns
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4))
    for model in (PPA(degree=3).fit(X), PPA(n_components=2, degree=3).fit(X)):
        np.testing.assert_allclose(np.linalg.det(model.jacobian(X[:20])), 1.0, atol=1e-9)


def test_jacobian_matches_central_differences(fitted):
    model, X = fitted
    rng = np.random.default_rng(3)
    for x in X[rng.choice(len(X), 10)]:
        J = model.jacobian(x[None])[0]
        np.testing.assert_allclose(J, _central_differences(model, x), atol=1e-6)


def test_jacobian_of_partial_fit_is_volume_preserving(X):
    model = PPA(n_components=1, degree=4).fit(X)
    J = model.jacobian(X[:100])
    np.testing.assert_allclose(np.linalg.det(J), 1.0, atol=1e-9)
    # its first row is the gradient of the one output coefficient
    x = X[3]
    h = 1e-6
    grad = [
        (model.transform((x + h * e)[None])[0, 0] - model.transform((x - h * e)[None])[0, 0])
        / (2 * h)
        for e in np.eye(X.shape[1])
    ]
    np.testing.assert_allclose(J[3, 0], grad, atol=1e-6)


# --- beyond the training range ---------------------------------------------------------------


def test_far_points_give_finite_output_and_exact_inverse():
    X = noisy_helix()
    train = X[::2]
    model = PPA(degree=15).fit(train)
    rng = np.random.default_rng(4)
    far = rng.normal(size=(200, 3)) * np.array([1.0, 10.0, 1e3]) + 50.0
    R = model.transform(far)
    assert np.isfinite(R).all()
    np.testing.assert_allclose(model.inverse_transform(R), far, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(model.jacobian(far)), 1.0, atol=1e-9)


def test_linear_extension_is_continuous_at_the_range_ends():
    X = noisy_helix()
    model = PPA(degree=9).fit(X)
    e = model.leading_vectors_[0]
    lo, hi = model.alpha_ranges_[0]
    # points along e_1 just inside and just outside the fitted range
    for end in (lo, hi):
        inside = model.mean_ + (end - np.sign(end) * 1e-9) * e
        outside = model.mean_ + (end + np.sign(end) * 1e-9) * e
        R_in, R_out = model.transform(np.vstack([inside, outside]))
        np.testing.assert_allclose(R_in, R_out, atol=1e-6)


def test_polynomial_extrapolation_grows_faster_than_linear():
    X = noisy_helix()
    far = np.array([[40.0, 0.0, 0.0]])
    lin = PPA(degree=9).fit(X).transform(far)
    poly = PPA(degree=9, extrapolation="polynomial").fit(X).transform(far)
    assert np.abs(poly).max() > 100 * np.abs(lin).max()


def test_japanese_vowels_half_split_degree_five_stays_finite():
    # the case that overflows with plain polynomial extrapolation (issue: real test data)
    from ppa_dask.datasets import load_japanese_vowels

    X, _ = load_japanese_vowels()
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(X))
    train, test = X[order[: len(X) // 2]], X[order[len(X) // 2 :]]
    model = PPA(degree=5).fit(train)
    R = model.transform(test)
    assert np.isfinite(R).all()
    np.testing.assert_allclose(model.inverse_transform(R), test, atol=1e-9)
    raw = PPA(degree=5, extrapolation="polynomial").fit(train).transform(test)
    # the remedy only changes points outside the training range of some alpha
    assert np.abs(raw).max() > np.abs(R).max()
