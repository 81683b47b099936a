"""Feature and instance instability (Sun, "Feature Bagging Provides Stability"; docs/design.md section 4).

For a learning algorithm ``A`` with output ``f = A(D)`` and the fits without feature ``j``
(``f^{:,-j}``) or without instance ``i`` (``f^{-i,:}``):

* feature instability ``FI = (1/d) sum_j mean_x ||f(x) - f^{:,-j}(x)||^2``;
* instance instability ``II = (1/n) sum_i mean_x ||f(x) - f^{-i,:}(x)||^2``,

the mean over ``x`` taken on an evaluation set (``X_eval``, by default the training data). The
output is ``predict`` for regressors, ``predict_proba`` for classifiers (one-hot votes without
it) and, for PPA-based estimators (:class:`~ppa_dask.PPA`,
:class:`~ppa_dask.FeatureBaggingPPA`), the ``k``-component reconstruction in input units,
compared on the features both fits share -- so FI is in squared input units. A vector output is
compared with the squared Euclidean norm (the Hilbert-space FI of the paper's section 4).

A bagged estimator is known by what it exposes, not by its class: its bag plan, member
template and member kind (:class:`~ppa_dask.ensemble.BaggedEstimator`, which the
``FeatureBagging*`` ensembles implement and any other estimator can); its members are then
refitted one by one, a single estimator as a whole.

Methods
-------
``"refit"``
    Brute force: the estimator is refitted without each feature (or instance). For a bagged
    estimator only the members whose bag the removal changes are refitted (with
    ``coupling="shared"`` the others are the same fit); each index's refits are one Dask task on
    the current Client.
``"oob"``
    No refits: ``f^{:,-j}`` is the average of the members that never saw ``j`` (``f^{-i,:}``: of
    those that never saw ``i``). Under shared coupling the refit's bags are uniform subsets of
    the remaining features, which is what the out-of-bag members are, so this estimates the
    infinite-bagging FI (and II).
``"closed_form"``
    For ``LinearRegression`` and ``Ridge`` members (bagged or not): exact leave-one-feature-out
    and leave-one-instance-out coefficients from one matrix inverse per member (the normal
    equations, or the Gram matrix of the rows for a minimum-norm fit with more features than
    rows), including the replacement a shared-coupling bag draws. Equal to ``"refit"`` up to
    rounding.

Coupling
--------
``"shared"`` (the paper's default, ``xi^j = xi``): the refit keeps every bag the removal does not
touch, and a bag that contained the removed index takes the next index of its own permutation.
``"independent"``: the bags of the perturbed axis are redrawn from fresh seeds (the paper's
section 3 convention). A single (non-bagged) estimator keeps its ``random_state`` under shared
coupling and gets a fresh one under independent coupling.

The paper's guidance as functions: :func:`feature_stability_bound` (``M^2/(d-1) q/(1-q)``),
:func:`instance_stability_bound` and :func:`bagging_rounds` (``B`` of order ``d (1-q)/q``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.utils.multiclass import check_classification_targets

from ppa_dask.ensemble.bagging import (
    BagPlan,
    accumulate,
    check_coupling,
    finish,
    fit_member,
    member_output,
)
from ppa_dask.ensemble.protocol import bagged_kind
from ppa_dask.ppa.estimator import PPA
from ppa_dask.ppa.multifit import fit_members_shared_scans
from ppa_dask.utils.arrays import check_dask_samples, is_dask
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.compute import current_client
from ppa_dask.utils.fanout import run_tasks
from ppa_dask.utils.params import Integer, Options, Real, check_param, is_int
from ppa_dask.utils.seeds import SEED_MAX, check_seed, ensemble_seed, key_rng

__all__ = [
    "StabilityResult",
    "feature_instability",
    "instance_instability",
    "feature_stability_bound",
    "instance_stability_bound",
    "bagging_rounds",
]

METHODS = ("refit", "oob", "closed_form")
# refits of one instance each are costly; without n_instances, "refit" samples this many rows
DEFAULT_REFIT_INSTANCES = 100


# --------------------------------------------------------------------------------------------
# the paper's guidance
# --------------------------------------------------------------------------------------------


def feature_stability_bound(n_features, q, M=1.0):
    """Proposition 4.1: infinite feature bagging with ratio ``q`` has ``FI <= M^2/(d-1) q/(1-q)``.

    For base learners with outputs in ``[-M, M]`` (a Hilbert-space radius ``M`` for vector
    outputs). ``q = 1`` (no bagging) gives ``inf``.

    Examples
    --------
    >>> round(feature_stability_bound(11, 0.5, M=2.0), 6)
    0.4
    """
    d, q = _check_population(n_features, "n_features"), _check_ratio(q, "q")
    return math.inf if q == 1.0 else M**2 / (d - 1) * q / (1 - q)


def instance_stability_bound(n_samples, p, M=1.0):
    """The instance-side bound (Soloff et al.): infinite instance bagging has
    ``II <= M^2/(n-1) p/(1-p)``."""
    n, p = _check_population(n_samples, "n_samples"), _check_ratio(p, "p")
    return math.inf if p == 1.0 else M**2 / (n - 1) * p / (1 - p)


def bagging_rounds(n_features, q, constant=1.0):
    """Rounds ``B`` of order ``d (1 - q) / q`` past which finite bagging is as stable as infinite
    bagging up to an ``O(1/B)`` term (section 4.3); at least 1.

    Examples
    --------
    >>> bagging_rounds(100, 0.5), bagging_rounds(100, 0.1)
    (100, 900)
    """
    d, q = _check_population(n_features, "n_features"), _check_ratio(q, "q")
    return max(1, math.ceil(constant * d * (1 - q) / q - 1e-9))


def _check_population(value, name):
    return check_param(name, value, Integer(2))


def _check_ratio(value, name):
    return check_param(name, value, Real(0, 1, closed="right"))


# --------------------------------------------------------------------------------------------
# result
# --------------------------------------------------------------------------------------------


@dataclass
class StabilityResult:
    """Feature or instance instability with its per-index terms.

    Attributes
    ----------
    value : float
        The mean of ``terms``: FI (or II), or its estimate from a subset of indices.
    terms : ndarray
        ``mean_x ||f(x) - f^{-index}(x)||^2`` for each index in ``indices``.
    stderr : float
        Standard error of ``value`` as an estimate of the mean over all ``population`` indices
        (with the finite-population correction; 0 when every index is used).
    indices : ndarray of int
        Features ``j`` (or instances ``i``) evaluated.
    axis : {"feature", "instance"}
    method : {"refit", "oob", "closed_form"}
    coupling : {"shared", "independent"}
    population : int
        ``d`` (or ``n``).
    n_refits : int
        Member fits made beyond the original fit (0 for ``"oob"``).
    info : dict
        Context: ``n_estimators``, ``n_features_per_member``, ``q`` and, for feature bagging
        with ``q < 1``, ``bagging_rounds`` (``d (1 - q) / q``).
    """

    value: float
    terms: np.ndarray
    stderr: float
    indices: np.ndarray
    axis: str
    method: str
    coupling: str
    population: int
    n_refits: int = 0
    info: dict = field(default_factory=dict)

    def to_dict(self):
        """Plain-JSON form (terms and indices as lists)."""
        return dict(
            value=float(self.value),
            stderr=float(self.stderr),
            terms=self.terms.tolist(),
            indices=self.indices.tolist(),
            axis=self.axis,
            method=self.method,
            coupling=self.coupling,
            population=int(self.population),
            n_refits=int(self.n_refits),
            info=self.info,
        )


def _summarise(terms, indices, population, **kw):
    terms = np.asarray(terms, dtype=np.float64)
    k = terms.size
    if k == population or k == 0:
        stderr = 0.0
    elif k == 1:
        stderr = math.nan
    else:
        fpc = math.sqrt((population - k) / (population - 1))
        stderr = float(terms.std(ddof=1) / math.sqrt(k) * fpc)
    value = float(terms.mean()) if k else math.nan
    return StabilityResult(
        value, terms, stderr, np.asarray(indices, dtype=np.intp), population=population, **kw
    )


# --------------------------------------------------------------------------------------------
# what is being fitted: members, their outputs and their leave-one-out redraws
# --------------------------------------------------------------------------------------------


@dataclass
class _Plan:
    kind: str  # "regressor", "classifier" or "ppa"
    template: object
    bags: BagPlan
    specs: list
    width: int
    y: np.ndarray | None
    column_means: np.ndarray | None = None  # ppa: a feature held by no member
    bagged: bool = True

    def fallback(self, X, axis=None, index=None):
        if self.column_means is None:
            return None
        if axis == "instance":
            n = X.shape[0]
            row = X[index]
            row = np.asarray(row.compute() if is_dask(row) else row, dtype=np.float64)
            return (self.column_means * n - row) / (n - 1)
        return self.column_means


def _make_plan(estimator, X, y, n_components, random_state):
    n, d = X.shape
    # a bagged estimator is refitted member by member through its interface
    # (ppa_dask.ensemble.protocol), whatever its class
    kind = bagged_kind(estimator)
    if kind is not None:
        template = estimator.member_template()
        bags = estimator.bag_plan(n, d)
        specs = bags.members()
        if kind == "ppa":
            means = None if is_dask(X) else X.mean(axis=0)
            return _Plan("ppa", template, bags, specs, d, None, means)
        if kind == "classifier":
            y, width = _encode_classes(y, n)
            return _Plan("classifier", template, bags, specs, width, y)
        y = _regression_targets(y, n)
        return _Plan("regressor", template, bags, specs, 1 if y.ndim == 1 else y.shape[1], y)
    if not (hasattr(estimator, "fit") and hasattr(estimator, "get_params")):
        raise TypeError(
            f"estimator must be a scikit-learn estimator with fit and get_params, got "
            f"{type(estimator).__name__}"
        )
    seed = ensemble_seed(random_state)
    bags = BagPlan(seed, n, d, 1, d, None, own_seeds=False)
    specs = bags.members()
    estimator = _pin_random_state(estimator, seed)
    if isinstance(estimator, PPA):
        k = n_components if n_components is not None else (estimator.n_components or 1)
        if not is_int(k) or not 1 <= k < d - 1:
            raise ValueError(
                f"n_components={k!r}: PPA's reconstruction is compared after removing a "
                f"feature, so k must satisfy 1 <= k < d - 1 = {d - 1}"
            )
        template = clone(estimator).set_params(n_components=int(k))
        means = None if is_dask(X) else X.mean(axis=0)
        return _Plan("ppa", template, bags, specs, d, None, means, bagged=False)
    if not callable(getattr(estimator, "predict", None)):
        raise TypeError(f"estimator {type(estimator).__name__} has no predict method")
    template = clone(estimator)
    if is_classifier(estimator):
        y, width = _encode_classes(y, n)
        return _Plan("classifier", template, bags, specs, width, y, bagged=False)
    y = _regression_targets(y, n)
    return _Plan(
        "regressor", template, bags, specs, 1 if y.ndim == 1 else y.shape[1], y, bagged=False
    )


def _pin_random_state(estimator, seed):
    """A clone whose unset ``random_state`` parameters are fixed from ``seed``: shared
    randomness means the fit and its refits draw the same, which ``None`` would not."""
    unset = sorted(
        k
        for k, v in estimator.get_params(deep=True).items()
        if k.endswith("random_state") and v is None
    )
    if not unset:
        return estimator
    values = key_rng(seed, 11).integers(SEED_MAX, size=len(unset))
    return clone(estimator).set_params(**{k: int(v) for k, v in zip(unset, values)})


def _check_y_length(y, n):
    if y is None:
        raise ValueError("this estimator needs targets y, got None")
    y = np.asarray(y)
    if y.shape[0] != n:
        raise ValueError(
            f"y has {y.shape[0]} entries but X has {n} rows (samples); they must match."
        )
    return y


def _regression_targets(y, n):
    y = _check_y_length(y, n)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if not np.issubdtype(y.dtype, np.number):
        raise ValueError(f"y must be numeric for a regressor, got dtype {y.dtype}")
    return y.astype(np.float64)


def _encode_classes(y, n):
    y = _check_y_length(y, n)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    check_classification_targets(y)
    classes, encoded = np.unique(y, return_inverse=True)
    return encoded.astype(np.intp), len(classes)


def _check_arrays(X, X_eval, estimator):
    if is_dask(X_eval):
        raise TypeError(
            "X_eval is a Dask array; pass the evaluation points in memory (a sample of rows)."
        )
    if is_dask(X):
        if not (isinstance(estimator, PPA) or bagged_kind(estimator) == "ppa"):
            raise TypeError(
                "X is a Dask array: out-of-core refits (all of them from shared scans) are for "
                "PPA and FeatureBaggingPPA; other estimators take in-memory data (.compute())."
            )
        if X_eval is None:
            raise ValueError(
                "with a Dask array X, pass X_eval: the in-memory rows the "
                "reconstructions are compared at"
            )
        X = check_dask_samples(X, "X", min_features=2, who="feature removal")
        X_eval = np.asarray(X_eval, dtype=np.float64)
        if X_eval.ndim != 2 or X_eval.shape[1] != X.shape[1]:
            raise ValueError(
                f"X_eval must have the {X.shape[1]} columns of X, got shape {X_eval.shape}"
            )
        return X, X_eval
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (samples x features), got shape {X.shape}")
    if X.shape[1] < 2:
        raise ValueError(f"X has {X.shape[1]} feature(s); feature removal needs at least 2")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"X must be numeric, got dtype {X.dtype}")
    X = X.astype(np.float64, copy=False)
    if X_eval is None:
        X_eval = X
    else:
        X_eval = np.asarray(X_eval, dtype=np.float64)
        if X_eval.ndim != 2 or X_eval.shape[1] != X.shape[1]:
            raise ValueError(
                f"X_eval must have the {X.shape[1]} columns of X, got shape {X_eval.shape}"
            )
    return X, X_eval


def _choose_indices(given, count, population, rng_seed, axis):
    """The indices evaluated: all, ``count`` drawn without replacement, or ``given``."""
    if given is not None:
        idx = np.unique(np.asarray(given, dtype=np.intp).ravel())
        if idx.size == 0 or idx.min() < 0 or idx.max() >= population:
            raise ValueError(
                f"{axis}s must be indices in [0, {population}), got {np.asarray(given)!r}"
            )
        return idx
    if count is None or count >= population:
        return np.arange(population)
    count = check_param(f"n_{axis}s", count, Integer(1))
    rng = key_rng(rng_seed, 9)
    return np.sort(rng.choice(population, size=int(count), replace=False))


def _compared(plan, axis, index):
    """Output columns both fits share (a PPA refit without feature j has no column j)."""
    cols = np.ones(plan.width, dtype=bool)
    if plan.kind == "ppa" and axis == "feature":
        cols[index] = False
    return cols


def _term(f, g, cols):
    diff = f[:, cols] - g[:, cols]
    return float(np.einsum("ij,ij->i", diff, diff).mean())


# --------------------------------------------------------------------------------------------
# tasks
# --------------------------------------------------------------------------------------------


def _fit_output_task(spec, X, y, template, kind, X_eval, width):
    with one_blas_thread():
        return member_output(kind, fit_member(spec, X, y, template), spec, X_eval, width)


def _refit_task(item, X, y, template, kind, X_eval, width):
    """All changed members of one removal: their outputs on ``X_eval``, in member order."""
    _, changed = item
    with one_blas_thread():
        return [
            member_output(kind, fit_member(spec, X, y, template), spec, X_eval, width)
            for _, spec in changed
        ]


def _closed_form_task(item, X, y, template, X_eval):
    """One member's closed-form refits: ``{index: output}`` for each removal that changes it."""
    spec, removals = item
    with one_blas_thread():
        member = _LinearMember(X, y, spec, template)
        out = {"__full__": member.predict(X_eval)}
        for index, axis, new in removals:
            out[index] = member.refit_predict(new, axis, index, X_eval)
        return out


