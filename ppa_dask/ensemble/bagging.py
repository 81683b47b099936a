"""Feature-bagging ensembles (Sun, "Feature Bagging Provides Stability"; docs/design.md section 4).

Feature sub-bagging fits ``B`` members, each on ``s = round(q d)`` of the ``d`` features drawn
without replacement; at prediction time member ``b`` sees only its own columns and the outputs
are averaged. Instance sub-bagging (ratio ``p``) and both at once ("general bagging") are
options. Three estimators:

* :class:`FeatureBaggingRegressor` and :class:`FeatureBaggingClassifier` for any scikit-learn
  estimator (the classifier averages ``predict_proba``, or votes when the members have none);
* :class:`FeatureBaggingPPA`: PPA members whose output is the reconstruction of the input from
  ``k`` curvilinear components, averaged per feature over the members that hold it, with the
  per-sample reconstruction error as a score.

How the members are drawn
-------------------------
Everything random is a function of one integer seed and the member's number ``b``:
member ``b``'s features are the first ``s`` entries of a permutation of the ``d`` features drawn
from ``numpy.random.default_rng([seed, b, 0])`` (kept sorted), its instances the first ``m`` of a
permutation of the ``n`` rows from ``[seed, b, 1]``, and its estimator's ``random_state`` comes from
``[seed, b, 2]``. So member ``b`` does not depend on ``B``, on which worker fits it, or when; and
removing a feature ``j`` has a natural *shared* coupling (``coupling="shared"``, the default):
the refit keeps every bag that did not contain ``j`` and a bag that did takes the next feature
of its own permutation instead, drawn from the same seed. ``coupling="independent"`` redraws the
bags of the perturbed axis from fresh seeds (the affected-axis resampling of the paper's
section 3). :mod:`ppa_dask.stability` uses both.

:class:`FeatureBaggingPPA` draws its instance subsets differently: row ``i`` belongs to member
``b`` when a 64-bit hash of ``(member seed, i)`` falls below ``p`` (a Bernoulli subsample of
expected size ``p n``). This membership needs no index list of length ``n`` and is the same for
a numpy array and a Dask array of any chunking, which is what lets all members of a
:class:`FeatureBaggingPPA` be fitted together from one scan of an out-of-core array per step.

Where members are fitted
------------------------
With a current distributed Client the members are Dask tasks (futures with ``pure=False``,
collected with ``as_completed``, retried on failure; a text progress bar with ``verbose=1``);
otherwise they are fitted one by one in process. With ``store=DIR`` every finished member is
written to ``DIR`` as one ``.npz`` file (arrays and JSON, never pickle) and a later fit with the
same parameters and data loads those and fits only the rest, so an interrupted fit resumes.
Resumption covers members the model-file encoder can hold -- PPA, linear models, decision
trees, SVMs, nearest neighbours and pipelines of those; members holding code (a function
parameter) or state that is not plain data (forests, boosting) cannot be written without
pickle, so they stay in memory (the store then records only the manifest). A member file
that cannot be used (damaged, of an earlier layout, naming a class outside the allow-list)
gives a warning naming it and the member is fitted again (:mod:`ppa_dask.store.members`).
A Dask-array fit of :class:`FeatureBaggingPPA` writes its members when its shared scans finish.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted, validate_data

from ppa_dask.ppa.estimator import PPA
from ppa_dask.ppa.kernels import row_hash
from ppa_dask.ppa.multifit import fit_members_shared_scans
from ppa_dask.store.encoding import register_estimator, register_record
from ppa_dask.store.members import MemberStore, fingerprint
from ppa_dask.store.seam import labelled, labelled_fit
from ppa_dask.utils.arrays import check_dask_samples, is_dask
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.compute import current_client
from ppa_dask.utils.fanout import run_tasks
from ppa_dask.utils.params import (
    AnyOf,
    Integer,
    InvalidParameterError,
    Options,
    Real,
    check_param,
    is_int,
)
from ppa_dask.utils.seeds import (
    DATA_SEED_MAX,
    SEED_MAX,
    child_seed,
    ensemble_seed,
    key_rng,
    set_random_state,
)

__all__ = [
    "FeatureBaggingRegressor",
    "FeatureBaggingClassifier",
    "FeatureBaggingPPA",
    "MemberSpec",
]

COUPLINGS = ("shared", "independent")

# stream tags of key_rng(seed, b, tag, ...): one independent stream per random choice
_FEATURES, _SAMPLES, _MEMBER_SEED = 0, 1, 2
_FEATURES_REDRAWN, _SEED_REDRAWN_F, _SAMPLES_REDRAWN, _SEED_REDRAWN_I = 3, 4, 5, 6
_ROW_HASH, _ROW_HASH_REDRAWN = 7, 8


# --------------------------------------------------------------------------------------------
# members and how they are drawn
# --------------------------------------------------------------------------------------------


@register_record
@dataclass(frozen=True, eq=False)
class MemberSpec:
    """What one member is fitted on (all indices refer to the original data).

    Attributes
    ----------
    index : int
        The member's number ``b``.
    features : ndarray of int
        Sorted columns the member sees.
    samples : ndarray of int or None
        Sorted rows it is fitted on (fixed-size subsample); None for a hash membership or all.
    seed : int or None
        ``random_state`` given to the member's estimator (None leaves the estimator's own).
    row_seed : int or None
        Hash seed of a Bernoulli row membership (:class:`FeatureBaggingPPA`).
    row_fraction : float
        Probability that a row belongs, with ``row_seed``.
    excluded_rows : tuple of int
        Rows taken out of the membership (leave-one-instance-out refits).
    """

    index: int
    features: np.ndarray
    samples: np.ndarray | None = None
    seed: int | None = None
    row_seed: int | None = None
    row_fraction: float = 1.0
    excluded_rows: tuple = field(default=())

    def row_mask(self, start, stop):
        """Membership of the global rows ``start`` to ``stop - 1`` (bool array); None for all rows."""
        if self.samples is not None:
            lo, hi = np.searchsorted(self.samples, [start, stop])
            mask = np.zeros(stop - start, dtype=bool)
            mask[self.samples[lo:hi] - start] = True
            return mask
        if self.row_seed is None and not self.excluded_rows:
            return None
        if self.row_seed is None:
            mask = np.ones(stop - start, dtype=bool)
        else:
            mask = row_hash(start, stop, self.row_seed) < _hash_threshold(self.row_fraction)
        for i in self.excluded_rows:
            if start <= i < stop:
                mask[i - start] = False
        return mask

    def rows(self, n):
        """Sorted rows of an ``n``-row array the member is fitted on, or None for all."""
        if self.samples is not None:
            return self.samples
        mask = self.row_mask(0, n)
        return None if mask is None else np.flatnonzero(mask)

    def same_as(self, other):
        """True when ``other`` draws exactly the same features, rows and seed."""
        return (
            np.array_equal(self.features, other.features)
            and (self.samples is None) == (other.samples is None)
            and (self.samples is None or np.array_equal(self.samples, other.samples))
            and self.seed == other.seed
            and self.row_seed == other.row_seed
            and self.row_fraction == other.row_fraction
            and tuple(self.excluded_rows) == tuple(other.excluded_rows)
        )

    def to_json(self):
        return dict(
            index=int(self.index),
            features=[int(v) for v in self.features],
            samples=None if self.samples is None else [int(v) for v in self.samples],
            seed=self.seed,
            row_seed=self.row_seed,
            row_fraction=float(self.row_fraction),
            excluded_rows=[int(v) for v in self.excluded_rows],
        )


def _hash_threshold(fraction):
    # rows whose 64-bit hash is below fraction * 2^64 belong (fraction 1: every row)
    if fraction >= 1:
        return np.uint64(2**64 - 1)
    return np.uint64(min(int(fraction * 2.0**64), 2**64 - 1))


class BagPlan:
    """The members of an ensemble as functions of ``(seed, b)``, and their leave-one-out redraws.

    Parameters
    ----------
    seed : int
    n_samples, n_features : int
    n_estimators : int
    n_features_per_member : int
        ``s``.
    samples : None, int or float
        ``None``: every member sees all rows. An int ``m``: a fixed-size subsample of ``m`` rows
        (``sampling="fixed"``). A float ``p``: a hash (Bernoulli) membership of probability
        ``p`` (``sampling="hash"``).
    own_seeds : bool
        Give each member its own ``random_state`` (ensembles); False keeps the estimator's own
        (a single, non-bagged estimator).
    """

    def __init__(
        self,
        seed,
        n_samples,
        n_features,
        n_estimators,
        n_features_per_member,
        samples=None,
        own_seeds=True,
    ):
        self.seed = int(seed)
        self.n_samples = int(n_samples)
        self.n_features = int(n_features)
        self.n_estimators = int(n_estimators)
        self.s = int(n_features_per_member)
        self.samples = samples
        self.own_seeds = own_seeds

    @property
    def sampling(self):
        if self.samples is None:
            return None
        return "hash" if isinstance(self.samples, float) else "fixed"

    def _feature_order(self, b):
        return key_rng(self.seed, b, _FEATURES).permutation(self.n_features)

    def _sample_order(self, b):
        return key_rng(self.seed, b, _SAMPLES).permutation(self.n_samples)

    def member(self, b):
        features = np.sort(self._feature_order(b)[: self.s])
        seed = child_seed(self.seed, b, _MEMBER_SEED, high=SEED_MAX) if self.own_seeds else None
        if self.sampling == "fixed":
            m = self.samples
            samples = None if m >= self.n_samples else np.sort(self._sample_order(b)[:m])
            return MemberSpec(b, features, samples=samples, seed=seed)
        if self.sampling == "hash":
            row_seed = child_seed(self.seed, b, _ROW_HASH, high=DATA_SEED_MAX)
            return MemberSpec(
                b, features, seed=seed, row_seed=row_seed, row_fraction=float(self.samples)
            )
        return MemberSpec(b, features, seed=seed)

    def members(self):
        return [self.member(b) for b in range(self.n_estimators)]

    def without_feature(self, spec, j, coupling):
        """Member ``spec`` refitted on the data without column ``j`` (original indices)."""
        b, keep = spec.index, min(self.s, self.n_features - 1)
        if coupling == "shared":
            if j not in spec.features:
                return spec
            order = self._feature_order(b)
            seed = spec.seed
        else:
            order = key_rng(self.seed, b, _FEATURES_REDRAWN, j).permutation(self.n_features)
            seed = child_seed(self.seed, b, _SEED_REDRAWN_F, j, high=SEED_MAX)
        features = np.sort(order[order != j][:keep])
        return MemberSpec(
            b, features, spec.samples, seed, spec.row_seed, spec.row_fraction, spec.excluded_rows
        )

    def without_instance(self, spec, i, coupling):
        """Member ``spec`` refitted on the data without row ``i``."""
        b = spec.index
        shared = coupling == "shared"
        seed = spec.seed if shared else child_seed(self.seed, b, _SEED_REDRAWN_I, i, high=SEED_MAX)
        if self.sampling == "fixed" and spec.samples is not None:
            keep = min(self.samples, self.n_samples - 1)
            if shared:
                if i not in spec.samples:
                    return spec
                order = self._sample_order(b)
            else:
                order = key_rng(self.seed, b, _SAMPLES_REDRAWN, i).permutation(self.n_samples)
            samples = np.sort(order[order != i][:keep])
            return MemberSpec(b, spec.features, samples, seed)
        if self.sampling == "hash":
            row_seed = spec.row_seed
            if shared:
                if not spec.row_mask(i, i + 1)[0]:
                    return spec
            else:
                row_seed = child_seed(self.seed, b, _ROW_HASH_REDRAWN, i, high=DATA_SEED_MAX)
            return MemberSpec(b, spec.features, None, seed, row_seed, spec.row_fraction, (int(i),))
        # every row: drop row i
        return MemberSpec(
            b, spec.features, None, seed, None, 1.0, tuple(spec.excluded_rows) + (int(i),)
        )

    def without(self, spec, axis, index, coupling):
        if axis == "feature":
            return self.without_feature(spec, index, coupling)
        return self.without_instance(spec, index, coupling)


# --------------------------------------------------------------------------------------------
# fitting one member, and its output
# --------------------------------------------------------------------------------------------


def member_data(spec, X, y=None):
    """The rows and columns of ``X`` (and ``y``) member ``spec`` is fitted on."""
    rows = spec.rows(X.shape[0])
    if rows is None:
        Xm = X[:, spec.features]
        return Xm, y
    Xm = X[np.ix_(rows, spec.features)]
    return Xm, (None if y is None else y[rows])


def fit_member(spec, X, y, template):
    """Clone ``template``, seed it from ``spec`` and fit it on the member's data."""
    estimator = clone(template)
    if spec.seed is not None:
        set_random_state(estimator, spec.seed)
    Xm, ym = member_data(spec, X, y)
    if y is None:
        estimator.fit(Xm)
    else:
        estimator.fit(Xm, ym)
    return estimator


