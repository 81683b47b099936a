"""ppa-dask: Principal Polynomial Analysis fitted blockwise on Dask.

>>> from ppa_dask import PPA
"""

# first, before the imports below take seconds: the ppa-dask command about to compute starts
# compiling its kernels on the other core (a first run on this machine; see ppa_dask.launch)
from ppa_dask.launch import compile_early as _compile_early

_compile_early()

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