# --------------------------------------------------------------------------------------------
# the estimators
# --------------------------------------------------------------------------------------------


def feature_instability(
    estimator,
    X,
    y=None,
    X_eval=None,
    method="refit",
    coupling=None,
    features=None,
    n_features=None,
    n_components=None,
    random_state=None,
    client=None,
    verbose=0,
):
    """Feature instability ``FI = (1/d) sum_j mean_x ||f(x) - f^{:,-j}(x)||^2``.

    Parameters
    ----------
    estimator : estimator
        Fitted anew on ``X`` (it is cloned; a fitted one is not reused): a
        :class:`~ppa_dask.ensemble.FeatureBaggingRegressor`, ``FeatureBaggingClassifier``,
        ``FeatureBaggingPPA``, any other bagged estimator implementing
        :class:`~ppa_dask.ensemble.BaggedEstimator` (refitted member by member), a
        :class:`~ppa_dask.PPA` or any scikit-learn regressor or classifier.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or None
        Targets (None for PPA-based estimators).
    X_eval : array-like of shape (n_eval, n_features), default=None
        Points ``x`` the outputs are compared at; ``X`` by default.
    method : {"refit", "oob", "closed_form"}, default="refit"
    coupling : {"shared", "independent"} or None
        None takes the estimator's ``coupling`` (``"shared"`` for one without).
    features : array-like of int, optional
        Evaluate these features only (``value`` then estimates FI, with ``stderr``).
    n_features : int, optional
        Evaluate this many features drawn at random (seeded by ``random_state``).
    n_components : int, optional
        ``k`` for a single PPA (default: its ``n_components``, else 1).
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seeds the choice of features and, for a single (non-bagged) estimator, fixes its unset
        ``random_state`` parameters (so the fit and its refits share their randomness) and,
        under independent coupling, its fresh ``random_state`` per refit.
    client : distributed.Client, False or None
        Where the fits run: None the current Client if there is one, False in process.
    verbose : int
        Text progress bar of the fits when > 0.

    Returns
    -------
    StabilityResult

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from ppa_dask import FeatureBaggingRegressor
    >>> from ppa_dask.stability import feature_instability
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 6)); y = X.sum(axis=1) + rng.normal(size=100)
    >>> ens = FeatureBaggingRegressor(LinearRegression(), n_estimators=30, max_features=0.5,
    ...                               random_state=0)
    >>> a = feature_instability(ens, X, y, method="refit")
    >>> b = feature_instability(ens, X, y, method="closed_form")
    >>> bool(np.isclose(a.value, b.value, rtol=1e-10)), a.terms.shape
    (True, (6,))
    """
    return _instability(
        "feature",
        estimator,
        X,
        y,
        X_eval,
        method,
        coupling,
        features,
        n_features,
        n_components,
        random_state,
        client,
        verbose,
    )


