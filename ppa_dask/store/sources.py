"""Data sources: the formats ppa-dask reads, defined once, and :func:`open_source`.

This module and :mod:`.sinks` are the one data-I/O layer: the vocabulary of formats (their
names, what they hold, their suffixes and their options: :data:`FORMATS`) is written here and
nowhere else, and the CLI's ``fit`` / ``transform`` / ``inverse``, the pipeline's load and
transform stages and the Python readers are front-ends of :func:`open_source` and
:func:`ppa_dask.store.sinks.write_result`. A new format is one reader here and one writer in
:mod:`.sinks`.

Sources
-------
:func:`open_source` opens what a user names (a path, a glob or a list, with options) as a
:class:`Source`: the data (a ``(samples, features)`` Dask array, or an xarray cube), its kind,
its feature dimension and feature names, its valid-sample mask, its georeferencing and a
fingerprint of its files for resuming.

Cubes
-----
:func:`open_cube` opens a variable of a NetCDF file (xarray: netCDF-3 with the ``scipy`` engine,
netCDF-4 with ``h5netcdf``, chosen by the file's first bytes, :func:`netcdf_engine`), a GeoTIFF or
Cloud-Optimized GeoTIFF (rioxarray: the bands are the features, dimension ``band``; the CRS and
transform ride along as the ``spatial_ref`` coordinate), or many NetCDF files making one series
(a glob or a list: ``xarray.open_mfdataset``, concatenated along ``concat_dim`` in the order
given, a glob sorted by name). Nothing is read but metadata: the DataArray is Dask-backed with
the file's own chunks (the HDF5 chunks of a NetCDF variable, Dask's automatic chunks for a
contiguous one; the tiles of a GeoTIFF, or its strips merged up to 256 rows; at least one
chunk per file of a series), so every task reads whole storage blocks. :class:`ppa_dask.PPA`
fits it through the stacker (``fit(cube, feature_dim=...)``), and its component images keep
the coordinates; writing them back in the input's format is
:func:`ppa_dask.store.write_cube`.

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

import contextlib
import dataclasses
import functools
import glob
import hashlib
import json
import os
import re

import numpy as np

from ppa_dask.store.feature_dims import FEATURE_DIM_SEP, merge_feature_dims
from ppa_dask.store.results import (
    is_remote,
    local_path,
    open_zarr_dataset,
    open_zarr_input,
    zarr_node_type,
)
from ppa_dask.utils.files import NotARegularFile, check_regular

__all__ = [
    "BAND_DIM",
    "FORMATS",
    "CUBE_FORMATS",
    "TABLE_FORMATS",
    "ZARR",
    "Source",
    "parse_feature_dim",
    "open_source",
    "open_input",
    "file_format",
    "suffix",
    "components_variable",
    "is_series",
    "expand_paths",
    "fingerprint",
    "source_fingerprint",
    "source_format",
    "open_cube",
    "open_table",
    "table_array",
    "name_features",
]


@dataclasses.dataclass(frozen=True)
class Format:
    """One file format: what it holds (``"cube"`` or ``"table"``), its name for people, its
    suffixes (the first is the one written), what a path of it may be, and the options that
    apply to it besides ``path`` (the pipeline's ``data.`` keys, the readers' keywords);
    ``lists``: whether a list of files may name one input."""

    kind: str
    label: str
    suffixes: tuple
    paths: str
    options: tuple
    lists: bool = False


#: Every file format read and written, by the name used everywhere (``data.source``,
#: ``transform.format``): the one place their suffixes and options are declared.
FORMATS = {
    "netcdf": Format(
        "cube",
        "NetCDF",
        (".nc", ".nc4", ".netcdf", ".cdf"),
        "a NetCDF file, a glob or a list of files (a series)",
        ("variable", "variables", "feature_dim", "concat_dim", "nodata"),
        lists=True,
    ),
    "geotiff": Format(
        "cube",
        "GeoTIFF",
        (".tif", ".tiff"),
        "a GeoTIFF file (its bands are the features), or a glob or list of single-band "
        "files on one grid (one band per file)",
        ("nodata", "feature_dim"),
        lists=True,
    ),
    "parquet": Format(
        "table",
        "Parquet",
        (".parquet", ".pq"),
        "a Parquet file, folder or glob (string)",
        ("columns",),
    ),
    "csv": Format("table", "CSV", (".csv",), "a CSV file or glob (string)", ("columns",)),
}
#: The format of anything without a file suffix of :data:`FORMATS`: a Zarr array or group.
ZARR = "zarr"
_ZARR_SUFFIX = ".zarr"
#: Cube formats read by :func:`open_cube` and written by ``write_cube``.
CUBE_FORMATS = tuple(name for name, f in FORMATS.items() if f.kind == "cube")
#: Table formats read by :func:`open_table` and written by ``write_table``.
TABLE_FORMATS = tuple(name for name, f in FORMATS.items() if f.kind == "table")
_SUFFIXES = {sfx: name for name, f in FORMATS.items() for sfx in f.suffixes}
_GLOB_CHARS = "*?["
#: The dimension of a GeoTIFF holding its bands (rioxarray's name).
BAND_DIM = "band"
_NUMERIC_KINDS = "biuf"


def suffix(fmt):
    """The suffix a file of format ``fmt`` is written with (``zarr``: ``.zarr``).

    Examples
    --------
    >>> "components" + suffix("geotiff"), "components" + suffix("zarr")
    ('components.tif', 'components.zarr')
    """
    return _ZARR_SUFFIX if fmt == ZARR else FORMATS[fmt].suffixes[0]


def components_variable(path):
    """The variable holding the components in a file ppa-dask wrote at ``path``: None for a
    GeoTIFF (its bands are the components), ``"components"`` otherwise.

    Examples
    --------
    >>> components_variable("c.tif"), components_variable("c.nc")
    (None, 'components')
    """
    return None if file_format(path) == "geotiff" else "components"


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
                f"{where} holds the variables {names}; choose one with variable= (--variable "
                "NAME), or stack those sharing their dimensions as the features with variables= "
                "(--variable a,b,c or --variable all)"
            )
        variable = names[0]
    if variable not in ds.data_vars:
        raise ValueError(f"{where} has no variable {variable!r}; variables: {names}")
    return ds[variable]


#: The first bytes of a netCDF-3 file: classic and 64-bit offset (scipy reads both).
_NETCDF3_MAGIC = (b"CDF\x01", b"CDF\x02")
#: ... of a netCDF-3 64-bit data file (CDF-5), which only the netCDF4 library reads.
_CDF5_MAGIC = b"CDF\x05"
#: The HDF5 signature of a netCDF-4 file, at byte 0 or after a user block of 512 * 2**k bytes.
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def netcdf_engine(path):
    """The xarray engine that reads the NetCDF file ``path``, from its first bytes: ``"scipy"``
    for netCDF-3 (classic ``CDF\\x01`` and 64-bit offset ``CDF\\x02``, what most archives
    serve), ``"h5netcdf"`` for netCDF-4 (an HDF5 file).

    Raises ValueError naming the file and what its first bytes are not, and for a CDF-5 file
    (only the netCDF4 library, not a dependency, reads those).

    Examples
    --------
    >>> import os, tempfile, numpy as np, xarray as xr
    >>> path = os.path.join(tempfile.mkdtemp(), "classic.nc")
    >>> xr.Dataset({"v": ("x", np.arange(3.0))}).to_netcdf(path, engine="scipy")
    >>> netcdf_engine(path)
    'scipy'
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if head[:4] in _NETCDF3_MAGIC:
                return "scipy"
            if head == _HDF5_MAGIC:
                return "h5netcdf"
            if head[:4] == _CDF5_MAGIC:
                # only the netCDF4 library reads CDF-5; it is not among ppa-dask's dependencies
                raise ValueError(
                    f"{path!r} is a netCDF-3 64-bit data (CDF-5) file, which only the netCDF4 "
                    "library reads and ppa-dask does not use: convert it to netCDF-4 first "
                    "(nccopy -k nc4)"
                )
            # an HDF5 file may start with a user block: its signature then follows it
            offset = 512
            while offset < os.fstat(f.fileno()).st_size:
                f.seek(offset)
                if f.read(8) == _HDF5_MAGIC:
                    return "h5netcdf"
                offset *= 2
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc}") from None
    raise ValueError(
        f"cannot open {path!r} as NetCDF: its first bytes {head[:4]!r} are neither netCDF-3's "
        "(b'CDF\\x01', b'CDF\\x02') nor netCDF-4's HDF5 signature"
    )


