"""The paper's properties of PPA (sections 2 and 3): PCA as a special case, better than PCA,
exact inverse, volume preservation, analytic Jacobian."""

import os

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
from conftest import noisy_helix, random_nonlinear
from direct_ppa import fit_direct, reconstruct_direct
from numpy.polynomial.chebyshev import chebval
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


def test_beyond_the_range_each_curve_continues_along_its_tangent_at_the_end():
    # one step in 2-D: at x = mean + a e_1 the residual is -U v(t), so the second output is
    # -p(t) with p = residual_basis^T U in Chebyshev coefficients, t = (a - offset) / scale;
    # beyond the training range [lo, hi] of a it must be p's tangent line at the nearest end
    rng = np.random.default_rng(8)
    t = rng.uniform(-1, 1, 3000)
    X = np.column_stack([t, t**2 - 0.3 * t**3 + 0.05 * rng.normal(size=t.size)])
    model = PPA(degree=5).fit(X)
    e, (offset, scale), (lo, hi) = (
        model.leading_vectors_[0],
        model.basis_intervals_[0],
        model.alpha_ranges_[0],
    )
    p = model.residual_basis_[:, 0] @ model.coefficients_[0]
    dp = np.polynomial.chebyshev.chebder(p)
    for end, side in ((lo, -1.0), (hi, 1.0)):
        t_end = (end - offset) / scale
        value, slope = -chebval(t_end, p), -chebval(t_end, dp) / scale
        assert abs(slope) > 0.1  # a curved end: a wrong continuation slope would show
        a = end + side * np.array([1e-6, 1e-3, 0.1, 1.0, 10.0])
        R = model.transform(model.mean_ + a[:, None] * e)
        np.testing.assert_allclose(R[:, 0], a, rtol=1e-12)
        np.testing.assert_allclose(R[:, 1], value + slope * (a - end), rtol=0, atol=1e-10)
        # the Jacobian there agrees: d R_1 / d a along e_1 is the end's slope
        np.testing.assert_allclose(
            model.jacobian(model.mean_ + a[:, None] * e)[:, 1] @ e, slope, rtol=1e-9
        )
        # just inside, the output is the polynomial itself
        inside = end - side * 1e-3
        R_in = model.transform((model.mean_ + inside * e)[None])[0]
        np.testing.assert_allclose(R_in[1], -chebval((inside - offset) / scale, p), atol=1e-12)


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


# --- the same properties over random shapes, degrees, chunkings and scales (hypothesis) --------

# HYPOTHESIS_PROFILE=ppa-large runs many more examples; the default keeps this file quick. The
# profiles are applied per test (not loaded globally), so other test files keep their settings.
hypothesis.settings.register_profile("ppa-small", max_examples=15, deadline=None)
hypothesis.settings.register_profile("ppa-large", max_examples=200, deadline=None)
SETTINGS = hypothesis.settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ppa-small"))


