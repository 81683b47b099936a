"""Geometry of a fitted PPA model (paper sections 3.4, 5.1, 5.2).

The induced metric ``M(x) = J^T Lambda^{-1} J`` (:func:`metric_from_jacobian`,
:func:`coefficient_variances`; ``PPA.metric`` applies them), the curvilinear axes with their
Frenet-Serret frames and generalised curvatures (:func:`frenet_serret`), and k-nearest
neighbours in the PPA metric (:func:`make_ppa_knn`, with :func:`make_mahalanobis_knn` as the
linear counterpart).

>>> from ppa_dask.geometry import frenet_serret
"""

from ppa_dask.geometry.frenet import axis_derivatives, frenet_from_derivatives, frenet_serret
from ppa_dask.geometry.neighbors import make_mahalanobis_knn, make_ppa_knn
from ppa_dask.ppa.metric import coefficient_variances, metric_from_jacobian

__all__ = [
    "coefficient_variances",
    "metric_from_jacobian",
    "axis_derivatives",
    "frenet_from_derivatives",
    "frenet_serret",
    "make_ppa_knn",
    "make_mahalanobis_knn",
]
