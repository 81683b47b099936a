"""The drivers' whole-array work (ppa_dask.ppa.drivers): the largest |x| and rescaled copies.

PPA.fit asks the driver for these when float64 moments cannot hold the data: the largest |x|
must be numpy's (NaN when the data hold one), and a rescaled driver must read exactly the data
times the power of two with the same options, in memory and on Dask.
"""

import dask.array as da
import numpy as np
import pytest

from ppa_dask.ppa.drivers import DaskDriver, NumpyDriver


def data(n=500, d=4):
    X = np.random.default_rng(0).normal(size=(n, d))
    X[17, 2] = -9.5  # the largest |x| is a negative entry
    return X


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_max_abs_is_the_largest_absolute_entry_and_nan_with_a_nan(kind):
    X = data()
    make = NumpyDriver if kind == "numpy" else lambda A: DaskDriver(da.from_array(A, (120, 2)))
    assert make(X).max_abs() == 9.5
    X[3, 1] = np.nan
    assert np.isnan(make(X).max_abs())


def test_a_rescaled_numpy_driver_reads_the_data_times_the_power_of_two():
    X = data()
    driver = NumpyDriver(X, block_rows=64, limit_blas=False)
    small = driver.rescaled(-300)
    assert isinstance(small, NumpyDriver) and small.block_rows == 64
    np.testing.assert_array_equal(small.X, X * 2.0**-300)
    assert small.X.dtype == np.float64
    np.testing.assert_array_equal(driver.X, data())  # the input is not touched


def test_a_rescaled_dask_driver_keeps_the_chunks_and_the_options(tmp_path):
    X = data()
    driver = DaskDriver(
        da.from_array(X, (120, 2)), residual_cache="checkpoint", split_every=3,
        block_rows=50, checkpoint_dir=str(tmp_path), groups=2,
    )  # fmt: skip
    big = driver.rescaled(200)
    assert isinstance(big, DaskDriver)
    assert (big.residual_cache, big.split_every, big.block_rows) == ("checkpoint", 3, 50)
    assert (big.checkpoint_dir, big.groups) == (str(tmp_path), 2)
    assert big.X.chunks == driver.X.chunks
    np.testing.assert_array_equal(big.X.compute(), X * 2.0**200)
