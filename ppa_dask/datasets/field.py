"""A synthetic climate field with a curved leading mode: an ENSO-like sea surface temperature
anomaly whose warm and cold phases differ in shape.

Re-exported as :func:`ppa_dask.datasets.make_enso_field`.

The model (a ``(time, latitude, longitude)`` field on a regular grid of 60 S - 60 N by
0 - 360 E, monthly dates), all of it deterministic given the seed:

* an ENSO-like index ``s(t)``: an AR(1) series (lag-one correlation 0.9), standardised over
  the record (mean 0, variance 1);
* the leading mode, one curve in the space of maps:

      s(t) P1 + (s(t)^2 - 1) P2

  ``P1`` is the mean ENSO pattern (warm in the central-eastern equatorial Pacific) and ``P2``
  the asymmetry, a dipole along the equator (positive in the far east, negative in the central
  Pacific) orthogonal to ``P1`` over the ocean cells. With ``s = +2`` the map is
  ``2 P1 + 3 P2``, with ``s = -2`` it is ``-(2 P1 - 3 P2)``: warm events are stronger and
  shifted east, cold events weaker and centred further west, as observed El Nino and La Nina
  events are. Since ``P2`` is orthogonal to ``P1`` and ``s^2 - 1`` is uncorrelated with a
  symmetric ``s``, the first EOF of the field is ``P1``: a linear mode cannot hold the
  asymmetry, which is a quadratic function of that EOF's coefficient;
* two smaller independent modes (an Indian Ocean dipole and a tropical Atlantic mode), each a
  fixed pattern times its own standardised AR(1) series;
* white Gaussian noise of standard deviation ``noise`` in every cell;
* with ``land=True``, NaN on a fixed idealised land mask (a few elliptical continents that
  leave the tropical Pacific open).

Reproducibility: the series and the noise come from ``SeedSequence([seed, stream])``, the
patterns and the mask from the grid alone.
"""

from __future__ import annotations

import numpy as np

from ppa_dask.utils.params import Integer, Options, Real, check_params
from ppa_dask.utils.seeds import RANDOM_STATE, resolve_seed

__all__ = ["make_enso_field"]

_STREAMS = {"enso": 1, "indian": 2, "atlantic": 3, "noise": 4}
_LAT_EDGE = 60.0  # the grid spans [-60, 60] degrees of latitude
_START = "1980-01"
#: Idealised continents: (centre latitude, centre longitude, half-axes in degrees).
_CONTINENTS = (
    (-15.0, 298.0, 27.0, 15.0),  # South America
    (42.0, 262.0, 22.0, 30.0),  # North America
    (16.0, 268.0, 9.0, 8.0),  # Central America
    (5.0, 20.0, 32.0, 22.0),  # Africa
    (48.0, 90.0, 14.0, 65.0),  # Eurasia
    (-25.0, 134.0, 11.0, 17.0),  # Australia
    (2.0, 112.0, 7.0, 9.0),  # the Maritime Continent
)

_FIELD_PARAMS = {
    "n_times": Integer(3),
    "n_lat": Integer(2),
    "n_lon": Integer(2),
    "noise": Real(0),
    "land": Options(True, False),
    "return_modes": Options(True, False),
    "random_state": RANDOM_STATE,
}


def _bump(lat, lon, lat0, lon0, lat_scale, lon_scale):
    """A Gaussian bump on the grid (``lat`` column, ``lon`` row), longitudes wrapped."""
    dlon = (lon - lon0 + 180.0) % 360.0 - 180.0
    return np.exp(-(((lat - lat0) / lat_scale) ** 2) - (dlon / lon_scale) ** 2)


def _land(lat, lon):
    land = np.zeros(np.broadcast_shapes(lat.shape, lon.shape), dtype=bool)
    for lat0, lon0, a, b in _CONTINENTS:
        dlon = (lon - lon0 + 180.0) % 360.0 - 180.0
        land |= ((lat - lat0) / a) ** 2 + (dlon / b) ** 2 <= 1.0
    return land


def _ar1(rng, n, rho):
    """A standardised AR(1) series (mean 0, variance 1 over its ``n`` values)."""
    e = rng.standard_normal(n + 50)
    x = np.empty_like(e)
    x[0] = e[0]
    for t in range(1, e.size):
        x[t] = rho * x[t - 1] + e[t]
    x = x[50:]  # the burn-in forgets the start
    return (x - x.mean()) / x.std()