def _netcdf_dataset(path, chunks=None):
    import xarray as xr

    engine = netcdf_engine(path)
    try:
        # fill values are applied by the no-data rule (a pixel is missing in every band), not
        # value by value: the variables are read as stored and unpacked here (_cf_values)
        return xr.open_dataset(
            path, engine=engine, chunks={} if chunks is None else chunks, mask_and_scale=False
        )
    except Exception as exc:
        raise ValueError(f"cannot open {path!r} as NetCDF ({engine} engine): {exc}") from None


def _open_netcdf(path, variable):
    ds = _netcdf_dataset(path)
    cube = _pick_variable(ds, variable, repr(path))
    if cube.encoding.get("chunksizes") is None:
        # a contiguous variable has no storage chunks: Dask's automatic chunks read
        # hyperslabs of it instead of the whole variable in one task
        cube = _netcdf_dataset(path, "auto")[cube.name]
    # the file a result written like this cube takes its global attributes from (h5netcdf
    # records it on the variable, scipy only on the dataset)
    cube.encoding.setdefault("source", path)
    return cube


def _series_engine(paths):
    """The one engine reading every file of a series (netCDF-3 and netCDF-4 files may not be
    mixed: one engine opens them all)."""
    engines = {p: netcdf_engine(p) for p in paths}
    if len(set(engines.values())) > 1:
        kinds = {e: p for p, e in engines.items()}
        listed = "; ".join(f"{_NETCDF_KINDS.get(e, e)}: {p!r}" for e, p in kinds.items())
        raise ValueError(
            f"the {len(paths)} files {paths[0]!r} ... {paths[-1]!r} mix NetCDF formats "
            f"({listed}); convert them to one (nccopy -k nc4) to read them as one series"
        )
    return engines[paths[0]]


_NETCDF_KINDS = {"scipy": "netCDF-3", "h5netcdf": "netCDF-4", "netcdf4": "CDF-5"}


def _series_dataset(paths, concat_dim):
    import xarray as xr

    engine = _series_engine(paths)
    try:
        ds = xr.open_mfdataset(
            paths,
            engine=engine,
            combine="nested",
            concat_dim=concat_dim,
            chunks={},
            data_vars="minimal",
            coords="minimal",
            compat="override",
            join="exact",
            parallel=False,
            mask_and_scale=False,
        )
    except Exception as exc:
        raise ValueError(
            f"cannot open the {len(paths)} files {paths[0]!r} ... {paths[-1]!r} as one NetCDF "
            f"series along {concat_dim!r}: {exc}"
        ) from None
    return ds, f"the series {paths[0]!r} ... ({len(paths)} files)"


def _open_series(paths, variable, concat_dim):
    ds, where = _series_dataset(paths, concat_dim)
    cube = _pick_variable(ds, variable, where)
    cube.encoding.setdefault("source", paths[0])
    return cube


@contextlib.contextmanager
def quiet_not_georeferenced():
    """rasterio's ``NotGeoreferencedWarning`` silenced while a GeoTIFF is opened or written: a
    raster without CRS or transform (a lab or airborne cube) is read and written on its pixel
    grid, which that warning only restates at every open (twice: rioxarray passes it on)."""
    import warnings

    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        yield


#: The rows a chunk of whole strips of a GeoTIFF reaches (a row of a tiled file's 256-pixel
#: tiles), at most Dask's ``array.chunk-size`` of values.
STRIP_CHUNK_ROWS = 256


