"""A synthetic hyperspectral-like cube: smooth nonlinear spectra of a few latent fields.

Re-exported as :func:`ppa_dask.datasets.make_cube`.

The model (all of it deterministic given the seed):

* three latent fields over the image, smooth random fields made of ``_N_MODES`` random Fourier
  modes (so any pixel of any chunk is evaluated on its own, in closed form):
  vegetation fraction ``f`` in (0, 1), moisture ``m`` in (0, 1) and illumination ``s`` (about
  0.7-1.0, a shading pattern times a per-date sun factor); with ``n_times`` the vegetation and
  moisture follow a seasonal cycle;
* per band with wavelength ``lam`` (400-2400 nm), the reflectance

      r = s * ( f veg(lam) exp(-2 m w(lam)) + (1 - f) soil(lam) (1 - 0.3 m) exp(-0.8 m w(lam)) )

  with smooth end-member spectra ``veg`` (green peak, red edge near 715 nm, NIR plateau),
  ``soil`` (rising) and a water absorption profile ``w`` (bands near 970, 1450 and 1940 nm):
  a 3-dimensional curved manifold in band space, nonlinear in the latent fields;
* Gaussian noise of standard deviation ``noise`` (reflectance units);
* clouds: where another smooth field (new for each date) exceeds its ``1 - cloud_fraction``
  quantile, every band is NaN.

Reproducibility: the Fourier modes come from ``SeedSequence([seed, stream])``; the noise of image
row ``y`` of date ``t`` from ``SeedSequence([seed, 7, t, y])``. Values therefore do not depend on
the Dask chunking (a chunk computes its own rows) nor on whether the cube is in memory or lazy.
"""

from __future__ import annotations

import numbers

import numpy as np

from ppa_dask.store import open_dataset, write_dataset
from ppa_dask.utils.params import AnyOf, Integer, Real, check_param, check_params
from ppa_dask.utils.seeds import RANDOM_STATE, resolve_seed

__all__ = ["make_cube", "cube_wavelengths"]

_N_MODES = 24
_NOISE_STREAM = 7
_STREAMS = {"vegetation": 1, "moisture": 2, "shade": 3, "cloud": 4, "season": 5}
_PIXEL = 30.0  # metres per pixel (the x / y coordinates)

#: What make_cube's parameters may be (dtype and chunks are checked where they are read).
_CUBE_PARAMS = {
    "n_bands": Integer(2),
    "ny": Integer(1),
    "nx": Integer(1),
    "n_times": AnyOf(None, Integer(1)),
    "noise": Real(0),
    "cloud_fraction": Real(0, 1, closed="left"),
    "field_scale": AnyOf(None, Real(0, closed="neither")),
    "random_state": RANDOM_STATE,
}


def cube_wavelengths(n_bands):
    """Band centres in nm, evenly spaced over 400-2400 nm."""
    return np.linspace(400.0, 2400.0, n_bands)


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _endmembers(lam):
    """Vegetation, soil and water-absorption spectra at wavelengths ``lam`` (nm)."""
    g = np.exp
    red_edge = _sigmoid((lam - 715.0) / 18.0) * (1.0 - 0.55 * _sigmoid((lam - 1350.0) / 150.0))
    veg = 0.04 + 0.05 * g(-(((lam - 550.0) / 40.0) ** 2)) + 0.42 * red_edge
    soil = 0.10 + 0.25 * (1.0 - g(-(lam - 400.0) / 700.0))
    water = (
        0.35 * g(-(((lam - 970.0) / 45.0) ** 2))
        + 1.0 * g(-(((lam - 1450.0) / 70.0) ** 2))
        + 1.5 * g(-(((lam - 1940.0) / 90.0) ** 2))
        + 0.4 * _sigmoid((lam - 2250.0) / 80.0)
    )
    return veg, soil, water


