"""Writing results in the formats users hold: GeoTIFF, NetCDF, Parquet and CSV (and Zarr).

The writing half of the data-I/O layer (:mod:`.sources` holds the formats' vocabulary):
:func:`write_result` writes any result to the format its path names, and is what the CLI and
the pipelines call.

:func:`write_cube` writes component images or reconstructions as a GeoTIFF (one band per
component, the CRS and transform of the input, tiled) or a NetCDF file (CF attributes, the
input's coordinates and global attributes); :func:`write_table` writes a ``(samples, k)`` array
as Parquet or CSV with named columns. Dask data are written chunk by chunk on the current
scheduler, never gathered.

Every write goes to a hidden temporary sibling renamed into place when complete
(:func:`ppa_dask.store.results.move_into_place`), so the target only ever holds a whole file.
An existing target is replaced only with ``overwrite=True`` and only when ppa-dask wrote it:
GeoTIFF, NetCDF and Parquet outputs carry a record (a ``PPA_DASK`` TIFF tag, a ``ppa_dask``
global attribute, a ``ppa_dask`` key of the Parquet schema metadata); a CSV file carries none,
so an existing CSV is never replaced.

A command's performance report (``--performance-report FILE.html``) goes the same way:
:func:`report_file` hands its writer a temporary sibling, closes the file with a record (an
HTML comment) and renames it into place; an existing file is replaced only with
``overwrite=True`` and only when it ends with that record.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import sys
import threading

import numpy as np

from ppa_dask.store.results import (
    ATTRS_KEY,
    check_target,
    local_path,
    move_into_place,
    write_array,
    write_dataset,
)
from ppa_dask.store.sources import (
    BAND_DIM,
    CUBE_FORMATS,
    TABLE_FORMATS,
    file_format,
    netcdf_engine,
    quiet_not_georeferenced,
    suffix,
)
from ppa_dask.utils.compute import current_client
from ppa_dask.utils.files import remove_path, temp_sibling
from ppa_dask.utils.version import VERSION

__all__ = [
    "CUBE_FORMAT",
    "check_report_target",
    "report_file",
    "write_result",
    "write_cube",
    "write_table",
    "written_by_ppa_dask",
]

#: The ``format`` of the record stored in the files :func:`write_cube` / :func:`write_table`
#: write.
CUBE_FORMAT = "ppa-dask-file"
_TIFF_TAG = "PPA_DASK"
_NC_ATTR = "ppa_dask"
_DEFAULT_BLOCK = 256
_COMPONENT_DIM = "component"


def _record(what):
    return json.dumps(
        {"format": CUBE_FORMAT, "format_version": 1, "library_version": VERSION, "what": what}
    )


def _is_record(text):
    try:
        return json.loads(text).get("format") == CUBE_FORMAT
    except (TypeError, ValueError, AttributeError):
        return False


def written_by_ppa_dask(path):
    """Whether ``path`` is a GeoTIFF, NetCDF or Parquet output of :func:`write_cube` /
    :func:`write_table` (only those are replaced with ``overwrite=True``).

    Examples
    --------
    >>> import tempfile
    >>> written_by_ppa_dask(os.path.join(tempfile.mkdtemp(), "absent.tif"))
    False
    """
    fmt = file_format(path)
    try:
        if fmt == "geotiff":
            import rasterio

            with quiet_not_georeferenced(), rasterio.open(path) as src:
                return _is_record(src.tags().get(_TIFF_TAG))
        if fmt == "netcdf":
            import h5netcdf

            with h5netcdf.File(path, "r") as f:
                return _is_record(f.attrs.get(_NC_ATTR))
        if fmt == "parquet" and os.path.isdir(path):
            import pyarrow.parquet as pq

            parts = sorted(p for p in os.listdir(path) if file_format(p) == "parquet")
            if not parts:
                return False
            meta = pq.read_schema(os.path.join(path, parts[0])).metadata or {}
            return _is_record(meta.get(_NC_ATTR.encode(), b"").decode())
    except Exception:  # unreadable, or not of that format: not ours
        return False
    return False


def _target(path, overwrite, fmt_allowed, what):
    fmt = file_format(path)
    if fmt not in fmt_allowed:
        raise ValueError(
            f"{os.fspath(path)!r}: {what} writes {', '.join(fmt_allowed)} files, named by their "
            f"suffix ({', '.join(_suffixes(fmt_allowed))})"
        )
    path = local_path(path)
    check_target(path, overwrite, written_by_ppa_dask, f"{fmt} file written by ppa-dask")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path, fmt


def _suffixes(formats):
    return [suffix(f) for f in formats]


def _write_lock(name):
    """A lock serialising the chunk writes into one file: a distributed Lock on a cluster
    (workers in other processes), a thread lock otherwise."""
    if current_client() is not None:
        from distributed import Lock

        return Lock(f"ppa-dask-write-{name}")
    return threading.Lock()


def _like_attrs(like):
    """(variable attrs, global attrs, source path) of the input ``like`` (a DataArray, a
    Dataset or a path of a NetCDF / GeoTIFF file)."""
    import xarray as xr

    if like is None:
        return {}, {}, None
    if isinstance(like, (str, os.PathLike)):
        source = os.fspath(like)
        var_attrs = {}
    elif isinstance(like, xr.DataArray):
        source = like.encoding.get("source")
        var_attrs = dict(like.attrs)
    elif isinstance(like, xr.Dataset):
        # a Dataset of one variable (a file's): that variable's attributes too
        names = list(like.data_vars)
        var_attrs = dict(like[names[0]].attrs) if len(names) == 1 else {}
        return var_attrs, dict(like.attrs), like.encoding.get("source")
    else:
        raise TypeError(f"like must be an xarray object or a file path, got {type(like)}")
    global_attrs = {}
    if source and file_format(source) == "netcdf" and os.path.exists(source):
        global_attrs = {
            k: _plain(v) for k, v in _netcdf_attrs(source).items() if not k.startswith("_")
        }
        global_attrs.pop(_NC_ATTR, None)
    return var_attrs, global_attrs, source


def _netcdf_attrs(path):
    """The global attributes of the NetCDF file ``path``, netCDF-3 or netCDF-4."""
    engine = netcdf_engine(path)
    if engine == "h5netcdf":
        import h5netcdf

        with h5netcdf.File(path, "r") as f:
            return dict(f.attrs)
    import xarray as xr

    with xr.open_dataset(path, engine=engine, decode_cf=False) as ds:
        return dict(ds.attrs)


def _plain(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray) and value.size == 1:
        return value.item()
    return value


def _check_spatial(obj):
    dims = [d for d in obj.dims if d not in ("y", "x")]
    if "y" not in obj.dims or "x" not in obj.dims or len(dims) > 1:
        raise ValueError(
            f"a GeoTIFF holds images (y, x) with at most one band dimension; got dimensions "
            f"{obj.dims} (write such arrays as NetCDF, .nc)"
        )
    return dims[0] if dims else None


def _output_dtype(dtype, like):
    """The dtype of written results: ``dtype`` (float32 or float64), else float32 when the
    input ``like`` was float32 or integer (its file's dtype when it was read from one) and
    float64 otherwise."""
    import xarray as xr

    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")
        return dtype
    if isinstance(like, xr.Dataset):
        kinds = [like[v].encoding.get("dtype", like[v].dtype) for v in like.data_vars]
    elif isinstance(like, xr.DataArray):
        kinds = [like.encoding.get("dtype", like.dtype)]
    else:
        return np.dtype(np.float64)
    kinds = [np.dtype(k) for k in kinds]
    small = kinds and all(k.kind in "iub" or k == np.float32 for k in kinds)
    return np.dtype(np.float32 if small else np.float64)


def _georeferenced(obj, like):
    """``obj`` with the CRS of ``like`` (a DataArray or Dataset read from a raster) when it has
    none of its own, and ``like``'s transform when they share the grid: every format writes
    the georeferencing of the input (GeoTIFF tags; NetCDF and Zarr: the CF ``spatial_ref``
    grid mapping, which rioxarray reads back)."""
    import rioxarray  # noqa: F401  (registers the .rio accessor)

    if like is None or isinstance(like, (str, os.PathLike)) or "y" not in obj.dims:
        return obj
    try:
        if obj.rio.crs is not None:
            return obj
        crs = like.rio.crs
    except Exception:  # no usable grid mapping
        return obj
    if crs is None:
        return obj
    same_grid = like.sizes.get("y") == obj.sizes["y"] and like.sizes.get("x") == obj.sizes["x"]
    transform = like.rio.transform() if same_grid else None
    obj = obj.rio.write_crs(crs)
    return obj if transform is None else obj.rio.write_transform(transform)


def _result_attrs(obj, like):
    """(the variable's attributes, the file's global attributes) of a result written like the
    input ``like``: its ``long_name`` / ``units`` (components: "PPA coefficients of ..." in
    the input's units, PPA being volume preserving) and the input's global attributes."""
    import xarray as xr

    var_attrs, global_attrs, _ = _like_attrs(like)
    attrs = dict(obj.attrs) if isinstance(obj, xr.DataArray) else {}
    if isinstance(obj, xr.DataArray) and _COMPONENT_DIM in obj.dims:
        source_name = var_attrs.get("long_name") or (
            getattr(like, "name", None) if isinstance(like, xr.DataArray) else None
        )
        attrs.setdefault(
            "long_name", "PPA coefficients" + (f" of {source_name}" if source_name else "")
        )
        if "units" in var_attrs:
            attrs.setdefault("units", var_attrs["units"])
    else:
        for key in ("long_name", "standard_name", "units"):
            if key in var_attrs:
                attrs.setdefault(key, var_attrs[key])
    return attrs, global_attrs


def _write_geotiff(obj, tmp, like, block, what, dtype=np.float64):
    import rioxarray  # noqa: F401  (registers the .rio accessor)

    band = _check_spatial(obj)
    if band is None:
        obj = obj.expand_dims({BAND_DIM: [1]})
        band = BAND_DIM
    obj = _georeferenced(obj.transpose(band, "y", "x"), like)
    var_attrs, global_attrs = _result_attrs(obj, like)
    if band in obj.coords:
        labels = [f"{band} {v}" for v in np.asarray(obj[band].values).tolist()]
    else:
        labels = [f"{band} {i + 1}" for i in range(obj.sizes[band])]
    obj = obj.astype(dtype)
    # TIFF tags: the input's global attributes and units; the bands' descriptions
    tags = {k: v for k, v in global_attrs.items() if isinstance(v, (str, int, float))}
    if "units" in var_attrs:
        tags["units"] = var_attrs["units"]
    obj.attrs = {**tags, "long_name": tuple(labels)}
    obj = obj.rio.write_nodata(np.nan, encoded=False)
    # the input's tiles (a Dataset's chunks are a mapping, a DataArray's a tuple: chunksizes
    # is the mapping of both)
    chunks = getattr(like, "chunksizes", None) if like is not None else None
    if chunks and "y" in chunks and "x" in chunks:
        block = (int(chunks["y"][0]), int(chunks["x"][0]))
    # TIFF tiles are multiples of 16 pixels
    by, bx = (max(16, int(b) // 16 * 16) for b in block)
    data = obj.data
    is_lazy = hasattr(data, "dask")
    if is_lazy:
        obj = obj.chunk({band: -1, "y": by, "x": bx})
    with quiet_not_georeferenced():
        obj.rio.to_raster(
            tmp,
            driver="GTiff",
            tiled=True,
            blockxsize=bx,
            blockysize=by,
            # lossless: floating-point prediction then deflate (component images of smooth
            # scenes take a third to a half of their raw size)
            compress="deflate",
            predictor=3,
            tags={_TIFF_TAG: _record(what)},
            lock=_write_lock(os.path.basename(tmp)) if is_lazy else None,
            compute=True,
        )


def _result_dataset(obj, like, name, dtype):
    """The Dataset a NetCDF file or a Zarr group of a result holds: the variable named
    ``name`` (default ``obj.name``), floats in ``dtype``, the input's georeferencing and
    attributes (:func:`_georeferenced`, :func:`_result_attrs`), CF ``Conventions``."""
    import xarray as xr

    if not isinstance(obj, (xr.DataArray, xr.Dataset)):
        raise TypeError(f"write_cube needs an xarray DataArray or Dataset, got {type(obj)}")
    obj = _georeferenced(obj, like)
    attrs, global_attrs = _result_attrs(obj, like)
    if isinstance(obj, xr.DataArray):
        name = name or (obj.name if obj.name is not None else "data")
        ds = obj.rename(name).to_dataset()
        ds[name].attrs = attrs
    else:
        ds = obj.copy()
    for v in ds.data_vars:
        if ds[v].dtype.kind == "f":
            ds[v] = ds[v].astype(dtype)
    if _COMPONENT_DIM in ds.coords:
        ds[_COMPONENT_DIM].attrs.setdefault("long_name", "PPA component (1 = first)")
    ds.attrs = {**global_attrs, **ds.attrs}
    ds.attrs.setdefault("Conventions", "CF-1.8")
    return ds


def _write_netcdf(obj, tmp, like, name, what, dtype=np.float64):
    ds = _result_dataset(obj, like, name, dtype)
    ds.attrs[_NC_ATTR] = _record(what)
    encoding = {}
    for v in ds.variables:
        ds[v].encoding = {}
    for v in ds.data_vars:
        chunks = ds[v].chunks
        if chunks:
            # storage chunks = Dask chunks, so reading the file back is chunk-aligned
            encoding[v] = {"chunksizes": tuple(max(int(c[0]), 1) for c in chunks)}
    with _hdf5_write_errors(tmp):
        ds.to_netcdf(tmp, engine="h5netcdf", encoding=encoding, compute=True)


def _cube_bytes(obj, fmt):
    """The bytes a cube file holds at least: its values, uncompressed (GeoTIFF as float64)."""
    import xarray as xr

    if fmt == "geotiff":
        return int(obj.size) * 8
    arrays = obj.variables.values() if isinstance(obj, xr.Dataset) else [obj, *obj.coords.values()]
    return sum(int(a.size) * a.dtype.itemsize for a in arrays)


def _check_room(nbytes, path):
    """Refuse a file that cannot fit on its device or under the process's file-size limit,
    before writing: HDF5 (NetCDF) and libtiff (GeoTIFF) report a failed write where it cannot
    be caught cleanly (inside h5py's ``__dealloc__``, or printed by GDAL), and HDF5 can leave
    a file with holes that looks whole. :func:`_hdf5_write_errors` catches a disk that fills
    during the write."""
    folder = os.path.dirname(os.path.abspath(path))
    free = shutil.disk_usage(folder).free
    if nbytes > free:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device (the file needs {nbytes / 1e6:.1f} MB, the device has "
            f"{free / 1e6:.1f} MB free)",
            path,
        )
    try:
        import resource
    except ImportError:  # not on Windows
        return
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft != resource.RLIM_INFINITY and nbytes > soft:
        raise OSError(
            errno.EFBIG,
            f"File too large (the file needs {nbytes / 1e6:.1f} MB, the process may write "
            f"files up to {soft / 1e6:.1f} MB: RLIMIT_FSIZE)",
            path,
        )


@contextlib.contextmanager
def _hdf5_write_errors(path):
    """Raise the write errors HDF5 reports while h5py releases the file.

    h5py writes the last buffered data when it drops its file id, inside a ``__dealloc__``
    whose exceptions Python only prints ("Exception ignored in"): a full disk would leave a
    file with holes where data should be, renamed into place as if whole. The error is caught
    from ``sys.unraisablehook`` and raised as the ``OSError`` (errno, ``path``) HDF5 named.
    """
    seen = []
    previous = sys.unraisablehook

    def hook(unraisable):
        text = str(unraisable.exc_value)
        found = re.search(r"errno = (\d+)", text)
        if isinstance(unraisable.exc_value, RuntimeError) and "write failed" in text:
            seen.append(int(found.group(1)) if found else errno.EIO)
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
    if seen:
        raise OSError(seen[0], os.strerror(seen[0]), path)


def write_cube(obj, path, like=None, *, name=None, overwrite=False, what="components", dtype=None):
    """Write component images or reconstructions as a GeoTIFF or NetCDF file, atomically.

    Parameters
    ----------
    obj : xarray.DataArray or xarray.Dataset
        E.g. ``model.transform(cube)`` (dims ``component``, ``y``, ``x``) or
        ``model.inverse_transform(...)``. Dask data are written chunk by chunk.
    path : str or os.PathLike
        ``.tif`` / ``.tiff`` (GeoTIFF) or ``.nc`` / ``.nc4`` / ``.cdf`` (NetCDF).
    like : xarray.DataArray, xarray.Dataset or str, optional
        The input the result came from (or its path): its CRS and transform (GeoTIFF) when
        ``obj`` lost them, its tile size, its ``long_name`` / ``units`` and global attributes
        (NetCDF).
    name : str, optional
        NetCDF: the variable name (default: ``obj.name``).
    overwrite : bool, default=False
        Replace an existing file, only one written by ppa-dask.
    what : str
        Recorded in the file's ``ppa_dask`` record.
    dtype : {"float32", "float64"}, optional
        The written values' dtype. Default: float32 when ``like`` is float32 or integer (the
        dtype of the file it was read from, when it was), else float64.

    Returns
    -------
    path : str
        The absolute path written.

    Notes
    -----
    GeoTIFF: tiled (the input's block size, else 256), ``dtype``, NaN as nodata, one band per
    component with the description ``component i``, the CRS and transform of ``obj``'s
    ``spatial_ref`` coordinate (``rioxarray``), else of ``like``. An array without ``y`` and
    ``x`` dimensions, or with more than one other dimension, is refused. NetCDF: the
    coordinates of ``obj`` (those of the input), CF attributes (``long_name``, ``units``
    where the input has them, ``Conventions``), the input's global attributes; storage chunks
    equal to the Dask chunks.

    Examples
    --------
    >>> import os, tempfile, numpy as np, xarray as xr
    >>> import rioxarray  # the .rio accessor
    >>> from ppa_dask.store import open_cube, write_cube
    >>> folder = tempfile.mkdtemp()
    >>> t = np.random.default_rng(0).uniform(size=(32, 32))
    >>> img = xr.DataArray(np.stack([t, t**2, t**3]), dims=("band", "y", "x"),
    ...                    coords={"y": 100.0 - np.arange(32), "x": 5.0 + np.arange(32)})
    >>> img = img.rio.write_crs("EPSG:32633")
    >>> p = write_cube(img, os.path.join(folder, "img.tif"))
    >>> back = open_cube(p)
    >>> str(back.rio.crs), back.sizes["band"]
    ('EPSG:32633', 3)
    """
    import xarray as xr

    if not isinstance(obj, (xr.DataArray, xr.Dataset)):
        raise TypeError(f"write_cube needs an xarray DataArray or Dataset, got {type(obj)}")
    path, fmt = _target(path, overwrite, CUBE_FORMATS, "write_cube")
    if fmt == "geotiff" and isinstance(obj, xr.Dataset):
        raise ValueError(f"{path!r}: a GeoTIFF holds one array; write a Dataset as NetCDF (.nc)")
    if fmt == "geotiff":
        _check_spatial(obj)
    _check_room(_cube_bytes(obj, fmt), path)
    dtype = _output_dtype(dtype, like)
    tmp = temp_sibling(path)
    try:
        if fmt == "geotiff":
            _write_geotiff(obj, tmp, like, (_DEFAULT_BLOCK, _DEFAULT_BLOCK), what, dtype)
        else:
            _write_netcdf(obj, tmp, like, name, what, dtype)
        move_into_place(
            tmp, path, overwrite, written_by_ppa_dask, f"{fmt} file written by ppa-dask"
        )
    except BaseException:
        remove_path(tmp)
        raise
    return path


def write_table(X, path, columns=None, *, overwrite=False, what="components"):
    """Write a ``(samples, k)`` numpy or Dask array as Parquet or CSV with named columns.

    Parameters
    ----------
    X : numpy.ndarray or dask.array.Array of shape (n_samples, k)
    path : str or os.PathLike
        ``.parquet`` / ``.pq`` (a folder of parts, one per row chunk) or ``.csv`` (one file).
    columns : list of str, optional
        Column names (default ``x0 .. x{k-1}``), e.g. ``model.get_feature_names_out()``.
    overwrite : bool, default=False
        Replace an existing Parquet output of ppa-dask (an existing CSV is never replaced: it
        carries no record saying who wrote it).
    what : str
        Recorded in the Parquet schema metadata.

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from ppa_dask.store import open_table, write_table
    >>> p = write_table(np.eye(3), os.path.join(tempfile.mkdtemp(), "r.parquet"),
    ...                 columns=["a", "b", "c"])
    >>> list(open_table(p).columns)
    ['a', 'b', 'c']
    """
    import dask.array as da
    import dask.dataframe as dd

    X = X if hasattr(X, "dask") else da.from_array(np.asarray(X))
    if X.ndim != 2:
        raise ValueError(f"write_table writes 2-D arrays (samples x columns), got shape {X.shape}")
    columns = [f"x{j}" for j in range(X.shape[1])] if columns is None else list(map(str, columns))
    if len(columns) != X.shape[1]:
        raise ValueError(f"{len(columns)} column names for {X.shape[1]} columns")
    if file_format(path) == "csv" and os.path.lexists(local_path(path)):
        raise FileExistsError(
            f"{os.fspath(path)!r} already exists; a CSV file carries no record of who wrote it, "
            "so ppa-dask never replaces one: remove it or choose another name"
        )
    path, fmt = _target(path, overwrite, TABLE_FORMATS, "write_table")
    frame = dd.from_dask_array(X.rechunk({1: -1}), columns=columns)
    tmp = temp_sibling(path)
    try:
        if fmt == "parquet":
            frame.to_parquet(tmp, write_index=False, custom_metadata={_NC_ATTR: _record(what)})
        else:
            frame.to_csv(tmp, single_file=True, index=False)
        move_into_place(
            tmp, path, overwrite, written_by_ppa_dask, f"{fmt} file written by ppa-dask"
        )
    except BaseException:
        remove_path(tmp)
        raise
    return path


def write_result(
    out,
    path,
    like=None,
    *,
    overwrite=False,
    name=None,
    what="components",
    dtype=None,
    columns=None,
    attrs=None,
):
    """Write a result to the format ``path`` names: the one writer behind the CLI and the
    pipelines.

    An xarray result (component images, a reconstruction) goes to a GeoTIFF or NetCDF file
    (:func:`write_cube`, taking ``like``'s georeferencing, coordinates and attributes), else
    to a Zarr group (:func:`~ppa_dask.store.write_dataset`); an array result to a Parquet or
    CSV table (:func:`write_table`, ``columns`` naming its columns), else to a Zarr array
    (:func:`~ppa_dask.store.write_array`, with ``attrs``).

    Parameters
    ----------
    out : numpy.ndarray, dask.array.Array, xarray.DataArray or xarray.Dataset
    path : str or os.PathLike
    like : xarray.DataArray, xarray.Dataset or str, optional
        The input the result came from (cube formats).
    overwrite : bool, default=False
        Replace an existing output of ppa-dask.
    name, what, dtype :
        As for :func:`write_cube`; a Zarr group of an xarray result is written like a NetCDF
        file (``like``'s CRS, transform and attributes, ``dtype`` by the same default). Arrays
        are written float64 unless ``dtype`` is given.
    columns : list of str, optional
        Table formats: the column names.
    attrs : dict, optional
        A Zarr array: attributes stored with it.

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from ppa_dask.store import open_table
    >>> p = write_result(np.eye(2), os.path.join(tempfile.mkdtemp(), "r.csv"), columns=["a", "b"])
    >>> list(open_table(p).columns)
    ['a', 'b']
    """
    import xarray as xr

    fmt = file_format(path)
    if isinstance(out, (xr.DataArray, xr.Dataset)):
        if fmt in CUBE_FORMATS:
            return write_cube(
                out, path, like=like, name=name, overwrite=overwrite, what=what, dtype=dtype
            )
        # a Zarr group: the same variable, dtype, georeferencing and attributes as a NetCDF
        # file of the result
        ds = _result_dataset(out, like, name, _output_dtype(dtype, like))
        ds.attrs.pop(ATTRS_KEY, None)  # the group's own record goes there
        return write_dataset(ds, path, overwrite=overwrite)
    if dtype is not None:
        out = out.astype(_output_dtype(dtype, None))  # tables: float64 unless told
    if fmt in TABLE_FORMATS:
        return write_table(out, path, columns, overwrite=overwrite, what=what)
    return write_array(out, path, overwrite=overwrite, attrs=attrs)


# ---------------------------------------------------------------------------------------------
# performance reports
# ---------------------------------------------------------------------------------------------

#: What a performance report's record says it is (the ``what`` of :func:`_record`).
_REPORT_WHAT = "performance report"
#: Bytes at the end of an existing file read to find a report's record (the record is the
#: file's last line, a few hundred bytes): deciding whose a file is never reads it whole.
_REPORT_TAIL = 4096
_REPORT_RECORD = re.compile(rb"<!-- ppa-dask (\{[^\n]*\}) -->\s*$")


def _is_report(path):
    """Whether ``path`` is a regular file ending with the record :func:`report_file` writes."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):  # a link, a folder, a FIFO or a device: not ours
            return False
        with open(path, "rb") as f:
            f.seek(max(0, info.st_size - _REPORT_TAIL))
            tail = f.read(_REPORT_TAIL)
    except OSError:
        return False
    match = _REPORT_RECORD.search(tail)
    return match is not None and _is_record(match.group(1).decode("utf-8", "replace"))


def check_report_target(path, overwrite=False):
    """Refuse a performance report's path before any work: an existing one unless
    ``overwrite`` and it is a report ppa-dask wrote (:func:`report_file`).

    Raises
    ------
    FileExistsError
        Naming the path and why it is not replaced.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check_report_target(os.path.join(folder, "r.html"))  # absent: fine
    >>> try:
    ...     check_report_target(folder, overwrite=True)
    ... except FileExistsError as exc:
    ...     print("not a performance report written by ppa-dask" in str(exc))
    True
    """
    check_target(local_path(path), overwrite, _is_report, _REPORT_WHAT + " written by ppa-dask")


@contextlib.contextmanager
def report_file(path, overwrite=False):
    """The atomic write of a performance report: yields a temporary sibling of ``path`` for
    the report's writer (distributed's ``performance_report(filename=...)``) to fill; on a
    clean exit the record is appended and the file renamed into place, replacing an existing
    report only with ``overwrite`` and only one ppa-dask wrote. The temporary is removed
    either way.

    Parameters
    ----------
    path : str or os.PathLike
        The report's local path.
    overwrite : bool, default=False
        Replace an existing report ppa-dask wrote (never any other file).

    Yields
    ------
    tmp : str
        Where the writer writes.

    Examples
    --------
    >>> import tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "r.html")
    >>> with report_file(p) as tmp:
    ...     _ = open(tmp, "w").write("<html></html>")
    >>> _is_report(p), os.listdir(os.path.dirname(p))
    (True, ['r.html'])
    """
    path = local_path(path)
    check_report_target(path, overwrite)
    tmp = temp_sibling(path)
    try:
        yield tmp
        with open(tmp, "a", encoding="utf-8") as f:
            f.write(f"\n<!-- ppa-dask {_record(_REPORT_WHAT)} -->\n")
            f.flush()
            os.fsync(f.fileno())
        move_into_place(tmp, path, overwrite, _is_report, _REPORT_WHAT + " written by ppa-dask")
    finally:
        remove_path(tmp)
