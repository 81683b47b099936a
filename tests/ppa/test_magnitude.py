"""ppa_dask.ppa.magnitude: when a fit rescales its data, and that the model scaled back is exact.

tests/ppa/test_scale.py checks the model of scaled data against the model of the data to
rounding, and the refusals in decimal; here the policy's own properties: the documented ranges
are its boundaries (inclusive), and a fit of data times ``2**k`` is the fit of the data, every
fitted attribute scaled by its power of two, bit for bit.
"""

import dask.array as da
import numpy as np
import pytest

from ppa_dask import PPA
from ppa_dask.ppa import magnitude
from ppa_dask.ppa.magnitude import (
    LARGEST_VARIANCE,
    MAGNITUDE_RANGE,
    SMALLEST_VARIANCE,
    UNIT_POWERS,
    VARIANCE_RANGE,
    MagnitudeCheck,
    Rescale,
    check_storable_variance,
    rescale_exponent,
)


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    X = np.column_stack([t, t**2, np.sin(3 * t), rng.normal(size=n), 0.1 * rng.normal(size=n)])
    # largest |x| in [1/2, 1): data times 2**k are rescaled back to exactly these
    return np.ldexp(X, -int(np.frexp(np.abs(X).max())[1]))


X0 = _data()
# the fitted attributes in units of X (1) or of X squared (2), declared here apart from the
# module's table: an attribute with units that the conversion missed fails the exact test
UNITS = {
    "mean_": 1,
    "coefficients_": 1,
    "basis_intervals_": 1,
    "alpha_ranges_": 1,
    "explained_variance_": 2,
    "residual_variance_": 2,
    "cv_scores_": 2,
}
MODELS = {
    "candidates": dict(degree=(1, 2, 3)),
    "gd": dict(degree=2, leading_vector="gd", gd_max_iter=4),
    "whiten": dict(degree=(1, 3), whiten=True, n_components=3, cv=3),
}


def _fitted(model):
    return {k: v for k, v in vars(model).items() if k.endswith("_") and not k.startswith("_")}


def _same(a, b):
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("kind", ["numpy", "dask"])
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("k", [300, -300, 480])
def test_the_fit_of_data_times_a_power_of_two_is_the_fit_scaled_exactly(k, model, kind):
    X = X0 * 2.0**k
    assert not VARIANCE_RANGE[0] <= X.var(axis=0).sum() <= VARIANCE_RANGE[1]  # rescaled
    as_kind = (lambda A: A) if kind == "numpy" else (lambda A: da.from_array(A, chunks=(250, 5)))
    ref = _fitted(PPA(random_state=0, **MODELS[model]).fit(as_kind(X0)))
    got = _fitted(PPA(random_state=0, **MODELS[model]).fit(as_kind(X)))
    assert sorted(got) == sorted(ref)
    for name, value in got.items():
        expected = ref[name]
        if expected is None:
            pass
        elif name in UNITS:
            expected = np.ldexp(expected, UNITS[name] * k)
        elif name == "gd_history_":
            expected = [
                {
                    key: float(np.ldexp(v, 2 * k)) if key.startswith("objective") else v
                    for key, v in record.items()
                }
                for record in expected
            ]
        elif name == "n_passes_":
            expected += 2  # the discarded first pass and the largest-|x| reduction
        assert _same(value, expected), name


class _Moments:
    """A driver whose first pass reports a given total variance and largest |x|."""

    def __init__(self, variance, largest=1.0):
        self.variance, self.largest = variance, largest

    def first_pass(self, sample_index):
        zero = np.zeros(1, dtype=np.int64)
        return {"n": 1, "scatter": np.array([[self.variance]]), "n_nan": zero, "n_inf": zero}

    def max_abs(self):
        return self.largest


def _rescales(variance, largest):
    driver = _Moments(variance, largest)
    try:
        MagnitudeCheck(driver, driver.max_abs).first_pass(None)
    except Rescale as rescale:
        return rescale.exponent
    return None


def test_the_rescale_decision_at_the_documented_boundaries():
    lo, hi = VARIANCE_RANGE
    below, above = np.nextafter(lo, 0), np.nextafter(hi, np.inf)
    # inside the variance range (ends included): fitted as given, whatever the largest |x|
    for variance in (lo, 1.0, hi):
        assert _rescales(variance, 2.0**300) is None
    # outside it: rescaled by the binary exponent of the largest |x| when that is outside its
    # range (ends included), so that the rescaled largest |x| is in [1/2, 1)
    m_lo, m_hi = MAGNITUDE_RANGE
    for variance in (below, above, 0.0):
        for largest in (m_lo, 1.0, m_hi, np.inf, np.nan):
            assert _rescales(variance, largest) is None
        for largest in (np.nextafter(m_lo, 0), 2.0**-600 * 3, np.nextafter(m_hi, np.inf)):
            e = _rescales(variance, largest)
            assert e == rescale_exponent(largest) and 0.5 <= np.ldexp(largest, -e) < 1
    # a driver's data (fit_with_driver) cannot be rescaled: refused when out of range
    with pytest.raises(ValueError, match="outside .* where PPA's float64 moments"):
        MagnitudeCheck(_Moments(above)).first_pass(None)
    assert MagnitudeCheck(_Moments(hi)).first_pass(None)["n"] == 1


def test_the_variances_a_model_can_store_at_the_documented_boundaries():
    # data fitted divided by 2**exponent: their variance in the input's units is variance *
    # 4**exponent, stored from SMALLEST_VARIANCE to LARGEST_VARIANCE (ends included)
    for bound, beyond, exponent in [
        (SMALLEST_VARIANCE, np.nextafter(SMALLEST_VARIANCE, 0), -300),
        (SMALLEST_VARIANCE, np.nextafter(SMALLEST_VARIANCE, 0), 0),
        (LARGEST_VARIANCE, np.nextafter(LARGEST_VARIANCE, np.inf), 0),
        (LARGEST_VARIANCE, np.nextafter(LARGEST_VARIANCE, np.inf), 300),
    ]:
        check_storable_variance(np.ldexp(bound, -2 * exponent), exponent)
        with pytest.raises(ValueError, match="beyond what float64 holds"):
            check_storable_variance(np.ldexp(beyond, -2 * exponent), exponent)
    check_storable_variance(0.0, 600)  # nothing to store but zeros


def test_every_unit_power_names_a_fitted_attribute():
    fitted = _fitted(PPA(degree=(1, 2), random_state=0).fit(X0))
    assert set(UNIT_POWERS) <= set(fitted)
    assert magnitude.in_input_units(fitted, 0).keys() == fitted.keys()
