"""The fit's magnitude policy: data whose float64 moments would not be exact are fitted divided
by a power of two, and the model is scaled back.

PPA is scale-equivariant. A fit's moments are sums of squares of the data, so data of extreme
magnitude would overflow them or sink them into the subnormals. :class:`MagnitudeCheck` wraps a
driver (:mod:`ppa_dask.ppa.drivers`) and looks at the first pass: a total variance (trace of
the covariance) inside :data:`VARIANCE_RANGE` is fitted as it is (data of ordinary magnitude pay
nothing); outside it, the data are divided by ``2**e``, ``e`` the binary exponent of their
largest ``|x|`` (:func:`rescale_exponent`), so that it falls in ``[1/2, 1)``.
:func:`fit_in_range` runs a fit that way, refitting on ``driver.rescaled(-e)`` (exact in
float64: powers of two) when the first pass asks for it, and :func:`in_input_units` scales the
fitted attributes back, exactly. A model whose variances float64 cannot store in the input's
units (outside :data:`SMALLEST_VARIANCE` to :data:`LARGEST_VARIANCE`) is refused, saying by how
much (:func:`check_storable_variance`).

Examples
--------
>>> rescale_exponent(3.0) is None  # inside MAGNITUDE_RANGE: nothing to rescale
True
>>> rescale_exponent(3.0 * 2.0**300)  # divided by 2**302, its largest |x| is 0.75
302
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "LARGEST_VARIANCE",
    "MAGNITUDE_RANGE",
    "SMALLEST_VARIANCE",
    "UNIT_POWERS",
    "VARIANCE_RANGE",
    "MagnitudeCheck",
    "Rescale",
    "check_storable_variance",
    "fit_in_range",
    "in_input_units",
    "rescale_exponent",
]

#: Total variance (trace of the covariance) inside which a fit's float64 moments are exact to
#: rounding: sums of n squares stay far from overflow and residuals far above the subnormals.
VARIANCE_RANGE = (2.0**-500, 2.0**500)
#: Outside :data:`VARIANCE_RANGE`, data whose largest ``|x|`` is outside this range are fitted
#: divided by a power of two near it (:func:`rescale_exponent`).
MAGNITUDE_RANGE = (2.0**-250, 2.0**250)
#: The variances of a model (``explained_variance_`` ...) must be normal float64 numbers with
#: room to spare: the total variance in the input's units is refused below this ...
SMALLEST_VARIANCE = 2.0**-992
#: ... or above this (or when it overflows).
LARGEST_VARIANCE = 2.0**1022
#: Fitted attributes in units of X (power 1) or of X squared (power 2); the rest are unit-free.
UNIT_POWERS = {
    "mean_": 1,
    "coefficients_": 1,
    "basis_intervals_": 1,
    "alpha_ranges_": 1,
    "explained_variance_": 2,
    "residual_variance_": 2,
    "cv_scores_": 2,
}
# ... and the entries of PPA-GD's history (gd_history_) in units of X squared
_GD_UNIT_POWERS = {"objective_start": 2, "objective": 2}


class Rescale(Exception):
    """The first pass found data to be fitted divided by ``2**exponent`` (caught by
    :func:`fit_in_range`)."""

    def __init__(self, exponent):
        super().__init__(exponent)
        self.exponent = exponent


def rescale_exponent(largest):
    """The power of two that data of largest ``|x|`` ``largest`` are divided by, or None.

    Parameters
    ----------
    largest : float
        The data's largest ``|x|`` (``driver.max_abs()``).

    Returns
    -------
    int or None
        ``e`` with ``largest / 2**e`` in ``[1/2, 1)`` (``np.frexp``); None when ``largest`` is
        inside :data:`MAGNITUDE_RANGE` (nothing to rescale) or not finite (the fit reports
        NaN and inf itself).

    Examples
    --------
    >>> rescale_exponent(2.0**-300), rescale_exponent(2.0**250), rescale_exponent(float("nan"))
    (-299, None, None)
    """
    if not np.isfinite(largest) or MAGNITUDE_RANGE[0] <= largest <= MAGNITUDE_RANGE[1]:
        return None
    return int(np.frexp(largest)[1])


class MagnitudeCheck:
    """A driver whose first pass also checks that float64 moments can hold the data.

    Every other attribute is the wrapped driver's.

    Parameters
    ----------
    driver : ppa_dask.ppa.drivers.Driver
    magnitude : callable, optional
        Returns the data's largest ``|x|`` (``driver.max_abs``), called only when the moments
        are out of :data:`VARIANCE_RANGE`; given by :func:`fit_in_range`, which can refit on
        rescaled data: the first pass then raises :class:`Rescale`. Without it (a driver of
        :meth:`ppa_dask.PPA.fit_with_driver`) out-of-range data raise a ValueError saying so.
    exponent : int, default=0
        That of data already divided by ``2**exponent``: their variance in the input's units
        is checked against what a model can store (:func:`check_storable_variance`).

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask.ppa.drivers import NumpyDriver
    >>> X = np.arange(8.0).reshape(4, 2) * 2.0**300
    >>> MagnitudeCheck(NumpyDriver(X)).first_pass(np.arange(4))
    Traceback (most recent call last):
    ...
    ValueError: X has a total variance of 4.15e+181, outside [3.05e-151, 3.27e+150] where ...
    """

    def __init__(self, driver, magnitude=None, exponent=0):
        self._driver, self._magnitude, self._exponent = driver, magnitude, exponent

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def first_pass(self, sample_index):
        first = self._driver.first_pass(sample_index)
        finite = not (first["n_nan"].any() or first["n_inf"].any())
        variance = float(np.trace(first["scatter"])) / max(first["n"], 1) if finite else np.inf
        if self._exponent:
            check_storable_variance(variance, self._exponent)
            return first
        lo, hi = VARIANCE_RANGE
        if lo <= variance <= hi:
            return first
        if self._magnitude is None:
            if not finite or variance == 0:
                return first  # NaN/inf (or squares that overflow): reported by the fit
            raise ValueError(
                f"X has a total variance of {variance:.3g}, outside [{lo:.3g}, {hi:.3g}] "
                "where PPA's float64 moments are accurate; divide X by a power of two near "
                "its largest |x| (PPA.fit does this itself)."
            )
        exponent = rescale_exponent(self._magnitude())
        if exponent is None:
            return first  # NaN or inf in X (the fit reports them), or nothing to rescale
        raise Rescale(exponent)


def check_storable_variance(variance, exponent):
    """Refuse data (fitted divided by ``2**exponent``) whose variances a model cannot store.

    Parameters
    ----------
    variance : float
        The total variance of the data as fitted.
    exponent : int
        They were divided by ``2**exponent``: in the input's units the variance is
        ``variance * 4**exponent``, which must lie in [:data:`SMALLEST_VARIANCE`,
        :data:`LARGEST_VARIANCE`] (a variance of 0 is let through).

    Raises
    ------
    ValueError
        Naming the variance in decimal and the power of two to multiply X by.

    Examples
    --------
    >>> check_storable_variance(1.0, 511)  # 2**1022 in the input's units: stored
    >>> check_storable_variance(2.0, 511)
    Traceback (most recent call last):
    ...
    ValueError: X has a total variance of about 8.99e+307, beyond what float64 holds ...
    """
    with np.errstate(over="ignore", under="ignore"):
        in_units = float(np.ldexp(variance, 2 * exponent))
    if variance > 0 and not SMALLEST_VARIANCE <= in_units <= LARGEST_VARIANCE:
        # written in decimal without forming the number, which float64 cannot hold
        power = np.log10(variance) + 2 * exponent * np.log10(2.0)
        decade = int(np.floor(power))
        raise ValueError(
            f"X has a total variance of about {10 ** (power - decade):.3g}e{decade:+d}, "
            "beyond what float64 holds with full "
            f"precision ({SMALLEST_VARIANCE:.3g} to {LARGEST_VARIANCE:.3g}), so the model's "
            "variances (explained_variance_, ...) cannot be stored; multiply X by a constant "
            f"(e.g. 2**{-exponent}) and fit again."
        )


def in_input_units(fitted, exponent):
    """Fitted attributes of data divided by ``2**exponent``, in the input's units.

    Parameters
    ----------
    fitted : dict
        Attribute name -> value (:func:`ppa_dask.ppa.steps.fit_steps`'s result).
    exponent : int

    Returns
    -------
    dict
        A new dict: the attributes of :data:`UNIT_POWERS` (and PPA-GD's objectives in
        ``gd_history_``) multiplied by ``2**(power * exponent)``, exactly; the rest as given.

    Examples
    --------
    >>> out = in_input_units({"mean_": np.array([0.5]), "rank_": 3}, 10)
    >>> out["mean_"].tolist(), out["rank_"]
    ([512.0], 3)
    """
    out = dict(fitted)
    for name, power in UNIT_POWERS.items():
        if out.get(name) is not None:
            out[name] = np.ldexp(out[name], power * exponent)
    if out.get("gd_history_"):
        out["gd_history_"] = [
            {
                k: float(np.ldexp(v, _GD_UNIT_POWERS[k] * exponent)) if k in _GD_UNIT_POWERS else v
                for k, v in record.items()
            }
            for record in out["gd_history_"]
        ]
    return out


def fit_in_range(driver, fit):
    """Run ``fit`` on ``driver``'s data, or on them divided by a power of two when their
    float64 moments would not be exact; the drivers are closed.

    Parameters
    ----------
    driver : ppa_dask.ppa.drivers.Driver
        With ``max_abs()`` and ``rescaled(exponent)`` (the in-memory and Dask drivers).
    fit : callable
        ``fit(checked, exponent, extra_passes)``: fits through ``checked`` (a
        :class:`MagnitudeCheck` of the driver) data divided by ``2**exponent`` (0: as given);
        ``extra_passes`` is the number of passes the first attempt cost (0, or 2 after a
        rescale: the discarded first pass and the max-abs reduction). It converts its result
        back (:func:`in_input_units`).

    Returns
    -------
    What ``fit`` returned.

    Examples
    --------
    >>> from ppa_dask.ppa.drivers import NumpyDriver
    >>> X = np.arange(150.0).reshape(50, 3) * 2.0**400  # largest |x| 149 * 2**400
    >>> def fit(checked, exponent, extra_passes):
    ...     first = checked.first_pass(np.arange(5))  # raises Rescale on the data as given
    ...     return exponent, extra_passes, float(first["mean"].max())
    >>> fit_in_range(NumpyDriver(X), fit)  # fitted divided by 2**408: mean 75.5 / 2**8
    (408, 2, 0.294921875)
    """
    try:
        return fit(MagnitudeCheck(driver, driver.max_abs), 0, 0)
    except Rescale as rescale:
        exponent = rescale.exponent
    finally:
        driver.close()
    driver = driver.rescaled(-exponent)
    try:
        return fit(MagnitudeCheck(driver, exponent=exponent), exponent, 2)
    finally:
        driver.close()
