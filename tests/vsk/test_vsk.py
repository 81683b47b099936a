"""Variably scaled kernels (Campi, Marchetti, Perracchione 2021): identities, theorems, learners.

Reads like the paper: a VSK is the kernel on the augmented points (x, psi(x)), so the Gaussian
VSK Gram matrix is a Hadamard product and the linear one a sum (sections 4.1-4.2); the Gaussian
VSK is more expressive (Corollary 1) and better conditioned (Proposition 1); Proposition 2 bounds
the linear VSK's spectral ratio; the blockwise diagnostics equal the dense ones; the learners are
ordinary scikit-learn estimators; bad input gets a clear error.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression
from sklearn.metrics.pairwise import linear_kernel, rbf_kernel
from sklearn.model_selection import GridSearchCV
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC
from sklearn_checks import estimator_checks

from ppa_dask import PPA
from ppa_dask.ensemble import FeatureBaggingClassifier, FeatureBaggingRegressor
from ppa_dask.stability import feature_instability
from ppa_dask.vsk import (
    CurveFitRegressor,
    ModelScaling,
    NaiveBayesScaling,
    PPAScaling,
    SVMExtraction,
    VariablyScaled,
    blockwise_condition_number,
    blockwise_spectral_ratio,
    condition_number,
    make_krn_vsk,
    make_svm_vsk,
    spectral_ratio,
    tiled_gram_operator,
    vsk_gram,
)

SEEDS = range(6)


def random_case(seed, n=None, d=None, m=None, nonneg=False):
    """Random points and random psi values (sizes drawn from the seed too)."""
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(5, 60))
    d = d or int(rng.integers(1, 5))
    m = m or int(rng.integers(1, 3))
    if nonneg:
        return rng.uniform(0, 1, (n, d)), rng.uniform(0, 1, (n, m))
    return rng.normal(size=(n, d)), rng.normal(size=(n, m))


def two_classes(n=120, d=4, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([-1, 1], n // 2)
    X = rng.normal(size=(n, d)) + 0.9 * y[:, None] * np.linspace(1, 0.2, d)
    return X, y


# -------------------------------------------------------------------------------------------
# the Gram identities (sections 4.1 and 4.2)
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_gaussian_vsk_gram_is_the_hadamard_product(seed):
    X, P = random_case(seed)
    gamma = float(np.random.default_rng(seed).uniform(0.05, 3))
    expected = rbf_kernel(X, gamma=gamma) * rbf_kernel(P, gamma=gamma)
    np.testing.assert_allclose(vsk_gram(X, P, "rbf", gamma), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("seed", SEEDS)
def test_linear_vsk_gram_is_the_sum(seed):
    X, P = random_case(seed)
    expected = linear_kernel(X) + linear_kernel(P)
    np.testing.assert_allclose(vsk_gram(X, P, "linear"), expected, rtol=1e-12, atol=1e-12)


def test_psi_may_be_given_as_values_function_or_fitted_scaling():
    X, y = two_classes()
    psi = NaiveBayesScaling().fit(X, y)
    values = GaussianNB().fit(X, y).predict_proba(X)[:, 1]
    K = vsk_gram(X, values, "rbf", 0.7)
    np.testing.assert_allclose(vsk_gram(X, psi, "rbf", 0.7), K, rtol=1e-12)
    np.testing.assert_allclose(vsk_gram(X, psi.transform, "rbf", 0.7), K, rtol=1e-12)
    np.testing.assert_allclose(vsk_gram(X, None, "rbf", 0.7), rbf_kernel(X, gamma=0.7), rtol=1e-12)


def test_svm_vsk_is_an_svm_with_the_hadamard_gram_matrix():
    """The pipeline SVC on [x, psi] decides like an SVC given K(x) o K(psi) precomputed."""
    X, y = two_classes(seed=3)
    Xt, _ = two_classes(n=40, seed=4)
    model = make_svm_vsk("rbf", C=2.0, gamma=0.5).fit(X, y)
    nb = GaussianNB().fit(X, y)
    p, pt = nb.predict_proba(X)[:, 1:], nb.predict_proba(Xt)[:, 1:]
    K = rbf_kernel(X, gamma=0.5) * rbf_kernel(p, gamma=0.5)
    Kt = rbf_kernel(Xt, X, gamma=0.5) * rbf_kernel(pt, p, gamma=0.5)
    direct = SVC(kernel="precomputed", C=2.0).fit(K, y)
    np.testing.assert_allclose(
        model.decision_function(Xt), direct.decision_function(Kt), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("nu", [0.0, 1e-3])
def test_krn_vsk_solves_the_regularised_vsk_system(nu):
    """KRN-VSK coefficients c = (K_Psi + nu I)^-1 y, predictions K_Psi(x, X) c (section 3.2)."""
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 1, 25))[:, None]
    y = np.sin(4 * t.ravel()) + t.ravel() ** 2
    psi = lambda X: np.cos(3 * X)  # noqa: E731
    gamma = 20.0
    model = make_krn_vsk(psi=psi, alpha=nu, gamma=gamma).fit(t, y)
    c = np.linalg.solve(vsk_gram(t, psi(t), "rbf", gamma) + nu * np.eye(len(t)), y)
    tt = np.linspace(0, 1.1, 9)[:, None]
    K_new = rbf_kernel(tt, t, gamma=gamma) * rbf_kernel(psi(tt), psi(t), gamma=gamma)
    np.testing.assert_allclose(model.predict(tt), K_new @ c, rtol=1e-6, atol=1e-6)


# -------------------------------------------------------------------------------------------
# the paper's theorems on random data
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_gaussian_vsk_is_more_expressive(seed):
    """Corollary 1: C(K_Psi) >= C(K) at the same shape parameter."""
    X, P = random_case(seed)
    gamma = float(np.random.default_rng(seed).uniform(0.05, 3))
    C, C_psi = (
        spectral_ratio(vsk_gram(X, None, "rbf", gamma)),
        spectral_ratio(vsk_gram(X, P, "rbf", gamma)),
    )
    assert C_psi >= C - 1e-12
    # and both lie in [1, sqrt(n)]
    assert 1 - 1e-12 <= C <= np.sqrt(len(X)) + 1e-12


@pytest.mark.parametrize("seed", SEEDS)
def test_gaussian_vsk_is_better_conditioned(seed):
    """Proposition 1 (via Schur): lambda_min grows, lambda_max shrinks, so cond(K_Psi) <= cond(K)."""
    X, P = random_case(seed, n=40, d=2)
    gamma = 4.0  # well enough conditioned for eigvalsh to resolve lambda_min
    K, KP = vsk_gram(X, None, "rbf", gamma), vsk_gram(X, P, "rbf", gamma)
    lam, lam_p = np.linalg.eigvalsh(K), np.linalg.eigvalsh(KP)
    assert lam_p[0] >= lam[0] * (1 - 1e-8)
    assert lam_p[-1] <= lam[-1] * (1 + 1e-12)
    assert np.isfinite(condition_number(K))
    assert condition_number(KP) <= condition_number(K) * (1 + 1e-8)


@pytest.mark.parametrize("seed", SEEDS)
def test_linear_vsk_proposition_2_on_nonnegative_data(seed):
    """Linear VSK on non-negative data: tr(K)/tr(K_Psi) <= 1, ||K_Psi||_F >= ||K||_F, hence
    C(K_Psi) <= C(K) tr(K_Psi)/tr(K) (the paper's Proposition 2 and Table 2)."""
    X, P = random_case(seed, nonneg=True)
    K, KP = vsk_gram(X, None, "linear"), vsk_gram(X, P, "linear")
    assert (K >= 0).all() and (KP >= 0).all()
    ratio = np.trace(K) / np.trace(KP)
    assert ratio <= 1
    assert np.linalg.norm(KP) >= np.linalg.norm(K)
    assert spectral_ratio(KP) * ratio <= spectral_ratio(K) * (1 + 1e-12)


def test_spectral_ratio_extremes_and_normalisation():
    n = 9
    assert spectral_ratio(np.eye(n)) == pytest.approx(3.0)  # full rank, flat spectrum
    assert spectral_ratio(np.ones((n, n))) == pytest.approx(1.0)  # rank one
    assert spectral_ratio(np.eye(n), normalized=True) == pytest.approx(1.0)
    assert spectral_ratio(np.ones((n, n)), normalized=True) == pytest.approx(0.0)
    K = rbf_kernel(np.random.default_rng(0).normal(size=(n, 2)))
    C = spectral_ratio(K)
    assert spectral_ratio(K, normalized=True) == pytest.approx((C - 1) / (np.sqrt(n) - 1))


def test_condition_number_agrees_with_numpy_and_flags_singular():
    K = rbf_kernel(np.random.default_rng(1).uniform(size=(30, 2)), gamma=20.0)
    assert condition_number(K) == pytest.approx(np.linalg.cond(K), rel=1e-6)
    assert condition_number(np.ones((3, 3))) == np.inf


# -------------------------------------------------------------------------------------------
# blockwise diagnostics equal the dense ones
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("tile_rows", [16, 37, 64, 500])
def test_blockwise_spectral_ratio_equals_dense(kernel, tile_rows):
    X, P = random_case(11, n=203, d=3, m=1, nonneg=True)
    for psi in (None, P):
        dense = spectral_ratio(vsk_gram(X, psi, kernel, 0.8))
        tiled = blockwise_spectral_ratio(X, psi, kernel, 0.8, tile_rows=tile_rows)
        assert tiled == pytest.approx(dense, rel=1e-10)
        assert blockwise_spectral_ratio(
            X, psi, kernel, 0.8, normalized=True, tile_rows=tile_rows
        ) == pytest.approx(
            spectral_ratio(vsk_gram(X, psi, kernel, 0.8), normalized=True), rel=1e-10
        )


def test_blockwise_diagnostics_on_dask_equal_dense():
    import dask
    import dask.array as da

    X, P = random_case(5, n=230, d=2, m=1)
    Xd = da.from_array(X, chunks=(70, 2))
    Pd = da.from_array(P, chunks=(70, 1))
    psi = NaiveBayesScaling().fit(X, (X[:, 0] > 0).astype(int))
    gamma = 60.0
    with dask.config.set(scheduler="synchronous"):
        for dask_psi, dense_psi in ((None, None), (Pd, P), (psi, psi)):
            K = vsk_gram(X, dense_psi, "rbf", gamma)
            assert blockwise_spectral_ratio(
                Xd, dask_psi, "rbf", gamma, tile_rows=64
            ) == pytest.approx(spectral_ratio(K), rel=1e-10)
        # one Dask graph per Lanczos product: a well conditioned case keeps them few
        K = vsk_gram(X, P, "rbf", 400.0)
        assert blockwise_condition_number(Xd, Pd, "rbf", 400.0, tile_rows=120) == pytest.approx(
            condition_number(K), rel=1e-6
        )


@pytest.mark.parametrize("shift", [0.0, 1e-3])
def test_blockwise_condition_number_equals_dense(shift):
    X, P = random_case(2, n=150, d=2, m=1)
    for psi in (None, P):
        K = vsk_gram(X, psi, "rbf", 40.0)
        dense = condition_number(K + shift * np.eye(len(K)))
        tiled = blockwise_condition_number(X, psi, "rbf", 40.0, shift=shift, tile_rows=41)
        assert tiled == pytest.approx(dense, rel=1e-6)


def test_tiled_operator_products_equal_dense_products():
    X, P = random_case(8, n=97, d=3, m=2)
    v = np.random.default_rng(0).normal(size=97)
    for kernel in ("rbf", "linear"):
        op = tiled_gram_operator(X, P, kernel, 0.3, tile_rows=20)
        np.testing.assert_allclose(op @ v, vsk_gram(X, P, kernel, 0.3) @ v, rtol=1e-12, atol=1e-12)


# -------------------------------------------------------------------------------------------
# scaling functions
# -------------------------------------------------------------------------------------------


def test_naive_bayes_scaling_is_the_positive_class_posterior():
    X, y = two_classes()
    nb = GaussianNB().fit(X, y)
    np.testing.assert_allclose(
        NaiveBayesScaling().fit(X, y).transform(X)[:, 0],
        nb.predict_proba(X)[:, list(nb.classes_).index(1)],
        rtol=1e-12,
    )


def test_naive_bayes_scaling_uses_the_a_priori_data():
    X, y = two_classes(n=40, seed=1)
    Xa, ya = two_classes(n=400, seed=2)
    psi = NaiveBayesScaling(extra_X=Xa, extra_y=ya).fit(X, y)
    both = GaussianNB().fit(np.vstack([X, Xa]), np.concatenate([y, ya]))
    np.testing.assert_allclose(psi.transform(X)[:, 0], both.predict_proba(X)[:, 1], rtol=1e-12)
    assert not np.allclose(psi.transform(X), NaiveBayesScaling().fit(X, y).transform(X))


def test_naive_bayes_scaling_multiclass_keeps_all_but_one_posterior():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 30)
    X = rng.normal(size=(90, 2)) + y[:, None]
    P = NaiveBayesScaling().fit(X, y).transform(X)
    full = GaussianNB().fit(X, y).predict_proba(X)
    assert P.shape == (90, 2)
    np.testing.assert_allclose(P, full[:, 1:], rtol=1e-12)
    np.testing.assert_allclose(1 - P.sum(axis=1), full[:, 0], atol=1e-12)