def instance_instability(
    estimator,
    X,
    y=None,
    X_eval=None,
    method="refit",
    coupling=None,
    instances=None,
    n_instances=None,
    n_components=None,
    random_state=None,
    client=None,
    verbose=0,
):
    """Instance instability ``II = (1/n) sum_i mean_x ||f(x) - f^{-i,:}(x)||^2``.

    Parameters are those of :func:`feature_instability`, with ``instances`` / ``n_instances``
    choosing the removed rows. With neither, ``"refit"`` uses a random subset of
    ``min(n, 100)`` rows (``value`` is then an estimate, with ``stderr``) and ``"oob"`` and
    ``"closed_form"`` use every row. ``"oob"`` needs instance sub-bagging (``max_samples``).

    Returns
    -------
    StabilityResult
    """
    return _instability(
        "instance",
        estimator,
        X,
        y,
        X_eval,
        method,
        coupling,
        instances,
        n_instances,
        n_components,
        random_state,
        client,
        verbose,
    )


def _instability(
    axis,
    estimator,
    X,
    y,
    X_eval,
    method,
    coupling,
    given,
    count,
    n_components,
    random_state,
    client,
    verbose,
):
    check_param("method", method, Options(*METHODS))
    check_seed(random_state)
    if coupling is None:
        coupling = getattr(estimator, "coupling", "shared")
    check_coupling(coupling)
    X, X_eval = _check_arrays(X, X_eval, estimator)
    n, d = X.shape
    plan = _make_plan(estimator, X, y, n_components, random_state)
    population = d if axis == "feature" else n
    if count is None and given is None and axis == "instance" and method == "refit":
        count = DEFAULT_REFIT_INSTANCES
    indices = _choose_indices(given, count, population, ensemble_seed(random_state), axis)
    if client is None:
        client = current_client()
    elif client is False:
        client = None

    info = dict(
        n_estimators=plan.bags.n_estimators, n_features_per_member=plan.bags.s, q=plan.bags.s / d
    )
    if plan.bagged and plan.bags.s < d:
        info["bagging_rounds"] = bagging_rounds(d, plan.bags.s / d)
    common = dict(axis=axis, method=method, coupling=coupling, info=info)

    if method == "closed_form":
        terms, refits = _closed_form(plan, X, X_eval, axis, indices, coupling, client, verbose)
        return _summarise(terms, indices, population, n_refits=refits, **common)

    items = []
    if method == "refit":
        for index in indices:
            changed = []
            for pos, spec in enumerate(plan.specs):
                new = plan.bags.without(spec, axis, int(index), coupling)
                if not new.same_as(spec):
                    changed.append((pos, new))
            items.append((int(index), changed))
    work = [item for item in items if item[1]]

    if is_dask(X):
        # out of core: the members and every refit from the same 1 + k scans
        outputs, results = _shared_scan_outputs(plan, X, X_eval, work)
    else:
        outputs = _full_outputs(plan, X, X_eval, client, verbose)
    total, count_ = accumulate(outputs, X_eval.shape[0], plan.width)
    f = finish(total, count_, plan.fallback(X))
    if method == "oob":
        terms = _oob_terms(plan, X, outputs, f, axis, indices)
        return _summarise(terms, indices, population, n_refits=0, **common)

    if not is_dask(X):
        results = {}
        for k, value in run_tasks(
            _refit_task,
            work,
            (X, plan.y, plan.template, plan.kind, X_eval, plan.width),
            client=client,
            label=f"{axis} refits",
            key=lambda item: f"{axis[0]}i-refit-{axis}-{item[0]}",
            verbose=verbose,
        ):
            results[work[k][0]] = value
    terms = []
    for index, changed in items:
        new_outputs = list(outputs)
        for (pos, _), out in zip(changed, results.get(index, [])):
            new_outputs[pos] = out
        total_j, count_j = accumulate(new_outputs, X_eval.shape[0], plan.width)
        uncovered = (count_j == 0).any()  # only then is the fallback (a row read) needed
        g = finish(total_j, count_j, plan.fallback(X, axis, index) if uncovered else None)
        terms.append(_term(f, g, _compared(plan, axis, index)))
    refits = sum(len(changed) for _, changed in items)
    return _summarise(terms, indices, population, n_refits=refits, **common)


