"""ppa-dask: Principal Polynomial Analysis fitted blockwise on Dask.

>>> from ppa_dask import PPA
"""

from .ppa import PPA
from .neighbors import make_ppa_knn
from .ensemble import FeatureBaggingClassifier, FeatureBaggingPPA, FeatureBaggingRegressor

__version__ = "0.1.0"
__all__ = [
    "PPA",
    "make_ppa_knn",
    "FeatureBaggingRegressor",
    "FeatureBaggingClassifier",
    "FeatureBaggingPPA",
    "__version__",
]