def test_model_scaling_fits_a_parametric_curve():
    t = np.linspace(0, 1, 30)[:, None]
    f = lambda x, a, b, c: a * np.exp(-(((x - b) / c) ** 2))  # noqa: E731
    y = f(t.ravel(), 3.0, 0.4, 0.2)
    psi = ModelScaling(CurveFitRegressor(f, p0=(1, 0.5, 0.3))).fit(t, y)
    np.testing.assert_allclose(psi.model_.params_, [3.0, 0.4, 0.2], rtol=1e-6)
    np.testing.assert_allclose(psi.transform(t)[:, 0], y, atol=1e-6)


def test_model_scaling_uses_a_frozen_prefitted_model_without_y():
    t = np.arange(10.0)[:, None]
    aux = LinearRegression().fit(t, 3 * t.ravel())  # fitted on a-priori data
    vsk = clone(VariablyScaled(ModelScaling(FrozenEstimator(aux))))
    out = vsk.fit_transform(t[:5])  # no y: the model is not refitted
    np.testing.assert_allclose(out[:, 1], 3 * t[:5, 0], atol=1e-10)


def test_ppa_scaling_appends_the_leading_ppa_coordinates():
    rng = np.random.default_rng(0)
    s = rng.uniform(-1, 1, 400)
    X = np.column_stack([s, s**2, 0.3 * s**3]) + 0.01 * rng.normal(size=(400, 3))
    out = VariablyScaled(PPAScaling(n_components=2, random_state=0)).fit_transform(X)
    ref = PPA(n_components=2, degree=(1, 2, 3), random_state=0, whiten=True).fit(X).transform(X)
    np.testing.assert_allclose(out[:, :3], X)
    np.testing.assert_allclose(out[:, 3:], ref, rtol=1e-10, atol=1e-12)