def _shared_scan_outputs(plan, X, X_eval, work):
    """PPA members and their refits fitted together from shared scans of a Dask array."""
    specs = list(plan.specs) + [spec for _, changed in work for _, spec in changed]
    members, info = fit_members_shared_scans(X, specs, plan.template)
    plan.column_means = info["feature_mean"]
    with one_blas_thread():
        outs = [
            member_output(plan.kind, m, spec, X_eval, plan.width)
            for m, spec in zip(members, specs)
        ]
    outputs, rest = outs[: len(plan.specs)], iter(outs[len(plan.specs) :])
    results = {index: [next(rest) for _ in changed] for index, changed in work}
    return outputs, results


def _full_outputs(plan, X, X_eval, client, verbose):
    outputs = [None] * len(plan.specs)
    for k, out in run_tasks(
        _fit_output_task,
        plan.specs,
        (X, plan.y, plan.template, plan.kind, X_eval, plan.width),
        client=client,
        label="members",
        key=lambda spec: f"stability-member-{spec.index:04d}",
        verbose=verbose,
    ):
        outputs[k] = out
    return outputs


def _oob_terms(plan, X, outputs, f, axis, indices):
    if not plan.bagged:
        raise ValueError(
            "method='oob' needs a bagged estimator (FeatureBagging*): a single estimator has no "
            "members that left a feature or an instance out"
        )
    n = X.shape[0]
    if axis == "instance":
        held = np.array([[_holds_row(spec, int(i), n) for i in indices] for spec in plan.specs])
        if held.all():
            raise ValueError(
                "method='oob' for instance instability needs instance sub-bagging "
                "(max_samples < 1): every member saw every row"
            )
    else:
        held = np.array([np.isin(indices, spec.features) for spec in plan.specs])
    terms = []
    for k, index in enumerate(indices):
        out_of_bag = [outputs[b] for b in range(len(plan.specs)) if not held[b, k]]
        if not out_of_bag:
            raise ValueError(
                f"method='oob': every member saw {axis} {int(index)}, so no out-of-bag estimate "
                "exists; use more members (n_estimators) or a smaller max_features/max_samples"
            )
        total, count = accumulate(out_of_bag, f.shape[0], plan.width)
        uncovered = (count == 0).any()
        g = finish(total, count, plan.fallback(X, axis, int(index)) if uncovered else None)
        terms.append(_term(f, g, _compared(plan, axis, int(index))))
    return terms


