"""The PPA engine: the estimator and the machinery that fits it in one data pass per step.

Layers, bottom up: :mod:`.fused` (the compiled per-row sweep: basis, step update, moments),
:mod:`.kernels` (pure per-block functions both drivers call), :mod:`.algebra` (small-matrix
algebra between passes on the client), :mod:`.drivers` (the driver interface and its numpy and
Dask implementations), :mod:`.steps` (the step loop and the degree policy), :mod:`.magnitude`
(data rescaled by a power of two when float64 moments cannot hold them, the model scaled back),
:mod:`.multifit` (many models fitted from shared scans of one array) and :mod:`.estimator`
(:class:`PPA`, the scikit-learn estimator).

>>> from ppa_dask.ppa import PPA
"""

from ppa_dask.ppa.estimator import PPA

__all__ = ["PPA"]
