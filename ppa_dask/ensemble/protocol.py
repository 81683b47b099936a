"""What a bagged estimator exposes: the interface :mod:`ppa_dask.stability` works through.

Feature and instance instability refit a bagged estimator member by member, so they need to
know its members, not its class. A *bagged estimator* is any object with

* ``bag_plan(n_samples, n_features)``: the :class:`~ppa_dask.ensemble.bagging.BagPlan` of a fit
  on data of that shape (its members, and how each is redrawn without a feature or a row);
* ``member_template()``: a fresh, unfitted estimator every member is a clone of (seeded from
  its :class:`~ppa_dask.ensemble.MemberSpec`, as
  :func:`~ppa_dask.ensemble.bagging.fit_member` does);
* ``member_kind``: what a member's output is and how the ensemble averages it, one of
  :data:`MEMBER_KINDS`: ``"regressor"`` (``predict``), ``"classifier"`` (``predict_proba``,
  or votes) or ``"ppa"`` (a PPA member's k-component reconstruction of its own features,
  averaged per feature);

and optionally ``coupling`` (``"shared"`` or ``"independent"``, the default coupling of its
refits). :class:`~ppa_dask.FeatureBaggingRegressor`, :class:`~ppa_dask.FeatureBaggingClassifier`
and :class:`~ppa_dask.FeatureBaggingPPA` implement it; so can an estimator written elsewhere,
which then gets FI and II (every method) without ``ppa_dask.stability`` knowing its class.

Examples
--------
>>> from ppa_dask import FeatureBaggingPPA, FeatureBaggingRegressor
>>> from ppa_dask.ensemble.protocol import bagged_kind
>>> bagged_kind(FeatureBaggingRegressor()), bagged_kind(FeatureBaggingPPA())
('regressor', 'ppa')
>>> from sklearn.linear_model import Ridge
>>> bagged_kind(Ridge()) is None  # not bagged: refitted as a whole
True
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["MEMBER_KINDS", "BaggedEstimator", "bagged_kind"]

#: What a member outputs and how the ensemble averages it (``member_kind``).
MEMBER_KINDS = ("regressor", "classifier", "ppa")


@runtime_checkable
class BaggedEstimator(Protocol):
    """A bagged estimator as :mod:`ppa_dask.stability` sees it (see the module docstring).

    ``isinstance(obj, BaggedEstimator)`` checks that the three members are there (their
    types are not checked; :func:`bagged_kind` checks ``member_kind``).
    """

    member_kind: str

    def bag_plan(self, n_samples, n_features):
        """The ``BagPlan`` of a fit on ``n_samples x n_features`` data (validates parameters)."""

    def member_template(self):
        """A fresh, unfitted clone of the member estimator."""


def bagged_kind(estimator):
    """``estimator.member_kind`` if it is a :class:`BaggedEstimator`, else None.

    Raises
    ------
    ValueError
        ``member_kind`` is not one of :data:`MEMBER_KINDS`.

    Examples
    --------
    >>> class Odd:
    ...     member_kind = "ranker"
    ...     def bag_plan(self, n_samples, n_features): ...
    ...     def member_template(self): ...
    >>> bagged_kind(Odd())
    Traceback (most recent call last):
    ...
    ValueError: Odd.member_kind is 'ranker'; a bagged estimator's members are one of (...)
    """
    if not isinstance(estimator, BaggedEstimator):
        return None
    kind = estimator.member_kind
    if kind not in MEMBER_KINDS:
        raise ValueError(
            f"{type(estimator).__name__}.member_kind is {kind!r}; a bagged estimator's members "
            f"are one of {MEMBER_KINDS}"
        )
    return kind
