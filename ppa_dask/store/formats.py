"""Reading the formats users hold: NetCDF, GeoTIFF, series of NetCDF files, Parquet and CSV.

Cubes
-----
:func:`open_cube` opens a variable of a NetCDF file (xarray, ``h5netcdf`` engine), a GeoTIFF or
Cloud-Optimized GeoTIFF (rioxarray: the bands are the features, dimension ``band``; the CRS and
transform ride along as the ``spatial_ref`` coordinate), or many NetCDF files making one series
(a glob or a list: ``xarray.open_mfdataset``, concatenated along ``concat_dim`` in the order
given, a glob sorted by name). Nothing is read but metadata: the DataArray is Dask-backed with
the file's own chunks (the HDF5 chunks of a NetCDF variable, Dask's automatic chunks for a
contiguous one; the tile or strip size of a GeoTIFF; at least one chunk per file of a series),
so every task reads whole storage blocks. :class:`ppa_dask.PPA` fits it through the stacker
(``fit(cube, feature_dim=...)``), and its component images keep the coordinates; writing them
back in the input's format is :func:`ppa_dask.store.write_cube`.

Tables
------
:func:`open_table` opens Parquet (a file, a folder of parts or a glob) or CSV with
``dask.dataframe``, keeping the named ``columns`` (all by default), each checked to be numeric;
:func:`table_array` turns it into a ``(samples, features)`` Dask array with known chunk sizes
and the column names, which become the fitted estimator's ``feature_names_in_``
(:func:`name_features`).

:func:`file_format` tells which of these a path names (``None`` for anything else, e.g. Zarr).
"""

from __future__ import annotations

import glob
import os

import numpy as np

__all__ = [
    "BAND_DIM",
    "CUBE_FORMATS",
    "TABLE_FORMATS",
    "file_format",
    "is_series",
    "expand_paths",
    "open_cube",
    "open_table",
    "table_array",
    "name_features",
]

#: Cube formats read by :func:`open_cube` and written by ``write_cube``.
CUBE_FORMATS = ("netcdf", "geotiff")
#: Table formats read by :func:`open_table` and written by ``write_table``.
TABLE_FORMATS = ("parquet", "csv")
_SUFFIXES = {
    ".nc": "netcdf",
    ".nc4": "netcdf",
    ".netcdf": "netcdf",
    ".cdf": "netcdf",
    ".tif": "geotiff",
    ".tiff": "geotiff",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
}
_GLOB_CHARS = "*?["
#: The dimension of a GeoTIFF holding its bands (rioxarray's name).
BAND_DIM = "band"
_NUMERIC_KINDS = "biuf"


def _is_glob(path):
    return isinstance(path, str) and any(c in path for c in _GLOB_CHARS)


def file_format(path):
    """The format a path (a glob, or a list of paths) names by its suffix, or None.

    Examples
    --------
    >>> file_format("cube.nc"), file_format("scene.TIF"), file_format(["a.nc", "b.nc"])
    ('netcdf', 'geotiff', 'netcdf')
    >>> file_format("data/*.parquet"), file_format("model.zarr")
    ('parquet', None)
    """
    if isinstance(path, (list, tuple)):
        formats = {file_format(p) for p in path}
        return formats.pop() if len(formats) == 1 else None
    name = os.fspath(path).rstrip("/")
    return _SUFFIXES.get(os.path.splitext(name)[1].lower())


def is_series(path):
    """Whether ``path`` names many NetCDF files (a list, or a glob): one series.

    Examples
    --------
    >>> is_series("data/*.nc"), is_series(["a.nc", "b.nc"]), is_series("a.nc")
    (True, True, False)
    """
    many = isinstance(path, (list, tuple)) or _is_glob(path)
    return many and file_format(path) == "netcdf"


def expand_paths(path):
    """The existing files a path, a glob or a list of them names, in order (a glob sorted).

    Raises FileNotFoundError naming the first path or pattern that matches nothing.

    Examples
    --------
    >>> import tempfile
    >>> try:
    ...     expand_paths(os.path.join(tempfile.mkdtemp(), "*.nc"))
    ... except FileNotFoundError as exc:
    ...     print("no files match" in str(exc))
    True
    """
    items = list(path) if isinstance(path, (list, tuple)) else [path]
    if not items:
        raise FileNotFoundError("an empty list of paths names no file")
    out = []
    for item in items:
        item = os.fspath(item)
        if _is_glob(item):
            found = sorted(glob.glob(item))
            if not found:
                raise FileNotFoundError(f"no files match {item!r}")
            out += found
        elif not os.path.exists(item):
            raise FileNotFoundError(f"no such file {item!r}")
        else:
            out.append(item)
    return out


