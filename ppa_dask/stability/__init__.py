"""Feature and instance instability (FI, II) of bagged and plain estimators.

Leave-one-feature-out and leave-one-instance-out refits (``method="refit"``), their out-of-bag
estimates (``"oob"``) and the closed form for linear members (``"closed_form"``), fanned out as
Dask tasks; the paper's stability bounds and the number of bagging rounds they call for.

>>> from ppa_dask.stability import feature_instability
"""

from ppa_dask.stability.instability import (
    StabilityResult,
    bagging_rounds,
    feature_instability,
    feature_stability_bound,
    instance_instability,
    instance_stability_bound,
)

__all__ = [
    "StabilityResult",
    "feature_instability",
    "instance_instability",
    "feature_stability_bound",
    "instance_stability_bound",
    "bagging_rounds",
]
