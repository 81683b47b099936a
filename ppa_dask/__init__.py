"""ppa-dask: Principal Polynomial Analysis fitted blockwise on Dask.

>>> from ppa_dask import PPA
"""

from ppa_dask.ensemble.bagging import (
    FeatureBaggingClassifier,
    FeatureBaggingPPA,
    FeatureBaggingRegressor,
)
from ppa_dask.geometry.neighbors import make_ppa_knn
from ppa_dask.ppa.estimator import PPA
from ppa_dask.utils.version import VERSION

__version__ = VERSION
__all__ = [
    "PPA",
    "make_ppa_knn",
    "FeatureBaggingRegressor",
    "FeatureBaggingClassifier",
    "FeatureBaggingPPA",
    "__version__",
]