def test_rescale_minmax_maps_training_psi_to_unit_interval():
    t = np.linspace(0, 1, 20)[:, None]
    vsk = VariablyScaled(lambda X: 1000 + 500 * X, rescale="minmax", weight=2.0).fit(t)
    out = vsk.transform(t)
    np.testing.assert_allclose(out[:, 1], 2 * t[:, 0], atol=1e-12)


# -------------------------------------------------------------------------------------------
# SVM-E
# -------------------------------------------------------------------------------------------


def test_svm_extraction_keeps_features_and_compresses_the_rest():
    X, y = two_classes(d=6, seed=7)
    model = SVMExtraction(keep=[2], kernel="linear").fit(X, y)
    rest = [0, 1, 3, 4, 5]
    expected = np.column_stack(
        [X[:, 2], GaussianNB().fit(X[:, rest], y).predict_proba(X[:, rest])[:, 1]]
    )
    np.testing.assert_allclose(model.extract(X), expected, rtol=1e-12)
    direct = SVC(kernel="linear").fit(expected, y)
    np.testing.assert_array_equal(model.predict(X), direct.predict(expected))


def test_svm_extraction_random_choice_is_seeded():
    X, y = two_classes(d=9, seed=8)
    a = SVMExtraction(n_keep=2, random_state=3).fit(X, y)
    b = SVMExtraction(n_keep=2, random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.keep_, b.keep_)
    assert a.keep_.size == 2 and a.compressed_.size == 7
    assert set(a.keep_) | set(a.compressed_) == set(range(9))


