"""ppa-dask: Principal Polynomial Analysis fitted blockwise on Dask.

>>> from ppa_dask import PPA
"""

from ppa_dask.ensemble.bagging import (
    FeatureBaggingClassifier,
    FeatureBaggingPPA,
    FeatureBaggingRegressor,
)
from ppa_dask.geometry.neighbors import make_ppa_knn

# importing NLPCA registers it with the model-file allow-list, so that any process that
# imported ppa_dask (a Dask worker, ``import ppa_dask.store``) can load a saved NLPCA
from ppa_dask.nlpca import NLPCA
from ppa_dask.ppa.estimator import PPA
from ppa_dask.utils.version import VERSION
from ppa_dask.utils.warnings import RankDeficientWarning

__version__ = VERSION
__all__ = [
    "PPA",
    "NLPCA",
    "make_ppa_knn",
    "FeatureBaggingRegressor",
    "FeatureBaggingClassifier",
    "FeatureBaggingPPA",
    "RankDeficientWarning",
    "__version__",
]
