"""Multi-information and its reduction by a transform (paper section 5.3, Table 3).

Marginal entropies (scipy's spacing estimators, histograms or a Gaussian KDE) with
dequantisation of repeated values, the multi-information reduction ``Delta I`` in bits per
dimension, and the rank check that flags inputs whose true ``Delta I`` is infinite.

>>> from ppa_dask.information import multi_information_reduction
"""

from ppa_dask.information.entropy import (
    RANK_RTOL,
    RankDeficientWarning,
    covariance_rank,
    dequantize,
    marginal_entropies,
    marginal_entropy,
    multi_information_reduction,
    quantisation_steps,
)

__all__ = [
    "RANK_RTOL",
    "RankDeficientWarning",
    "covariance_rank",
    "quantisation_steps",
    "dequantize",
    "marginal_entropy",
    "marginal_entropies",
    "multi_information_reduction",
]
