"""The client's small linear algebra of a fit runs on one BLAS thread, on Dask input too.

Multithreaded BLAS on the d x d algebra between the passes (an eigendecomposition per step)
made a 450-feature Dask fit 5-10x slower on a busy machine; the library now holds one BLAS
thread for the whole fit, as the CLI and the in-memory fit did, and gives the caller's setting
back afterwards.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import random_nonlinear
from threadpoolctl import threadpool_info, threadpool_limits

from ppa_dask import PPA
from ppa_dask.ppa import algebra


def _blas_threads():
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


@pytest.mark.parametrize("kind", ["dask", "numpy"])
def test_the_step_algebra_of_a_fit_runs_on_one_blas_thread(monkeypatch, kind):
    seen = []
    for name in ("leading_direction", "fit_step"):
        original = getattr(algebra, name)

        def recording(*args, _original=original, **kwargs):
            seen.append(_blas_threads())
            return _original(*args, **kwargs)

        monkeypatch.setattr(algebra, name, recording)
    X = random_nonlinear(n=1200, d=5)
    data = da.from_array(X, chunks=(400, 5)) if kind == "dask" else X
    # the test session holds one BLAS thread (conftest): a caller with two, as numpy starts
    with dask.config.set(scheduler="threads"), threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == 2
        model = PPA(degree=2, random_state=0).fit(data)
        assert _blas_threads() == 2  # the caller's setting, given back
    assert len(seen) == 2 * len(model.degrees_) == 8  # two calls per step, four steps
    assert set(seen) == {1}, seen
    if kind == "dask":
        ref = PPA(degree=2, random_state=0).fit(X)
        assert np.allclose(model.explained_variance_, ref.explained_variance_, rtol=1e-10)