class _Field:
    """A smooth random field: ``sqrt(2 / K) sum_k cos(2 pi (a_k y + b_k x) / L + phi_k)``.

    Approximately standard normal at every pixel; correlated over about ``length`` pixels.
    """

    def __init__(self, seed, stream, length, t=0):
        rng = np.random.default_rng(np.random.SeedSequence([seed, stream, t]))
        self.freq = rng.normal(size=(_N_MODES, 2)) / length
        self.phase = rng.uniform(0.0, 2.0 * np.pi, _N_MODES)

    def __call__(self, y, x):
        """Values on the grid ``y`` (rows) x ``x`` (columns) of pixel indices."""
        out = np.zeros((y.size, x.size))
        for (fy, fx), phi in zip(self.freq, self.phase):
            # cos(a + b) = cos a cos b - sin a sin b: two outer products instead of a 2-D cos
            a = 2.0 * np.pi * fy * y + phi
            b = 2.0 * np.pi * fx * x
            out += np.outer(np.cos(a), np.cos(b)) - np.outer(np.sin(a), np.sin(b))
        return out * np.sqrt(2.0 / _N_MODES)


class _CubeModel:
    """Everything a chunk needs to compute its pixels (small; shipped to Dask workers)."""

    def __init__(self, seed, n_bands, nx, n_times, noise, cloud_fraction, length, cloud_length):
        from scipy.stats import norm

        self.seed, self.n_bands, self.nx, self.noise = seed, n_bands, nx, noise
        self.n_dates = 1 if n_times is None else n_times
        self.cloud_fraction = cloud_fraction
        # the fields are about standard normal: this quantile leaves ~cloud_fraction above it
        self.cloud_threshold = (
            float(norm.ppf(1.0 - cloud_fraction)) if cloud_fraction > 0 else np.inf
        )
        self.veg_field = _Field(seed, _STREAMS["vegetation"], length)
        self.moist_field = _Field(seed, _STREAMS["moisture"], length)
        self.shade_field = _Field(seed, _STREAMS["shade"], length)
        self.cloud_fields = [
            _Field(seed, _STREAMS["cloud"], cloud_length, t) for t in range(self.n_dates)
        ]
        self.veg, self.soil, self.water = _endmembers(cube_wavelengths(n_bands))
        rng = np.random.default_rng(np.random.SeedSequence([seed, _STREAMS["season"]]))
        self.season_phase = float(rng.uniform(0, 2 * np.pi))
        self.seasonal = n_times is not None

    def latents(self, t, y, x):
        """(vegetation, moisture, illumination, cloud) on a grid of pixel indices at date t."""
        phase = 2.0 * np.pi * t / 12.0 + self.season_phase if self.seasonal else 0.0
        veg_shift = 1.0 * np.sin(phase) if self.seasonal else 0.0
        moist_shift = 0.6 * np.cos(phase) if self.seasonal else 0.0
        sun = 0.85 + 0.15 * np.cos(phase) if self.seasonal else 1.0
        f = _sigmoid(1.8 * self.veg_field(y, x) + veg_shift)
        m = _sigmoid(1.4 * self.moist_field(y, x) + 0.3 + moist_shift)
        s = sun * (0.85 + 0.15 * np.tanh(self.shade_field(y, x)))
        cloud = self.cloud_fields[t](y, x) > self.cloud_threshold
        return f, m, s, cloud

    def reflectance(self, t, y, x):
        """(bands, rows, cols) reflectance, NaN under clouds."""
        f, m, s, cloud = self.latents(t, y, x)
        w = self.water[:, None, None]
        r = s * (
            f * self.veg[:, None, None] * np.exp(-2.0 * m * w)
            + (1.0 - f) * self.soil[:, None, None] * (1.0 - 0.3 * m) * np.exp(-0.8 * m * w)
        )
        if self.noise > 0:
            for i, row in enumerate(y):
                rng = np.random.default_rng(
                    np.random.SeedSequence([self.seed, _NOISE_STREAM, t, int(row)])
                )
                # the whole image row is drawn, then the chunk's columns taken: chunk-independent
                r[:, i, :] += self.noise * rng.standard_normal((self.n_bands, self.nx))[:, x]
        r[:, cloud] = np.nan
        return r