def _holds_row(spec, i, n):
    if spec.samples is not None:
        pos = np.searchsorted(spec.samples, i)
        return bool(pos < spec.samples.size and spec.samples[pos] == i)
    mask = spec.row_mask(i, i + 1)
    return True if mask is None else bool(mask[0])


# --------------------------------------------------------------------------------------------
# closed forms for least squares and ridge
# --------------------------------------------------------------------------------------------


def _closed_form(plan, X, X_eval, axis, indices, coupling, client, verbose):
    template = plan.template
    if plan.kind != "regressor" or type(template) not in (LinearRegression, Ridge):
        raise ValueError(
            "method='closed_form' needs LinearRegression or Ridge as the (member) estimator, "
            f"got {type(template).__name__}; use method='refit'"
        )
    if getattr(template, "positive", False):
        raise ValueError("method='closed_form' does not cover positive=True; use method='refit'")
    if isinstance(template, Ridge) and not isinstance(template.alpha, numbers.Real):
        raise ValueError("method='closed_form' needs a scalar Ridge alpha; use method='refit'")
    if plan.y.ndim != 1:
        raise ValueError("method='closed_form' needs a single target column")
    if plan.bagged and coupling != "shared":
        raise ValueError(
            "method='closed_form' updates each member from its own inverse, which needs "
            "coupling='shared' (an independent redraw is a new fit); use method='refit'"
        )
    items = []
    for spec in plan.specs:
        removals = []
        for index in indices:
            new = plan.bags.without(spec, axis, int(index), coupling)
            if not new.same_as(spec):
                removals.append((int(index), axis, new))
        items.append((spec, removals))
    per_member = [None] * len(items)
    for k, value in run_tasks(
        _closed_form_task,
        items,
        (X, plan.y, template, X_eval),
        client=client,
        label="closed forms",
        key=lambda item: f"closed-form-member-{item[0].index:04d}",
        verbose=verbose,
    ):
        per_member[k] = value
    B = len(plan.specs)
    f = sum(out["__full__"] for out in per_member) / B
    terms = []
    for index in indices:
        g = sum(out.get(int(index), out["__full__"]) for out in per_member) / B
        diff = f - g
        terms.append(float(np.mean(diff * diff)))
    refits = sum(len(removals) for _, removals in items)
    return terms, refits


