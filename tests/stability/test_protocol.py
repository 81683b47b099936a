"""Stability through the bagged-estimator interface (ppa_dask.ensemble.protocol), not classes.

A bagged estimator written here, outside the package, exposes only a bag plan, a member
template and a member kind; feature and instance instability must refit it member by member
exactly as a brute force does with numpy (ridge members solved from their normal equations).
"""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import Ridge

from ppa_dask import FeatureBaggingClassifier, FeatureBaggingPPA, FeatureBaggingRegressor
from ppa_dask.ensemble import BaggedEstimator, BagPlan
from ppa_dask.ensemble.protocol import MEMBER_KINDS, bagged_kind
from ppa_dask.stability import feature_instability, instance_instability

ALPHA = 0.7


class SubspaceRidge(RegressorMixin, BaseEstimator):
    """A random-subspace ridge ensemble of someone else's: each member a ridge regression on
    ``n_features_per_member`` columns and ``n_rows`` rows drawn by a :class:`BagPlan`."""

    member_kind = "regressor"

    def __init__(self, n_estimators=7, n_features_per_member=3, n_rows=45, random_state=5):
        self.n_estimators = n_estimators
        self.n_features_per_member = n_features_per_member
        self.n_rows = n_rows
        self.random_state = random_state

    def bag_plan(self, n_samples, n_features):
        return BagPlan(
            self.random_state,
            n_samples,
            n_features,
            self.n_estimators,
            self.n_features_per_member,
            samples=self.n_rows,
        )

    def member_template(self):
        return Ridge(alpha=ALPHA)

    def fit(self, X, y):
        specs = self.bag_plan(*X.shape).members()
        self.members_ = [(s.features, _ridge(X, y, s.rows(len(X)), s.features)) for s in specs]
        return self

    def predict(self, X):
        return np.mean([_ridge_predict(m, X[:, f]) for f, m in self.members_], axis=0)


def _ridge(X, y, rows, features):
    """Ridge with an intercept from its normal equations (sklearn's objective, solved by hand)."""
    A = X[np.ix_(rows, features)]
    b = y[rows]
    mx, my = A.mean(axis=0), b.mean()
    Ac = A - mx
    w = np.linalg.solve(Ac.T @ Ac + ALPHA * np.eye(len(features)), Ac.T @ (b - my))
    return mx, my, w


def _ridge_predict(member, Xm):
    mx, my, w = member
    return (Xm - mx) @ w + my


def _ensemble(specs, X, y, X_eval):
    n = len(X)
    return np.mean(
        [
            _ridge_predict(_ridge(X, y, s.rows(n), s.features), X_eval[:, s.features])
            for s in specs
        ],
        axis=0,
    )


def _data(n=80, d=6, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 0.3 * np.sin(3 * X[:, 0]) + 0.2 * rng.normal(size=n)
    return X, y, rng.normal(size=(30, d))


def test_the_ensembles_implement_the_interface():
    kinds = {
        FeatureBaggingRegressor: "regressor",
        FeatureBaggingClassifier: "classifier",
        FeatureBaggingPPA: "ppa",
    }
    for cls, kind in kinds.items():
        assert isinstance(cls(), BaggedEstimator) and bagged_kind(cls()) == kind
    assert isinstance(SubspaceRidge(), BaggedEstimator)
    assert bagged_kind(Ridge()) is None and set(kinds.values()) == set(MEMBER_KINDS)


@pytest.mark.parametrize("coupling", ["shared", "independent"])
def test_a_third_party_bagged_estimator_gets_the_brute_force_fi_and_ii(coupling):
    X, y, X_eval = _data()
    model = SubspaceRidge()
    plan = model.bag_plan(*X.shape)
    specs = plan.members()
    f = _ensemble(specs, X, y, X_eval)
    # the brute force is the estimator's own prediction (the members are what it fits)
    assert np.allclose(model.fit(X, y).predict(X_eval), f, rtol=1e-12, atol=1e-12)

    fi = feature_instability(model, X, y, X_eval=X_eval, coupling=coupling, client=False)
    expected = []
    for j in range(X.shape[1]):
        g = _ensemble([plan.without(s, "feature", j, coupling) for s in specs], X, y, X_eval)
        expected.append(np.mean((f - g) ** 2))
    assert np.allclose(fi.terms, expected, rtol=1e-9, atol=1e-14)
    assert fi.value == pytest.approx(np.mean(expected), rel=1e-9)
    assert fi.info["n_features_per_member"] == 3 and fi.info["n_estimators"] == 7
    # a removed feature changes only the bags that held it (shared) or every bag (independent)
    held = sum(np.isin(np.arange(6), s.features).sum() for s in specs)
    assert fi.n_refits == (held if coupling == "shared" else 6 * len(specs))

    rows = [0, 11, 42, 79]
    ii = instance_instability(
        model, X, y, X_eval=X_eval, coupling=coupling, instances=rows, client=False
    )
    expected = []
    for i in rows:
        g = _ensemble([plan.without(s, "instance", i, coupling) for s in specs], X, y, X_eval)
        expected.append(np.mean((f - g) ** 2))
    assert np.allclose(ii.terms, expected, rtol=1e-9, atol=1e-14)


def test_out_of_bag_instability_of_a_third_party_ensemble():
    # "oob": f^{-i} is the mean of the members that never saw row i
    X, y, X_eval = _data()
    model = SubspaceRidge(n_estimators=12, n_rows=40)
    specs = model.bag_plan(*X.shape).members()
    f = _ensemble(specs, X, y, X_eval)
    rows = [3, 50]
    ii = instance_instability(model, X, y, X_eval=X_eval, method="oob", instances=rows)
    expected = [
        np.mean((f - _ensemble([s for s in specs if i not in s.rows(80)], X, y, X_eval)) ** 2)
        for i in rows
    ]
    assert np.allclose(ii.terms, expected, rtol=1e-9, atol=1e-14)


def test_a_member_kind_outside_the_vocabulary_is_refused():
    class Ranker(SubspaceRidge):
        member_kind = "ranker"

    X, y, _ = _data()
    with pytest.raises(ValueError, match="Ranker.member_kind is 'ranker'"):
        feature_instability(Ranker(), X, y, client=False)


def test_stability_names_no_ensemble_class():
    # it chooses what to refit by the interface alone (docstrings may name the classes)
    import ast
    import pathlib

    import ppa_dask.stability

    classes = {"FeatureBaggingRegressor", "FeatureBaggingClassifier", "FeatureBaggingPPA"}
    for path in pathlib.Path(ppa_dask.stability.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert used & classes == set(), path.name
