"""NLPCA, the hierarchical autoencoder of the PPA paper's comparisons (ppa_dask.nlpca)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn_checks import estimator_checks

import ppa_dask
from ppa_dask.nlpca import NLPCA
from ppa_dask.nlpca.autoencoder import hierarchical_loss, layer_shapes, unpack_weights
from ppa_dask.store import load_model, save_model


def _fit(X, **params):
    # the small max_iter of the tests often ends before tol: the warning is expected here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return NLPCA(**params).fit(X)


def _mse(A, B):
    return float(np.mean(np.sum((A - B) ** 2, axis=1)))


def _pca_error(X, k):
    pca = PCA(k).fit(X)
    return _mse(X, pca.inverse_transform(pca.transform(X))), pca


def _parabola(n=300, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    return np.column_stack([t, t**2]) + 0.02 * rng.normal(size=(n, 2))


@pytest.fixture(scope="module")
def parabola():
    X = _parabola()
    return X, _fit(X, n_components=1, random_state=0, max_iter=400)


# ---------------------------------------------------------------------------------------------
# the analytic gradient
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.0, 0.05])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_gradient_equals_central_differences(k, alpha):
    rng = np.random.default_rng(10 * k + int(alpha > 0))
    d, h = 4, 5
    shapes = layer_shapes(d, h, k)
    n_weights = sum(r * c + c for r, c in shapes)
    # random weights and biases, large enough for tanh to be well away from linear
    theta = rng.normal(0.0, 0.7, n_weights)
    Xs = rng.normal(size=(25, d))
    loss, grad = hierarchical_loss(theta, Xs, shapes, alpha)
    eps = 1e-6
    numeric = np.empty(n_weights)
    for j in range(n_weights):
        step = np.zeros(n_weights)
        step[j] = eps
        up = hierarchical_loss(theta + step, Xs, shapes, alpha)[0]
        down = hierarchical_loss(theta - step, Xs, shapes, alpha)[0]
        numeric[j] = (up - down) / (2 * eps)
    assert np.isfinite(loss)
    assert np.linalg.norm(grad - numeric) / np.linalg.norm(numeric) < 1e-6


def test_loss_is_the_sum_of_the_hierarchy_plus_weight_decay():
    # the objective's value itself, from an independent forward pass
    rng = np.random.default_rng(3)
    shapes = layer_shapes(3, 4, 2)
    theta = rng.normal(0.0, 0.5, sum(r * c + c for r, c in shapes))
    Xs = rng.normal(size=(20, 3))
    (W1, W2, W3, W4), (b1, b2, b3, b4) = unpack_weights(theta, shapes)
    Z = np.tanh(Xs @ W1 + b1) @ W2 + b2
    expected = 0.0
    for i in (1, 2):
        Zi = np.where(np.arange(2) < i, Z, 0.0)
        Y = np.tanh(Zi @ W3 + b3) @ W4 + b4
        expected += np.mean((Y - Xs) ** 2)
    expected += 0.1 * sum(np.sum(W**2) for W in (W1, W2, W3, W4))
    assert hierarchical_loss(theta, Xs, shapes, 0.1)[0] == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# what it fits
# ---------------------------------------------------------------------------------------------


def test_linear_data_is_fitted_like_pca():
    rng = np.random.default_rng(1)
    t = rng.uniform(-2, 2, 300)
    X = np.column_stack([t, 0.5 * t]) + 0.1 * rng.normal(size=(300, 2))
    # weight decay costs ~2 % here: a straight line needs large weights on the tanh layers
    model = _fit(X, n_components=1, random_state=0, max_iter=500)
    pca_error, pca = _pca_error(X, 1)
    error = _mse(X, model.inverse_transform(model.transform(X)))
    assert abs(error / pca_error - 1) < 0.05
    r = np.corrcoef(model.transform(X)[:, 0], pca.transform(X)[:, 0])[0, 1]
    assert abs(r) > 0.99


def test_curved_data_is_fitted_better_than_pca(parabola):
    X, model = parabola
    pca_error, _ = _pca_error(X, 1)
    error = _mse(X, model.inverse_transform(model.transform(X)))
    assert error < 0.1 * pca_error
    assert model.reconstruction_errors_ == pytest.approx([error])


def test_circle_arc_is_fitted_better_than_pca():
    rng = np.random.default_rng(2)
    angle = rng.uniform(0, np.pi, 300)
    X = np.column_stack([np.cos(angle), np.sin(angle)]) + 0.02 * rng.normal(size=(300, 2))
    model = _fit(X, n_components=1, random_state=0, max_iter=300)
    pca_error, _ = _pca_error(X, 1)
    assert model.reconstruction_errors(X)[0] < 0.25 * pca_error


def test_components_are_ordered_by_the_hierarchy():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3)) * [3.0, 1.5, 0.5]
    model = _fit(X, n_components=2, random_state=0, max_iter=300)
    Z = model.transform(X)
    errors = model.reconstruction_errors(X)
    mean_only = _mse(X, X.mean(axis=0))
    assert mean_only > errors[0] > errors[1]
    assert errors == pytest.approx(model.reconstruction_errors_)
    # the first unit alone explains more than the second alone (the first zeroed)
    second_only = Z.copy()
    second_only[:, 0] = 0.0
    assert errors[0] < _mse(X, model.inverse_transform(second_only))
    # and, like PCA's, the first unit captures about the leading variance
    assert errors[0] == pytest.approx(_pca_error(X, 1)[0], rel=0.1)


def test_inverse_transform_of_transform_approximates_the_input(parabola):
    X, model = parabola
    X_rec = model.inverse_transform(model.transform(X))
    assert X_rec.shape == X.shape
    assert np.mean((X - X_rec) ** 2) < 0.01 * np.mean((X - X.mean(axis=0)) ** 2)


def test_inverse_transform_sets_missing_units_to_zero():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 4)) * [2.0, 1.0, 0.5, 0.2]
    model = _fit(X, n_components=3, hidden=6, random_state=0, max_iter=30)
    Z = model.transform(X)
    padded = np.column_stack([Z[:, :2], np.zeros(len(Z))])
    assert np.array_equal(model.inverse_transform(Z[:, :2]), model.inverse_transform(padded))
    with pytest.raises(ValueError, match="between 1 and n_components_ = 3"):
        model.inverse_transform(np.zeros((5, 4)))


def test_standardisation_is_one_scale_and_is_undone_on_output():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(80, 3)) * [10.0, 1.0, 0.1]
    params = dict(n_components=1, hidden=5, max_iter=30, random_state=0)
    model = _fit(X, **params)
    assert model.mean_ == pytest.approx(X.mean(axis=0))
    # one overall standard deviation, so the small feature stays small inside the network
    assert isinstance(model.scale_, float)
    assert model.scale_ == pytest.approx(np.sqrt(np.mean((X - X.mean(axis=0)) ** 2)))
    # shifting and scaling all features alike changes nothing but the output's units
    shifted = _fit(3.0 * X + 5.0, **params)
    assert np.allclose(shifted.transform(3.0 * X + 5.0), model.transform(X))
    Z = model.transform(X)
    assert np.allclose(shifted.inverse_transform(Z), 3.0 * model.inverse_transform(Z) + 5.0)


# ---------------------------------------------------------------------------------------------
# seeds and restarts
# ---------------------------------------------------------------------------------------------


def test_same_seed_same_weights_other_seed_other_weights():
    X = _parabola(n=80)
    params = dict(hidden=6, max_iter=40, n_restarts=2)
    a, b = (_fit(X, random_state=7, **params) for _ in range(2))
    c = _fit(X, random_state=8, **params)
    for Wa, Wb in zip(a.coefs_ + a.intercepts_, b.coefs_ + b.intercepts_):
        assert np.array_equal(Wa, Wb)
    assert not np.allclose(a.coefs_[0], c.coefs_[0])


def test_more_restarts_never_give_a_worse_training_loss():
    X = _parabola(n=80, seed=1)
    params = dict(hidden=6, max_iter=40, random_state=1)
    fits = [_fit(X, n_restarts=r, **params) for r in (1, 2, 4)]
    # with this seed the best restart is not the last one: keeping the last would show
    assert fits[2].best_restart_ == np.argmin(fits[2].restart_losses_) < 3
    losses = [m.loss_ for m in fits]
    assert losses[0] >= losses[1] >= losses[2]
    # restart r is the same run whatever n_restarts is: the smaller sets are prefixes
    assert np.array_equal(fits[1].restart_losses_, fits[2].restart_losses_[:2])
    assert np.array_equal(fits[0].restart_losses_, fits[2].restart_losses_[:1])
    # the restarts really differ, so the prefix property is not vacuous
    assert len(set(fits[2].restart_losses_.tolist())) == 4
    best = fits[2]
    assert best.loss_ == best.restart_losses_.min() == best.loss_curve_[-1]
    assert best.n_iter_ == best.restart_n_iter_[best.best_restart_]
    assert np.all(np.diff(best.loss_curve_) <= 1e-12)


# ---------------------------------------------------------------------------------------------
# parameters, input, state
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, name",
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 3}, "n_components"),
        ({"n_components": 1.5}, "n_components"),
        ({"hidden": 0}, "hidden"),
        ({"hidden": "wide"}, "hidden"),
        ({"alpha": -1e-3}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"n_restarts": 0}, "n_restarts"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1.0}, "tol"),
        ({"random_state": -1}, "random_state"),
        ({"random_state": "seed"}, "random_state"),
        ({"random_state": 1.5}, "random_state"),
    ],
)
def test_bad_parameters_are_named(params, name):
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match=name):
        NLPCA(**params).fit(X)


def test_unfitted_model_raises_not_fitted():
    X = np.zeros((3, 2))
    with pytest.raises(NotFittedError):
        NLPCA().transform(X)
    with pytest.raises(NotFittedError):
        NLPCA().inverse_transform(X[:, :1])


def test_dask_input_is_refused_with_advice(parabola):
    X, model = parabola
    lazy = da.from_array(X, chunks=100)
    with pytest.raises(TypeError, match=r"compute\(\)"):
        NLPCA().fit(lazy)
    with pytest.raises(TypeError, match="subsample"):
        model.transform(lazy)


def test_feature_names_out(parabola):
    X, model = parabola
    assert model.get_feature_names_out().tolist() == ["nlpca0"]


def test_state_is_saved_as_arrays_and_numbers(parabola, tmp_path):
    X, model = parabola
    path = save_model(model, str(tmp_path / "nlpca.zarr"))
    loaded = load_model(path)
    assert type(loaded) is NLPCA and loaded.get_params() == model.get_params()
    assert np.array_equal(loaded.transform(X), model.transform(X))
    Z = model.transform(X)
    assert np.array_equal(loaded.inverse_transform(Z), model.inverse_transform(Z))


@pytest.mark.slow
def test_saved_model_loads_in_a_process_that_imported_only_the_store(parabola, tmp_path):
    # the allow-list is filled by registration at import; ppa_dask's own import must
    # register NLPCA, or a fresh process (a Dask worker, a user's script) refuses the file
    X, model = parabola
    path = save_model(model, str(tmp_path / "nlpca.zarr"))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Z.npy", model.transform(X))
    script = (
        "import sys\n"
        "import numpy as np\n"
        "import ppa_dask.store\n"
        "model = ppa_dask.store.load_model(sys.argv[1])\n"
        "assert type(model).__name__ == 'NLPCA', type(model)\n"
        "np.testing.assert_array_equal(model.transform(np.load(sys.argv[2])), np.load(sys.argv[3]))\n"
        "print('loaded', type(model).__module__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, path, str(tmp_path / "X.npy"), str(tmp_path / "Z.npy")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "loaded ppa_dask.nlpca.autoencoder" in done.stdout


def test_nlpca_is_exported_from_the_package():
    assert ppa_dask.NLPCA is NLPCA and "NLPCA" in ppa_dask.__all__


# ---------------------------------------------------------------------------------------------
# scikit-learn's estimator checks
# ---------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@estimator_checks([NLPCA(hidden=4, n_restarts=2, max_iter=15, random_state=0)], xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
