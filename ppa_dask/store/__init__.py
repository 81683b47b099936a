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

from ppa_dask.utils.lazy import attach as _attach

# each name is imported from its module on first use (ppa_dask.utils.lazy): the command's
# --help and argument checks read the formats' vocabulary (.sources) without xarray or Dask
__getattr__, __dir__ = _attach(
    __name__,
    {
        "register_estimator": "ppa_dask.store.encoding",
        "FORMAT_VERSION": "ppa_dask.store.model_files",
        "ModelFileError": "ppa_dask.store.model_files",
        "ModelFileNotFound": "ppa_dask.store.model_files",
        "load_model": "ppa_dask.store.model_files",
        "model_info": "ppa_dask.store.model_files",
        "save_model": "ppa_dask.store.model_files",
        "as_dask_if_zarr": "ppa_dask.store.results",
        "open_array": "ppa_dask.store.results",
        "open_dataset": "ppa_dask.store.results",
        "write_array": "ppa_dask.store.results",
        "write_dataset": "ppa_dask.store.results",
        "write_cube": "ppa_dask.store.sinks",
        "write_result": "ppa_dask.store.sinks",
        "write_table": "ppa_dask.store.sinks",
        "Source": "ppa_dask.store.sources",
        "SourceError": "ppa_dask.store.sources",
        "name_features": "ppa_dask.store.sources",
        "open_cube": "ppa_dask.store.sources",
        "open_input": "ppa_dask.store.sources",
        "open_source": "ppa_dask.store.sources",
        "open_table": "ppa_dask.store.sources",
        "table_array": "ppa_dask.store.sources",
        "patterns": "ppa_dask.store.seam",
    },
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
