"""Principal curves and surfaces of a fitted PPA model, and the colour limits of component
images (re-exported from :mod:`ppa_dask.app.plotting`, where they live).

>>> from ppa_dask.plotting import principal_grids
"""

from ppa_dask.app.plotting import PrincipalGrid, principal_grids, robust_limits

__all__ = ["PrincipalGrid", "principal_grids", "robust_limits"]
