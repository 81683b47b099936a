"""The PPA-induced metric M(x) = J^T Lambda^-1 J (paper section 3.4, eq. 20-21) and the
PPA-metric k-NN classifier (section 5.1)."""

import dask.array as da
import numpy as np
import pytest
from conftest import noisy_helix, random_nonlinear
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier

from ppa_dask import PPA
from ppa_dask.datasets import make_parabolas
from ppa_dask.geometry import coefficient_variances, make_mahalanobis_knn, make_ppa_knn


@pytest.fixture(scope="module")
def curved_model():
    X = random_nonlinear(n=3000, d=5, seed=2)
    return PPA(degree=range(1, 6), cv=2, random_state=0).fit(X), X


# ---------------------------------------------------------------- the metric is a metric ---


def test_metric_is_symmetric_positive_definite(curved_model):
    model, X = curved_model
    M = model.metric(X[:300])
    assert M.shape == (300, 5, 5)
    np.testing.assert_array_equal(M, np.swapaxes(M, 1, 2))
    assert np.linalg.eigvalsh(M).min() > 0


def test_metric_determinant_is_that_of_lambda_because_ppa_preserves_volume(curved_model):
    # det J = 1 everywhere, so det M(x) = 1 / prod(Lambda) at every point, however curved
    model, X = curved_model
    M = model.metric(X[:300])
    lam = coefficient_variances(model)
    np.testing.assert_allclose(np.linalg.det(M) * np.prod(lam), 1.0, rtol=1e-8)
    np.testing.assert_allclose(
        np.linalg.det(model.metric(X[:300], whitened=False)), 1.0, rtol=1e-8
    )


def test_metric_is_the_local_squared_distance_after_whitened_ppa(curved_model):
    # d^2(x, x + dx) = dx^T M dx: compare with the Euclidean distance between whitened
    # coefficients of two nearby points (an independent route through transform)
    model, X = curved_model
    white = PPA(**{**model.get_params(), "whiten": True}).fit(X)
    rng = np.random.default_rng(3)
    x = X[:50]
    u = rng.normal(size=x.shape)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    h = 1e-5
    d2 = ((white.transform(x + h * u) - white.transform(x - h * u)) ** 2).sum(axis=1) / (
        2 * h
    ) ** 2
    expected = np.einsum("ni,nij,nj->n", u, model.metric(x), u)
    np.testing.assert_allclose(d2, expected, rtol=1e-5)


def test_unwhitened_metric_is_jacobian_gram(curved_model):
    model, X = curved_model
    J = model.jacobian(X[:20])
    np.testing.assert_allclose(
        model.metric(X[:20], whitened=False), np.einsum("nki,nkj->nij", J, J), atol=1e-12
    )


# ---------------------------------------------------------- degree 1 is Mahalanobis -------


def test_degree_one_metric_is_the_inverse_covariance_everywhere():
    X = noisy_helix(n=1500, noise=0.3, seed=4)  # curved, non-Gaussian, correlated
    model = PPA(degree=1).fit(X)
    M = model.metric(X[::50])
    precision = np.linalg.inv(np.cov(X, rowvar=False))  # ddof=1, like explained_variance_
    np.testing.assert_allclose(M, np.broadcast_to(precision, M.shape), rtol=1e-9, atol=1e-12)


def test_partial_degree_one_metric_is_probabilistic_pca_precision():
    # n_components=k: the residual coordinates share the residual variance equally, which is
    # the precision matrix of probabilistic PCA (scikit-learn's get_precision, computed
    # independently from its own SVD)
    X = random_nonlinear(n=2000, d=6, seed=5)
    for k in (1, 3):
        model = PPA(n_components=k, degree=1).fit(X)
        reference = PCA(n_components=k).fit(X).get_precision()
        M = model.metric(X[:10])
        np.testing.assert_allclose(M, np.broadcast_to(reference, M.shape), rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------------------ dask ------


def test_metric_of_dask_input_is_lazy_and_equal_to_numpy(curved_model):
    model, X = curved_model
    Xd = da.from_array(X[:700], chunks=(200, 5))
    Md = model.metric(Xd)
    assert isinstance(Md, da.Array) and Md.shape == (700, 5, 5)
    np.testing.assert_allclose(Md.compute(), model.metric(X[:700]), rtol=0, atol=1e-12)


def test_metric_bad_input_names_the_width():
    model = PPA(degree=2).fit(noisy_helix(n=300))
    with pytest.raises(ValueError, match="3 features"):
        model.metric(np.zeros((4, 2)))


# -------------------------------------------------------- PPA-metric k-NN (Fig. 4) --------


def test_make_ppa_knn_is_whitened_ppa_then_euclidean_knn():
    clf = make_ppa_knn(n_neighbors=4, degree=2, random_state=1)
    ppa, knn = clf.named_steps["ppa"], clf.named_steps["kneighborsclassifier"]
    assert ppa.whiten and ppa.degree == 2 and knn.n_neighbors == 4 and knn.metric == "minkowski"
    with pytest.raises(ValueError, match="whiten"):
        make_ppa_knn(whiten=False)


def _mean_accuracy(make, n_train, curvature, seeds=range(10)):
    scores = []
    for seed in seeds:
        X, y = make_parabolas(n_train + 1000, curvature=curvature, random_state=seed)
        scores.append(make().fit(X[:n_train], y[:n_train]).score(X[n_train:], y[n_train:]))
    return float(np.mean(scores))


def test_ppa_metric_knn_beats_euclidean_and_mahalanobis_with_few_samples_at_high_curvature():
    # the paper's Fig. 4 (bottom): two noisy parabolas of high curvature, few training points;
    # the degree is 2 as the paper's cross-validation found
    n_train, curvature = 20, 1.5
    ppa = _mean_accuracy(lambda: make_ppa_knn(3, degree=2), n_train, curvature)
    euclid = _mean_accuracy(lambda: KNeighborsClassifier(3), n_train, curvature)
    mahal = _mean_accuracy(lambda: make_mahalanobis_knn(3), n_train, curvature)
    assert ppa > euclid + 0.05
    assert ppa > mahal + 0.05


def test_ppa_metric_gain_over_mahalanobis_grows_with_curvature():
    # a linear metric cannot follow the bend: the more curved, the more PPA gains over it
    gain = {
        c: _mean_accuracy(lambda: make_ppa_knn(3, degree=2), 20, c)
        - _mean_accuracy(lambda: make_mahalanobis_knn(3), 20, c)
        for c in (0.5, 1.5)
    }
    assert gain[1.5] > gain[0.5] + 0.02 and gain[0.5] > 0


def test_parabolas_are_two_balanced_classes_on_their_curves():
    X, y = make_parabolas(400, curvature=1.2, gap=0.3, noise=0.0, random_state=0)
    assert np.bincount(y).tolist() == [200, 200]
    np.testing.assert_allclose(X[:, 1], 1.2 * X[:, 0] ** 2 + 0.3 * y)
    with pytest.raises(ValueError, match="noise"):
        make_parabolas(10, noise=-1)