def member_output(kind, estimator, spec, X, width):
    """``(columns, values)``: where member ``spec``'s output on ``X`` goes in the ensemble's.

    ``kind`` is ``"regressor"`` (``predict``, ``width`` outputs), ``"classifier"`` (class
    probabilities in the ensemble's ``width`` classes; a member without ``predict_proba`` votes)
    or ``"ppa"`` (the member's k-component reconstruction of its own features).
    """
    Xm = X[:, spec.features]
    n = X.shape[0]
    if kind == "regressor":
        return np.arange(width), np.asarray(estimator.predict(Xm), dtype=np.float64).reshape(n, -1)
    if kind == "classifier":
        full = np.zeros((n, width))
        classes = np.asarray(estimator.classes_).astype(np.intp)
        if hasattr(estimator, "predict_proba"):
            full[:, classes] = estimator.predict_proba(Xm)
        else:
            full[np.arange(n), np.asarray(estimator.predict(Xm)).astype(np.intp)] = 1.0
        return np.arange(width), full
    if kind == "ppa":
        # members keep k components, so this is the k-component reconstruction
        return spec.features, estimator.inverse_transform(estimator.transform(Xm))
    raise ValueError(f"unknown output kind {kind!r}")


def accumulate(outputs, n_rows, width):
    """Sum member outputs ``[(columns, values), ...]`` per column, in the order given."""
    total = np.zeros((n_rows, width))
    count = np.zeros(width)
    for cols, values in outputs:
        total[:, cols] += values
        count[cols] += 1
    return total, count


