"""Checks of the direct reference PPA (tests/direct_ppa.py) against independent facts."""

import ast
import pathlib

import direct_ppa
import numpy as np
import pytest
from direct_ppa import (
    fit_direct,
    fit_direct_cv,
    inverse_direct,
    reconstruct_direct,
    transform_direct,
)
from sklearn.decomposition import PCA

from ppa_dask.app.bench import direct_port


def _correlated(n, d, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d)) * np.linspace(3.0, 0.3, d)[:, None]
    return rng.normal(size=(n, d)) @ A + rng.normal(size=d)


def _helix(n, seed):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, 2.0 * np.pi, n)
    X = np.column_stack([2.0 * np.cos(t), 2.0 * np.sin(t), 0.8 * t])
    return X + 0.1 * rng.normal(size=X.shape)


def test_degree_one_is_pca():
    X = _correlated(1000, 5, seed=0)
    R = transform_direct(fit_direct(X, 1), X)
    P = PCA(n_components=5, svd_solver="full").fit_transform(X)
    for j in range(5):
        a, b = R[:, j], P[:, j]
        sign = np.sign(a @ b)
        assert np.max(np.abs(a - sign * b)) <= 1e-8 * np.max(np.abs(b)), j


def test_leading_vectors_degree_one_are_pca_axes():
    X = _correlated(1000, 5, seed=1)
    model = fit_direct(X, 1)
    comps = PCA(n_components=5, svd_solver="full").fit(X).components_
    axes = np.vstack([model["leading"], model["last_direction"]])
    np.testing.assert_allclose(np.abs(axes @ comps.T), np.eye(5), atol=1e-8)
    for v in axes:
        assert v[np.argmax(np.abs(v))] > 0
    # with degree 1 every output column is the projection on its signed ambient axis
    R = transform_direct(model, X)
    np.testing.assert_allclose(
        R, (X - X.mean(axis=0)) @ axes.T, rtol=0, atol=1e-8 * np.max(np.abs(R))
    )


@pytest.mark.parametrize("degrees", [3, [4, 2, 1, 3]])
def test_transform_inverse_roundtrip(degrees):
    X = _correlated(800, 5, seed=2)
    X = X + 0.3 * X[:, [0]] ** 2  # some curvature so W is not zero
    model = fit_direct(X, degrees)
    np.testing.assert_allclose(
        inverse_direct(model, transform_direct(model, X)),
        X,
        rtol=0,
        atol=1e-10 * np.max(np.abs(X)),
    )
    Xnew = _correlated(300, 5, seed=3)
    np.testing.assert_allclose(
        inverse_direct(model, transform_direct(model, Xnew)),
        Xnew,
        rtol=0,
        atol=1e-10 * np.max(np.abs(Xnew)),
    )


def _mse(X, Xhat):
    return np.mean(np.sum((X - Xhat) ** 2, axis=1))


def test_reconstruction_not_worse_than_pca_on_helix():
    X = _helix(2000, seed=4)
    model = fit_direct(X, 3)
    errs = []
    for k in range(4):
        ppa_err = _mse(X, reconstruct_direct(model, X, k))
        if k == 0:
            pca_err = _mse(X, X.mean(axis=0))
        else:
            pca = PCA(n_components=k, svd_solver="full").fit(X)
            pca_err = _mse(X, pca.inverse_transform(pca.transform(X)))
        assert ppa_err <= pca_err * (1 + 1e-10) + 1e-20, (k, ppa_err, pca_err)
        errs.append((ppa_err, pca_err))
    # the truncation error is exactly E||x_k||^2 (paper, eq. 7); x_2 is the last column
    R = transform_direct(model, X)
    np.testing.assert_allclose(errs[2][0], np.mean(R[:, 2] ** 2), rtol=1e-10)
    # the curved first axis really helps on one turn of a helix
    assert errs[1][0] < 0.9 * errs[1][1]


def test_cv_picks_quadratic_on_parabola():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1.0, 1.0, 600)
    X = np.column_stack([x, x**2 + 0.05 * rng.normal(size=x.size)])
    folds = rng.permutation(np.arange(x.size) % 5)
    model, scores, chosen = fit_direct_cv(X, [1, 2, 3], folds)
    assert scores.shape == (1, 3)
    assert chosen[0] >= 2
    assert scores[0, 0] > scores[0, 1]
    assert model["degrees"] == chosen
    # refit on all rows with the chosen degree matches fit_direct
    np.testing.assert_allclose(
        transform_direct(model, X), transform_direct(fit_direct(X, chosen), X), atol=1e-12
    )


def _imported_modules(source):
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def test_the_direct_port_imports_numpy_and_nothing_else():
    # it is the independent check of PPA only while it shares no code with the package it
    # lives in: an import of anything of ppa_dask (or of a helper of it) would make it a copy
    source = pathlib.Path(direct_port.__file__).read_text()
    assert _imported_modules(source) == {"numpy"}
    # the scan sees the imports a shared-code change would add
    assert _imported_modules("from ppa_dask.ppa import algebra\nfrom . import x") == {
        "ppa_dask.ppa",
        ".",
    }


def test_the_tests_use_the_port_the_bench_measures():
    for name in direct_ppa.__all__:
        assert getattr(direct_ppa, name) is getattr(direct_port, name), name
