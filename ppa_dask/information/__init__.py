"""Multi-information and its reduction by a transform (paper section 5.3, Table 3).

Marginal entropies (scipy's spacing estimators or histograms) with dequantisation of repeated
values, and the multi-information reduction ``Delta I`` in bits per dimension.

>>> from ppa_dask.information import multi_information_reduction
"""

from ppa_dask.information.entropy import (
    dequantize,
    marginal_entropies,
    marginal_entropy,
    multi_information_reduction,
    quantisation_steps,
)

__all__ = [
    "quantisation_steps",
    "dequantize",
    "marginal_entropy",
    "marginal_entropies",
    "multi_information_reduction",
]
