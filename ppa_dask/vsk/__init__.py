"""Variably scaled kernels (Campi, Marchetti, Perracchione): SVM-VSK, KRN-VSK and diagnostics.

A scaling function ``psi`` (naive Bayes, any fitted model, or PPA) appends ``psi(x)`` to the
features before an ordinary kernel (:class:`VariablyScaled`, :func:`make_svm_vsk`,
:func:`make_krn_vsk`); :class:`SVMExtraction` is the feature-extraction baseline; the spectral
ratio and condition number of the Gram matrix, in memory or tiled over Dask
(:func:`blockwise_spectral_ratio`, :func:`blockwise_condition_number`), check Proposition 1.

>>> from ppa_dask.vsk import make_svm_vsk
"""

from ppa_dask.vsk.scaling import (
    CurveFitRegressor,
    ModelScaling,
    NaiveBayesScaling,
    PPAScaling,
    SVMExtraction,
    VariablyScaled,
    blockwise_condition_number,
    blockwise_spectral_ratio,
    condition_number,
    gram_tile,
    make_krn_vsk,
    make_svm_vsk,
    normalized_spectral_ratio,
    spectral_ratio,
    tiled_gram_operator,
    vsk_gram,
)

__all__ = [
    "VariablyScaled",
    "NaiveBayesScaling",
    "ModelScaling",
    "PPAScaling",
    "CurveFitRegressor",
    "SVMExtraction",
    "make_svm_vsk",
    "make_krn_vsk",
    "gram_tile",
    "vsk_gram",
    "spectral_ratio",
    "normalized_spectral_ratio",
    "condition_number",
    "blockwise_spectral_ratio",
    "blockwise_condition_number",
    "tiled_gram_operator",
]
