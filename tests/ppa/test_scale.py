"""PPA is scale-equivariant: data of any float64 magnitude give the model of the data divided by
their scale, scaled back, or a clear error when float64 cannot hold the model's variances."""

import dask.array as da
import numpy as np
import pytest

from ppa_dask import PPA
from ppa_dask.ppa import algebra
from ppa_dask.ppa.drivers import NumpyDriver


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    return np.column_stack([t, t**2, np.sin(3 * t), rng.normal(size=n)])


X0 = _data()
DEGREES = {"fixed": 2, "cv": (1, 2, 3)}
REFERENCE = {name: PPA(degree=g, random_state=0).fit(X0) for name, g in DEGREES.items()}
# float64 holds the variances of these (about 1.9 * scale**2)
STORABLE = [1e-100, 1.0, 1e100, 1e153]
# ... and not of these: 1.9e-600, 1.9e-320 (subnormal), 1.9e308 (> the largest float), 1.9e600
UNSTORABLE = [1e-300, 1e-160, 1e154, 1e300]


def _as(kind, X):
    return X if kind == "numpy" else da.from_array(X, chunks=(700, 4))


def _total_variance_decade(scale):
    """log10 of the total variance of X0 * scale, computed without forming it."""
    return int(np.floor(np.log10(X0.var(axis=0).sum()) + 2 * np.log10(scale)))


@pytest.mark.parametrize("kind", ["numpy", "dask"])
@pytest.mark.parametrize("degree", sorted(DEGREES))
@pytest.mark.parametrize("scale", STORABLE)
def test_the_model_of_scaled_data_is_the_scaled_model(scale, degree, kind):
    ref = REFERENCE[degree]
    X = X0 * scale
    model = PPA(degree=DEGREES[degree], random_state=0).fit(_as(kind, X))
    assert model.degrees_.tolist() == ref.degrees_.tolist()
    R = np.asarray(model.transform(X))
    R_ref = ref.transform(X / scale) * scale
    np.testing.assert_allclose(R, R_ref, rtol=0, atol=1e-10 * np.abs(R_ref).max())
    np.testing.assert_allclose(
        np.asarray(model.inverse_transform(R)), X, rtol=0, atol=1e-10 * np.abs(X).max()
    )
    # the Jacobian is unit-free
    np.testing.assert_allclose(model.jacobian(X[:20]), ref.jacobian(X0[:20]), atol=1e-10)
    for name in ("explained_variance_", "residual_variance_"):
        v, v_ref = getattr(model, name), getattr(ref, name)
        np.testing.assert_allclose(v / v.sum(), v_ref / v_ref.sum(), rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(v / scale**2, v_ref, rtol=1e-10, err_msg=name)
    np.testing.assert_allclose(model.mean_ / scale, ref.mean_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.leading_vectors_, ref.leading_vectors_, atol=1e-10)
    if ref.cv_scores_ is not None:
        np.testing.assert_allclose(model.cv_scores_ / scale**2, ref.cv_scores_, rtol=1e-10)
    # outside the range of ordinary magnitudes the fit read the data twice more (a first pass
    # that found them out of range and the largest-|x| reduction)
    # rescaling costs two passes (the discarded first pass and the max-abs reduction); compared
    # with the unscaled fit of the same kind of array (a Dask fit gathers steps ahead where the
    # in-memory one does not)
    unscaled = (
        ref if kind == "numpy" else PPA(degree=DEGREES[degree], random_state=0).fit(_as(kind, X0))
    )
    assert model.n_passes_ == unscaled.n_passes_ + (2 if scale != 1.0 else 0)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_whitened_coefficients_do_not_depend_on_the_scale(kind):
    ref = PPA(degree=2, whiten=True, random_state=0).fit(X0)
    model = PPA(degree=2, whiten=True, random_state=0).fit(_as(kind, X0 * 1e120))
    np.testing.assert_allclose(model.transform(X0 * 1e120), ref.transform(X0), atol=1e-10)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
@pytest.mark.parametrize("degree", sorted(DEGREES))
@pytest.mark.parametrize("scale", UNSTORABLE)
def test_variances_float64_cannot_hold_are_refused_saying_so(scale, degree, kind):
    decade = _total_variance_decade(scale)
    with pytest.raises(ValueError) as info:
        PPA(degree=DEGREES[degree], random_state=0).fit(_as(kind, X0 * scale))
    message = str(info.value)
    assert "X has a total variance of about 1.9" in message, message
    assert f"e{decade:+d}, beyond what float64 holds" in message, message
    assert "inf values" not in message and "Index" not in message


def test_inf_is_reported_only_when_the_input_holds_inf():
    X = X0 * 1e153  # squares overflow: not reported as inf
    X[7, 2] = np.inf
    X[9, 0] = np.nan
    with pytest.raises(
        ValueError, match=r"X contains 1 NaN and 1 inf values, in columns \[0, 2\]"
    ):
        PPA(degree=2).fit(X)


def test_a_driver_of_out_of_range_data_is_refused_by_fit_with_driver():
    # a driver's data cannot be rescaled from outside: fit_with_driver says what to do
    with pytest.raises(
        ValueError, match=r"total variance of 1.9\de\+200, outside .* power of two"
    ):
        PPA(degree=2).fit_with_driver(NumpyDriver(X0 * 1e100))


def test_the_degree_choice_refuses_scores_that_are_not_finite():
    with pytest.raises(FloatingPointError, match=r"degrees \[1, 2\] are not finite"):
        algebra.choose_degree(np.array([np.nan, 1.0]), [1, 2], 1.0)