# -------------------------------------------------------------------------------------------
# scikit-learn composition
# -------------------------------------------------------------------------------------------


def test_vsk_pipelines_clone_and_tune_in_grid_search():
    X, y = two_classes(n=90)
    model = make_pipeline(MinMaxScaler(), VariablyScaled(NaiveBayesScaling()), SVC())
    search = GridSearchCV(
        model, {"svc__C": [0.5, 4.0], "variablyscaled__psi": [None, NaiveBayesScaling()]}, cv=3
    )
    search.fit(X, y)
    assert set(search.best_params_) == {"svc__C", "variablyscaled__psi"}
    svm_vsk = make_svm_vsk("linear", C=3.0)
    twin = clone(svm_vsk)
    assert twin.get_params()["svc__C"] == 3.0 and twin is not svm_vsk
    assert isinstance(twin.get_params()["vsk__psi"], NaiveBayesScaling)
    krn = make_krn_vsk(psi=PPAScaling(), alpha=1e-4, gamma=2.0)
    assert clone(krn).get_params()["krn__alpha"] == 1e-4


def test_supervised_psi_is_fitted_on_training_folds_only():
    """Inside cross-validation the NB posterior never sees the validation rows' labels."""
    X, y = two_classes(n=60, seed=9)
    vsk = VariablyScaled(NaiveBayesScaling()).fit(X[:40], y[:40])
    nb = GaussianNB().fit(X[:40], y[:40])
    np.testing.assert_allclose(vsk.transform(X[40:])[:, -1], nb.predict_proba(X[40:])[:, 1])


