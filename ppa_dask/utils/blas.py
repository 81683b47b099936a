"""One BLAS thread for in-process block loops and small tasks.

Multithreaded OpenBLAS on block-sized products is many times slower than one thread on a
shared machine, so every block loop of the package runs inside :func:`one_blas_thread`. The
libraries are inspected once per process: a fresh ``threadpool_limits`` rescans them, a few ms
each time, which is 5 % of a 10-pass in-memory fit.
"""

from __future__ import annotations

__all__ = ["BLAS_THREAD_VARIABLES", "one_blas_thread"]

#: Environment variables that fix the thread count of the BLAS / OpenMP libraries in a process
#: started after they are set (workers spawned by a nanny read them at start-up).
BLAS_THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

_CONTROLLER = None


def one_blas_thread():
    """A context manager limiting BLAS to one thread (cheap: the controller is cached).

    Examples
    --------
    >>> import numpy as np
    >>> with one_blas_thread():
    ...     float(np.ones((3, 3)) @ np.ones(3) @ np.ones(3))
    9.0
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")
