"""Feature-bagging ensembles (Sun, "Feature Bagging Provides Stability").

:class:`FeatureBaggingRegressor`, :class:`FeatureBaggingClassifier` and
:class:`FeatureBaggingPPA` average members fitted on random feature (and sample) subsets
drawn from one seed (:class:`BagPlan`, :class:`MemberSpec`); members are fanned out over the
current Dask cluster and can be kept in a member store to resume an interrupted fit.

>>> from ppa_dask.ensemble import FeatureBaggingRegressor
"""

from ppa_dask.ensemble.bagging import (
    FeatureBaggingClassifier,
    FeatureBaggingPPA,
    FeatureBaggingRegressor,
    MemberSpec,
)

__all__ = [
    "FeatureBaggingRegressor",
    "FeatureBaggingClassifier",
    "FeatureBaggingPPA",
    "MemberSpec",
]
