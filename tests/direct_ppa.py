"""The direct port of the paper's PPA, the independent check the suite holds the package against.

It lives in the package as :mod:`ppa_dask.app.bench.direct_port` (``ppa-dask bench`` times PPA
against it in an installed copy too); it imports only NumPy, which
tests/ppa/test_direct_reference.py checks, so it stays a computation that shares no code with the
implementation it checks. The tests import it from here by its old name.
"""

from ppa_dask.app.bench.direct_port import (
    fit_direct,
    fit_direct_cv,
    inverse_direct,
    reconstruct_direct,
    reconstruct_zeroed_coefficients_direct,
    transform_direct,
)

__all__ = [
    "fit_direct",
    "fit_direct_cv",
    "transform_direct",
    "inverse_direct",
    "reconstruct_direct",
    "reconstruct_zeroed_coefficients_direct",
]
