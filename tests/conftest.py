"""Shared data sets for the PPA tests: small, seeded, nonlinear."""

import numpy as np
import pytest

# the skip policy (a test may skip only for a missing system program): its hooks, registered here
from system_programs import (  # noqa: F401
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from threadpoolctl import threadpool_limits


def pytest_collection_modifyitems(config, items):
    # a test that starts a cluster (or submits to SLURM) is slow as well, so that
    # `-m "not slow"` leaves out every cluster without each test saying both
    for item in items:
        if item.get_closest_marker("cluster") or item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _one_blas_thread():
    # block-sized BLAS calls are many times slower multithreaded on this 2-core machine
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def noisy_helix(n=2000, noise=0.1, seed=0, a=2.0, b=0.8):
    """The paper's 3-D helix (one turn, a = 2, b = 0.8) with Gaussian noise."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, n)
    X = np.column_stack([a * np.cos(t), a * np.sin(t), b * t])
    return X + noise * rng.normal(size=X.shape)


def loopback_cluster(n_workers, **options):
    """An in-process LocalCluster: worker threads (one each), every socket on the loopback
    interface, no dashboards unless asked for."""
    from distributed import LocalCluster

    kwargs = dict(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address=None,
        worker_dashboard_address=None,
    )
    return LocalCluster(**{**kwargs, **options})


def random_nonlinear(n=2000, d=6, seed=1):
    """Random 6-D data with curved dependence between coordinates, randomly rotated."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1.5, 1.5, size=(n, 2))
    cols = [
        u[:, 0],
        0.8 * u[:, 0] ** 2 + 0.5 * u[:, 1],
        np.sin(1.5 * u[:, 0]) * 0.6 + 0.3 * u[:, 1] ** 2,
        0.3 * u[:, 0] * u[:, 1],
    ]
    cols += [0.05 * (j + 1) * rng.normal(size=n) for j in range(d - len(cols))]
    Y = np.column_stack(cols) + 0.02 * rng.normal(size=(n, d))
    Q, R = np.linalg.qr(rng.normal(size=(d, d)))
    return Y @ (Q * np.sign(np.diag(R)))


@pytest.fixture
def helix():
    return noisy_helix()


@pytest.fixture
def nonlinear6():
    return random_nonlinear()