def make_enso_field(
    n_times=360, n_lat=48, n_lon=144, noise=0.1, land=True, random_state=0, return_modes=False
):
    """Synthetic sea surface temperature anomalies with an asymmetric ENSO-like leading mode.

    The field is ``s P1 + (s^2 - 1) P2`` plus two smaller independent modes plus noise, where
    ``s`` is a standardised ENSO-like index, ``P1`` the mean pattern and ``P2`` (orthogonal to
    ``P1``) the difference between warm and cold events: a mode that is one curve, not a line,
    in the space of maps. PCA's first EOF is ``P1`` alone; a one-component PPA of degree 2
    follows the curve. See the module docstring of ``ppa_dask.datasets.field`` for the exact
    model. Every value is a function of the seed and the grid only.

    Parameters
    ----------
    n_times : int, default=360
        Number of monthly dates (from January 1980).
    n_lat, n_lon : int, default 48, 144
        Grid cells along latitude (60 S - 60 N) and longitude (0 - 360 E): 2.5 degrees by
        default, 6912 cells of which 5430 are ocean.
    noise : float, default=0.1
        Standard deviation of the white noise in every cell (K).
    land : bool, default=True
        NaN over the idealised land mask (every date), as a real SST field has.
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState, \
default=0
    return_modes : bool, default=False
        Also return the truth: a Dataset with ``index`` (``time``, the ENSO-like index ``s``),
        ``pattern`` (``P1``) and ``asymmetry`` (``P2``), both ``(latitude, longitude)`` maps in
        K, NaN over land when ``land``.

    Returns
    -------
    field : xarray.DataArray
        ``"sst_anomaly"`` with dims ``(time, latitude, longitude)``, float64; coordinates
        ``time`` (monthly dates), ``latitude`` (degrees north, cell centres) and
        ``longitude`` (degrees east); ``attrs`` give ``units`` (K), ``long_name``, the
        generator and its parameters.
    modes : xarray.Dataset
        Only with ``return_modes=True``.

    Examples
    --------
    >>> from ppa_dask.datasets import make_enso_field
    >>> field = make_enso_field(n_times=24, random_state=0)
    >>> field.dims, field.shape, field.attrs["units"]
    (('time', 'latitude', 'longitude'), (24, 48, 144), 'K')
    >>> int(field.isel(time=0).notnull().sum())  # ocean cells: the features of a fit
    5430
    >>> field, modes = make_enso_field(n_times=24, return_modes=True)
    >>> s = modes["index"]  # the true ENSO-like index, standardised
    >>> bool(abs(s.mean()) < 1e-12), round(float(s.std()), 12)
    (True, 1.0)
    """
    import xarray as xr

    # (imported here: datasets re-exports this function, so it imports this module)
    checked = check_params(
        _FIELD_PARAMS,
        dict(
            n_times=n_times,
            n_lat=n_lat,
            n_lon=n_lon,
            noise=noise,
            land=land,
            return_modes=return_modes,
            random_state=random_state,
        ),
    )
    n_times, n_lat, n_lon, noise = (checked[k] for k in ("n_times", "n_lat", "n_lon", "noise"))
    land = bool(checked["land"])
    seed = resolve_seed(random_state)

    step_lat, step_lon = 2.0 * _LAT_EDGE / n_lat, 360.0 / n_lon
    lat = -_LAT_EDGE + (np.arange(n_lat) + 0.5) * step_lat
    lon = (np.arange(n_lon) + 0.5) * step_lon
    LAT, LON = lat[:, None], lon[None, :]
    ocean = ~_land(LAT, LON) if land else np.ones((n_lat, n_lon), dtype=bool)

    p1 = 1.0 * _bump(LAT, LON, 0.0, 235.0, 12.0, 45.0)
    east, central = _bump(LAT, LON, -2.0, 268.0, 9.0, 18.0), _bump(LAT, LON, 2.0, 195.0, 9.0, 25.0)
    p2 = 0.45 * (east - central)
    # P2 orthogonal to P1 over the cells a fit sees: then P1 is the first EOF exactly (up to the
    # noise and sampling) and the asymmetry is nowhere in a linear mode
    p2 -= (p1[ocean] @ p2[ocean]) / (p1[ocean] @ p1[ocean]) * p1
    indian = 0.5 * (
        _bump(LAT, LON, -2.0, 60.0, 12.0, 18.0) - _bump(LAT, LON, -6.0, 100.0, 8.0, 12.0)
    )
    atlantic = 0.4 * _bump(LAT, LON, 12.0, 320.0, 10.0, 20.0)

    def series(stream, rho):
        return _ar1(np.random.default_rng(np.random.SeedSequence([seed, stream])), n_times, rho)

    s = series(_STREAMS["enso"], 0.9)
    values = (
        s[:, None, None] * p1
        + (s**2 - 1.0)[:, None, None] * p2
        + series(_STREAMS["indian"], 0.8)[:, None, None] * indian
        + series(_STREAMS["atlantic"], 0.95)[:, None, None] * atlantic
    )
    if noise > 0:
        rng = np.random.default_rng(np.random.SeedSequence([seed, _STREAMS["noise"]]))
        values += noise * rng.standard_normal(values.shape)
    values[:, ~ocean] = np.nan

    time = (np.datetime64(_START, "M") + np.arange(n_times)).astype("datetime64[ns]")
    coords = {"time": time, "latitude": lat, "longitude": lon}
    field = xr.DataArray(
        values,
        dims=("time", "latitude", "longitude"),
        coords=coords,
        name="sst_anomaly",
        attrs={
            "units": "K",
            "long_name": "sea surface temperature anomaly",
            "generator": "ppa_dask.datasets.make_enso_field",
            "random_state": seed,
            "noise": noise,
            "model": "s P1 + (s^2 - 1) P2 + Indian Ocean + Atlantic modes + noise",
        },
    )
    field["latitude"].attrs.update(units="degrees_north", standard_name="latitude")
    field["longitude"].attrs.update(units="degrees_east", standard_name="longitude")
    if not return_modes:
        return field

    def as_map(p, long_name):
        out = xr.DataArray(np.where(ocean, p, np.nan), dims=("latitude", "longitude"))
        out.attrs.update(units="K", long_name=long_name)
        return out

    modes = xr.Dataset(
        {
            "index": ("time", s, {"long_name": "ENSO-like index s (standardised)"}),
            "pattern": as_map(p1, "mean ENSO pattern P1"),
            "asymmetry": as_map(p2, "warm-cold asymmetry P2 (coefficient s^2 - 1)"),
        },
        coords={k: field[k] for k in coords},
    )
    return field, modes
