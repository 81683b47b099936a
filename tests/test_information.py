"""Marginal entropies and multi-information reduction (paper section 5.4)."""

import numpy as np
import pytest
import scipy.stats
from conftest import noisy_helix
from sklearn.decomposition import PCA

from ppa_dask import PPA
from ppa_dask.information import (
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
        marginal_entropies(X, method="kde")
    with pytest.raises(ValueError, match="log_det"):
        multi_information_reduction(X, X, log_det=np.zeros(3))
    with pytest.raises(ValueError, match="2-D"):
        marginal_entropy(X)
