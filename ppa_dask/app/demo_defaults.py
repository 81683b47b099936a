"""The demo's defaults and bounds: its output folders and the size of its cube.

Apart from :mod:`ppa_dask.app.demo` (which imports the engine) so that the command's parser
reads them for ``ppa-dask demo --help`` and its argument checks without importing Dask.

Examples
--------
>>> CUBE_DEMO_MIN_BANDS <= CUBE_DEMO_BANDS
True
"""

from __future__ import annotations

__all__ = [
    "DEMO_OUTPUT",
    "CUBE_DEMO_OUTPUT",
    "CUBE_DEMO_BANDS",
    "CUBE_DEMO_PIXELS",
    "CUBE_DEMO_MIN_BANDS",
    "CUBE_DEMO_MIN_PIXELS",
]

#: Default output folders of ``demo`` and of ``demo --cube`` (the cube part alone).
DEMO_OUTPUT = "ppa-dask-demo"
CUBE_DEMO_OUTPUT = "ppa-dask-demo-cube"
#: Size of the demo cube (bands, image side); pipelines/demo.yaml is the same run.
CUBE_DEMO_BANDS = 32
CUBE_DEMO_PIXELS = 256
#: Smallest accepted sizes, checked before anything runs. Fewer than 4 bands leave no curved
#: structure to compare; below 8 x 8 pixels the cloud-free pixels can be too few for 2-fold
#: cross-validation of degrees up to 5 (12 samples), and that would only show after the table.
CUBE_DEMO_MIN_BANDS = 4
CUBE_DEMO_MIN_PIXELS = 8