# -------------------------------------------------------------------------------------------
# cubes
# -------------------------------------------------------------------------------------------


def _pick_variable(ds, variable, where):
    names = [str(n) for n in ds.data_vars]
    if variable is None:
        if len(names) != 1:
            raise ValueError(
                f"{where} holds the variables {names}; choose one with variable= (--variable)"
            )
        variable = names[0]
    if variable not in ds.data_vars:
        raise ValueError(f"{where} has no variable {variable!r}; variables: {names}")
    return ds[variable]


def _open_netcdf(path, variable):
    import xarray as xr

    try:
        ds = xr.open_dataset(path, engine="h5netcdf", chunks={})
    except Exception as exc:
        raise ValueError(f"cannot open {path!r} as NetCDF (h5netcdf engine): {exc}") from None
    cube = _pick_variable(ds, variable, repr(path))
    if cube.encoding.get("chunksizes") is None:
        # a contiguous variable has no storage chunks: Dask's automatic chunks read
        # hyperslabs of it instead of the whole variable in one task
        ds = xr.open_dataset(path, engine="h5netcdf", chunks="auto")
        cube = ds[cube.name]
    return cube


def _open_series(paths, variable, concat_dim):
    import xarray as xr

    try:
        ds = xr.open_mfdataset(
            paths,
            engine="h5netcdf",
            combine="nested",
            concat_dim=concat_dim,
            chunks={},
            data_vars="minimal",
            coords="minimal",
            compat="override",
            join="exact",
            parallel=False,
        )
    except Exception as exc:
        raise ValueError(
            f"cannot open the {len(paths)} files {paths[0]!r} ... {paths[-1]!r} as one NetCDF "
            f"series along {concat_dim!r}: {exc}"
        ) from None
    where = f"the series {paths[0]!r} ... ({len(paths)} files)"
    cube = _pick_variable(ds, variable, where)
    cube.encoding.setdefault("source", paths[0])
    return cube


def _geotiff_block(path):
    import rasterio

    with rasterio.open(path) as src:
        rows, cols = src.block_shapes[0]
    return int(rows), int(cols)


def _open_geotiff(path, variable, feature_dim):
    import rioxarray

    if variable is not None:
        raise ValueError(
            f"{path!r} is a GeoTIFF: its bands are the features, it has no variables "
            f"(variable={variable!r} applies to NetCDF)"
        )
    try:
        rows, cols = _geotiff_block(path)
        cube = rioxarray.open_rasterio(
            path, chunks={BAND_DIM: -1, "y": rows, "x": cols}, masked=True
        )
    except Exception as exc:
        raise ValueError(f"cannot open {path!r} as a GeoTIFF (rasterio): {exc}") from None
    if isinstance(cube, list) or BAND_DIM not in getattr(cube, "dims", ()):
        raise ValueError(
            f"{path!r} did not open as one (band, y, x) raster; a GeoTIFF with subdatasets is "
            "not supported"
        )
    if feature_dim == "component":
        # a GeoTIFF of component images (written by write_cube): band i is component i
        return cube.rename({BAND_DIM: "component"})
    if feature_dim not in (None, BAND_DIM):
        raise ValueError(
            f"{path!r} is a GeoTIFF: its features are the bands, dimension {BAND_DIM!r}; "
            f"got feature_dim={feature_dim!r}"
        )
    if cube.sizes[BAND_DIM] < 2:
        raise ValueError(
            f"{path!r} is a GeoTIFF with {cube.sizes[BAND_DIM]} band; PPA needs at least 2 "
            f"bands as features (dimension {BAND_DIM!r})"
        )
    return cube