@st.composite
def curved_data(draw):
    """Random curved data: a latent u in [-1, 1], each further coordinate a random cubic of u
    plus noise, columns of distinct spread (so leading directions are well defined), rotated."""
    n = draw(st.integers(60, 300))
    d = draw(st.integers(2, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1, 1, n)
    cols = [u]
    for j in range(1, d):
        a, b, c = rng.normal(size=3)
        cols.append(
            0.6**j * (a * u + b * u**2 + c * u**3) / 3 + 0.05 * 0.6**j * rng.normal(size=n)
        )
    Q, R = np.linalg.qr(rng.normal(size=(d, d)))
    X = np.column_stack(cols) @ (Q * np.sign(np.diag(R)))
    if draw(st.booleans()):
        degree = draw(st.integers(1, 4))
    else:
        degree = tuple(draw(st.sets(st.integers(1, 4), min_size=2, max_size=4)))
    return X, degree


def _fit(X, degree, **kw):
    return PPA(degree=degree, random_state=0, **kw).fit(X)


@SETTINGS
@hypothesis.given(curved_data())
def test_property_inverse_is_exact_and_truncation_is_the_direct_ports(case):
    X, degree = case
    model = _fit(X, degree)
    R = model.transform(X)
    scale = np.abs(X).max()
    np.testing.assert_allclose(model.inverse_transform(R), X, rtol=0, atol=1e-10 * scale)
    direct = fit_direct(X, model.degrees_.tolist())
    pca = PCA().fit(X)
    P = pca.transform(X)
    for k in range(1, X.shape[1]):
        rec = model.inverse_transform(R[:, :k])  # the dropped coefficients are zeros
        np.testing.assert_allclose(rec, reconstruct_direct(direct, X, k), atol=1e-7 * scale)
        # and never worse than PCA with k components (paper, section 2)
        pca_rec = pca.inverse_transform(
            np.column_stack([P[:, :k], np.zeros((len(X), X.shape[1] - k))])
        )
        ppa_err = np.mean(np.sum((X - rec) ** 2, axis=1))
        pca_err = np.mean(np.sum((X - pca_rec) ** 2, axis=1))
        assert ppa_err <= pca_err * (1 + 1e-10) + 1e-14 * scale**2, (k, ppa_err, pca_err)


@SETTINGS
@hypothesis.given(curved_data(), st.floats(0.01, 0.3), st.floats(0.2, 3.0))
def test_property_jacobian_is_central_differences_inside_beyond_and_at_the_range_ends(
    case, near, far
):
    X, degree = case
    model = _fit(X, degree)
    d = X.shape[1]
    base = model.transform(X[:1])[0]
    # every alpha_p of the base point at the middle of its range: a training sample can sit
    # exactly at a range end (the ends are training extremes), where the second derivative
    # jumps and central differences are off by O(h), not O(h^2)
    base[: len(model.alpha_ranges_)] = model.alpha_ranges_.mean(axis=1)
    coefficients = [base]
    # for every step, points whose alpha_p lies just inside and just outside each end of its
    # training range, and far beyond it (placed there exactly through the inverse)
    for p, (lo, hi) in enumerate(model.alpha_ranges_):
        width = hi - lo
        for end, side in ((lo, -1.0), (hi, 1.0)):
            for offset in (-near, near, far):
                r = base.copy()
                r[p] = end + side * offset * width
                coefficients.append(r)
    points = model.inverse_transform(np.array(coefficients))
    J = model.jacobian(points)
    h = 1e-6 * np.abs(X).max()
    for x, J_x in zip(points, J):
        steps = h * np.eye(d)
        forward = model.transform(x + steps)
        backward = model.transform(x - steps)
        fd = ((forward - backward) / (2 * h)).T
        np.testing.assert_allclose(J_x, fd, rtol=0, atol=1e-5 * max(1.0, np.abs(J_x).max()))


@SETTINGS
@hypothesis.given(curved_data(), st.data())
def test_property_any_chunking_numpy_or_dask_gives_the_same_model(case, data):
    import dask.array as da

    X, degree = case
    rows = data.draw(st.integers(7, len(X)), label="chunk rows")
    reference = _fit(X, degree)
    model = _fit(da.from_array(X, chunks=(rows, X.shape[1])), degree)
    blocked = _fit(X, degree, block_rows=data.draw(st.integers(5, len(X)), label="block rows"))
    for other in (model, blocked):
        assert other.degrees_.tolist() == reference.degrees_.tolist()
        np.testing.assert_allclose(
            np.asarray(other.transform(X)), reference.transform(X), atol=1e-10 * np.abs(X).max()
        )
        np.testing.assert_allclose(
            other.explained_variance_, reference.explained_variance_, rtol=1e-10
        )


@SETTINGS
@hypothesis.given(curved_data(), st.sampled_from([-140, -100, -40, 0, 40, 100, 150]))
def test_property_the_model_of_scaled_data_is_the_scaled_model(case, power):
    X, degree = case
    scale = 10.0**power
    reference = _fit(X, degree)
    model = _fit(X * scale, degree)
    assert model.degrees_.tolist() == reference.degrees_.tolist()
    R_ref = reference.transform(X) * scale
    np.testing.assert_allclose(
        model.transform(X * scale), R_ref, rtol=0, atol=1e-10 * np.abs(R_ref).max()
    )
    v, v_ref = model.explained_variance_, reference.explained_variance_
    np.testing.assert_allclose(v / v.sum(), v_ref / v_ref.sum(), rtol=1e-10, atol=1e-14)
