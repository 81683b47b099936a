"""ppa-dask: Principal Polynomial Analysis fitted blockwise on Dask.

>>> from ppa_dask import PPA

The public names (and the subpackages, ``ppa_dask.store`` and the like) are imported on first
use (:mod:`ppa_dask.utils.lazy`): ``import ppa_dask`` loads neither Dask nor scikit-learn, and
the ``ppa-dask`` command answers ``--help`` before any of them.
"""

# first, before the imports below take seconds: the ppa-dask command about to compute starts
# compiling its kernels on the other core (a first run on this machine; see ppa_dask.launch)
from ppa_dask.launch import compile_early as _compile_early

_compile_early()

from ppa_dask.utils import lazy as _lazy
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

_BAGGING = "ppa_dask.ensemble.bagging"
__getattr__, __dir__ = _lazy.attach(
    __name__,
    {
        "PPA": "ppa_dask.ppa.estimator",
        "NLPCA": "ppa_dask.nlpca",
        "make_ppa_knn": "ppa_dask.geometry.neighbors",
        "FeatureBaggingRegressor": _BAGGING,
        "FeatureBaggingClassifier": _BAGGING,
        "FeatureBaggingPPA": _BAGGING,
    },
)

# the library's classes that model files name, by the modules that register them on import: any
# process that imported ppa_dask (a Dask worker, ``import ppa_dask.store``) loads a saved NLPCA
# or ensemble without importing it first (ppa_dask.store.encoding consults the tables)
_lazy.DEFERRED_ESTIMATORS.update(
    {
        "PPA": "ppa_dask.ppa.estimator",
        "NLPCA": "ppa_dask.nlpca.autoencoder",
        "FeatureBaggingRegressor": _BAGGING,
        "FeatureBaggingClassifier": _BAGGING,
        "FeatureBaggingPPA": _BAGGING,
    }
)
_lazy.DEFERRED_RECORDS.update({"MemberSpec": _BAGGING})
