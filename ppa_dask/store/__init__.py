"""Files: model files, ensemble member files, result arrays, inputs and the xarray stacker.

Everything is arrays plus JSON, never pickle. One encoder of estimator state and one
allow-list of classes (:mod:`.encoding`) serve model files (:mod:`.model_files`, Zarr v3
groups) and ensemble member files (:mod:`.members`); :mod:`.results` writes and reads result
arrays and datasets atomically and opens Zarr inputs; :mod:`.formats` / :mod:`.format_writers`
read and write NetCDF, GeoTIFF, Parquet and CSV; :mod:`.stacker` turns xarray objects into
``(samples, features)`` arrays and back.

>>> from ppa_dask import store
>>> sorted(store.__all__)[:3]
['FORMAT_VERSION', 'ModelFileError', 'ModelFileNotFound']
"""

from ppa_dask.store.encoding import register_estimator
from ppa_dask.store.format_writers import write_cube, write_table
from ppa_dask.store.formats import name_features, open_cube, open_table, table_array
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
    open_input,
    write_array,
    write_dataset,
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
    "open_cube",
    "open_table",
    "table_array",
    "name_features",
    "write_cube",
    "write_table",
]
