"""Marginal entropies and multi-information reduction (paper section 5.4)."""

import warnings

import numpy as np
import pytest
import scipy.stats
from conftest import noisy_helix
from sklearn.decomposition import PCA

from ppa_dask import PPA
from ppa_dask.information import (
    RANK_RTOL,
    RankDeficientWarning,
    covariance_rank,
    dequantize,
    marginal_entropies,
    marginal_entropy,
    multi_information_reduction,
    quantisation_steps,
)

LOG2 = np.log(2)


def _gaussian(n, d=4, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d))
    C = A @ A.T + 0.3 * np.eye(d)
    X = np.random.default_rng(seed + 100).multivariate_normal(np.zeros(d), C, size=n)
    return X, C


def _closed_form_bits(C):
    # I(x) of a Gaussian is -1/2 log det(correlation); PCA makes the components independent
    sd = np.sqrt(np.diag(C))
    return -0.5 * np.log(np.linalg.det(C / np.outer(sd, sd))) / (C.shape[0] * LOG2)


# ------------------------------------------------------------------- the definition --------


def test_reduction_is_the_difference_of_marginal_entropies_in_bits_per_dimension():
    X = noisy_helix(n=3000, noise=0.2, seed=3)
    model = PPA(degree=range(1, 10), cv=2, random_state=0).fit(X)
    R = model.transform(X)
    for method in ("auto", "vasicek", "histogram"):
        delta = multi_information_reduction(X, R, method=method)
        hx = marginal_entropies(X, method=method)
        hr = marginal_entropies(R, method=method)
        assert delta == pytest.approx((hx.sum() - hr.sum()) / (3 * LOG2), rel=1e-12)
        # one column at a time agrees with the vectorised estimate
        assert marginal_entropy(R[:, 1], method=method) == pytest.approx(hr[1], rel=1e-12)


def test_log_det_term_makes_the_reduction_invariant_to_rescaling():
    # a diagonal scaling is not volume preserving but changes no dependence: with
    # E log|det J| supplied the reduction is 0 (spacing estimators are scale-equivariant)
    X, _ = _gaussian(5000)
    scale = np.array([0.5, 3.0, 10.0, 0.1])
    delta = multi_information_reduction(X, X * scale, log_det=np.log(scale).sum())
    assert delta == pytest.approx(0.0, abs=1e-12)
    per_sample = np.full(5000, np.log(scale).sum())
    delta = multi_information_reduction(X, X * scale, log_det=per_sample)
    assert delta == pytest.approx(0.0, abs=1e-12)
    # without it, a spurious change of -mean log|det J| / (d log 2)
    assert multi_information_reduction(X, X * scale) == pytest.approx(
        -np.log(scale).sum() / (4 * LOG2), abs=1e-12
    )


# ------------------------------------------------------ Gaussian closed form (PCA) ---------


@pytest.mark.parametrize("method", ["auto", "histogram"])
def test_pca_on_gaussian_data_matches_the_closed_form(method):
    # measured spread of the estimate over 10 draws of n = 20000: 0.002 bits/dim, bias < 0.001
    X, C = _gaussian(20000)
    delta = multi_information_reduction(X, PCA().fit(X), method=method)
    assert delta == pytest.approx(_closed_form_bits(C), abs=0.01)


def test_gaussian_marginal_entropy_estimate():
    x = np.random.default_rng(7).normal(scale=2.5, size=20000)
    exact = 0.5 * np.log(2 * np.pi * np.e * 2.5**2)
    assert marginal_entropy(x) == pytest.approx(exact, abs=0.02)
    assert marginal_entropy(x, method="histogram") == pytest.approx(exact, abs=0.02)
    assert marginal_entropy(x, base=2) == pytest.approx(marginal_entropy(x) / LOG2)


def test_ppa_removes_more_redundancy_than_pca_on_curved_data():
    # the paper's Table 3 claim, on the helix where PCA leaves the nonlinear dependence in place
    X = noisy_helix(n=4000, noise=0.1, seed=5)
    ppa = multi_information_reduction(X, PPA(degree=range(1, 12), cv=2, random_state=0).fit(X))
    pca = multi_information_reduction(X, PCA().fit(X))
    assert ppa > pca + 0.1


