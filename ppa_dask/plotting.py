"""Principal curves and surfaces of a fitted PPA model (re-exported from
:mod:`ppa_dask.app.plotting`, where it lives).

>>> from ppa_dask.plotting import principal_grids
"""

from ppa_dask.app.plotting import PrincipalGrid, principal_grids

__all__ = ["PrincipalGrid", "principal_grids"]