def finish(total, count, fallback=None):
    """Average per column; a column no member wrote takes ``fallback`` (or 0)."""
    out = np.empty_like(total)
    held = count > 0
    out[:, held] = total[:, held] / count[held]
    if (~held).any():
        out[:, ~held] = 0.0 if fallback is None else np.asarray(fallback)[~held]
    return out


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------


#: ``max_features``: a count ``s >= 1`` or a ratio ``q`` in (0, 1] (an int is a count).
MAX_FEATURES = AnyOf(Integer(1), Real(0, 1, closed="right"))
#: ``max_samples``: None (every row), a count ``m >= 1`` or a ratio ``p`` in (0, 1].
MAX_SAMPLES = AnyOf(None, Integer(1), Real(0, 1, closed="right"))


def resolve_max_features(max_features, n_features):
    """``s`` from ``max_features`` (a ratio ``q`` in (0, 1] or a count ``1 <= s <= d``)."""
    value = check_param("max_features", max_features, MAX_FEATURES)
    if isinstance(value, int):
        if value > n_features:
            raise InvalidParameterError(
                f"max_features={value} asks for {value} features per member, but X has "
                f"{n_features} features; use 1 <= max_features <= {n_features} (or a ratio in "
                "(0, 1])."
            )
        return value
    return max(1, min(n_features, int(np.floor(value * n_features + 0.5))))


def resolve_max_samples(max_samples, n_samples, as_fraction=False):
    """None (all rows), or the subsample: ``m`` rows (int) or, with ``as_fraction``, ``p``."""
    value = check_param("max_samples", max_samples, MAX_SAMPLES)
    if value is None:
        return None
    if isinstance(value, int):
        if value > n_samples:
            raise InvalidParameterError(
                f"max_samples={value} asks for {value} rows per member, but X has {n_samples} "
                f"rows; use 1 <= max_samples <= {n_samples} (or a ratio in (0, 1])."
            )
        if as_fraction:
            return None if value == n_samples else value / n_samples
        return None if value == n_samples else value
    if value == 1.0:
        return None
    if as_fraction:
        return value
    return max(1, min(n_samples, int(np.floor(value * n_samples + 0.5))))


def check_n_estimators(n_estimators):
    """``n_estimators`` as an int >= 1."""
    return check_param("n_estimators (the number of bags B)", n_estimators, Integer(1))


def check_coupling(coupling):
    """``coupling``, one of :data:`COUPLINGS`."""
    return check_param("coupling", coupling, Options(*COUPLINGS))