def test_vsk_learners_as_feature_bagging_base_learners():
    X, y = two_classes(n=120, d=6, seed=10)
    clf = FeatureBaggingClassifier(
        make_svm_vsk("rbf"), n_estimators=5, max_features=0.5, random_state=0
    ).fit(X, y)
    # each member is an SVM-VSK on its own 3 features: 3 columns + the NB posterior
    member = clf.estimators_[0]
    assert member.named_steps["vsk"].n_psi_ == 1 and member.named_steps["vsk"].n_features_in_ == 3
    assert clf.score(X, y) > 0.75
    rng = np.random.default_rng(0)
    t = rng.uniform(size=(80, 4))
    target = np.sin(3 * t[:, 0]) + t[:, 1]
    reg = FeatureBaggingRegressor(
        make_krn_vsk(psi=ModelScaling(LinearRegression()), alpha=1e-3, gamma=1.0),
        n_estimators=4,
        max_features=0.75,
        random_state=0,
    ).fit(t, target)
    assert reg.predict(t).shape == (80,)


def test_feature_instability_of_an_svm_vsk_ensemble_equals_brute_force_refits():
    """FI of a bagged SVM-VSK from its definition: refit every member without feature j."""
    X, y = two_classes(n=60, d=4, seed=12)
    ens = FeatureBaggingClassifier(
        make_svm_vsk("linear"), n_estimators=6, max_features=0.5, random_state=0
    )
    result = feature_instability(ens, X, y, client=False)
    plan = ens.bag_plan(*X.shape)
    classes = np.unique(y)

    def votes(specs):
        # SVC without probabilities: each member casts a one-hot vote, the ensemble averages
        total = np.zeros((len(X), len(classes)))
        for spec in specs:
            rows = spec.rows(len(X))
            rows = np.arange(len(X)) if rows is None else rows
            member = make_svm_vsk("linear").fit(X[rows][:, spec.features], y[rows])
            hit = np.searchsorted(classes, member.predict(X[:, spec.features]))
            total[np.arange(len(X)), hit] += 1
        return total / len(specs)

    f = votes(plan.members())
    expected = []
    for j in range(4):
        g = votes([plan.without_feature(spec, j, "shared") for spec in plan.members()])
        expected.append(np.mean(((f - g) ** 2).sum(axis=1)))
    assert max(expected) > 0  # removing a feature changes some votes: the check has teeth
    np.testing.assert_allclose(result.terms, expected, rtol=1e-12, atol=1e-15)
    assert result.value == pytest.approx(np.mean(expected), rel=1e-12)


