"""The step algebra's shortcuts are exact: the same numbers, bit for bit, as the plain
formulation through scipy's Cholesky (the fitted model must not change when the small algebra
between passes is made cheaper). The one exception is the batched solve of the
cross-validation systems, which sums in another order: its scores agree to rounding and choose
the same degrees."""

import numpy as np
import pytest
import scipy.linalg

from ppa_dask import PPA
from ppa_dask.ppa import algebra, kernels


def _solve_plain(S_vv, S_zv):
    """``S_zv S_vv^{-1}`` by scipy.linalg.cho_factor / cho_solve, lstsq when not safely PD."""
    try:
        factor = scipy.linalg.cho_factor(S_vv, lower=True, check_finite=False)
        diag = np.abs(np.diag(factor[0]))
        if diag.min() > 1e-7 * diag.max():
            return scipy.linalg.cho_solve(factor, S_zv.T, check_finite=False).T
    except np.linalg.LinAlgError:
        pass
    return scipy.linalg.lstsq(S_vv, S_zv.T, check_finite=False)[0].T


def _cv_scores_plain(moments, e, candidates):
    """The cross-validation score of each degree, fold by fold (design.md 3.4)."""
    vv, zz, counts = moments["vv"], moments["zz"], moments["n"]
    zv = moments["yv"] - e[:, None] * np.einsum("i,fij->fj", e, moments["yv"])[:, None, :]
    n_folds = vv.shape[0]
    scores = []
    for g in candidates:
        size = g + 1
        total = 0.0
        for f in range(n_folds):
            others = [j for j in range(n_folds) if j != f]
            W = _solve_plain(
                vv[others, :size, :size].sum(axis=0), zv[others, :, :size].sum(axis=0)
            )
            held_vv, held_zv = vv[f, :size, :size], zv[f, :, :size]
            total += zz[f] - 2.0 * np.sum(W * held_zv) + np.sum((W @ held_vv) * W)
        scores.append(total / counts.sum())
    return np.array(scores)


def _moments(rng, n_folds, d, degree, n):
    Y = rng.normal(size=(d, n)) * rng.uniform(0.1, 10.0, size=(d, 1))
    Y[0] = rng.uniform(-3, 3, size=n)
    Y[1] += Y[0] ** 2  # a curved residual: the degrees' scores differ
    e = np.zeros(d)
    e[0] = 1.0
    seed = int(rng.integers(2**31))
    spec = kernels.StepSpec(e, 0.0, 3.5, degree, seed=seed, n_folds=n_folds)
    return kernels.step_moments(Y, 0, spec), e


@pytest.mark.parametrize("n_folds", [2, 3, 5])
def test_cv_scores_equal_the_fold_by_fold_scores_and_choose_the_same_degree(n_folds):
    """The batched solve of every (fold, degree) system is another order of the same sums:
    the scores agree to rounding, and the degree chosen is the same."""
    rng = np.random.default_rng(n_folds)
    fallbacks = 0
    for trial in range(40):
        d = int(rng.integers(2, 40))
        degree = int(rng.integers(1, 6))
        moments, e = _moments(rng, n_folds, d, degree, int(rng.integers(40, 600)))
        if trial % 5 == 0 and degree > 1:  # a singular Gram matrix: the least-squares fallback
            vv = moments["vv"]
            vv[:, -1], vv[:, :, -1] = vv[:, -2], vv[:, :, -2]
            fallbacks += 1
        candidates = sorted({int(g) for g in rng.integers(1, degree + 1, size=3)})
        expected = _cv_scores_plain(moments, e, candidates)
        got = algebra.cv_scores(moments, e, candidates)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0, err_msg=str(trial))
        variance = float(moments["zz"].sum() / moments["n"].sum())
        assert algebra.choose_degree(got, candidates, variance) == algebra.choose_degree(
            expected, candidates, variance
        )
    assert fallbacks >= 4


def test_normal_equations_equal_scipys_cholesky_and_its_fallbacks_bit_for_bit():
    rng = np.random.default_rng(0)
    for trial in range(60):
        s, d = int(rng.integers(2, 7)), int(rng.integers(1, 30))
        A = rng.normal(size=(s, s))
        S_vv = A @ A.T
        S_zv = rng.normal(size=(d, s))
        if trial % 4 == 1:
            S_vv[:, -1], S_vv[-1] = S_vv[:, 0], S_vv[0]  # singular
        elif trial % 4 == 2:
            S_vv = -S_vv  # not positive definite: Cholesky fails
        elif trial % 4 == 3:
            S_vv[-1, -1] *= 1e-20  # ill conditioned: below the diagonal-ratio test
        assert np.array_equal(algebra.solve_normal_equations(S_vv, S_zv), _solve_plain(S_vv, S_zv))


@pytest.mark.parametrize("with_steps", [False, True])
def test_a_pass_reading_columns_in_place_equals_a_pass_on_their_copy_bit_for_bit(with_steps):
    # the shared scans of an ensemble give each member its features without copying them
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 7))
    X[:, 2] += X[:, 5] ** 2
    columns = np.array([5, 2, 0, 6])
    copy = np.ascontiguousarray(X[:, columns])
    mean = copy.mean(axis=0)
    direction = np.linalg.eigh(np.cov(copy.T))[1][:, -1]
    steps = ()
    if with_steps:  # a curved step fitted first, re-applied in the sweep
        steps = PPA(degree=3, n_components=1, random_state=0).fit(copy).model_params().steps
        assert steps[0].coef.shape[1] > 2  # curved
    kwargs = dict(keep=True)
    spec = kernels.StepSpec(direction, 0.0, 3.0, 3, 11, 3, ahead=((np.eye(4)[1], 0.1, 2.0),))
    args = (100, mean, steps, spec)
    res_a, mom_a = kernels.pass_kernel(copy, *args, **kwargs)
    res_b, mom_b = kernels.pass_kernel(X, *args, columns=columns, **kwargs)
    assert np.array_equal(res_a, res_b)
    assert mom_a.keys() == mom_b.keys() >= {"n", "vv", "yv", "zz", "tmin", "tmax", "ahead"}
    for key in ("n", "vv", "yv", "zz", "tmin", "tmax"):
        assert np.array_equal(mom_a[key], mom_b[key]), key
        assert np.array_equal(mom_a["ahead"][0][key], mom_b["ahead"][0][key]), key
    with pytest.raises(IndexError, match="columns must lie in 0 .. 6"):
        kernels.pass_kernel(X, *args, columns=np.array([0, 7]), **kwargs)
