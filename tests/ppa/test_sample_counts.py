"""How few samples a fit takes: refused up front exactly below the smallest row count whose
cross-validation folds all leave enough training rows, and fitted for real from there."""

import dask.array as da
import numpy as np
import pytest
from conftest import random_nonlinear

from ppa_dask import PPA
from ppa_dask.ppa.drivers import NumpyDriver
from ppa_dask.ppa.kernels import fold_labels
from ppa_dask.utils.seeds import estimator_seed

X = random_nonlinear(200, 4)


def smallest_workable_n(seed, folds, degree):
    """Brute force: the first n whose every training fold (rows outside one fold) has at least
    degree + 1 rows, under the fit's fold labels."""
    for n in range(1, 10_000):
        counts = np.bincount(fold_labels(0, n, seed, folds), minlength=folds)
        if (n - counts).min() >= degree + 1:
            return n
    raise AssertionError("no n found")


CASES = [
    # (random_state, degree candidates, cv): the default degrees 1..5 with 2 folds among them
    (0, (1, 2, 3, 4, 5), 2),
    (1, (1, 2, 3, 4, 5), 2),
    (2, (1, 2, 3, 4, 5), 2),
    (0, (1, 3), 3),
    (3, (2, 4), 5),
]


@pytest.mark.parametrize("random_state, degree, cv", CASES)
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_the_boundary_is_exact_both_ways(random_state, degree, cv, kind):
    n = smallest_workable_n(estimator_seed(random_state), cv, max(degree))

    def data(m):
        return X[:m] if kind == "numpy" else da.from_array(X[:m], chunks=(5, 4))

    model = PPA(degree=degree, cv=cv, random_state=random_state).fit(data(n))
    assert model.n_samples_ == n and np.isfinite(model.transform(X)).all()
    with pytest.raises(ValueError) as info:
        PPA(degree=degree, cv=cv, random_state=random_state).fit(data(n - 1))
    message = str(info.value)
    assert message.startswith(f"X has {n - 1} sample(s); in {cv}-fold cross-validation"), message
    assert f"degree {max(degree)} needs at least {max(degree) + 1}" in message, message
    assert f"the folds reach from {n} samples" in message, message


@pytest.mark.parametrize("n", [12, 13])
def test_twelve_or_thirteen_rows_with_the_default_degrees_are_refused_before_any_pass(n):
    # on average enough (2 folds of 6 rows), but these folds leave a training fold short
    seed = estimator_seed(0)
    assert smallest_workable_n(seed, 2, 5) > 13
    labels = fold_labels(0, n, seed, 2)
    short = n - np.bincount(labels, minlength=2).max()
    driver = NumpyDriver(X[:n])
    with pytest.raises(ValueError, match=rf"smallest training fold has {short} rows; degree 5"):
        PPA(random_state=0).fit_with_driver(driver)
    assert driver.n_passes == 0


def test_a_fixed_degree_needs_degree_plus_one_rows():
    PPA(degree=3).fit(X[:4])
    with pytest.raises(ValueError, match=r"X has 3 sample\(s\); degree 3 needs at least 4 rows"):
        PPA(degree=3).fit(X[:3])