def _describe(value):
    """A JSON description of a parameter (an estimator by its class and parameters)."""
    if hasattr(value, "get_params"):
        params = {k: _describe(v) for k, v in sorted(value.get_params(deep=False).items())}
        return {"class": f"{type(value).__module__}.{type(value).__qualname__}", "params": params}
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    if isinstance(value, numbers.Number):
        return value.item() if hasattr(value, "item") else float(value)
    return repr(value)


# --------------------------------------------------------------------------------------------
# the ensembles
# --------------------------------------------------------------------------------------------


class _FeatureBagging(BaseEstimator):
    """Shared machinery: validation, the bag plan, fitting members (tasks, store, resume)."""

    # with bag_plan and member_template, the bagged-estimator interface stability refits through
    # (ppa_dask.ensemble.protocol): what a member outputs, one of MEMBER_KINDS
    member_kind = None
    # parameters that do not change which members a fit draws (left out of the store identity)
    _not_in_identity = ("n_estimators", "coupling", "store", "retries", "verbose")

    def _default_estimator(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def member_template(self):
        """A fresh, unfitted clone of the member estimator (the default one when
        ``estimator`` is None), checked to have the methods the ensemble calls."""
        estimator = self._default_estimator() if self.estimator is None else self.estimator
        if not (hasattr(estimator, "fit") and hasattr(estimator, "get_params")):
            raise TypeError(
                f"estimator must be a scikit-learn estimator with fit and get_params, got "
                f"{type(estimator).__name__}"
            )
        needed = "transform" if self.member_kind == "ppa" else "predict"
        if not callable(getattr(estimator, needed, None)):
            raise TypeError(
                f"estimator {type(estimator).__name__} has no {needed} method; a "
                f"{type(self).__name__} needs members with fit and {needed}."
            )
        return clone(estimator)

    def _check_bagging(self, n_samples, n_features, sample_fraction=False):
        B = check_n_estimators(self.n_estimators)
        s = resolve_max_features(self.max_features, n_features)
        samples = resolve_max_samples(self.max_samples, n_samples, as_fraction=sample_fraction)
        check_coupling(self.coupling)
        if self.store is not None and not is_int(self.random_state):
            raise ValueError(
                "store needs an int random_state, so that a resumed fit draws the same members "
                f"(got random_state={self.random_state!r})"
            )
        return B, s, samples

    def bag_plan(self, n_samples, n_features):
        """The :class:`BagPlan` of a fit on ``n_samples x n_features`` data (validates params)."""
        B, s, samples = self._check_bagging(n_samples, n_features, self.member_kind == "ppa")
        seed = ensemble_seed(self.random_state)
        return BagPlan(seed, n_samples, n_features, B, s, samples)

    def _identity(self, seed, data_key):
        params = {
            k: _describe(v)
            for k, v in sorted(self.get_params(deep=False).items())
            if k not in self._not_in_identity
        }
        if params.get("estimator") is None:
            params["estimator"] = _describe(self._default_estimator())
        cls = type(self)
        return {
            # the class name alone: a module path would change when the code moves
            "ensemble": cls.__name__,
            "params": params,
            "seed": int(seed),
            "data": data_key,
        }

    def _open_store(self, seed, data_key):
        if self.store is None:
            return None
        return MemberStore(self.store, self._identity(seed, data_key))

    @staticmethod
    def _member_check(spec):
        """What a member file keeps to recognise its member: small values, the rows as a digest
        (a member is a function of the seed, so its sample indices are never stored)."""
        samples = None if spec.samples is None else np.asarray(spec.samples, dtype=np.int64)
        return {
            "features": [int(v) for v in spec.features],
            "seed": None if spec.seed is None else int(spec.seed),
            "row_seed": None if spec.row_seed is None else int(spec.row_seed),
            "row_fraction": float(spec.row_fraction),
            "rows": fingerprint(samples, np.asarray(spec.excluded_rows, dtype=np.int64)),
        }

    def _load_members(self, specs, store):
        """Members in spec order from ``store``; None where one is to be fitted (not on disk,
        or a file that cannot be used: a MemberFileWarning names it, and the refit rewrites it)."""
        members = [None] * len(specs)
        if store is not None:
            on_disk = set(store.indices())
            for pos, spec in enumerate(specs):
                if spec.index in on_disk:
                    members[pos] = store.load_usable(spec.index, self._member_check(spec))
        return members

    def _fit_members(self, specs, X, y, template, store):
        """Fitted members in spec order: loaded from ``store`` or fitted as tasks."""
        members = self._load_members(specs, store)
        todo = [pos for pos, m in enumerate(members) if m is None]
        client = current_client()
        tasks = run_tasks(
            _fit_member_task,
            [specs[pos] for pos in todo],
            (X, y, template),
            client=client,
            retries=self.retries,
            label=f"{type(self).__name__} members",
            key=lambda spec: f"bag-member-{spec.index:04d}",
            verbose=self.verbose,
        )
        for k, estimator in tasks:
            pos = todo[k]
            members[pos] = estimator
            if store is not None:
                store.save(specs[pos].index, estimator, check=self._member_check(specs[pos]))
        self.n_members_loaded_ = len(specs) - len(todo)
        return members

    def _record(self, plan, specs, members):
        self.seed_ = plan.seed
        self.estimators_ = members
        self.estimators_features_ = [spec.features for spec in specs]
        self.member_specs_ = list(specs)
        self.n_features_per_member_ = plan.s
        self.member_seeds_ = np.array([spec.seed for spec in specs])
        self.n_members_per_feature_ = np.bincount(
            np.concatenate(self.estimators_features_), minlength=plan.n_features
        )

    def _validate_y(self, X, y):
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        n_y = len(y) if hasattr(y, "__len__") else None
        n_X = X.shape[0] if hasattr(X, "shape") else (len(X) if hasattr(X, "__len__") else None)
        if n_y is not None and n_X is not None and n_y != n_X:
            raise ValueError(
                f"y has {n_y} entries but X has {n_X} rows (samples); they must match."
            )

    def _validate_training_data(self, X, y, y_numeric):
        """X and y checked as scikit-learn does; NaN in X only if the members accept it."""
        self._check_not_dask(X)
        self._validate_y(X, y)
        allow_nan = self._members_allow_nan()
        X, y = validate_data(
            self,
            X,
            y,
            reset=True,
            multi_output=True,
            y_numeric=y_numeric,
            ensure_all_finite="allow-nan" if allow_nan else True,
        )
        if y.ndim == 2 and y.shape[1] == 1:
            from sklearn.utils.validation import column_or_1d

            y = column_or_1d(y, warn=True)
        return X, y

    def _members_allow_nan(self):
        from sklearn.utils import get_tags

        estimator = self._default_estimator() if self.estimator is None else self.estimator
        try:
            return bool(get_tags(estimator).input_tags.allow_nan)
        except Exception:  # not a scikit-learn estimator: the template check reports it
            return False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self._members_allow_nan()
        return tags

    def _check_not_dask(self, X, what="fit"):
        if is_dask(X):
            raise TypeError(
                f"{type(self).__name__}.{what} takes in-memory data (a Dask array was given); "
                "call .compute() on data that fits in memory. Out-of-core ensembles: "
                "FeatureBaggingPPA."
            )

    def _member_outputs(self, X, width):
        X = np.asarray(X, dtype=np.float64) if X.dtype.kind not in "fc" else X
        specs = self._specs_for_output()
        with one_blas_thread():
            return [
                member_output(self.member_kind, est, spec, X, width)
                for est, spec in zip(self.estimators_, specs)
            ]

    def _specs_for_output(self):
        return [MemberSpec(b, f) for b, f in enumerate(self.estimators_features_)]


def _call_method(block, estimator, name):
    return getattr(estimator, name)(block)


def _most_probable(proba, classes):
    return classes[np.argmax(proba, axis=1)]


def _fit_member_task(spec, X, y, template):
    with one_blas_thread():
        return fit_member(spec, X, y, template)


class _SklearnBagging(_FeatureBagging):
    """Regressor and classifier: any scikit-learn estimator as the member."""

    def __init__(
        self,
        estimator=None,
        n_estimators=10,
        max_features=0.5,
        max_samples=None,
        coupling="shared",
        random_state=None,
        store=None,
        retries=2,
        verbose=0,
    ):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.max_samples = max_samples
        self.coupling = coupling
        self.random_state = random_state
        self.store = store
        self.retries = retries
        self.verbose = verbose

    def _fit_arrays(self, X, y_fit):
        template = self.member_template()
        n, d = X.shape
        plan = self.bag_plan(n, d)
        specs = plan.members()
        store = self._open_store(plan.seed, fingerprint(X, y_fit))
        members = self._fit_members(specs, X, y_fit, template, store)
        self._record(plan, specs, members)
        self.estimators_samples_ = [
            np.arange(n) if spec.samples is None else spec.samples for spec in specs
        ]
        return self

    def _check_predict_input(self, X):
        check_is_fitted(self)
        if is_dask(X):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has shape {X.shape}, but {type(self).__name__} is expecting "
                    f"{self.n_features_in_} features as input."
                )
            return X
        return validate_data(self, X, reset=False, ensure_all_finite=False)


