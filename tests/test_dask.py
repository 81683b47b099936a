"""One pass per step on Dask: the same model from numpy, any chunking and any worker count."""

import threading

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import random_nonlinear

from ppa_dask import PPA

X = random_nonlinear(n=6000, d=6, seed=11)
PARAMS = dict(degree=(1, 2, 3, 4, 5), cv=2, random_state=3)


def fitted_attributes(model):
    return {
        name: getattr(model, name)
        for name in ("mean_", "leading_vectors_", "coefficients_", "explained_variance_",
                     "alpha_ranges_", "residual_basis_", "cv_scores_")
    }


@pytest.fixture(scope="module")
def reference():
    return PPA(**PARAMS).fit(X)


def assert_same_model(model, reference, atol=1e-10):
    assert model.degrees_.tolist() == reference.degrees_.tolist()
    for name, value in fitted_attributes(reference).items():
        np.testing.assert_allclose(getattr(model, name), value, atol=atol, err_msg=name)
    np.testing.assert_allclose(np.asarray(model.transform(X)), reference.transform(X), atol=atol)


@pytest.mark.parametrize("chunks", [(6000, 6), (1000, 6), (777, 4)])
@pytest.mark.parametrize("cache", ["persist", "recompute"])
def test_dask_chunkings_give_the_numpy_model(reference, chunks, cache):
    model = PPA(residual_cache=cache, **PARAMS).fit(da.from_array(X, chunks=chunks))
    assert model.residual_cache_ == cache
    assert_same_model(model, reference)


def test_numpy_block_size_does_not_matter(reference):
    assert_same_model(PPA(block_rows=1001, **PARAMS).fit(X), reference)


@pytest.mark.parametrize("n_workers", [1, 2])
def test_local_cluster_gives_the_numpy_model(reference, n_workers):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, Client(cluster):
        Xd = da.from_array(X, chunks=(1500, 6))
        model = PPA(**PARAMS).fit(Xd)
        R = model.transform(Xd)
        assert isinstance(R, da.Array)
        np.testing.assert_allclose(R.compute(), reference.transform(X), atol=1e-10)
    assert_same_model(model, reference)


def test_dask_in_gives_lazy_dask_out(reference):
    Xd = da.from_array(X, chunks=(1000, 6))
    model = PPA(**PARAMS).fit(Xd)
    R = model.transform(Xd)
    Xr = model.inverse_transform(R[:, :3])
    J = model.jacobian(Xd[:50])
    assert all(isinstance(a, da.Array) for a in (R, Xr, J))
    assert R.chunks[0] == Xd.chunks[0] and J.shape == (50, 6, 6)
    np.testing.assert_allclose(Xr.compute(), reference.inverse_transform(reference.transform(X)[:, :3]), atol=1e-10)
    np.testing.assert_allclose(J.compute(), reference.jacobian(X[:50]), atol=1e-10)
    np.testing.assert_allclose(model.reconstruction_errors(Xd), reference.reconstruction_errors(X), rtol=1e-10)


class CountingReads:
    """Counts how often each source block is computed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reads = {}

    def __call__(self, block, block_info=None):
        key = block_info[0]["chunk-location"]
        with self.lock:
            self.reads[key] = self.reads.get(key, 0) + 1
        return block


@pytest.mark.parametrize("cache, reads_per_block", [("persist", 2), ("recompute", 6)])
def test_one_pass_over_the_data_per_step(cache, reads_per_block):
    counter = CountingReads()
    source = da.from_array(X, chunks=(1000, 6)).map_blocks(counter, dtype=X.dtype)
    with dask.config.set(scheduler="threads"):
        model = PPA(residual_cache=cache, **PARAMS).fit(source)
    # mean/covariance pass + one pass per step (5 steps); persisted residuals are not re-read
    assert model.n_passes_ == 1 + 5
    assert set(counter.reads.values()) == {reads_per_block}


def test_float32_dask_input_is_computed_in_float64(reference):
    model = PPA(**PARAMS).fit(da.from_array(X.astype(np.float32), chunks=(1000, 6)))
    ref32 = PPA(**PARAMS).fit(X.astype(np.float32).astype(np.float64))
    assert_same_model(model, ref32)
    assert model.transform(da.from_array(X, chunks=(1000, 6))).dtype == np.float64


def test_nan_in_a_lazy_transform_is_reported_when_computed(reference):
    bad = X.copy()
    bad[4321, 2] = np.nan
    R = reference.transform(da.from_array(bad, chunks=(1000, 6)))
    with pytest.raises(ValueError, match=r"NaN.*columns \[2\].*row 4321"):
        R.compute()
