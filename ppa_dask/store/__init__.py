"""Files: model files, ensemble member files, result arrays, inputs and the xarray stacker.

Everything is arrays plus JSON, never pickle. One encoder of estimator state and one
allow-list of classes (:mod:`.encoding`) serve model files (:mod:`.model_files`, Zarr v3
groups) and ensemble member files (:mod:`.members`); :mod:`.results` writes and reads result
arrays and datasets atomically and opens Zarr inputs; :mod:`.sources` / :mod:`.sinks` are the
one data-I/O layer (the formats' vocabulary, :func:`open_source` and :func:`write_result`:
Zarr, NetCDF, GeoTIFF, Parquet and CSV); :mod:`.stacker` turns xarray objects into
``(samples, features)`` arrays and back, and :mod:`.seam` is the one place the estimators'
methods take xarray input through (decorators that stack and unstack around them).

>>> from ppa_dask import store
>>> sorted(store.__all__)[:3]
['FORMAT_VERSION', 'ModelFileError', 'ModelFileNotFound']
"""

from ppa_dask.store.encoding import register_estimator
from ppa_dask.store.model_files import (
    FORMAT_VERSION,
    ModelFileError,
    ModelFileNotFound,
    load_model,
    model_info,
    save_model,
)
from ppa_dask.store.results import (
    as_dask_if_zarr,
    open_array,
    open_dataset,
    write_array,
    write_dataset,
)
from ppa_dask.store.seam import patterns
from ppa_dask.store.sinks import write_cube, write_result, write_table
from ppa_dask.store.sources import (
    Source,
    SourceError,
    name_features,
    open_cube,
    open_input,
    open_source,
    open_table,
    table_array,
)

__all__ = [
    "FORMAT_VERSION",
    "ModelFileError",
    "ModelFileNotFound",
    "register_estimator",
    "save_model",
    "load_model",
    "model_info",
    "write_array",
    "open_array",
    "write_dataset",
    "open_dataset",
    "open_input",
    "as_dask_if_zarr",
    "open_source",
    "Source",
    "SourceError",
    "write_result",
    "open_cube",
    "open_table",
    "table_array",
    "name_features",
    "write_cube",
    "write_table",
    "patterns",
]
