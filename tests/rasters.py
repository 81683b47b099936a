"""Small GeoTIFFs for the tests: one writer shared by the test folders.

:func:`write_tif` writes a (bands, rows, columns) array as a tiled GeoTIFF on a 30 m UTM grid
(EPSG:32621), the layout of the bundled Landsat 8 crop, optionally with a no-data tag.
"""

from __future__ import annotations


def write_tif(path, bands, nodata=None):
    """Write ``bands`` (count, height, width) as the GeoTIFF ``path``; return it as a str."""
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
        transform=from_origin(500000, 4000000, 30, 30),
        nodata=nodata,
        tiled=True,
        blockxsize=16,
        blockysize=16,
    ) as dst:
        dst.write(bands)
    return str(path)