def open_cube(path, variable=None, feature_dim=None, *, concat_dim="time"):
    """Open a NetCDF file, a GeoTIFF or a series of NetCDF files as a lazy DataArray.

    Parameters
    ----------
    path : str, os.PathLike or list of them
        A NetCDF file (``.nc``, ``.nc4``, ``.cdf``), a GeoTIFF / Cloud-Optimized GeoTIFF
        (``.tif``, ``.tiff``), or a glob / list of NetCDF files making one series.
    variable : str, optional
        The NetCDF variable; may be omitted when the file holds one data variable. A GeoTIFF
        has none (its bands are the features).
    feature_dim : str, optional
        The dimension holding the features, checked to exist. A GeoTIFF's is ``"band"`` (the
        default for it); ``"component"`` reads a GeoTIFF of component images, band ``i``
        being component ``i``.
    concat_dim : str, default="time"
        A series: the dimension the files are concatenated along, in the order given (a glob
        sorted by name).

    Returns
    -------
    cube : xarray.DataArray
        Dask-backed, one chunk per storage chunk of the file (HDF5 chunks, GeoTIFF tiles or
        strips, at least one chunk per file of a series); nothing but metadata is read. A
        GeoTIFF keeps its CRS and transform (``cube.rio.crs``, ``cube.rio.transform()``) and its
        nodata pixels are NaN (left out of a fit, NaN in the component images).

    Raises
    ------
    FileNotFoundError
        A missing file, or a glob matching nothing.
    ValueError
        A file of the wrong format, a missing variable, a missing feature dimension, a GeoTIFF
        asked for another feature dimension than ``band`` or with a single band.

    Examples
    --------
    >>> import os, tempfile, numpy as np, xarray as xr
    >>> from ppa_dask import PPA
    >>> from ppa_dask.store import open_cube
    >>> path = os.path.join(tempfile.mkdtemp(), "cube.nc")
    >>> t = np.random.default_rng(0).uniform(size=(20, 30))
    >>> refl = xr.DataArray(np.stack([t, t**2, t**3]), dims=("band", "y", "x"), name="refl")
    >>> refl.to_netcdf(path, engine="h5netcdf", encoding={"refl": {"chunksizes": (3, 10, 30)}})
    >>> cube = open_cube(path, feature_dim="band")
    >>> cube.chunks
    ((3,), (10, 10), (30,))
    >>> comps = PPA(degree=2, random_state=0).fit(cube, feature_dim="band").transform(cube)
    >>> comps.dims
    ('component', 'y', 'x')
    """
    if isinstance(path, (list, tuple)) or _is_glob(path):
        paths = expand_paths(path)
        fmt = file_format(paths)
        if fmt != "netcdf":
            raise ValueError(
                f"a series of files is read from NetCDF files (.nc); got {paths[:3]}"
                + (" ..." if len(paths) > 3 else "")
            )
        cube = _open_series(paths, variable, concat_dim) if len(paths) > 1 else None
        if cube is None:
            cube = _open_netcdf(paths[0], variable)
        where = f"{paths[0]!r}" + (f" ... ({len(paths)} files)" if len(paths) > 1 else "")
    else:
        path = os.fspath(path)
        (path,) = expand_paths(path)
        fmt = file_format(path)
        if fmt == "geotiff":
            return _open_geotiff(path, variable, feature_dim)
        if fmt != "netcdf":
            raise ValueError(
                f"{path!r}: open_cube reads NetCDF (.nc, .nc4, .cdf) and GeoTIFF (.tif, .tiff) "
                "files; open Zarr stores with xarray.open_zarr or ppa_dask.store.open_input"
            )
        cube = _open_netcdf(path, variable)
        where = repr(path)
    if feature_dim is not None and feature_dim not in cube.dims:
        raise ValueError(
            f"feature_dim {feature_dim!r} is not a dimension of {cube.name!r} in {where} "
            f"(dimensions: {', '.join(map(str, cube.dims))})"
        )
    return cube


# -------------------------------------------------------------------------------------------
# tables
# -------------------------------------------------------------------------------------------


def _column_list(columns):
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    columns = list(columns)
    if not columns or not all(isinstance(c, str) for c in columns):
        raise ValueError(f"columns must be a non-empty list of column names, got {columns!r}")
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        raise ValueError(f"columns names {dup} more than once")
    return columns


