"""Feature-bagging ensembles (Sun, "Feature Bagging Provides Stability").

:class:`FeatureBaggingRegressor`, :class:`FeatureBaggingClassifier` and
:class:`FeatureBaggingPPA` average members fitted on random feature (and sample) subsets
drawn from one seed (:class:`BagPlan`, :class:`MemberSpec`); members are fanned out over the
current Dask cluster and can be kept in a member store to resume an interrupted fit.
:class:`BaggedEstimator` (:mod:`.protocol`) is what a bagged estimator exposes (its bag plan,
member template and member kind): the three ensembles implement it, and
:mod:`ppa_dask.stability` refits any estimator that does.

>>> from ppa_dask.ensemble import FeatureBaggingRegressor
"""

from ppa_dask.ensemble.bagging import (
    BagPlan,
    FeatureBaggingClassifier,
    FeatureBaggingPPA,
    FeatureBaggingRegressor,
    MemberSpec,
)
from ppa_dask.ensemble.protocol import BaggedEstimator

__all__ = [
    "FeatureBaggingRegressor",
    "FeatureBaggingClassifier",
    "FeatureBaggingPPA",
    "MemberSpec",
    "BagPlan",
    "BaggedEstimator",
]