def _geotiff_block(path):
    """The (rows, columns) of a GeoTIFF's Dask chunks: its tiles, or for a file of strips
    (blocks as wide as the raster, often a few rows each) whole strips merged up to
    :data:`STRIP_CHUNK_ROWS` rows and Dask's chunk size: one task per 3-row strip made a fit
    5x slower, for the same reads."""
    import dask
    import rasterio
    from dask.utils import parse_bytes

    with quiet_not_georeferenced(), rasterio.open(path) as src:
        rows, cols = (int(n) for n in src.block_shapes[0])
        if cols >= src.width and rows < min(STRIP_CHUNK_ROWS, src.height):
            strip = rows * src.width * src.count * np.dtype(src.dtypes[0]).itemsize
            most = parse_bytes(dask.config.get("array.chunk-size")) // max(strip, 1)
            rows *= max(1, min(STRIP_CHUNK_ROWS // rows, most))
    return rows, cols


def _open_geotiff(path, variable, feature_dim, bands=None):
    import rioxarray

    if variable is not None:
        raise ValueError(
            f"{path!r} is a GeoTIFF: its bands are the features, it has no variables "
            f"(variable={variable!r} applies to NetCDF)"
        )
    try:
        rows, cols = _geotiff_block(path)
        # read as stored: the file's no-data tag is applied by the no-data rule (_apply_nodata)
        with quiet_not_georeferenced():
            cube = rioxarray.open_rasterio(
                path, chunks={BAND_DIM: -1, "y": rows, "x": cols}, masked=False
            )
    except Exception as exc:
        raise ValueError(f"cannot open {path!r} as a GeoTIFF (rasterio): {exc}") from None
    if isinstance(cube, list) or BAND_DIM not in getattr(cube, "dims", ()):
        raise ValueError(
            f"{path!r} did not open as one (band, y, x) raster; a GeoTIFF with subdatasets is "
            "not supported"
        )
    if bands is not None:
        if cube.sizes[BAND_DIM] != bands:
            raise ValueError(
                f"{path!r} holds {cube.sizes[BAND_DIM]} bands; the files of a cube read one "
                f"band per file hold {bands} each (multi-band files make a series along time "
                "when every one of them holds several bands)"
            )
        return cube
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


def open_cube(
    path, variable=None, feature_dim=None, *, variables=None, concat_dim="time", nodata=None
):
    """Open a NetCDF file, a GeoTIFF or a series of NetCDF files as a lazy DataArray.

    Parameters
    ----------
    path : str, os.PathLike or list of them
        A NetCDF file (``.nc``, ``.nc4``, ``.cdf``), a GeoTIFF / Cloud-Optimized GeoTIFF
        (``.tif``, ``.tiff``), or a glob / list of NetCDF files making one series.
    variable : str, optional
        The NetCDF variable; may be omitted when the file holds one data variable. A GeoTIFF
        has none (its bands are the features).
    variables : list of str, str or "all", optional
        Several NetCDF variables sharing their dimensions (bands stored as variables:
        ``["blue", "green", "red"]``, ``"blue,green,red"``, or ``"all"``: every data variable
        of the most common dimensions), stacked as the features along the dimension
        ``variable`` (its coordinate the names), each unpacked on its own; a pixel any of whose
        variables equals its no-data value is missing as a whole.
    feature_dim : str, optional
        The dimension holding the features, checked to exist. A GeoTIFF's is ``"band"`` (the
        default for it); ``"component"`` reads a GeoTIFF of component images, band ``i``
        being component ``i``.
    concat_dim : str, default="time"
        A series: the dimension the files are concatenated along, in the order given (a glob
        sorted by name).
    nodata : float, "none" or None, default=None
        The value marking missing pixels: a pixel any of whose features (bands) equals it is
        missing as a whole, NaN in every band (left out of a fit, NaN in every output band).
        None: the file's own tag (a GeoTIFF's no-data value, a NetCDF variable's
        ``_FillValue`` / ``missing_value``), if it has one; ``"none"``: no value is missing,
        whatever the file says. The value applied is ``cube.encoding["ppa_dask_nodata"]``,
        and a model fitted on the cube records it. With nothing declared, a fit warns
        (:class:`~ppa_dask.utils.warnings.NoDataWarning`) when a fill-like value (0, or the
        dtype's minimum or maximum) fills at least 1 % of the samples in every band.

    Returns
    -------
    cube : xarray.DataArray
        Dask-backed, one chunk per storage chunk of the file (HDF5 chunks, GeoTIFF tiles,
        GeoTIFF strips merged up to 256 rows, at least one chunk per file of a series);
        nothing but metadata is read. A
        GeoTIFF keeps its CRS and transform (``cube.rio.crs``, ``cube.rio.transform()``); its
        missing pixels (``nodata``) are NaN in every band. NetCDF values are unpacked
        (``scale_factor``, ``add_offset``).

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
    _check_regular_inputs(path, "python")  # a FIFO would block the read, a device never end it
    nodata = parse_nodata(nodata)
    if variables is not None:
        if variable is not None:
            raise ValueError(
                f"variable={variable!r} and variables={variables!r}: give one (one variable, or "
                "several stacked as the features)"
            )
        fmt = file_format(expand_paths(path))
        if fmt != "netcdf":
            raise ValueError(
                f"variables= stacks the variables of NetCDF files; {path!r} is not one (a "
                "GeoTIFF's bands are its features)"
            )
        return _open_variables(path, variables, feature_dim, concat_dim, nodata)
    if isinstance(path, (list, tuple)) or _is_glob(path):
        paths = _expand_bands(path)
        fmt = file_format(paths)
        if fmt not in CUBE_FORMATS:
            raise ValueError(
                f"several files make one cube when they are all NetCDF (.nc) or all GeoTIFF "
                f"(.tif) files; got {paths[:3]}" + (" ..." if len(paths) > 3 else "")
            )
        if len(paths) == 1:
            return open_cube(paths[0], variable, feature_dim, nodata=nodata)
        if fmt == "geotiff" and _band_count(paths[0]) > 1:
            # multi-band files: one date each, a series along concat_dim (time)
            return _open_geotiff_series(paths, variable, feature_dim, concat_dim, nodata)
        if fmt == "geotiff":
            # one band per file (Landsat's ..._B2.TIF, ..._B3.TIF)
            return _open_band_files(paths, fmt, variable, feature_dim or BAND_DIM, nodata)
        if feature_dim is not None and _lacks(paths[0], variable, feature_dim):
            # NetCDF files of one band each (no feature dimension in them): stacked along it
            return _open_band_files(paths, fmt, variable, feature_dim, nodata)
        paths = expand_paths(path)  # a series: in name order, as before
        cube = _open_series(paths, variable, concat_dim)
        where = f"{paths[0]!r}" + f" ... ({len(paths)} files)"
    else:
        path = os.fspath(path)
        (path,) = expand_paths(path)
        fmt = file_format(path)
        if fmt == "geotiff":
            cube = _open_geotiff(path, variable, feature_dim)
            fdim = BAND_DIM if feature_dim is None else feature_dim
            return _apply_nodata(cube, fdim, nodata, cube.rio.nodata)
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
    return _cf_values(cube, feature_dim, nodata)


# -------------------------------------------------------------------------------------------
# one band per file
# -------------------------------------------------------------------------------------------

_SEPARATORS = re.compile(r"([_\-. ]+)")


def _natural_key(path):
    parts = re.split(r"(\d+)", os.path.basename(path))
    return [int(p) if p.isdigit() else p.lower() for p in parts]


def band_names(paths):
    """Band names from what differs between file names (their suffixes dropped): the
    differing tokens between separators (``_``, ``-``, ``.``, spaces) when every name has as
    many, else what is left between the common start and end; ``1 .. n`` when the names are
    the same.

    Examples
    --------
    >>> band_names(["LC08_L1TP_B2.TIF", "LC08_L1TP_B3.TIF", "LC08_L1TP_B10.TIF"])
    ['B2', 'B3', 'B10']
    >>> band_names(["s2_blue_2020.nc", "s2_nir_2020.nc"])
    ['blue', 'nir']
    >>> band_names(["a/x.tif", "b/x.tif"])
    ['1', '2']
    """
    stems = [os.path.splitext(os.path.basename(os.fspath(p)))[0] for p in paths]
    tokens = [_SEPARATORS.split(s) for s in stems]
    if len({len(t) for t in tokens}) == 1:
        differ = [i for i in range(len(tokens[0])) if len({t[i] for t in tokens}) > 1]
        if differ:
            names = ["_".join(t[i] for i in differ) for t in tokens]
            if len(set(names)) == len(names):
                return names
    start = os.path.commonprefix(stems)
    end = os.path.commonprefix([s[len(start) :][::-1] for s in stems])[::-1]
    names = [s[len(start) : len(s) - len(end)].strip("_-. ") for s in stems]
    if all(names) and len(set(names)) == len(names):
        return names
    return [str(i + 1) for i in range(len(paths))]


def _grid(cube):
    """What must agree between the files of one cube: sizes, CRS, transform (GeoTIFF) or the
    y / x coordinates (NetCDF)."""
    grid = {"sizes": {d: int(n) for d, n in cube.sizes.items() if d != BAND_DIM}}
    if "spatial_ref" in cube.coords:
        grid["crs"] = str(cube.rio.crs)
        grid["transform"] = tuple(round(float(v), 9) for v in cube.rio.transform())[:6]
    else:
        for d in cube.dims:
            if d in cube.coords and cube[d].ndim == 1:
                grid[d] = np.asarray(cube[d].values)
    return grid


def _same_grid(a, b):
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray):
            if x.shape != y.shape or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


def _describe(grid):
    sizes = " x ".join(str(n) for n in grid["sizes"].values())
    crs = f", {grid['crs']}" if "crs" in grid else ""
    origin = (
        f", origin ({grid['transform'][2]:g}, {grid['transform'][5]:g})"
        if "transform" in grid
        else ""
    )
    return f"{sizes}{crs}{origin}"


def _open_band_file(path, fmt, variable, fdim):
    """One file of a cube read one band per file: (2-D layer, its no-data tag)."""
    if fmt == "geotiff":
        layer = _open_geotiff(path, variable, None, bands=1)
        return layer.squeeze(BAND_DIM, drop=True), layer.rio.nodata
    layer = _open_netcdf(path, variable)
    if fdim in layer.dims:
        raise ValueError(
            f"{path!r}: {layer.name!r} already has the feature dimension {fdim!r}; files read "
            "one band each hold one band"
        )
    return layer, layer.attrs.get("_FillValue", layer.attrs.get("missing_value"))


def _open_band_files(paths, fmt, variable, fdim, nodata):
    """Single-band files on one grid as one cube whose ``fdim`` (``band``) is named from
    what differs between the file names (:func:`band_names`)."""
    import xarray as xr

    layers, tags, first = [], [], None
    for path in paths:
        layer, tag = _open_band_file(path, fmt, variable, fdim)
        grid = _grid(layer)
        if first is None:
            first = (path, grid)
        elif not _same_grid(first[1], grid):
            raise ValueError(
                f"{first[0]!r} and {path!r} are not on one grid ({_describe(first[1])}; "
                f"{_describe(grid)}): the files of one cube must share their grid"
            )
        layers.append(layer)
        tags.append(_first(tag))
    known = {("nan" if t != t else t) for t in tags}
    if nodata is None and len(known) > 1:
        raise ValueError(
            f"the files {paths[0]!r} ... ({len(paths)} files) carry different no-data tags "
            f"({', '.join(map(str, tags))}); declare the value with nodata= (--nodata)"
        )
    cube = xr.concat(layers, dim=fdim, coords="minimal", compat="override", join="override")
    # fixed-width strings: what model files save (not pandas' or numpy's variable-width ones)
    cube = cube.assign_coords({fdim: np.asarray(band_names(paths), dtype=str)})
    cube = cube.chunk({fdim: -1})
    cube.encoding = dict(layers[0].encoding)
    cube.encoding["source"] = paths[0]
    if fmt == "geotiff":
        return _apply_nodata(cube, fdim, nodata, tags[0])
    return _cf_values(cube, fdim, nodata)


def _lacks(path, variable, dim):
    """Whether the variable of the NetCDF file ``path`` lacks the dimension ``dim``."""
    return dim not in _open_netcdf(path, variable).dims


def _expand_bands(path):
    """The files of a glob in natural order (B2 before B10), a list in its own order."""
    paths = expand_paths(path)
    return sorted(paths, key=_natural_key) if _is_glob(path) else paths


# -------------------------------------------------------------------------------------------
# bands as variables
# -------------------------------------------------------------------------------------------

#: The feature dimension data variables are stacked along (``variables=``).
VARIABLE_DIM = "variable"
#: ``variables="all"``: every data variable of the most common dimensions.
ALL_VARIABLES = "all"


def variable_choice(text):
    """The ``--variable`` option as ``(variable, variables)``: one name, or several
    (``a,b,c``, or ``all``) to stack as the features.

    Examples
    --------
    >>> variable_choice("refl"), variable_choice("blue,red"), variable_choice("all")
    (('refl', None), (None, ['blue', 'red']), (None, 'all'))
    """
    if text is None:
        return None, None
    if text.strip().lower() == ALL_VARIABLES:
        return None, ALL_VARIABLES
    if "," in text:
        return None, [v.strip() for v in text.split(",") if v.strip()]
    return text, None


def _sharing(ds):
    """The data variables of the most common dimensions (at least one), in the file's order."""
    groups = {}
    for name, v in ds.data_vars.items():
        if v.ndim:
            groups.setdefault(v.dims, []).append(str(name))
    return max(groups.values(), key=len) if groups else []


def _chosen_variables(ds, variables, where):
    names = [str(n) for n in ds.data_vars]
    if isinstance(variables, str):
        chosen = (
            _sharing(ds)
            if variables.strip().lower() == ALL_VARIABLES
            else [v.strip() for v in variables.split(",") if v.strip()]
        )
    elif isinstance(variables, (list, tuple)) and all(isinstance(v, str) for v in variables):
        chosen = list(variables)
    else:
        raise ValueError(
            f"variables must be a list of variable names, a string 'a,b,c' or 'all', got "
            f"{variables!r}"
        )
    if not chosen:
        raise ValueError(f"{where}: variables={variables!r} names no variable")
    for v in chosen:
        if v not in ds.data_vars:
            raise ValueError(f"{where} has no variable {v!r}; variables: {names}")
    dup = sorted({v for v in chosen if chosen.count(v) > 1})
    if dup:
        raise ValueError(f"variables names {dup} more than once")
    dims = {v: ds[v].dims for v in chosen}
    if len(set(dims.values())) > 1:
        listed = "; ".join(f"{v}: ({', '.join(map(str, d))})" for v, d in dims.items())
        raise ValueError(
            f"the variables of {where} stacked as features must share their dimensions; {listed}"
        )
    return chosen


def variable_names(path):
    """The data variables of a NetCDF file (the first of a series) or of a Zarr group, from
    their metadata; None for any other input, or one that cannot be opened (opening it
    reports why).

    Examples
    --------
    >>> import os, tempfile, numpy as np, xarray as xr
    >>> path = os.path.join(tempfile.mkdtemp(), "two.nc")
    >>> xr.Dataset({"a": ("x", np.ones(3)), "b": ("x", np.ones(3))}).to_netcdf(path)
    >>> variable_names(path), variable_names("scene.tif")
    (['a', 'b'], None)
    """
    import xarray as xr

    fmt = source_format(path)
    try:
        if fmt == "netcdf":
            first = expand_paths(path)[0]
            with xr.open_dataset(first, engine=netcdf_engine(first), decode_cf=False) as ds:
                return [str(n) for n in ds.data_vars]
        if fmt == ZARR and (is_remote(path) or zarr_node_type(local_path(path)) == "group"):
            return [str(n) for n in open_zarr_dataset(path).data_vars]
    except (OSError, ValueError):
        return None
    return None


def netcdf_nbytes(path, variable=None):
    """The bytes of NetCDF variables, from the files' headers alone (nothing else is read).

    Parameters
    ----------
    path : str, os.PathLike or list of them
        A NetCDF file, or a glob or list of them (a series: the sum over its files).
    variable : str, optional
        One variable, several (``"a,b,c"``) or ``"all"`` (:func:`variable_choice`); None:
        every data variable.

    Returns
    -------
    int

    Raises
    ------
    FileNotFoundError, ValueError
        A missing file, one that is not NetCDF, or a variable it does not hold.

    Examples
    --------
    >>> import os, tempfile, numpy as np, xarray as xr
    >>> path = os.path.join(tempfile.mkdtemp(), "two.nc")
    >>> xr.Dataset({"a": ("x", np.ones(10)), "b": ("x", np.ones(10, "f4"))}).to_netcdf(path)
    >>> netcdf_nbytes(path), netcdf_nbytes(path, "b"), netcdf_nbytes(path, "a,b")
    (120, 40, 120)
    """
    import xarray as xr

    one, several = variable_choice(variable)
    total = 0
    for item in expand_paths(path):
        engine = netcdf_engine(item)
        with xr.open_dataset(item, engine=engine, decode_cf=False) as ds:
            if one is not None:
                names = [_pick_variable(ds, one, repr(item)).name]
            elif several is not None:
                names = _chosen_variables(ds, several, repr(item))
            else:
                names = list(ds.data_vars)
            total += sum(int(ds[name].nbytes) for name in names)
    return total


def _open_variables(path, variables, feature_dim, concat_dim, nodata):
    """Data variables sharing their dimensions stacked along ``variable``: a pixel any of
    whose variables equals its no-data value (declared, else the variable's ``_FillValue`` /
    ``missing_value``) is missing as a whole; each variable unpacked on its own."""
    import xarray as xr

    if feature_dim not in (None, VARIABLE_DIM):
        raise ValueError(
            f"variables= stacks the variables along {VARIABLE_DIM!r}, their feature dimension; "
            f"got feature_dim={feature_dim!r}"
        )
    if isinstance(path, (list, tuple)) or _is_glob(path):
        paths = expand_paths(path)
        if len(paths) > 1:
            ds, where = _series_dataset(paths, concat_dim)
        else:
            ds, where = _netcdf_dataset(paths[0]), repr(paths[0])
    else:
        ds, where = _netcdf_dataset(path), repr(os.fspath(path))
    chosen = _chosen_variables(ds, variables, where)
    if any(ds[v].encoding.get("chunksizes") is None for v in chosen) and not (
        isinstance(path, (list, tuple)) or _is_glob(path)
    ):
        ds = _netcdf_dataset(path, "auto")  # contiguous variables: Dask's automatic chunks
    missing, layers, tags, equals = None, [], [], []
    for name in chosen:
        v = ds[name]
        tag = _first(v.attrs.get("_FillValue", v.attrs.get("missing_value")))
        tags.append(tag)
        value = None if nodata == NO_NODATA else nodata if nodata is not None else tag
        if value is not None and not np.isnan(value):
            equal = v == value
            missing = equal if missing is None else missing | equal
        else:
            equal = xr.zeros_like(v, dtype=bool)
        equals.append(equal.drop_attrs())
        layers.append(_unpacked(v))
    kinds = {layer.dtype for layer in layers}
    dtype = np.result_type(*kinds) if kinds else np.float64
    if missing is not None and dtype.kind != "f":
        dtype = np.dtype(np.float64)
    cube = xr.concat(
        [layer.astype(dtype).drop_attrs() for layer in layers],
        dim=VARIABLE_DIM,
        coords="minimal",
        compat="override",
        join="override",
    )
    cube = cube.assign_coords({VARIABLE_DIM: np.asarray(chosen, dtype=str)})
    cube = cube.chunk({VARIABLE_DIM: -1}).rename("variables")
    mask = None
    if missing is not None:
        equal = xr.concat(equals, dim=VARIABLE_DIM, coords="minimal", compat="override",
                          join="override")  # fmt: skip
        equal = equal.assign_coords({VARIABLE_DIM: cube[VARIABLE_DIM].values})
        mask = NoDataMask(cube, equal.chunk({VARIABLE_DIM: -1}), (VARIABLE_DIM,))
        cube = mask.apply()
    declared = nodata if nodata not in (None, NO_NODATA) else None
    known = [t for t in tags if t is not None and not np.isnan(t)]
    applied = (
        declared if declared is not None else (known[0] if nodata is None and known else None)
    )
    encoding = {"source": ds.encoding.get("source", where), "dtype": ds[chosen[0]].dtype}
    if nodata is None and all(t is None for t in tags):
        encoding["ppa_dask_fill_check"] = fill_candidates(ds[chosen[0]].dtype)
    cube.encoding = {**encoding, "ppa_dask_nodata": applied}
    return cube if mask is None else _keep_mask(cube, mask)


def _unpacked(v):
    """A variable read as stored, with its ``scale_factor`` / ``add_offset`` applied."""
    scale, offset = v.attrs.get("scale_factor"), v.attrs.get("add_offset")
    if scale is None and offset is None:
        return v
    kind = np.result_type(scale if scale is not None else offset, np.float32)
    out = v.astype(kind) * (1.0 if scale is None else _first(scale))
    return (out + (0.0 if offset is None else _first(offset))).astype(kind)


# -------------------------------------------------------------------------------------------
# series of multi-band files
# -------------------------------------------------------------------------------------------

_DATE = re.compile(r"(?<!\d)((?:19|20)\d\d)-?(0[1-9]|1[0-2])-?(0[1-9]|[12]\d|3[01])(?!\d)")
_TIFF_DATE = re.compile(r"^((?:19|20)\d\d):(\d\d):(\d\d)")


def _band_count(path):
    import rasterio

    try:
        with quiet_not_georeferenced(), rasterio.open(path) as src:
            return int(src.count)
    except Exception as exc:
        raise ValueError(f"cannot open {path!r} as a GeoTIFF (rasterio): {exc}") from None


def file_dates(paths):
    """The dates of a series of files: the first date (``YYYYMMDD`` or ``YYYY-MM-DD``) in
    each file name when every name has one and they differ, else each GeoTIFF's
    ``TIFFTAG_DATETIME`` when every file has one and they differ; None otherwise.

    Examples
    --------
    >>> file_dates(["LC08_L1TP_227065_20200608_20200824_02_T1.tif", "LC08_20200710.tif"])
    array(['2020-06-08', '2020-07-10'], dtype='datetime64[D]')
    >>> file_dates(["a.tif", "b.tif"]) is None
    True
    """
    found = [_DATE.search(os.path.basename(os.fspath(p))) for p in paths]
    if all(found):
        dates = np.array(["-".join(m.groups()) for m in found], dtype="datetime64[D]")
        if len(set(dates.tolist())) == len(dates):
            return dates
    try:
        import rasterio

        tags = []
        for p in paths:
            with quiet_not_georeferenced(), rasterio.open(p) as src:
                tags.append(_TIFF_DATE.match(src.tags().get("TIFFTAG_DATETIME", "")))
    except Exception:  # not GeoTIFFs, or unreadable: no dates
        return None
    if all(tags):
        dates = np.array(["-".join(m.groups()) for m in tags], dtype="datetime64[D]")
        if len(set(dates.tolist())) == len(dates):
            return dates
    return None


def _open_geotiff_series(paths, variable, feature_dim, concat_dim, nodata):
    """Multi-band GeoTIFFs on one grid, one date each, as one cube along ``concat_dim``: its
    coordinate the files' dates (:func:`file_dates`), else their order (0, 1, ...); sorted
    by date when there are dates."""
    import xarray as xr

    fdim = BAND_DIM if feature_dim is None else feature_dim
    layers, tags, first = [], [], None
    for path in paths:
        layer = _open_geotiff(path, variable, feature_dim)
        grid = {**_grid(layer), "bands": int(layer.sizes[fdim])}
        if first is None:
            first = (path, grid)
        elif not _same_grid(first[1], grid):
            raise ValueError(
                f"{first[0]!r} and {path!r} are not on one grid ({_describe(first[1])}, "
                f"{first[1]['bands']} bands; {_describe(grid)}, {grid['bands']} bands): the "
                "files of one series must share their grid and bands"
            )
        layers.append(layer)
        tags.append(_first(layer.rio.nodata))
    if nodata is None and len({("nan" if t != t else t) for t in tags}) > 1:
        raise ValueError(
            f"the files {paths[0]!r} ... ({len(paths)} files) carry different no-data tags "
            f"({', '.join(map(str, tags))}); declare the value with nodata= (--nodata)"
        )
    dates = file_dates(paths)
    order = np.argsort(dates, kind="stable") if dates is not None else np.arange(len(paths))
    stamps = dates[order] if dates is not None else np.arange(len(paths))
    cube = xr.concat(
        [layers[i] for i in order],
        dim=concat_dim,
        coords="minimal",
        compat="override",
        join="override",
    )
    cube = cube.assign_coords({concat_dim: stamps})
    cube.encoding = {**layers[0].encoding, "source": paths[0]}
    return _apply_nodata(cube, fdim, nodata, tags[0])


#: ``nodata="none"``: no value is missing, whatever the file's tag says.
NO_NODATA = "none"
#: The share of the samples a fill-like value must fill in every band to be warned about.
FILL_WARN_FRACTION = 0.01
#: What a fit does with samples NaN in some features (the stacker applies it; defined here, in
#: the vocabulary the command reads for its options without importing xarray)
NAN_POLICIES = ("raise", "drop_samples")


def parse_nodata(value, where="nodata"):
    """A no-data setting as given (a number, a numeric string, ``"none"`` or None) checked:
    a finite float, :data:`NO_NODATA` or None.

    Examples
    --------
    >>> parse_nodata("0"), parse_nodata(-9999), parse_nodata("None"), parse_nodata(None)
    (0.0, -9999.0, 'none', None)
    """
    import numbers

    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().lower() == NO_NODATA:
            return NO_NODATA
        try:
            number = float(value)
        except ValueError:
            number = None
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
    else:
        number = None
    if number is None or not np.isfinite(number):
        raise ValueError(
            f"{where} must be a finite number (the value marking missing pixels) or 'none', "
            f"got {value!r}"
        )
    return number


def parse_feature_dim(value, where="feature_dim"):
    """A feature-dimension setting as given checked: None, one dimension name (a str), or
    several (a list, a tuple or ``"time,band"``) as a tuple of names.

    Examples
    --------
    >>> parse_feature_dim("band"), parse_feature_dim("time, band"), parse_feature_dim(["band"])
    ('band', ('time', 'band'), 'band')
    >>> parse_feature_dim("band,band")
    Traceback (most recent call last):
    ...
    ValueError: feature_dim 'band,band' names 'band' twice; each dimension of the features is named once
    """
    if value is None:
        return None
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        names = [v.strip() for v in value]
    else:
        raise ValueError(
            f"{where} must be a dimension name or a list of them (e.g. [time, band]), "
            f"got {value!r}"
        )
    if not all(names):
        raise ValueError(f"{where} {value!r} has an empty dimension name")
    twice = [n for i, n in enumerate(names) if n in names[:i]]
    if twice:
        raise ValueError(
            f"{where} {value!r} names {twice[0]!r} twice; each dimension of the features is "
            "named once"
        )
    return names[0] if len(names) == 1 else tuple(names)


#: Fill values producers write without declaring them, besides 0 and the dtype's extremes:
#: -9999 and -999 (rasters, station data), -32767 / 32767 (int16 fills), -32768 and 65535 (the
#: extremes of the other 16-bit type, in files converted from it), 1e20 (CMIP's missing value)
#: and netCDF's default float fill 9.96921e36.
COMMON_FILLS = (-9999.0, -999.0, -32767.0, -32768.0, 32767.0, 65535.0, 1e20, -1e20, 9.96921e36)


def fill_candidates(dtype):
    """The fill-like values of a dtype: 0, its minimum and maximum, and the
    :data:`COMMON_FILLS` it can hold (as stored in it: a float32 file's 1e20 is
    ``float32(1e20)``). A fit warns of one only where it is the data's minimum or maximum in
    every feature (:func:`ppa_dask.store.stacker.fill_warning`).

    Examples
    --------
    >>> fill_candidates(np.uint16)
    [0.0, 65535.0, 32767.0]
    >>> fill_candidates(np.int8)
    [0.0, -128.0, 127.0]
    >>> fill_candidates(np.int16)
    [0.0, -32768.0, 32767.0, -9999.0, -999.0, -32767.0]
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        common = [v for v in COMMON_FILLS if info.min <= v <= info.max]
    elif dtype.kind == "f":
        info = np.finfo(dtype)
        common = [float(dtype.type(v)) for v in COMMON_FILLS]
    else:
        return [0.0]
    return list(dict.fromkeys([0.0, float(info.min), float(info.max), *common]))


def _first(value):
    if value is None:
        return None
    value = np.asarray(value).ravel()
    return float(value[0]) if value.size else None


def apply_attrs_nodata(cube, feature_dim):
    """A DataArray made outside ppa-dask's readers with the no-data value its own attributes
    declare applied, as the readers apply a file's tag (:func:`open_cube`): ``_FillValue``
    (rioxarray's and xarray's when they do not mask), ``missing_value`` (CF), or
    ``nodatavals`` (one per band, the older rasterio readers'). A cube the readers opened
    (they record the value applied, ``encoding["ppa_dask_nodata"]``), a NaN fill or no such
    attribute: ``cube`` as it is.

    Raises ValueError for ``nodatavals`` that differ between bands.

    Examples
    --------
    >>> import xarray as xr
    >>> cube = xr.DataArray([[1, -9999], [2, 5]], dims=("band", "x"), attrs={"_FillValue": -9999})
    >>> apply_attrs_nodata(cube, "band").values.tolist()
    [[1.0, nan], [2.0, nan]]
    """
    if "ppa_dask_nodata" in cube.encoding:
        return cube
    attrs = cube.attrs
    tag = _first(attrs.get("_FillValue", attrs.get("missing_value")))
    if tag is None and attrs.get("nodatavals") is not None:
        values = sorted({float(v) for v in np.ravel(attrs["nodatavals"]) if v is not None})
        values = [v for v in values if not np.isnan(v)]
        if len(values) > 1:
            raise ValueError(
                f"the DataArray {cube.name!r} declares no-data values that differ between "
                f"bands in its nodatavals attribute ({', '.join(f'{v:g}' for v in values)}); "
                "mask each band (cube.where(...)) and drop the attribute"
            )
        tag = values[0] if values else None
    if tag is None or np.isnan(tag):
        return cube
    return _apply_nodata(cube, feature_dim, None, tag)


#: The encoding key of the :class:`NoDataMask` a reader applied, with the Dask name of the cube
#: it made: the record describes that cube and no other (any operation renames the array).
_MASK_KEY = "ppa_dask_nodata_mask"


@dataclasses.dataclass(frozen=True)
class NoDataMask:
    """How a reader applied the no-data rule to a cube, kept so that a fit can apply it again
    with some features exempt (:meth:`apply`): a feature equal to the no-data value in every
    sample (a date stored entirely as fill) is then dropped, as a feature NaN in every sample
    is, instead of making every sample missing.

    Attributes
    ----------
    values : xarray.DataArray
        The cube as stored (integers as float64), lazy.
    equal : xarray.DataArray of bool
        Where ``values`` equals the no-data value, lazy.
    dims : tuple of str
        The feature dimensions a value equal to it makes the sample missing across.
    unpack : callable, optional
        Applied after the masking (a NetCDF variable's ``scale_factor`` / ``add_offset``).
    """

    values: object
    equal: object
    dims: tuple
    unpack: object = None

    def apply(self, exempt=None):
        """The cube with the rule applied: a sample any of whose features (along
        :attr:`dims`) equals the no-data value is NaN in every feature; the features
        ``exempt`` (a boolean DataArray over feature dimensions) do not take part in the rule
        and are NaN everywhere instead."""
        equal = self.equal if exempt is None else self.equal & ~exempt
        dims = [d for d in self.dims if d in equal.dims]
        out = self.values.where(~(equal.any(dims) if dims else equal))
        if exempt is not None:
            out = out.where(~exempt)
        return out if self.unpack is None else self.unpack(out)


def _keep_mask(cube, mask):
    """Record ``mask`` as the one that made ``cube`` (in its encoding)."""
    cube.encoding[_MASK_KEY] = (mask, getattr(cube.data, "name", None))
    return cube


def nodata_mask(cube):
    """The :class:`NoDataMask` a reader applied to make ``cube`` exactly, or None (none was
    applied, or the cube was changed since: selected, transposed, computed ...).

    Examples
    --------
    >>> import xarray as xr, dask.array as da
    >>> raw = xr.DataArray(da.from_array([[1.0, -1.0], [2.0, 3.0]]), dims=("band", "x"))
    >>> cube = _apply_nodata(raw, "band", -1.0, None)
    >>> nodata_mask(cube).dims, nodata_mask(cube.isel(x=[0])) is None
    (('band',), True)
    """
    mask, name = cube.encoding.get(_MASK_KEY, (None, None))
    if mask is None or name is None or getattr(cube.data, "name", None) != name:
        return None
    return mask


def without_mask(encoding):
    """An encoding without its :class:`NoDataMask` record (a cube made from it otherwise)."""
    return {k: v for k, v in encoding.items() if k != _MASK_KEY}


def _apply_nodata(cube, feature_dim, nodata, tag):
    """The cube with the no-data rule applied: ``nodata`` (parsed), else the file's ``tag``;
    records the value applied (``encoding["ppa_dask_nodata"]``) and how
    (:class:`NoDataMask`), or, when nothing was declared, the fill-like values a fit checks
    (``encoding["ppa_dask_fill_check"]``)."""
    tag = _first(tag)
    value = None if nodata == NO_NODATA else nodata if nodata is not None else tag
    encoding = {**cube.encoding, "dtype": cube.encoding.get("dtype", cube.dtype)}
    attrs = {k: v for k, v in cube.attrs.items() if k not in ("_FillValue", "missing_value")}
    if value is None or np.isnan(value):
        out = cube.copy()
        if nodata is None and tag is None:
            encoding["ppa_dask_fill_check"] = fill_candidates(cube.dtype)
        value = None
    else:
        dims = feature_dim if isinstance(feature_dim, (list, tuple)) else [feature_dim]
        # integers become float64, as a fit of them without no-data makes them (the stacker)
        values = cube if cube.dtype.kind == "f" else cube.astype(np.float64)
        mask = NoDataMask(values, cube == value, tuple(dims))
        out = mask.apply()
    out.attrs = attrs
    out.encoding = {**without_mask(encoding), "ppa_dask_nodata": value}
    if value is not None:
        _keep_mask(out, mask)
    return out


def _cf_values(cube, feature_dim, nodata):
    """A NetCDF variable read as stored: the no-data rule on its stored values (its
    ``_FillValue`` / ``missing_value`` the tag), then unpacked (``scale_factor``,
    ``add_offset``)."""
    attrs = cube.attrs
    tag = attrs.get("_FillValue", attrs.get("missing_value"))
    scale, offset = attrs.get("scale_factor"), attrs.get("add_offset")
    out = _apply_nodata(cube, feature_dim, nodata, tag)
    if scale is not None or offset is not None:
        mask = nodata_mask(out)
        encoding = without_mask(out.encoding)
        kind = np.result_type(attrs.get("scale_factor", attrs.get("add_offset")), np.float32)
        unpack = functools.partial(
            _unpack,
            scale=1.0 if scale is None else _first(scale),
            offset=0.0 if offset is None else _first(offset),
            kind=kind,
        )
        out = unpack(out)
        out.attrs = {k: v for k, v in attrs.items() if k not in _CF_PACKING}
        out.encoding = encoding
        if mask is not None:
            _keep_mask(out, dataclasses.replace(mask, unpack=unpack))
    return out


def _unpack(values, scale, offset, kind):
    return (values.astype(kind) * scale + offset).astype(kind)


_CF_PACKING = ("_FillValue", "missing_value", "scale_factor", "add_offset")

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


# -------------------------------------------------------------------------------------------
# sources: one opener for every front-end
# -------------------------------------------------------------------------------------------

#: How each front-end spells the options of :func:`open_source` in what it tells the user.
FRONTS = ("python", "cli", "pipeline")

# Messages that differ between the front-ends beyond an option's spelling, each front's own
# words (the CLI's and the pipeline's were established before this layer; they are kept).
_MESSAGES = {
    "table_feature_dim": {
        "cli": "--feature-dim applies to cubes; the features of the table {path!r} are its "
        "columns (choose them with --columns)",
        "python": "feature_dim= applies to cubes; the features of the table {path!r} are its "
        "columns (choose them with columns=)",
    },
    "columns_not_table": {
        "cli": "--columns applies to Parquet and CSV inputs, not to {path!r}",
        "python": "columns= applies to Parquet and CSV inputs, not to {path!r}",
    },
    "netcdf_feature_dim": {
        "cli": "{path!r} is a NetCDF cube: name the dimension holding its features with "
        "--feature-dim (e.g. band)",
        "python": "{path!r} is a NetCDF cube: name the dimension holding its features with "
        "feature_dim= (e.g. band)",
    },
    "zarr_ndim": {
        "cli": "INPUT {where} is a {ndim}-D array of shape {shape}; ppa-dask needs a 2-D array "
        "of samples x features (or, with --feature-dim, a cube)",
        "python": "{where} is a {ndim}-D array of shape {shape}; ppa-dask needs a 2-D array "
        "of samples x features (or, with feature_dim=, a cube)",
        "pipeline": "{path!r} holds a {ndim}-D array; source 'zarr' needs samples x features "
        "(use source 'xarray' with a feature_dim for a cube)",
    },
    "zarr_dtype": {
        "cli": "INPUT {where} holds dtype {dtype}; ppa-dask needs numbers (integer, float or "
        "bool)",
        "python": "{where} holds dtype {dtype}; ppa-dask needs numbers (integer, float or bool)",
    },
    "nodata_table": {
        "cli": "--nodata applies to cubes (NetCDF, GeoTIFF, Zarr datasets), not to the table "
        "{path!r}",
        "python": "nodata= applies to cubes (NetCDF, GeoTIFF, Zarr datasets), not to the table "
        "{path!r}",
        "pipeline": "applies to cubes (NetCDF, GeoTIFF, Zarr datasets), not to the table {path!r}",
    },
    "zarr_plain_array": {
        "cli": "--feature-dim {feature_dim!r} needs an xarray dataset (a Zarr group whose "
        "variables have named dimensions), but {path!r} is a plain Zarr array: drop "
        "--feature-dim to read it as samples x features",
        "python": "feature_dim={feature_dim!r} needs an xarray dataset (a Zarr group whose "
        "variables have named dimensions), but {path!r} is a plain Zarr array: drop "
        "feature_dim= to read it as samples x features",
    },
    "variable_choose": {
        "cli": "{path!r} holds the variables {names}; choose one with --variable",
        "python": "{path!r} holds the variables {names}; choose one with variable=",
        "pipeline": "{path!r} holds {n} variables ({listed}); name one",
    },
    "variable_missing": {
        "cli": "{path!r} has no variable {variable!r} (variables: {names})",
        "python": "{path!r} has no variable {variable!r} (variables: {names})",
        "pipeline": "{variable!r} is not a variable of {path!r} (variables: {listed})",
    },
    "feature_dims_missing": {
        "cli": "--feature-dim {given}: {missing!r} is not a dimension of {where} "
        "(dimensions: {dims})",
        "python": "feature_dim={given}: {missing!r} is not a dimension of {where} "
        "(dimensions: {dims})",
        "pipeline": "{given}: {missing!r} is not a dimension of {where} (dimensions: {dims})",
    },
    "feature_dims_table": {
        "cli": "--feature-dim {given} stacks dimensions of a cube; {path!r} is a table (its "
        "features are its columns)",
        "python": "feature_dim={given} stacks dimensions of a cube; {path!r} is a table (its "
        "features are its columns)",
    },
    "not_a_format": {
        "python": "{path!r} is a file of a format ppa-dask does not read (suffix {suffix!r}): "
        "it reads Zarr stores (folders), {known}; an ENVI cube (.dat with its .hdr) becomes a "
        "GeoTIFF with gdal_translate -of GTiff",
    },
    "feature_dim_missing": {
        "cli": "--feature-dim {feature_dim!r} is not a dimension of {variable!r} "
        "(dimensions: {dims})",
        "python": "feature_dim={feature_dim!r} is not a dimension of {variable!r} "
        "(dimensions: {dims})",
        "pipeline": "{feature_dim!r} is not a dimension of {path!r} (dimensions: {dims})",
    },
}


# the option names as each front-end spells them
_SPELLED = {
    "nodata": {"python": "nodata", "cli": "--nodata", "pipeline": "data.nodata"},
    "feature_dim": {
        "python": "feature_dim",
        "cli": "--feature-dim",
        "pipeline": "data.feature_dim",
    },
}


class SourceError(ValueError):
    """An input that cannot be opened as asked; ``key`` names the option at fault (``path``,
    ``variable``, ``feature_dim`` or ``columns``), so a front-end can say where it was set."""

    def __init__(self, message, key="path"):
        super().__init__(message)
        self.key = key


def _fail(what, front, key="path", **fields):
    words = _MESSAGES[what]
    text = words.get(front, words.get("python", words.get("cli")))
    raise SourceError(text.format(**fields), key)


def open_input(path_or_url, variable=None, storage_options=None):
    """Any input as a Dask array or DataArray: a Zarr array or a variable of a Zarr group
    (local path or fsspec URL, one Dask chunk per Zarr chunk), a NetCDF / GeoTIFF cube (a lazy
    DataArray: fit it with ``feature_dim=``) or a Parquet / CSV table (its ``(samples,
    features)`` array, ``variable`` naming its columns).

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from ppa_dask import PPA
    >>> from ppa_dask.datasets import write_zarr
    >>> from ppa_dask.store import open_input
    >>> p = write_zarr(os.path.join(tempfile.mkdtemp(), "d.zarr"), 3000, chunk_rows=1000,
    ...                random_state=0)
    >>> X = open_input(p)
    >>> X.chunks[0]
    (1000, 1000, 1000)
    >>> model = PPA(degree=2, random_state=0).fit(X)
    """
    fmt = file_format(path_or_url)
    if fmt in CUBE_FORMATS or is_series(path_or_url):
        return open_cube(path_or_url, variable=variable)
    if fmt in TABLE_FORMATS:
        return table_array(open_table(path_or_url, columns=variable))[0]
    return open_zarr_input(path_or_url, variable, storage_options)


def fingerprint(path):
    """SHA-256 of the names, sizes and modification times of every file under ``path``.

    ``path`` may be a local file or folder or an fsspec URL. Cheap (no data is read), and it
    changes when any file of a store is added, removed, resized or rewritten.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> a = fingerprint(folder)
    >>> _ = open(os.path.join(folder, "f"), "w").write("x")
    >>> a != fingerprint(folder)
    True
    """
    import fsspec

    path = os.fspath(path)
    fs, root = fsspec.core.url_to_fs(path)
    if not fs.exists(root):
        raise FileNotFoundError(path)
    if fs.isdir(root):
        entries = fs.find(root, detail=True, withdirs=False)
    else:
        entries = {root: fs.info(root)}
    h = hashlib.sha256()
    for name in sorted(entries):
        info = entries[name]
        stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or ""
        rel = name[len(root) :] if name.startswith(root) else name
        h.update(f"{rel}\0{info.get('size')}\0{stamp}\n".encode())
    return h.hexdigest()


def _sha256(obj):
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass
class Source:
    """An opened input: what :func:`open_source` returns.

    Attributes
    ----------
    data : dask.array.Array or xarray.DataArray
        ``kind == "table"``: a ``(samples, features)`` Dask array; ``kind == "cube"``: a lazy
        DataArray whose ``feature_dim`` holds the features and whose other dimensions are
        samples.
    kind : {"table", "cube"}
    format : str
        A name of :data:`FORMATS`, or ``"zarr"``.
    path : str or list of str
        As given.
    feature_dim : str, tuple of str or None
        The cube's feature dimension, or its feature dimensions when the features span
        several (``("time", "band")``); None for a table.
    feature_names : list of str or None
        A table's column names, a cube's feature labels; None when the input names none.
    variable : str or None
        The variable read (NetCDF, Zarr group), if any.
    nodata : float or None
        A cube's no-data value applied (declared, or the file's tag); None when none is.
    """

    data: object
    kind: str
    format: str
    path: object
    feature_dim: str | None = None
    feature_names: list | None = None
    variable: str | None = None
    nodata: float | None = None

    @property
    def files(self):
        """The local files (or the URL) the source reads."""
        if self.format == ZARR:
            return [os.fspath(self.path)]
        return expand_paths(self.path)

    @property
    def mask(self):
        """The valid samples: a boolean array (a DataArray over a cube's sample dimensions, a
        Dask vector for a table), True where every feature is finite. Lazy."""
        if self.kind == "cube":
            import xarray as xr

            dims = self.feature_dim
            dims = list(dims) if isinstance(dims, tuple) else dims
            return xr.apply_ufunc(np.isfinite, self.data, dask="allowed").all(dims)
        import dask.array as da

        return da.isfinite(self.data).all(axis=1)

    @property
    def georef(self):
        """``{"crs": ..., "transform": ...}`` of a georeferenced cube (rioxarray), else None."""
        if self.kind != "cube" or "spatial_ref" not in self.data.coords:
            return None
        import rioxarray  # noqa: F401  (registers the .rio accessor)

        crs = self.data.rio.crs
        return None if crs is None else {"crs": crs, "transform": self.data.rio.transform()}

    def fingerprint(self):
        """What a rerun compares to know the input unchanged (:func:`source_fingerprint`)."""
        return source_fingerprint(self.path, self.format)


def source_fingerprint(path, fmt):
    """What a rerun compares to know an input unchanged, without opening it: the path and a
    :func:`fingerprint` of a Zarr store; the files and one fingerprint of them all for the
    file formats.

    Examples
    --------
    >>> import tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(p, "w").write("a,b")
    >>> sorted(source_fingerprint(p, "csv"))
    ['files', 'fingerprint']
    """
    if fmt == ZARR:
        return {"path": path, "fingerprint": fingerprint(path)}
    files = expand_paths(path)
    return {"files": files, "fingerprint": _sha256([fingerprint(f) for f in files])}


def source_format(path):
    """The format of an input path (a name of :data:`FORMATS`), ``"zarr"`` for anything else.

    Examples
    --------
    >>> source_format("a.nc"), source_format(["a.csv"]), source_format("d.zarr")
    ('netcdf', 'csv', 'zarr')
    """
    return file_format(path) or ZARR


def _pick_zarr_variable(ds, path, variable, front):
    names = list(ds.data_vars)
    listed = ", ".join(map(str, names))
    if variable is None:
        if len(names) != 1:
            _fail(
                "variable_choose",
                front,
                "variable",
                path=path,
                names=names,
                n=len(names),
                listed=listed,
            )
        variable = names[0]
    if variable not in ds.data_vars:
        _fail(
            "variable_missing",
            front,
            "variable",
            path=path,
            variable=variable,
            names=names,
            listed=listed,
        )
    return ds[variable], variable


def _zarr_variables(path, variables, feature_dim, nodata):
    """Variables of a Zarr dataset stacked along ``variable`` (as :func:`_open_variables`)."""
    import xarray as xr

    if feature_dim != VARIABLE_DIM:
        raise ValueError(
            f"variables= stacks the variables along {VARIABLE_DIM!r}, their feature dimension; "
            f"got feature_dim={feature_dim!r}"
        )
    ds = open_zarr_dataset(path)
    chosen = _chosen_variables(ds, variables, repr(path))
    cube = xr.concat([ds[v].drop_attrs() for v in chosen], dim=VARIABLE_DIM, join="override")
    cube = cube.assign_coords({VARIABLE_DIM: np.asarray(chosen, dtype=str)}).rename("variables")
    return _apply_nodata(cube.chunk({VARIABLE_DIM: -1}), VARIABLE_DIM, nodata, None)


def _zarr_source(path, variable, feature_dim, front, nodata, variables=None):
    if variables is not None:
        cube = _zarr_variables(path, variables, feature_dim, nodata)
        names = _labels(cube, VARIABLE_DIM)
        return Source(
            cube, "cube", ZARR, path, VARIABLE_DIM, names, None, cube.encoding["ppa_dask_nodata"]
        )
    if feature_dim is None:
        if nodata is not None:
            _fail("nodata_table", front, "nodata", path=path)
        X = open_zarr_input(path, variable=variable)
        where = f"{path!r}" + (f" variable {variable!r}" if variable else "")
        if X.ndim != 2 or hasattr(X, "dims"):
            _fail("zarr_ndim", front, where=where, path=path, ndim=X.ndim, shape=tuple(X.shape))
        if X.dtype.kind not in _NUMERIC_KINDS:
            _fail("zarr_dtype", front, where=where, dtype=X.dtype)
        return Source(X, "table", ZARR, path, variable=variable)
    if front != "pipeline" and not is_remote(path) and zarr_node_type(local_path(path)) == "array":
        _fail("zarr_plain_array", front, "feature_dim", feature_dim=feature_dim, path=path)
    cube, variable = _pick_zarr_variable(open_zarr_dataset(path), path, variable, front)
    if feature_dim not in cube.dims:
        _fail(
            "feature_dim_missing",
            front,
            "feature_dim",
            feature_dim=feature_dim,
            variable=variable,
            path=path,
            dims=", ".join(map(str, cube.dims)),
        )
    cube = _apply_nodata(cube, feature_dim, nodata, cube.encoding.get("_FillValue"))
    return Source(
        cube,
        "cube",
        ZARR,
        path,
        feature_dim,
        _labels(cube, feature_dim),
        variable,
        cube.encoding["ppa_dask_nodata"],
    )


def _is_plain_file(path):
    return isinstance(path, (str, os.PathLike)) and not is_remote(path) and os.path.isfile(path)


#: What :func:`open_source` reads, for the refusal of a file it does not.
_KNOWN = "; ".join(f"{f.label} ({', '.join(f.suffixes)})" for f in FORMATS.values())


def _labels(cube, feature_dim):
    if feature_dim in cube.coords:
        return [str(v) for v in np.asarray(cube[feature_dim].values).tolist()]
    return None


def open_source(
    path,
    *,
    nodata=None,
    variables=None,
    variable=None,
    feature_dim=None,
    columns=None,
    concat_dim="time",
    format=None,
    front="python",
):
    """Open an input as a :class:`Source`: the one reader behind the CLI, the pipelines and
    the Python readers.

    Parameters
    ----------
    path : str, os.PathLike or list of them
        A Zarr array or group (local path or fsspec URL), a file of a format of
        :data:`FORMATS` (by its suffix), a glob or a list of NetCDF files (a series).
    variable : str, optional
        The array or variable of a Zarr group, or the NetCDF variable.
    feature_dim : str, list of str or tuple of str, optional
        The dimension holding the features: a Zarr input with one is read as an xarray cube,
        without one as a ``(samples, features)`` array. A GeoTIFF's is ``band`` (the default);
        a NetCDF cube needs one. Several (``("time", "band")``, or ``"time,band"``): the
        features span them all (a series' dates times its bands), each checked to exist; a
        sample equal to the no-data value in one band of one date is then missing as a whole
        (a sample NaN on some dates only is the fit's ``nan_policy``).
    columns : list of str or str, optional
        Parquet / CSV: the feature columns (default: all).
    concat_dim : str, default="time"
        A NetCDF series: the dimension the files are concatenated along.
    nodata : float, "none" or None
        A cube's no-data value (:func:`open_cube`); None: the file's own tag, if any.
    variables : list of str, str or "all", optional
        NetCDF / Zarr dataset: several variables stacked as the features along ``variable``
        (:func:`open_cube`).
    format : str, optional
        A name of :data:`FORMATS` or ``"zarr"``, instead of the path's suffix.
    front : {"python", "cli", "pipeline"}
        Whose words a refusal uses for the options (``feature_dim=``, ``--feature-dim``,
        ``data.feature_dim``).

    Returns
    -------
    Source

    Raises
    ------
    SourceError
        (a ValueError) naming the path and the option at fault.
    FileNotFoundError
        A missing file or store, or a glob matching nothing.

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> pd.DataFrame({"a": [1.0, 2, 3], "b": [4.0, 5, 6]}).to_csv(path, index=False)
    >>> src = open_source(path)
    >>> src.kind, src.format, src.feature_names, src.data.shape
    ('table', 'csv', ['a', 'b'], (3, 2))
    """
    if front not in FRONTS:
        raise ValueError(f"front must be one of {FRONTS}, got {front!r}")
    _check_regular_inputs(path, front)
    fmt = format or source_format(path)
    nodata = parse_nodata(nodata, _SPELLED["nodata"][front])
    try:
        feature_dim = parse_feature_dim(feature_dim, _SPELLED["feature_dim"][front])
    except ValueError as exc:
        raise SourceError(str(exc), "feature_dim") from None
    if isinstance(feature_dim, tuple):
        options = dict(variables=variables, variable=variable, columns=columns)
        return _several_dims(path, feature_dim, fmt, front, nodata, concat_dim, options)
    if variables is not None and feature_dim is None:
        feature_dim = VARIABLE_DIM  # several variables stacked: their names are the features
    if fmt in TABLE_FORMATS:
        if feature_dim is not None:
            _fail("table_feature_dim", front, "feature_dim", path=path)
        if nodata is not None:
            _fail("nodata_table", front, "nodata", path=path)
        X, names = table_array(open_table(path, columns=columns))
        return Source(X, "table", fmt, path, feature_names=names)
    if columns is not None:
        _fail("columns_not_table", front, "columns", path=path)
    if fmt == ZARR and format is None and _is_plain_file(path):
        # a Zarr store is a folder: a file of another suffix is a format not read here
        _fail("not_a_format", front, path=path, suffix=os.path.splitext(path)[1], known=_KNOWN)
    if fmt == ZARR:
        return _zarr_source(path, variable, feature_dim, front, nodata, variables)
    if fmt == "geotiff" and feature_dim is None:
        feature_dim = BAND_DIM
    if feature_dim is None:
        _fail("netcdf_feature_dim", front, "feature_dim", path=path)
    cube = open_cube(
        path, variable, feature_dim, variables=variables, concat_dim=concat_dim, nodata=nodata
    )
    return Source(
        cube,
        "cube",
        fmt,
        path,
        feature_dim,
        _labels(cube, feature_dim),
        cube.name,
        cube.encoding.get("ppa_dask_nodata"),
    )


def _check_regular_inputs(path, front):
    """Refuse, before any reader opens it, a local input (a path, each file of a glob, each of
    a list) that is not a regular file or a folder (a Zarr store): a FIFO would block the read
    and a device such as /dev/zero never end it. Missing paths pass (the readers say so)."""
    what = "INPUT" if front == "cli" else ""
    for item in path if isinstance(path, (list, tuple)) else [path]:
        item = os.fspath(item)
        if is_remote(item):
            continue
        if item.startswith(("file://", "local://")):
            item = local_path(item)
        for one in sorted(glob.glob(item)) if _is_glob(item) else [item]:
            try:
                check_regular(one, what, folder=True)
            except NotARegularFile as exc:
                raise SourceError(str(exc), "path") from None


def _several_dims(path, dims, fmt, front, nodata, concat_dim, options):
    """A cube whose features span several dimensions (``("time", "band")``): read along the
    one its format reads features along (a GeoTIFF's ``band``, stacked variables'
    ``variable``, else the first named), every dimension checked to exist, and the no-data
    rule applied across all of them: a sample equal to the no-data value in any feature (a
    band of a date) is missing as a whole, the features of a sample being all its dates'
    bands."""
    given = "[" + ", ".join(dims) + "]" if front == "pipeline" else ",".join(dims)
    if fmt in TABLE_FORMATS:
        _fail("feature_dims_table", front, "feature_dim", given=given, path=path)
    if fmt == "geotiff":
        read = BAND_DIM
    elif options["variables"] is not None and VARIABLE_DIM in dims:
        read = VARIABLE_DIM
    else:
        read = dims[0]
    src = open_source(
        path,
        nodata=nodata,
        feature_dim=read,
        concat_dim=concat_dim,
        format=fmt,
        front=front,
        **options,
    )
    cube = src.data
    for d in dims:
        if d not in cube.dims:
            _fail(
                "feature_dims_missing",
                front,
                "feature_dim",
                given=given,
                missing=d,
                where=repr(cube.name) + f" in {path!r}" if cube.name else repr(path),
                dims=", ".join(map(str, cube.dims)),
            )
    mask = nodata_mask(cube)
    if mask is not None:
        # the no-data rule across every feature dimension: a sample any of whose features
        # (every date's bands) equals the no-data value is missing as a whole. A sample NaN in
        # some features only is left to the fit's nan_policy, as with one feature dimension
        mask = dataclasses.replace(mask, dims=tuple(dims))
        attrs, encoding = cube.attrs, without_mask(cube.encoding)
        cube = mask.apply()
        cube.attrs, cube.encoding = attrs, encoding
        _keep_mask(cube, mask)
    merged, _ = merge_feature_dims(cube, dims)
    names = [str(v) for v in merged[FEATURE_DIM_SEP.join(dims)].values]
    return dataclasses.replace(src, data=cube, feature_dim=dims, feature_names=names)
