"""Small rasters for the tests, shared by the test folders.

:func:`write_tif` writes a (bands, rows, columns) array as a tiled GeoTIFF on a 30 m UTM grid
(EPSG:32621), the layout of the bundled Landsat 8 crop, optionally with a no-data tag and an
acquisition date; :func:`four_band_scene` is a smooth four-band uint16 scene in the range of
Landsat's digital numbers; :func:`assert_same_model` checks that a model fitted on a cube is
the in-memory fit of the cube's valid pixels stacked by hand.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ppa_dask import PPA

#: agreement of a cube's fit and the in-memory fit (of the total variance)
TOL = 1e-10


def write_tif(path, bands, nodata=None, origin=(500000, 4000000), date=None):
    """Write ``bands`` (count, height, width) as the GeoTIFF ``path`` with its upper-left corner
    at ``origin`` and, if given, ``date`` as its TIFFTAG_DATETIME; return the path as a str."""
    import rasterio
    from rasterio.transform import from_origin

    count, height, width = bands.shape
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=width,
        height=height,
        count=count,
        dtype=bands.dtype,
        crs="EPSG:32621",
        transform=from_origin(*origin, 30, 30),
        nodata=nodata,
        tiled=True,
        blockxsize=16,
        blockysize=16,
    ) as dst:
        dst.write(bands)
        if date:
            dst.update_tags(TIFFTAG_DATETIME=date)
    return str(path)


def four_band_scene(seed, ny, nx):
    """Four uint16 bands (t, t^2, sin 2t, sqrt t of one uniform field t in [0.1, 1]) in
    1000..10000, shape (4, ny, nx): a curved cloud of pixels that PPA of degree 2 follows."""
    t = np.random.default_rng(seed).uniform(0.1, 1.0, size=(ny, nx))
    bands = np.round(np.stack([t, t**2, np.sin(2 * t), np.sqrt(t)]) * 9000 + 1000)
    return bands.astype(np.uint16)


def assert_same_model(model, rows, feature_dim):
    """``model`` (fitted on a cube with its features along ``feature_dim``) is PPA(degree=2,
    random_state=0) fitted on ``rows`` in memory: the variances and degrees, and the transform
    of 30 rows given as a cube, to :data:`TOL` of the total variance (the smallest step's
    variance is 1e-7 of it, so its own relative difference is rounding of the sums times
    1e7)."""
    ref = PPA(degree=2, random_state=0).fit(rows)
    total = ref.explained_variance_.sum()
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=TOL, atol=TOL * total
    )
    assert list(model.degrees_) == list(ref.degrees_)
    probe = xr.DataArray(rows[:30].T[:, None, :], dims=(feature_dim, "y", "x"))
    np.testing.assert_allclose(
        model.transform(probe).values[:, 0, :].T,
        ref.transform(rows[:30]),
        rtol=TOL,
        atol=TOL * np.sqrt(total),
    )