# --------------------------------------------------------------------------- ties ----------


def _integer_gaussian(seed=3, n=5000):
    X, C = _gaussian(n, seed=seed)
    return np.round(3 * X), 9 * C


def test_integer_data_defeat_spacing_estimators_but_dequantised_estimates_are_finite():
    Xi, C = _integer_gaussian()
    with np.errstate(divide="ignore"):
        assert np.isneginf(scipy.stats.differential_entropy(Xi[:, 0]))
    with pytest.raises(ValueError, match="repeated values"):
        marginal_entropies(Xi, dequantize=False)
    h = marginal_entropies(Xi)
    assert np.isfinite(h).all()
    # h(x + U) of a fine lattice is close to the entropy of the continuous variable
    exact = 0.5 * np.log(2 * np.pi * np.e * np.diag(C))
    np.testing.assert_allclose(h, exact, atol=0.03)


@pytest.mark.parametrize("method", ["auto", "histogram"])
def test_ties_give_finite_reductions_close_to_the_continuous_ones(method):
    Xi, C = _integer_gaussian()
    pca = PCA().fit(Xi)
    # R as a transformer: applied to the dequantised X; R as an array: same tie rule
    for R in (pca, pca.transform(Xi)):
        delta = multi_information_reduction(Xi, R, method=method)
        assert np.isfinite(delta)
        assert delta == pytest.approx(_closed_form_bits(C), abs=0.02)


def test_quantisation_steps_and_dequantisation():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 20, 1000) * 0.25, rng.normal(size=1000)])
    steps = quantisation_steps(X)
    assert steps[0] == pytest.approx(0.25) and steps[1] == 0
    Z = dequantize(X, random_state=4)
    assert np.all(np.abs(Z[:, 0] - X[:, 0]) <= 0.125) and len(np.unique(Z[:, 0])) == 1000
    np.testing.assert_array_equal(Z[:, 1], X[:, 1])  # no ties: untouched
    np.testing.assert_array_equal(Z, dequantize(X, random_state=4))  # seeded
    assert not np.array_equal(Z, dequantize(X, random_state=5))
    assert quantisation_steps(X)[0] == pytest.approx(0.25)  # input not modified


# ---------------------------------------------------------------------- bad input ----------


def test_bad_input_raises_clear_errors():
    X, _ = _gaussian(500)
    const = X.copy()
    const[:, 2] = 1.5
    with pytest.raises(ValueError, match=r"constant columns \[2\]"):
        marginal_entropies(const)
    with pytest.raises(ValueError, match=r"X has constant columns \[2\]"):
        multi_information_reduction(const, PCA().fit(X).transform(X))
    nan = X.copy()
    nan[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"1 NaN .* columns \[1\]"):
        marginal_entropies(nan)
    with pytest.raises(ValueError, match=r"x contains 1 NaN"):
        marginal_entropy(nan[:, 1])
    with pytest.raises(ValueError, match=r"x is constant"):
        marginal_entropy(np.ones(10))
    with pytest.raises(ValueError, match=r"R contains 1 NaN"):
        multi_information_reduction(X, nan)
    with pytest.raises(ValueError, match="shape of X"):
        multi_information_reduction(X, X[:, :3])
    with pytest.raises(ValueError, match="method"):
        marginal_entropies(X, method="knn")
    with pytest.raises(ValueError, match="rank_deficient"):
        multi_information_reduction(X, X, rank_deficient="silent")
    with pytest.raises(ValueError, match="log_det"):
        multi_information_reduction(X, X, log_det=np.zeros(3))
    with pytest.raises(ValueError, match="2-D"):
        marginal_entropy(X)


# ------------------------------------------------------------- rank-deficient input --------


def _dependent(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) @ np.array([[1.0, 0.4, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 1.0]])
    return np.column_stack([X, X[:, 0] + X[:, 1]])  # x4 = x1 + x2, exactly