class _LinearMember:
    """One least-squares or ridge member and its exact leave-one-out updates.

    ``primal``: ``A = (Z^T Z + P)^{-1}`` with an unpenalised intercept column (``P`` = ridge
    penalty). Removing a column is a Schur-complement downdate of ``A``; adding the replacement
    column a bordering; removing/adding a row a Sherman-Morrison update. ``dual`` (minimum-norm
    least squares without intercept and with fewer rows than features):
    ``beta = Z^T (Z Z^T)^{-1} y``, with the same updates on the Gram matrix of the rows.
    """

    def __init__(self, X, y, spec, template):
        self.X, self.y = X, y
        self.spec = spec
        self.intercept = bool(template.fit_intercept)
        self.alpha = float(template.alpha) if isinstance(template, Ridge) else 0.0
        rows = spec.rows(X.shape[0])
        self.rows = np.arange(X.shape[0]) if rows is None else np.asarray(rows)
        self.features = np.asarray(spec.features)
        Z = X[np.ix_(self.rows, self.features)]
        m, s = Z.shape
        if self.alpha > 0 or m > s + self.intercept:
            self.mode = "primal"
            Zt = self._augment(Z)
            penalty = np.full(Zt.shape[1], self.alpha)
            if self.intercept:
                penalty[-1] = 0.0
            M = Zt.T @ Zt + np.diag(penalty)
            self.A = self._inverse(M, "Z^T Z")
            self.Zt = Zt
            self.beta = self.A @ (Zt.T @ y[self.rows])
        elif not self.intercept and m <= s:
            self.mode = "dual"
            self.Z = Z
            self.Ginv = self._inverse(Z @ Z.T, "Z Z^T")
            self.dual = self.Ginv @ y[self.rows]
            self.beta = Z.T @ self.dual
        else:
            raise ValueError(
                f"method='closed_form': member {spec.index} has {m} rows for {s} features and "
                "an intercept; minimum-norm least squares with fit_intercept=True needs more "
                "rows than features + 1 (use fit_intercept=False, Ridge, or method='refit')"
            )

    def _augment(self, Z):
        return np.column_stack([Z, np.ones(Z.shape[0])]) if self.intercept else Z

    def _inverse(self, M, what):
        cond = np.linalg.cond(M)
        if not np.isfinite(cond) or cond > 1e12:
            raise ValueError(
                f"method='closed_form': {what} of member {self.spec.index} is singular or nearly "
                f"so (condition number {cond:.3g}); use method='refit'"
            )
        return np.linalg.inv(M)

    def _predict(self, features, coef, intercept, X_eval):
        return X_eval[:, features] @ coef + intercept

    def predict(self, X_eval):
        if self.mode == "primal" and self.intercept:
            return self._predict(self.features, self.beta[:-1], self.beta[-1], X_eval)
        return self._predict(self.features, self.beta, 0.0, X_eval)

    def refit_predict(self, new, axis, index, X_eval):
        if axis == "feature":
            removed = np.setdiff1d(self.features, new.features)
            added = np.setdiff1d(new.features, self.features)
            features, coef, intercept = self._without_feature(int(removed[0]), added)
        else:
            new_rows = new.rows(self.X.shape[0])
            if new_rows is None:
                new_rows = np.arange(self.X.shape[0])
            removed = np.setdiff1d(self.rows, new_rows)
            added = np.setdiff1d(new_rows, self.rows)
            if removed.size != 1 or added.size > 1:
                raise ValueError(
                    "method='closed_form' covers removing one row (and adding at "
                    "most one replacement); use method='refit'"
                )
            features, coef, intercept = self._without_instance(int(removed[0]), added)
        return self._predict(features, coef, intercept, X_eval)

    # feature removal (and the replacement column a shared-coupling bag draws)
    def _without_feature(self, j, added):
        a = int(np.searchsorted(self.features, j))
        keep_f = np.delete(self.features, a)
        if self.mode == "primal":
            A, beta, Zt = self.A, self.beta, self.Zt
            keep = np.delete(np.arange(A.shape[0]), a)
            col = A[keep, a]
            A_ = A[np.ix_(keep, keep)] - np.outer(col, A[a, keep]) / A[a, a]
            beta_ = beta[keep] - col * beta[a] / A[a, a]
            features = keep_f
            if added.size:
                r = int(added[0])
                z = self.X[self.rows, r]
                w = Zt[:, keep].T @ z
                Aw = A_ @ w
                sigma = z @ z + self.alpha - w @ Aw
                beta_r = (z @ self.y[self.rows] - w @ beta_) / sigma
                beta_ = np.concatenate([beta_ - Aw * beta_r, [beta_r]])
                # the replacement column goes last (after the intercept, if any): reorder
                order = list(range(len(keep_f))) + [len(beta_) - 1]
                if self.intercept:
                    order += [len(keep_f)]
                beta_ = beta_[order]
                features = np.concatenate([keep_f, [r]])
            if self.intercept:
                return features, beta_[:-1], beta_[-1]
            return features, beta_, 0.0
        # dual: the Gram matrix of the rows loses column j's outer product (and gains r's), a
        # rank-one or rank-two (Woodbury) update of its inverse
        Z, y = self.Z, self.y[self.rows]
        columns = [Z[:, a]]
        signs = [-1.0]
        Znew = np.delete(Z, a, axis=1)
        features = keep_f
        if added.size:
            r = int(added[0])
            z = self.X[self.rows, r]
            columns.append(z)
            signs.append(1.0)
            Znew = np.column_stack([Znew, z])
            features = np.concatenate([keep_f, [r]])
        U = np.column_stack(columns)
        GU = self.Ginv @ U
        core = np.diag(1.0 / np.array(signs)) + U.T @ GU
        if np.linalg.cond(core) > 1e12:
            raise ValueError(
                f"method='closed_form': without feature {j}, member {self.spec.index} has fewer "
                "features than rows and its minimum-norm fit is no longer an interpolation; "
                "use method='refit'"
            )
        G_new = self.Ginv - GU @ np.linalg.solve(core, GU.T)
        return features, Znew.T @ (G_new @ y), 0.0

    # instance removal (and the replacement row)
    def _without_instance(self, i, added):
        a = int(np.searchsorted(self.rows, i))
        y = self.y
        if self.mode == "primal":
            A, beta = self.A, self.beta
            zi = self.Zt[a]
            Az = A @ zi
            h = zi @ Az
            if not added.size and abs(1.0 - h) < 1e-12:
                raise ValueError(
                    f"method='closed_form': row {i} has leverage 1 in member {self.spec.index}; "
                    "use method='refit'"
                )
            if added.size:
                # remove row i and add row r together: a rank-two (Woodbury) update
                r = int(added[0])
                zr = self._augment(self.X[r, self.features][None, :])[0]
                U = np.column_stack([zi, zr])
                AU = A @ U
                core = np.diag([-1.0, 1.0]) + U.T @ AU
                c = self.Zt.T @ y[self.rows] - zi * y[i] + zr * y[r]
                beta1 = A @ c - AU @ np.linalg.solve(core, AU.T @ c)
            else:
                beta1 = beta - Az * (y[i] - zi @ beta) / (1.0 - h)
            if self.intercept:
                return self.features, beta1[:-1], beta1[-1]
            return self.features, beta1, 0.0
        # dual: drop row a of the Gram matrix (Schur downdate), border with the new row
        Ginv, Z = self.Ginv, self.Z
        keep = np.delete(np.arange(Z.shape[0]), a)
        col = Ginv[keep, a]
        G_ = Ginv[np.ix_(keep, keep)] - np.outer(col, Ginv[a, keep]) / Ginv[a, a]
        Zk, yk = Z[keep], y[self.rows[keep]]
        dual = G_ @ yk
        if added.size:
            r = int(added[0])
            zr = self.X[r, self.features]
            g = Zk @ zr
            Gg = G_ @ g
            sigma = zr @ zr - g @ Gg
            if sigma <= 1e-12 * (zr @ zr):
                raise ValueError(
                    f"method='closed_form': the replacement row {r} of member "
                    f"{self.spec.index} lies in the span of the others; use method='refit'"
                )
            dual_r = (y[r] - g @ dual) / sigma
            dual = np.concatenate([dual - Gg * dual_r, [dual_r]])
            Zk = np.vstack([Zk, zr])
        return self.features, Zk.T @ dual, 0.0