def _band_block(model, what, dtype, time_axis, block_info=None):
    loc = block_info[None]["array-location"]
    if time_axis:
        (t0, t1), rest = loc[0], loc[1:]
    else:
        (t0, t1), rest = (0, 1), loc
    has_band = what == "reflectance"
    (y0, y1), (x0, x1) = rest[-2], rest[-1]
    y, x = np.arange(y0, y1), np.arange(x0, x1)
    out = []
    for t in range(t0, t1):
        if has_band:
            v = model.reflectance(t, y, x)
            (b0, b1) = rest[0]
            v = v[b0:b1]
        else:
            f, m, s, cloud = model.latents(t, y, x)
            v = {"vegetation": f, "moisture": m, "illumination": s, "cloud": cloud}[what]
        out.append(v)
    out = np.stack(out) if time_axis else out[0]
    return out.astype(dtype, copy=False)


def _normalise_chunks(chunks, dims, shape):
    if chunks is None:
        return None
    if isinstance(chunks, numbers.Integral) and not isinstance(chunks, bool):
        chunks = {"y": int(chunks)}
    if not isinstance(chunks, dict):
        raise ValueError(
            f"chunks must be None, an int (rows of y) or a dict by dimension, got {chunks!r}"
        )
    unknown = set(chunks) - set(dims)
    if unknown:
        raise ValueError(f"chunks names unknown dimension(s) {sorted(unknown)}; dims: {dims}")
    out = []
    for dim, size in zip(dims, shape):
        c = chunks.get(dim, 1 if dim == "time" else size)
        c = size if c in (-1, None) else check_param(f"chunks[{dim!r}]", c, Integer(1))
        out.append(min(c, size))
    return tuple(out)