def test_rank_check_warns_on_exactly_dependent_columns_and_names_rank_and_dimension():
    X = _dependent()
    with pytest.warns(RankDeficientWarning, match=r"X has rank 3 of 4: 1 exact linear"):
        delta = multi_information_reduction(X, PCA().fit(X))
    assert np.isfinite(delta)  # the estimator's floor, still returned
    with pytest.raises(ValueError, match=r"rank 3 of 4.*resolution floor"):
        multi_information_reduction(X, PCA().fit(X), rank_deficient="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        silent = multi_information_reduction(X, PCA().fit(X), rank_deficient="ignore")
    assert silent == delta


def test_rank_check_is_silent_on_full_rank_and_nearly_dependent_data():
    X = _dependent()
    # a dependency blurred by noise 1e-3 of the scale is a real (if thin) direction
    X[:, 3] += 1e-3 * np.random.default_rng(1).normal(size=X.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        multi_information_reduction(X, PCA().fit(X))
        full, _ = _gaussian(2000)
        multi_information_reduction(full, PCA().fit(full), rank_deficient="raise")


def test_covariance_rank_is_scale_free_and_accepts_dask():
    import dask.array as da

    X = _dependent(n=1000)
    assert covariance_rank(X) == 3
    # units differ by 1e8 and an offset of 1e6: a raw covariance threshold would drop the
    # small column, the correlation matrix does not
    scaled = X * np.array([1e4, 1.0, 1e-4, 1.0]) + 1e6
    assert covariance_rank(scaled) == 3
    assert covariance_rank(scaled[:, :3]) == 3
    assert covariance_rank(da.from_array(scaled, chunks=(128, 4))) == 3
    assert covariance_rank(da.from_array(X[:, :3], chunks=(128, 3))) == 3
    assert covariance_rank(np.column_stack([X[:, :3], np.ones(1000)])) == 3  # constant column
    assert RANK_RTOL == 1e-10


# -------------------------------------------------------------------------- KDE ------------


def test_kde_entropy_of_a_gaussian_sample_is_near_the_closed_form():
    # Silverman's bandwidth is optimal for a Gaussian: the resubstitution estimate is within
    # ~0.01 bits of 0.5 log2(2 pi e sigma^2) at n = 20000 (measured bias +0.004 bits)
    sigma = 2.5
    x = np.random.default_rng(11).normal(scale=sigma, size=20000)
    exact = 0.5 * np.log2(2 * np.pi * np.e * sigma**2)
    assert marginal_entropy(x, method="kde", base=2) == pytest.approx(exact, abs=0.01)


@pytest.mark.parametrize("shape", ["normal", "exponential", "bimodal"])
def test_kde_entropy_agrees_with_scipy_gaussian_kde(shape):
    rng = np.random.default_rng(2)
    n = 300
    x = {
        "normal": rng.normal(size=n),
        "exponential": rng.exponential(size=n),
        # a spike and a wide mode 1000 spike-widths away: many grid steps per bandwidth
        "bimodal": np.r_[0.01 * rng.normal(size=n // 2), 10 + 3 * rng.normal(size=n // 2)],
    }[shape]
    # gaussian_kde's kernel sd is factor * std(ddof=1); Silverman's factor 1.06 n^(-1/5)
    oracle = scipy.stats.gaussian_kde(x, bw_method=1.06 * n ** (-0.2))
    plug_in = -np.mean(np.log(oracle(x)))
    assert marginal_entropy(x, method="kde", dequantize=False) == pytest.approx(plug_in, abs=2e-4)


def test_kde_entropy_is_shift_invariant_and_adds_log_c_under_scaling():
    x = np.random.default_rng(4).gamma(2.0, size=5000)
    h = marginal_entropy(x, method="kde", base=2)
    assert marginal_entropy(x + 123.0, method="kde", base=2) == pytest.approx(h, abs=1e-9)
    for c in (0.01, 7.0):
        assert marginal_entropy(c * x, method="kde", base=2) == pytest.approx(
            h + np.log2(c), abs=1e-9
        )


def test_kde_reduction_of_pca_on_gaussian_data_matches_the_closed_form():
    X, C = _gaussian(20000)
    delta = multi_information_reduction(X, PCA().fit(X), method="kde")
    assert delta == pytest.approx(_closed_form_bits(C), abs=0.02)