@register_estimator
class FeatureBaggingRegressor(RegressorMixin, _SklearnBagging):
    """Feature (and instance) sub-bagging of any scikit-learn regressor.

    Member ``b`` is fitted on ``s = round(q d)`` columns drawn without replacement (and, with
    ``max_samples``, on ``m`` rows drawn without replacement); it predicts from its own columns
    and the ensemble averages the members' predictions.

    Parameters
    ----------
    estimator : estimator, default=None
        The member (cloned); None uses ``DecisionTreeRegressor()``, as scikit-learn's
        ``BaggingRegressor`` does.
    n_estimators : int, default=10
        Number of members ``B`` (``>= 1``). :func:`ppa_dask.stability.bagging_rounds` gives the
        order ``d (1 - q) / q`` past which more rounds change the feature stability little.
    max_features : float or int, default=0.5
        A ratio ``q`` in (0, 1] (``s = round(q d)``, at least 1) or a count ``s``.
    max_samples : float, int or None, default=None
        Instance sub-bagging: a ratio ``p`` in (0, 1] (``m = round(p n)``) or a count ``m``;
        None fits every member on all rows. With ``max_features`` too: general bagging.
    coupling : {"shared", "independent"}, default="shared"
        How a refit without one feature or instance draws its bags (used by
        :mod:`ppa_dask.stability`): ``"shared"`` keeps every bag the removal does not touch and
        replaces the removed index by the next one of the bag's own permutation;
        ``"independent"`` redraws the bags of the perturbed axis from fresh seeds.
    random_state : int, RandomState, Generator or None, default=None
        Seeds every draw (members are functions of ``(seed, b)`` only).
    store : str or path-like or None, default=None
        Directory where each finished member is written (one ``.npz``, no pickle) and from
        which a later fit with the same parameters and data resumes. Needs an int
        ``random_state``. Members the model-file encoder cannot hold (a function parameter,
        forests) are kept in memory.
    retries : int, default=2
        Retries of a failed member task on a Dask cluster.
    verbose : int, default=0
        Show a text progress bar of the member fits when > 0.

    Attributes
    ----------
    estimators_ : list of estimators
    estimators_features_ : list of ndarray
        Sorted columns of each member (as in scikit-learn's ``BaggingRegressor``).
    estimators_samples_ : list of ndarray
        Sorted rows of each member.
    member_specs_ : list of MemberSpec
        Each member's draw (features, rows, seed); :mod:`ppa_dask.stability` redraws them.
    seed_ : int
        The seed the members were drawn from.
    member_seeds_ : ndarray of int
        ``random_state`` given to each member's estimator.
    n_features_per_member_ : int
        ``s``.
    n_members_per_feature_ : ndarray of shape (n_features,)
        How many members hold each feature.
    n_members_loaded_ : int
        Members read from ``store`` instead of fitted.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from ppa_dask import FeatureBaggingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 10)); y = X @ np.arange(10.0) + rng.normal(size=200)
    >>> model = FeatureBaggingRegressor(LinearRegression(), n_estimators=20, max_features=0.5,
    ...                                 random_state=0).fit(X, y)
    >>> [len(f) for f in model.estimators_features_[:3]], model.predict(X[:2]).shape
    ([5, 5, 5], (2,))
    """

    member_kind = "regressor"

    def _default_estimator(self):
        from sklearn.tree import DecisionTreeRegressor

        return DecisionTreeRegressor()

    def fit(self, X, y):
        """Fit the ``n_estimators`` members (Dask tasks on the current Client, if any).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        X, y = self._validate_training_data(X, y, y_numeric=True)
        self.n_outputs_ = 1 if y.ndim == 1 else y.shape[1]
        return self._fit_arrays(X, y)

    def predict(self, X):
        """Average of the members' predictions, each from its own columns.

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs); lazy for a Dask array.
        """
        X = self._check_predict_input(X)
        if is_dask(X):
            if X.numblocks[1] != 1:
                X = X.rechunk({1: -1})
            if self.n_outputs_ == 1:
                return X.map_blocks(
                    _call_method,
                    self,
                    "predict",
                    drop_axis=1,
                    dtype=np.float64,
                    meta=np.empty((0,)),
                )
            return X.map_blocks(
                _call_method,
                self,
                "predict",
                dtype=np.float64,
                chunks=(X.chunks[0], (self.n_outputs_,)),
                meta=np.empty((0, 0)),
            )
        total, count = accumulate(
            self._member_outputs(X, self.n_outputs_), X.shape[0], self.n_outputs_
        )
        out = total / len(self.estimators_)
        return out[:, 0] if self.n_outputs_ == 1 else out


@register_estimator
class FeatureBaggingClassifier(ClassifierMixin, _SklearnBagging):
    """Feature (and instance) sub-bagging of any scikit-learn classifier.

    Parameters and attributes are those of :class:`FeatureBaggingRegressor` (the default member
    is ``DecisionTreeClassifier()``), plus ``classes_``. Members are fitted on the class indices
    ``0 .. n_classes - 1``; ``predict_proba`` averages their class probabilities (a member
    without ``predict_proba`` contributes a one-hot vote) and ``predict`` takes the most
    probable class.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from ppa_dask import FeatureBaggingClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 6)); y = np.where(X[:, 0] + X[:, 1] > 0, "a", "b")
    >>> clf = FeatureBaggingClassifier(LogisticRegression(), n_estimators=15,
    ...                                max_features=0.5, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape, bool(clf.score(X, y) > 0.7)
    ((2, 2), True)
    """

    member_kind = "classifier"

    def _default_estimator(self):
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier()

    def fit(self, X, y):
        """Fit the ``n_estimators`` members on the encoded classes.

        Returns
        -------
        self
        """
        X, y = self._validate_training_data(X, y, y_numeric=False)
        if y.ndim != 1:
            raise ValueError(f"y must be one column of class labels, got shape {y.shape}")
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        return self._fit_arrays(X, encoded.astype(np.intp))

    def predict_proba(self, X):
        """Average of the members' class probabilities, each from its own columns."""
        X = self._check_predict_input(X)
        width = len(self.classes_)
        if is_dask(X):
            if X.numblocks[1] != 1:
                X = X.rechunk({1: -1})
            return X.map_blocks(
                _call_method,
                self,
                "predict_proba",
                dtype=np.float64,
                chunks=(X.chunks[0], (width,)),
                meta=np.empty((0, 0)),
            )
        total, _ = accumulate(self._member_outputs(X, width), X.shape[0], width)
        return total / len(self.estimators_)

    def predict(self, X):
        """The most probable class."""
        proba = self.predict_proba(X)
        if is_dask(proba):
            return proba.map_blocks(
                _most_probable,
                self.classes_,
                drop_axis=1,
                dtype=self.classes_.dtype,
                meta=np.empty((0,), self.classes_.dtype),
            )
        return self.classes_[np.argmax(proba, axis=1)]


# xarray forms of FeatureBaggingPPA's methods (ppa_dask.store.seam stacks the input, maps the
# array method over the rows without NaN and unstacks what these say)
_USE = "reconstruct xarray input"


def _check_fitted(estimator, *args, **kwargs):
    check_is_fitted(estimator)


def _reconstruct_labelled(rows):
    return rows.features(rows.map((rows.n_kept,)), keep_attrs=True)


def _error_labelled(rows):
    values = rows.map((), method="reconstruction_error")
    return rows.per_sample(values, (), {}, "reconstruction_error")


def _score_labelled(rows, y=None):
    return -float(_error_labelled(rows).mean(skipna=True))


@register_estimator
class FeatureBaggingPPA(_FeatureBagging):
    """Feature-bagged Principal Polynomial Analysis: averaged k-component reconstructions.

    Member ``b`` is a :class:`~ppa_dask.PPA` with ``n_components=k`` fitted on ``s = round(q d)``
    of the features (and, with ``max_samples``, on a hash subsample of the rows, see the module
    docstring). The ensemble's output for a sample is its reconstruction in input units: each
    feature is the average, over the members that hold that feature, of the members'
    k-component reconstructions (a feature held by no member is its training mean). The
    per-sample squared reconstruction error is the score (:meth:`reconstruction_error`).

    A Dask array is fitted out of core: all members together, from one scan of the data per
    PPA step (every member's block moments taken in the same pass over each chunk), not one
    scan per member. A numpy array is fitted member by member as Dask tasks on the current
    Client (or in process).

    Parameters
    ----------
    estimator : PPA or None, default=None
        Template of the members (cloned; its ``n_components`` and ``random_state`` are set per
        member). None uses ``PPA()``.
    n_components : int, default=1
        ``k``, the components each member keeps (``k < s``).
    n_estimators : int, default=10
    max_features : float or int, default=0.5
    max_samples : float, int or None, default=None
        Expected fraction ``p`` of the rows in each member (an int ``m`` means ``p = m / n``);
        None: all rows.
    coupling : {"shared", "independent"}, default="shared"
    random_state : int, RandomState, Generator or None, default=None
    store : str or path-like or None, default=None
        Directory of member files (``.npz``, arrays and JSON); a later fit resumes from it.
    retries : int, default=2
    verbose : int, default=0

    Attributes
    ----------
    estimators_ : list of PPA
    estimators_features_ : list of ndarray
    estimators_samples_ : list of ndarray or None
        Sorted rows of each member (None after a Dask fit: ``member_specs_[b].row_mask(start,
        stop)`` gives member ``b``'s rows of any range without an index list of length ``n``).
    member_specs_ : list of MemberSpec
        Each member's draw (features, row membership, seed).
    feature_mean_ : ndarray of shape (n_features,)
        Training mean of every feature (the output of a feature no member holds).
    n_members_per_feature_ : ndarray of shape (n_features,)
    n_samples_per_member_ : ndarray of int
        Rows each member was fitted on.
    n_passes_ : int
        Scans of the data made by ``fit`` (Dask input: ``1 + k`` for all members together;
        numpy input: per member).
    seed_, member_seeds_, n_features_per_member_, n_members_loaded_, n_features_in_

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import FeatureBaggingPPA
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(-1, 1, 1000)
    >>> X = np.column_stack([t, t**2, np.sin(2 * t), t**3]) + 0.01 * rng.normal(size=(1000, 4))
    >>> model = FeatureBaggingPPA(n_components=1, n_estimators=8, max_features=0.75,
    ...                           random_state=0).fit(X)
    >>> model.reconstruct(X[:3]).shape, model.reconstruction_error(X[:3]).shape
    ((3, 4), (3,))
    """

    member_kind = "ppa"

    def __init__(
        self,
        estimator=None,
        n_components=1,
        n_estimators=10,
        max_features=0.5,
        max_samples=None,
        coupling="shared",
        random_state=None,
        store=None,
        retries=2,
        verbose=0,
    ):
        self.estimator = estimator
        self.n_components = n_components
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.max_samples = max_samples
        self.coupling = coupling
        self.random_state = random_state
        self.store = store
        self.retries = retries
        self.verbose = verbose

    def _default_estimator(self):
        return PPA()

    def member_template(self):
        if self.estimator is not None and not isinstance(self.estimator, PPA):
            raise TypeError(
                f"FeatureBaggingPPA members must be ppa_dask.PPA, got "
                f"{type(self.estimator).__name__}"
            )
        return super().member_template().set_params(n_components=self.n_components)

    def bag_plan(self, n_samples, n_features):
        plan = super().bag_plan(n_samples, n_features)
        k = self.n_components
        k = check_param("n_components", k, Integer(1))
        if k >= plan.s:
            raise ValueError(
                f"n_components={k} must be smaller than the {plan.s} features each member holds "
                f"(max_features={self.max_features!r} of {n_features}); lower n_components or "
                "raise max_features."
            )
        return plan

    @labelled_fit
    def fit(self, X, y=None):
        """Fit the members (one shared scan per PPA step for a Dask array).

        Parameters
        ----------
        X : array-like, dask.array.Array, xarray.DataArray or xarray.Dataset
            Arrays of shape (n_samples, n_features). xarray input is stacked to ``(samples,
            features)`` by :class:`ppa_dask.store.stacker.Stacker` (valid samples only), as
            :meth:`ppa_dask.PPA.fit` does, and the layout kept as ``xarray_layout_``.
        y : ignored
        feature_dim : str, optional
            xarray only: the dimension of a DataArray holding the features.
        nan_policy : {"raise", "drop_samples"}, default="raise"
            xarray only: what to do with samples NaN in some but not all features.
        coslat : bool or str, default=False
            xarray only: weight each feature by ``sqrt(cos(latitude))``, as
            :meth:`ppa_dask.PPA.fit` does; reconstructions come back in the input's units,
            errors are of the weighted values.

        Returns
        -------
        self
        """
        # xarray input and the xarray-only options are handled by @labelled_fit
        template = self.member_template()
        if is_dask(X):
            X = self._validate_dask(X)
        else:
            X = validate_data(
                self, X, reset=True, dtype=[np.float64, np.float32], ensure_min_features=2
            )
        n, d = X.shape
        plan = self.bag_plan(n, d)
        specs = plan.members()
        store = self._open_store(plan.seed, fingerprint(X))
        if is_dask(X):
            members = self._load_members(specs, store)
            todo = [pos for pos, m in enumerate(members) if m is None]
            fitted, info = fit_members_shared_scans(X, [specs[p] for p in todo], template)
            for pos, estimator in zip(todo, fitted):
                members[pos] = estimator
                if store is not None:
                    store.save(specs[pos].index, estimator, check=self._member_check(specs[pos]))
            self.n_members_loaded_ = len(specs) - len(todo)
            self.feature_mean_ = info["feature_mean"]
            self.n_passes_ = info["n_scans"]
        else:
            members = self._fit_members(specs, X, None, template, store)
            self.feature_mean_ = X.mean(axis=0, dtype=np.float64)
            self.n_passes_ = int(sum(getattr(m, "n_passes_", 0) for m in members))
        self._record(plan, specs, members)
        self.n_samples_per_member_ = np.array([m.n_samples_ for m in members])
        # index lists of length up to n per member only for in-memory data
        self.estimators_samples_ = (
            None
            if is_dask(X)
            else [np.arange(n) if spec.rows(n) is None else spec.rows(n) for spec in specs]
        )
        return self

    def _validate_dask(self, X):
        X = check_dask_samples(X, "X", min_features=2, who="FeatureBaggingPPA")
        self.n_features_in_ = X.shape[1]
        return X

    def _check_input(self, X):
        check_is_fitted(self)
        if is_dask(X):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has shape {X.shape}, but FeatureBaggingPPA is expecting "
                    f"{self.n_features_in_} features as input."
                )
            return X if X.numblocks[1] == 1 else X.rechunk({1: -1})
        return validate_data(self, X, reset=False, dtype=[np.float64, np.float32])

    @labelled(_reconstruct_labelled, use=_USE, check=_check_fitted)
    def reconstruct(self, X):
        """The ensemble's k-component reconstruction of ``X``, in input units.

        Parameters
        ----------
        X : array-like, dask.array.Array, xarray.DataArray or xarray.Dataset
            Arrays of shape (n_samples, n_features); xarray input of an ensemble fitted on
            xarray, stacked as in :meth:`fit`.

        Returns
        -------
        X_rec : ndarray, dask.array.Array, xarray.DataArray or xarray.Dataset
            Arrays: shape (n_samples, n_features), lazy for a Dask array. xarray input: the
            input's layout (dimensions, coordinates, attrs; a Dataset of the fitted variables),
            NaN for samples with a NaN and for features dropped at fit.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> from ppa_dask import FeatureBaggingPPA
        >>> rng = np.random.default_rng(0)
        >>> t = rng.uniform(-1, 1, 600)
        >>> X = np.column_stack([t, t**2, np.sin(2 * t), t**3]) + 0.01 * rng.normal(size=(600, 4))
        >>> cube = xr.DataArray(X.T.reshape(4, 20, 30), dims=("band", "y", "x"))
        >>> model = FeatureBaggingPPA(n_estimators=4, max_features=0.75, random_state=0)
        >>> model.fit(cube, feature_dim="band").reconstruct(cube).dims
        ('band', 'y', 'x')
        """
        X = self._check_input(X)
        d = self.n_features_in_
        if is_dask(X):
            return X.map_blocks(
                self._reconstruct_numpy,
                dtype=np.float64,
                chunks=(X.chunks[0], (d,)),
                meta=np.empty((0, 0)),
            )
        return self._reconstruct_numpy(X)

    def _reconstruct_numpy(self, X):
        total, count = accumulate(
            self._member_outputs(np.asarray(X), self.n_features_in_),
            X.shape[0],
            self.n_features_in_,
        )
        return finish(total, count, self.feature_mean_)

    predict = reconstruct

    @labelled(_error_labelled, use=_USE, check=_check_fitted)
    def reconstruction_error(self, X):
        """Squared reconstruction error of each sample, ``||x - reconstruct(x)||^2``.

        Parameters
        ----------
        X : array-like, dask.array.Array, xarray.DataArray or xarray.Dataset
            As for :meth:`reconstruct`.

        Returns
        -------
        errors : ndarray, dask.array.Array or xarray.DataArray
            Arrays: shape (n_samples,), lazy for a Dask array. xarray input: a DataArray
            ``"reconstruction_error"`` over the input's sample dimensions (coordinates and
            attrs kept), NaN for samples with a NaN.
        """
        X = self._check_input(X)
        if is_dask(X):
            return X.map_blocks(
                self._error_numpy, drop_axis=1, dtype=np.float64, meta=np.empty((0,))
            )
        return self._error_numpy(X)

    def _error_numpy(self, X):
        diff = np.asarray(X, dtype=np.float64) - self._reconstruct_numpy(X)
        return np.einsum("ij,ij->i", diff, diff)

    def score_samples(self, X):
        """Minus the per-sample reconstruction error (higher is better, scikit-learn's way)."""
        return -self.reconstruction_error(X)

    @labelled(_score_labelled, use=_USE, check=_check_fitted)
    def score(self, X, y=None):
        """Minus the mean squared reconstruction error (over the valid samples of xarray input)."""
        errors = self.reconstruction_error(X)
        return -float(errors.mean().compute() if is_dask(errors) else errors.mean())

    def get_feature_names_out(self, input_features=None):
        """Names of the outputs of :meth:`reconstruct`: the input features, one to one.

        Parameters
        ----------
        input_features : array-like of str, optional
            Checked against ``feature_names_in_`` when the ensemble was fitted on named
            columns; default ``feature_names_in_``, else ``x0 .. x{d-1}``.

        Returns
        -------
        names : ndarray of str objects

        Examples
        --------
        >>> import numpy as np
        >>> from ppa_dask import FeatureBaggingPPA
        >>> X = np.random.default_rng(0).normal(size=(200, 4))
        >>> FeatureBaggingPPA(n_estimators=2, random_state=0).fit(X).get_feature_names_out()
        array(['x0', 'x1', 'x2', 'x3'], dtype=object)
        """
        check_is_fitted(self, "n_features_in_")
        return _check_feature_names_in(self, input_features)