def make_cube(
    n_bands=32,
    ny=64,
    nx=64,
    n_times=None,
    noise=0.005,
    cloud_fraction=0.15,
    random_state=None,
    chunks=None,
    dtype="float32",
    field_scale=None,
    path=None,
    overwrite=False,
):
    """Synthetic hyperspectral-like cube: spectra that are smooth nonlinear functions of three
    latent fields (vegetation fraction, moisture, illumination) plus noise, with cloud gaps.

    See the module docstring of ``ppa_dask.datasets.cube`` for the exact model. Every value is a
    function of the seed and the pixel's position only (not of ``chunks``).

    Parameters
    ----------
    n_bands, ny, nx : int, default 32, 64, 64
        Number of bands (400-2400 nm) and image size in pixels.
    n_times : int or None, default=None
        With an int, a ``time`` dimension of that many monthly dates: vegetation and moisture
        follow a seasonal cycle, the sun factor varies and each date has its own clouds.
    noise : float, default=0.005
        Standard deviation of the Gaussian noise (reflectance units).
    cloud_fraction : float in [0, 1), default=0.15
        About this fraction of the pixels of each date are cloudy (NaN in every band).
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
    chunks : None, int or dict, optional
        None: numpy-backed (computed now). An int (rows of ``y`` per chunk) or a dict by
        dimension (``{"y": 32, "x": 64}``; ``time`` defaults to 1, other dimensions whole):
        Dask-backed and lazy, chunks computed on the workers.
    dtype : {"float32", "float64"}, default="float32"
        Of the reflectance (values are computed in float64).
    field_scale : float, optional
        Correlation length of the latent fields in pixels (default ``max(ny, nx) / 6``; clouds
        use half of it).
    path : str or os.PathLike, optional
        Also write the Dataset to a Zarr v3 store there (chunk by chunk, atomically, with
        :func:`ppa_dask.store.write_dataset`) and return it opened lazily from the store.
        Without ``chunks`` the store gets chunks of whole images rows of about 8 MiB.
    overwrite : bool, default=False
        Replace an existing cube written by this function at ``path``.

    Returns
    -------
    cube : xarray.Dataset
        ``reflectance`` with dims ``(band, y, x)`` or ``(time, band, y, x)``; the true latent
        fields ``vegetation``, ``moisture``, ``illumination`` and the boolean ``cloud`` mask,
        with dims ``(y, x)`` or ``(time, y, x)``. Coordinates: ``band`` (0..n_bands-1),
        ``wavelength`` (nm, along ``band``), ``y`` and ``x`` (pixel centres in metres),
        ``time`` (monthly dates). ``attrs`` record the generator and its parameters.

    Examples
    --------
    >>> from ppa_dask.datasets import make_cube
    >>> cube = make_cube(n_bands=16, ny=32, nx=32, random_state=0)
    >>> cube["reflectance"].dims, cube["reflectance"].shape
    (('band', 'y', 'x'), (16, 32, 32))
    >>> bool(cube["reflectance"].isnull().any("band").equals(cube["cloud"]))
    True
    """
    import xarray as xr

    # (imported here: datasets re-exports this function, so it imports this module)
    checked = check_params(
        _CUBE_PARAMS,
        dict(
            n_bands=n_bands,
            ny=ny,
            nx=nx,
            n_times=n_times,
            noise=noise,
            cloud_fraction=cloud_fraction,
            field_scale=field_scale,
            random_state=random_state,
        ),
    )
    n_bands, ny, nx, n_times = (checked[k] for k in ("n_bands", "ny", "nx", "n_times"))
    noise, cloud_fraction, field_scale = (
        checked[k] for k in ("noise", "cloud_fraction", "field_scale")
    )
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype("float32"), np.dtype("float64")):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype}")
    length = max(ny, nx) / 6.0 if field_scale is None else field_scale
    seed = resolve_seed(random_state)
    model = _CubeModel(seed, n_bands, nx, n_times, noise, cloud_fraction, length, length / 2.0)

    time_axis = n_times is not None
    lead = ("time",) if time_axis else ()
    lead_shape = (n_times,) if time_axis else ()
    cube_dims = lead + ("band", "y", "x")
    cube_shape = lead_shape + (n_bands, ny, nx)
    field_dims = lead + ("y", "x")
    field_shape = lead_shape + (ny, nx)
    if chunks is None and path is not None:
        rows = max(1, (8 << 20) // (n_bands * nx * dtype.itemsize))
        chunks = {"y": rows}
    cube_chunks = _normalise_chunks(chunks, cube_dims, cube_shape)

    variables = {}
    specs = [("reflectance", cube_dims, cube_shape, dtype)] + [
        (name, field_dims, field_shape, np.dtype(bool) if name == "cloud" else np.dtype("float64"))
        for name in ("vegetation", "moisture", "illumination", "cloud")
    ]
    for name, dims, shape, dt in specs:
        if cube_chunks is None:
            data = _band_block(
                model,
                name,
                dt,
                time_axis,
                block_info={None: {"array-location": [(0, s) for s in shape]}},
            )
        else:
            import dask.array as da

            ch = tuple(c for dim, c in zip(cube_dims, cube_chunks) if dim in dims)
            data = da.map_blocks(
                _band_block,
                model,
                name,
                dt,
                time_axis,
                chunks=da.core.normalize_chunks(ch, shape),
                dtype=dt,
                meta=np.empty((0,) * len(shape), dtype=dt),
            )
        variables[name] = (dims, data)

    coords = {
        "band": np.arange(n_bands),
        "wavelength": ("band", cube_wavelengths(n_bands)),
        "y": (np.arange(ny) + 0.5) * _PIXEL,
        "x": (np.arange(nx) + 0.5) * _PIXEL,
    }
    if time_axis:
        coords["time"] = (np.datetime64("2020-01", "M") + np.arange(n_times)).astype(
            "datetime64[ns]"
        )
    attrs = {
        "generator": "ppa_dask.datasets.make_cube",
        "random_state": seed,
        "noise": noise,
        "cloud_fraction": cloud_fraction,
        "field_scale": length,
        "model": "r = s (f veg e^{-2 m w} + (1 - f) soil (1 - 0.3 m) e^{-0.8 m w}) + noise",
    }
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    ds["wavelength"].attrs["units"] = "nm"
    ds["y"].attrs["units"] = ds["x"].attrs["units"] = "m"
    if path is None:
        return ds

    written = write_dataset(ds, path, overwrite=overwrite)
    return open_dataset(written)