def open_table(path, columns=None):
    """Open a Parquet or CSV table lazily (``dask.dataframe``), keeping numeric ``columns``.

    Parameters
    ----------
    path : str or os.PathLike
        A Parquet file or folder of parts (``.parquet``, ``.pq``) or a CSV file (``.csv``),
        or a glob of them.
    columns : list of str or str, optional
        The feature columns, in this order (a string is split at commas: ``"a,b,c"``);
        default: every column.

    Returns
    -------
    table : dask.dataframe.DataFrame
        The selected columns; one partition per Parquet row group (Dask may fuse small ones
        when few columns are read), CSV blocks of Dask's default size. Nothing but metadata
        (Parquet) or a sample (CSV) is read.

    Raises
    ------
    FileNotFoundError
        A missing file, or a glob matching nothing.
    ValueError
        A file of another format, a missing column (naming the available ones), or a selected
        column that does not hold numbers (naming its dtype).

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> from ppa_dask.store import open_table, table_array
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> pd.DataFrame({"id": ["a", "b", "c"], "x": [1.0, 2, 3], "y": [4.0, 5, 6]}).to_csv(
    ...     path, index=False)
    >>> table = open_table(path, columns=["x", "y"])
    >>> X, names = table_array(table)
    >>> X.shape, names
    ((3, 2), ['x', 'y'])
    """
    import dask.dataframe as dd

    columns = _column_list(columns)
    target = os.fspath(path)
    paths = expand_paths(target)
    fmt = file_format(target) or file_format(paths)
    if fmt not in TABLE_FORMATS:
        raise ValueError(
            f"{target!r}: open_table reads Parquet (.parquet, .pq) and CSV (.csv) tables"
        )
    try:
        if fmt == "parquet":
            # one partition per row group: the file's own chunks
            table = dd.read_parquet(paths if len(paths) > 1 else paths[0], split_row_groups=True)
        else:
            table = dd.read_csv(paths if len(paths) > 1 else paths[0])
    except Exception as exc:
        raise ValueError(f"cannot read {target!r} as {fmt}: {exc}") from None
    available = [str(c) for c in table.columns]
    if columns is None:
        columns = available
    missing = [c for c in columns if c not in available]
    if missing:
        raise ValueError(
            f"column {missing[0]!r} is not in {target!r}; its columns are: {', '.join(available)}"
        )
    for c in columns:
        dtype = table.dtypes[c]
        if getattr(dtype, "kind", "O") not in _NUMERIC_KINDS:
            raise ValueError(
                f"column {c!r} of {target!r} has dtype {dtype}, not numbers; select numeric "
                "feature columns with columns= (--columns a,b,c)"
            )
    return table[columns]


def table_array(table):
    """A table's values as a ``(samples, features)`` float Dask array, and its column names.

    The partitions' row counts are computed (one pass over the selected columns, needed for
    known chunk sizes); a pandas DataFrame is wrapped as one chunk.

    Examples
    --------
    >>> import pandas as pd
    >>> X, names = table_array(pd.DataFrame({"a": [1, 2], "b": [3.0, 4.0]}))
    >>> X.dtype, X.chunks, names
    (dtype('float64'), ((2,), (2,)), ['a', 'b'])
    """
    import dask.array as da

    names = [str(c) for c in table.columns]
    if hasattr(table, "to_dask_array"):
        # chunk sizes from the array's own graph: Dask may fuse small Parquet partitions
        # (whole row groups) once columns are projected, so the frame's partition count and
        # the array's chunks can differ
        X = table.to_dask_array()
        X.compute_chunk_sizes()
    else:
        X = da.from_array(np.asarray(table))
    return X.astype(np.float64), names


def name_features(model, names):
    """Set ``model.feature_names_in_`` to the column names a fitted estimator was given.

    A fit on a Dask array has no column names; after fitting on :func:`table_array`'s array,
    this records them as scikit-learn does for a DataFrame (a NumPy array of ``str`` objects).

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> model = name_features(PPA(degree=1).fit(X), ["a", "b", "c"])
    >>> model.feature_names_in_.tolist()
    ['a', 'b', 'c']
    """
    names = [str(n) for n in names]
    if len(names) != model.n_features_in_:
        raise ValueError(f"{len(names)} names for {model.n_features_in_} features: {names}")
    model.feature_names_in_ = np.asarray(names, dtype=object)
    return model