# -------------------------------------------------------------------------------------------
# bad input
# -------------------------------------------------------------------------------------------


def test_psi_with_wrong_number_of_rows_is_refused():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match="returned 9 rows for X with 10 rows"):
        VariablyScaled(lambda Z: Z[1:, :1]).fit(X)
    with pytest.raises(ValueError, match="rows"):
        vsk_gram(X, np.ones(9))


def test_psi_returning_nan_is_refused():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with np.errstate(invalid="ignore"):
        with pytest.raises(ValueError, match=r"non-finite values \(NaN or inf\) in 10 of 10 rows"):
            VariablyScaled(lambda Z: np.log(-np.abs(Z[:, 0]) - 1)).fit(X)
        vsk = VariablyScaled(lambda Z: np.sqrt(Z[:, 0])).fit(np.abs(X))
        with pytest.raises(ValueError, match="non-finite"):
            vsk.transform(X)


def test_naive_bayes_scaling_refuses_a_single_class():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match=r"at least two classes in y, got one class only \[1\]"):
        NaiveBayesScaling().fit(X, np.ones(10, dtype=int))


def test_supervised_psi_without_y_is_refused():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(
        ValueError, match="NaiveBayesScaling is a supervised scaling function: it requires y"
    ):
        VariablyScaled(NaiveBayesScaling()).fit(X)
    with pytest.raises(ValueError, match=r"ModelScaling\(LinearRegression\) is a supervised"):
        VariablyScaled(ModelScaling(LinearRegression())).fit(X)


def test_other_bad_input_gets_clear_errors_and_inputs_stay_unmodified():
    X = np.random.default_rng(0).normal(size=(12, 3))
    X0 = X.copy()
    y = np.repeat([0, 1], 6)
    with pytest.raises(ValueError, match="extra_X has 2 features but X has 3"):
        NaiveBayesScaling(extra_X=X[:, :2], extra_y=y).fit(X, y)
    with pytest.raises(ValueError, match="give both extra_X and extra_y"):
        NaiveBayesScaling(extra_X=X).fit(X, y)
    with pytest.raises(ValueError, match="kernel must be one of"):
        vsk_gram(X, None, "poly")
    with pytest.raises(ValueError, match=r"gamma \(of the Gaussian kernel\) must be .* > 0"):
        blockwise_spectral_ratio(X, None, "rbf", -1.0)
    with pytest.raises(ValueError, match="square"):
        spectral_ratio(np.ones((3, 4)))
    with pytest.raises(ValueError, match="symmetric"):
        condition_number(np.triu(np.ones((3, 3))))
    with pytest.raises(ValueError, match="leaves no feature for the naive-Bayes posterior"):
        SVMExtraction(n_keep=3).fit(X, y)
    with pytest.raises(ValueError, match=r"keep must hold distinct feature indices in \[0, 3\)"):
        SVMExtraction(keep=[5]).fit(X, y)
    with pytest.raises(TypeError, match="psi must be an estimator"):
        VariablyScaled(psi=3.0).fit(X)
    with pytest.raises(ValueError, match="contains NaN"):
        VariablyScaled().fit(np.where(X > 1, np.nan, X))
    with pytest.raises(ValueError, match="returned 2 columns, 1 at fit time"):
        vsk = VariablyScaled(lambda Z: Z[:, :1] if len(Z) == 12 else Z[:, :2]).fit(X)
        vsk.transform(X[:5])
    np.testing.assert_array_equal(X, X0)


# -------------------------------------------------------------------------------------------
# scikit-learn's estimator checks
# -------------------------------------------------------------------------------------------


@estimator_checks(
    [
        VariablyScaled(),
        VariablyScaled(NaiveBayesScaling()),
        NaiveBayesScaling(),
        ModelScaling(LinearRegression()),
        SVMExtraction(random_state=0),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
