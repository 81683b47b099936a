"""ppa-dask: Principal Polynomial Analysis fitted blockwise on Dask.

>>> from ppa_dask import PPA
"""

from .ppa import PPA

__version__ = "0.1.0"
__all__ = ["PPA", "__version__"]
