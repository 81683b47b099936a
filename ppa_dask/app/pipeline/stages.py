"""The stages of a pipeline run, in their order: load -> preprocess -> fit -> transform ->
evaluate -> plots.

Each stage is a :class:`Stage` object: its ``name`` (its folder is ``NN-<name>``), the sections
of the configuration it depends on (``config``), the stages whose outputs it reads (``inputs``),
and :meth:`Stage.run`, which writes its outputs in its folder and returns their names
and a record for its completion marker. :data:`STAGE_ORDER` is the order the run takes them in
(:class:`ppa_dask.app.pipeline.run.Run`); :data:`STAGES` their names. What a stage reads from
those before it goes through :func:`loaded`, :func:`samples`, :func:`preprocess_info` and
:func:`fitted_model`.
"""

from __future__ import annotations

import os

import numpy as np

from ppa_dask import datasets, store
from ppa_dask.app.baseline import pca_reconstruction_errors
from ppa_dask.app.pipeline.error_tables import (
    error_rows,
    format_error_table,
    write_error_csv,
    write_error_markdown,
)
from ppa_dask.app.pipeline.folder import read_marker, write_json
from ppa_dask.app.pipeline.schema import (
    COMPONENT_FILES,
    PipelineError,
    components_format,
    dims_of,
    fit_dim,
)
from ppa_dask.cluster import compute_with_progress, step_reporter
from ppa_dask.plotting import robust_limits
from ppa_dask.ppa.estimator import PPA
from ppa_dask.ppa.kernels import row_hash
from ppa_dask.store.feature_dims import FEATURE_DIM_SEP, merge_feature_dims, split_feature_dims
from ppa_dask.store.stacker import fill_warning
from ppa_dask.utils.files import read_json_file
from ppa_dask.utils.params import too_many_components
from ppa_dask.utils.seeds import child_seed
from ppa_dask.utils.version import VERSION
from ppa_dask.utils.warnings import NoDataWarning, warn

__all__ = [
    "STAGES",
    "STAGE_CONFIG",
    "STAGE_DIRS",
    "STAGE_INPUTS",
    "STAGE_ORDER",
    "Stage",
    "fitted_model",
    "held_out_rows",
    "loaded",
    "open_source",
    "preprocess_info",
    "samples",
]


class Stage:
    """One stage of a pipeline run.

    A stage reads the configuration (``run.config``), the outputs of the stages it depends on
    (:func:`loaded`, :func:`samples`, ...) and, for the first, files outside the run folder
    (:meth:`external_inputs`, fingerprinted into its key); :meth:`run` writes under
    ``run.dir(name)``, which holds nothing of an earlier run (a user's own files may be
    there), each file at the path ``run.path(name, file)`` gives, which records it as the
    run's before it is written (a rerun removes only those).
    """

    #: The stage's name (its folder is ``NN-<name>``).
    name = ""
    #: Sections of the configuration the stage depends on (besides the stages it reads from).
    config = ()
    #: The stages whose outputs the stage reads.
    inputs = ()

    def run(self, run):  # pragma: no cover - every stage defines it
        """Do the stage's work for ``run`` (a :class:`ppa_dask.app.pipeline.run.Run`);
        returns ``(outputs, info)``: the names of the files it wrote in its folder (or
        absolute paths outside it), and a JSON record for its marker."""
        raise NotImplementedError

    def external_inputs(self, config):
        """Fingerprints of what the stage reads from outside the run folder (none)."""
        return {}

    def __repr__(self):
        return f"<stage {self.name}>"


# ---------------------------------------------------------------------------------------------
# data access (the store API and the xarray cubes)
# ---------------------------------------------------------------------------------------------


def _write_table(X, path, attrs=None):
    """Write a 2-D Dask/numpy array as a result array (temporary sibling, marked complete,
    renamed into place: ppa_dask.store.write_array)."""
    store.write_array(X, path, attrs=attrs)


def _open_table(path):
    return store.open_array(path)


def _write_cube(cube, path, name):
    """Write a DataArray as a Zarr group (atomically: ppa_dask.store.write_dataset)."""
    store.write_dataset(cube.rename(name), path)


def _open_cube(path, name):
    return store.open_dataset(path)[name]


def _component_attrs(scale):
    """CF attributes of the component images the pipeline writes as GeoTIFF / NetCDF: min-max
    scaled features are dimensionless, so are their PPA coefficients (PPA preserves volume);
    unscaled, they take the input's ``units`` (``write_cube``)."""
    if scale == "minmax":
        return {"units": "1", "comment": "PPA of the features min-max scaled to [0, 1]"}
    return {}


def _save_model(model, path):
    store.save_model(model, path)


def _load_model(path):
    return store.load_model(path)


# ---------------------------------------------------------------------------------------------
# what each stage reads from those before it
# ---------------------------------------------------------------------------------------------


def loaded(run):
    """The loaded data: ("table", dask array, names) or ("cube", DataArray, feature_dim)."""
    info = (read_marker(run.dir("load")) or {}).get("info") or {}
    data = run.config["data"]
    if info.get("layout") == "cube":
        if data["source"] == "xarray":
            cube = open_source(data, "zarr", data["feature_dim"]).data
        elif data["source"] in store.sources.CUBE_FORMATS:
            cube = open_source(data, data["source"], info["feature_dim"]).data
            # chunks of whole rows of tiles (the last sample dimension whole), so the
            # stacked rows, and the cubes written from them, have regular chunks
            last = [d for d in cube.dims if d not in dims_of(info["feature_dim"])][-1]
            cube = cube.chunk({last: -1})
        else:
            cube = _open_cube(run.path("load", "data.zarr"), data["variable"])
        return "cube", cube, info["feature_dim"]
    if data["source"] == "zarr":
        X = open_source(data, "zarr").data
    elif data["source"] == "generated" and data["path"] is not None:
        X = store.open_input(os.path.abspath(data["path"]))
    else:
        X = _open_table(run.path("load", "data.zarr"))
    return "table", X, info.get("feature_names")


def open_source(data, fmt, feature_dim=None):
    """The input of ``data`` (ppa_dask.store.open_source); a refusal names the data key at
    fault (a file source's: ``data.path``)."""
    try:
        return store.open_source(
            data["path"],
            variable=data.get("variable"),
            variables=data.get("variables"),
            feature_dim=feature_dim,
            columns=data.get("columns"),
            concat_dim=data.get("concat_dim", "time"),
            nodata=data.get("nodata"),
            format=fmt,
            front="pipeline",
        )
    except store.SourceError as exc:
        raise PipelineError(f"data.{'path' if fmt != 'zarr' else exc.key}: {exc}") from None
    except ValueError as exc:
        if fmt == "zarr":
            raise
        raise PipelineError(f"data.path: {exc}") from None


def samples(run):
    """The preprocessed (training) samples, a Dask array."""
    return _open_table(run.path("preprocess", "samples.zarr"))


def preprocess_info(run):
    """The preprocess stage's record (counts, scaling, layout)."""
    return read_json_file(run.path("preprocess", "preprocess.json"))


def fitted_model(run):
    """The model the fit stage saved."""
    return _load_model(run.path("fit", "model.zarr"))


# ---------------------------------------------------------------------------------------------
# the stages
# ---------------------------------------------------------------------------------------------


class Load(Stage):
    """Read or generate the data: tables written to ``data.zarr``, stores and cubes read in
    place (their source recorded)."""

    name = "load"
    config = ("data", "seed")
    inputs = ()

    def run(self, run):
        data, seed = run.config["data"], run.config["seed"]
        source = data["source"]
        out = run.path("load", "data.zarr")
        if source == "zarr":
            X = open_source(data, "zarr").data
            run.log(
                f"  data: {X.shape[0]:,} x {X.shape[1]} Zarr array at {data['path']} "
                "(read in place)"
            )
            write_json(
                run.path("load", "source.json"),
                {"path": data["path"], "variable": data["variable"], "shape": list(X.shape)},
            )
            return ["source.json"], {
                "layout": "table",
                "shape": list(X.shape),
                "feature_names": None,
            }
        if source in store.sources.FORMATS:
            return self._load_file(run, data, out)
        if source == "xarray":
            dim = data["feature_dim"]
            opened = open_source(data, "zarr", dim)
            cube = opened.data
            run.log(f"  data: cube {dict(cube.sizes)} at {data['path']} (read in place)")
            write_json(
                run.path("load", "source.json"),
                {"path": data["path"], "variable": data["variable"], "sizes": dict(cube.sizes)},
            )
            return ["source.json"], self._cube_info(run, opened)
        if source == "make_cube":
            ds = datasets.make_cube(random_state=seed, path=out, **data["params"])
            cube = _cube_variable(ds, data["variable"], data["feature_dim"], "make_cube")
            run.log(f"  data: make_cube {dict(cube.sizes)} written to {out}")
            return ["data.zarr"], {
                "layout": "cube",
                "feature_dim": data["feature_dim"],
                "sizes": dict(cube.sizes),
            }
        import dask.array as da

        if source == "generated" and data["path"] is not None:
            return self._load_generated_zarr(run, data, seed)
        if source == "dataset":
            X, _ = datasets.TABLE_LOADERS[data["name"]](return_X_y=True)
            X = np.asarray(X, dtype=np.float64)
            names = None
            try:
                bunch = datasets.TABLE_LOADERS[data["name"]](return_X_y=False)
                names = [str(n) for n in bunch.feature_names]
            except Exception:  # a loader without names: columns are numbered
                names = None
            what = f"bundled data set {data['name']!r}"
        else:  # generated
            gen = datasets.make_helix if data["kind"] == "helix" else datasets.make_curved_manifold
            X = gen(
                data["n_samples"],
                n_features=data["n_features"],
                random_state=seed,
                **data["params"],
            )
            names, what = None, f"generated {data['kind']!r} data"
        rows = min(data["chunk_rows"], X.shape[0])
        _write_table(
            da.from_array(X, chunks=(rows, X.shape[1])),
            out,
            attrs={"feature_names": names} if names else None,
        )
        run.log(f"  data: {what}, {X.shape[0]:,} x {X.shape[1]}, written to {out}")
        return ["data.zarr"], {"layout": "table", "shape": list(X.shape), "feature_names": names}

    def external_inputs(self, config):
        """Fingerprints of what the stage reads from outside the run folder."""
        data = config["data"]
        if data["source"] in ("zarr", "xarray"):
            return store.sources.source_fingerprint(data["path"], "zarr")
        if data["source"] == "dataset":
            return {"dataset": data["name"], "ppa_dask": VERSION}
        if data["source"] in store.sources.FORMATS:
            return store.sources.source_fingerprint(data["path"], data["source"])
        return {}

    def _load_generated_zarr(self, run, data, seed):
        """The ``generated`` source with a ``path``: written there by ``datasets.write_zarr``
        on the cluster, or reused when the array already there holds the same samples."""
        path = os.path.abspath(data["path"])
        n, d = data["n_samples"], data["n_features"]
        rows = min(data["chunk_rows"], n)
        expected = {
            "kind": data["kind"],
            "n_samples": n,
            "n_features": d,
            "random_state": seed,
            "dtype": "float64",
            "params": data["params"],
        }
        why = _why_not_reusable(path, expected, (n, d), rows)
        if why is not None and (why == _FOREIGN or why.startswith("unreadable")):
            # only a data set the generator wrote is ever replaced
            raise PipelineError(
                f"data.path: {path!r} exists and holds no data set written by ppa-dask's "
                f"generator ({why}); it is not replaced: name a new path"
            )
        if why is None:
            run.log(f"  data: reusing {path} (same parameters)")
        else:
            note = "" if why == "absent" else f" (existing store: {why}; rewriting)"
            run.log(f"  data: writing {n:,} x {d} {data['kind']} samples to {path}{note}")
            datasets.write_zarr(
                path,
                n,
                n_features=d,
                kind=data["kind"],
                chunk_rows=rows,
                random_state=seed,
                overwrite=os.path.lexists(path),
                **data["params"],
            )
        write_json(
            run.path("load", "source.json"),
            {"path": path, "reused": why is None, "shape": [n, d], "chunk_rows": rows},
        )
        # the array is an output of this stage although it lies outside the stage folder (an
        # absolute name): a rerun redoes the stage if it was removed or changed
        return ["source.json", path], {
            "layout": "table",
            "shape": [n, d],
            "feature_names": None,
            "path": path,
            "reused": why is None,
        }

    def _cube_info(self, run, opened):
        """The load stage's record of a cube read in place, its no-data value among it; with
        none declared, the no-data check of the fit (one read of the data), logged and warned
        here since the fit sees the preprocessed cube."""
        message = fill_warning(opened.data, opened.feature_dim)
        if message is not None:
            run.log(f"  warning: {message}")
            warn(message, NoDataWarning)
        elif opened.nodata is not None:
            run.log(
                f"  data: no-data value {opened.nodata:g} (pixels equal to it in any band left out)"
            )
        return {
            "layout": "cube",
            "feature_dim": opened.feature_dim,
            "sizes": dict(opened.data.sizes),
            "nodata": opened.nodata,
        }

    def _load_file(self, run, data, out):
        """NetCDF / GeoTIFF cubes read in place; Parquet / CSV tables (the selected numeric
        columns, named) copied chunk by chunk to ``data.zarr`` (ppa_dask.store.sources)."""
        source = data["source"]
        opened = open_source(data, source, data.get("feature_dim"))
        if source in store.sources.CUBE_FORMATS:
            cube = opened.data
            run.log(f"  data: {source} cube {dict(cube.sizes)} at {data['path']} (read in place)")
            write_json(
                run.path("load", "source.json"),
                {"path": data["path"], "variable": cube.name, "sizes": dict(cube.sizes)},
            )
            return ["source.json"], self._cube_info(run, opened)
        X, names = opened.data, opened.feature_names
        rows = max(min(data["chunk_rows"], X.shape[0]), 1)
        _write_table(X.rechunk((rows, -1)), out, attrs={"feature_names": names})
        run.log(
            f"  data: {source} table {X.shape[0]:,} x {X.shape[1]} ({', '.join(names)}) "
            f"from {data['path']}, written to {out}"
        )
        return ["data.zarr"], {"layout": "table", "shape": list(X.shape), "feature_names": names}


class Preprocess(Stage):
    """Mask missing and out-of-range values, scale the features, hold out test samples."""

    name = "preprocess"
    config = ("preprocess", "data")
    inputs = ("load",)

    def run(self, run):
        layout, data, extra = loaded(run)
        pre = run.config["preprocess"]
        if layout == "cube":
            return self._preprocess_cube(run, data, extra, pre)
        return self._preprocess_table(run, data, pre, names=extra)

    def _mask_values(self, run, X, pre):
        """Values outside the valid range become NaN (fill values count as missing)."""
        import dask.array as da

        rng = pre["mask"]["valid_range"]
        if rng is None:
            return X
        lo, hi = rng
        return da.where((lo <= X) & (hi >= X), X, np.nan)

    def _preprocess_table(self, run, X, pre, names=None, cube_info=None):
        import dask.array as da

        X = X.astype(np.float64)
        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        X = self._mask_values(run, X, pre)
        n, d = X.shape
        finite = da.isfinite(X)
        counts, feature_counts, lo, hi = compute_with_progress(
            finite.all(axis=1).sum(),
            finite.sum(axis=0),
            da.nanmin(da.where(finite, X, np.nan), axis=0),
            da.nanmax(da.where(finite, X, np.nan), axis=0),
            label="preprocess: scan",
            stream=run.stream,
        )
        n_valid_any = int(counts)
        empty = np.flatnonzero(np.asarray(feature_counts) == 0)
        kept = np.flatnonzero(np.asarray(feature_counts) > 0)
        if kept.size < 2:
            raise PipelineError(
                f"preprocess: only {kept.size} feature(s) hold any finite value; "
                "PPA needs at least 2"
            )
        if empty.size:
            run.log(
                f"  preprocess: features {empty.tolist()} hold no finite value; dropped "
                "(restored as NaN in cubes)"
            )
            X = X[:, kept]
        valid = da.isfinite(X).all(axis=1)
        n_valid = int(valid.sum().compute()) if empty.size else n_valid_any
        n_masked = n - n_valid
        if n_masked and pre["mask"]["nonfinite"] == "error":
            raise PipelineError(
                f"preprocess.mask.nonfinite is 'error' and {n_masked} of {n} samples hold NaN, "
                f"inf or out-of-range values (first rows: {_first_false(valid, 5)})"
            )
        if n_valid < 2:
            raise PipelineError(
                f"preprocess: {n_valid} sample(s) without missing values; PPA needs more"
            )
        lo, hi = np.asarray(lo)[kept], np.asarray(hi)[kept]
        if pre["scale"] == "minmax":
            # scaled over the valid samples only (a masked sample's values do not count)
            if n_masked:
                Xv = da.where(valid[:, None], X, np.nan)
                lo, hi = compute_with_progress(
                    da.nanmin(Xv, axis=0),
                    da.nanmax(Xv, axis=0),
                    label="preprocess: range",
                    stream=run.stream,
                )
            width = hi - lo
            constant = np.flatnonzero(width <= 0)
            width = np.where(width > 0, width, 1.0)
            X = (X - lo) / width
        else:
            constant = np.array([], dtype=int)
            width = np.ones_like(lo)
            lo = np.zeros_like(lo)
        outputs = ["samples.zarr", "preprocess.json"]
        fraction = pre["test_fraction"]
        rows = run.config["data"]["chunk_rows"]
        if fraction:
            # a row is held out by a hash of (seed, its index): independent of chunking
            held = da.arange(n, chunks=(X.chunks[0],)).map_blocks(
                held_out_rows, _split_seed(run.config["seed"]), fraction, dtype=bool
            )
            n_test = _write_rows(X, valid & held, rows, run.path("preprocess", "test.zarr"))
            n_train = _write_rows(X, valid & ~held, rows, run.path("preprocess", "samples.zarr"))
            outputs.append("test.zarr")
            if min(n_train, n_test) < 2:
                raise PipelineError(
                    f"preprocess.test_fraction: {fraction} leaves {n_train} "
                    f"training and {n_test} test samples"
                )
        else:
            n_train, n_test = (
                _write_rows(
                    X, valid if n_masked else None, rows, run.path("preprocess", "samples.zarr")
                ),
                0,
            )
        info = {
            "n_samples": int(n),
            "n_valid": int(n_valid),
            "n_masked": int(n_masked),
            "n_train": int(n_train),
            "n_test": int(n_test),
            "test_fraction": fraction,
            "n_features_in": int(d),
            "kept_features": kept.tolist(),
            "dropped_features": empty.tolist(),
            "constant_features": constant.tolist(),
            "scale": pre["scale"],
            "offset": lo.tolist(),
            "width": width.tolist(),
            "feature_names": ([names[j] for j in kept] if names else None),
        }
        if cube_info:
            info.update(cube_info)
        write_json(run.path("preprocess", "preprocess.json"), info)
        run.log(
            f"  preprocess: {n_valid:,} of {n:,} samples kept ({n_masked:,} masked), "
            f"{kept.size} features, scale {pre['scale']}"
            + (f"; {n_test:,} held out for testing" if fraction else "")
        )
        return outputs, {
            "n_valid": int(n_valid),
            "n_masked": int(n_masked),
            "n_features": int(kept.size),
        }

    def _preprocess_cube(self, run, cube, feature_dim, pre):
        import xarray as xr

        dims, original, split = dims_of(feature_dim), cube, None
        if len(dims) > 1:
            # features spanning several dimensions (time, band): scaled along the one they are
            # merged into (as the fit merges them), written with them split back
            cube, split = merge_feature_dims(cube, dims)
            feature_dim = FEATURE_DIM_SEP.join(dims)
        sample_dims = [dm for dm in cube.dims if dm != feature_dim]
        stacked = cube.transpose(*sample_dims, feature_dim)
        table = _dask_data(stacked).reshape((-1, stacked.shape[-1]))
        outputs, info = self._preprocess_table(
            run,
            table,
            pre,
            names=[str(v) for v in cube[feature_dim].values],
            cube_info={
                "layout": "cube",
                "feature_dim": dims if split else feature_dim,
                "sample_dims": sample_dims,
            },
        )
        meta = preprocess_info(run)
        # the scaled cube (a sample with any missing value entirely NaN), for the fit through
        # the xarray adapter, which leaves such samples out and drops features without data
        d = cube.sizes[feature_dim]
        offset, width = np.zeros(d), np.ones(d)
        offset[meta["kept_features"]] = meta["offset"]
        width[meta["kept_features"]] = meta["width"]
        coord = {feature_dim: cube[feature_dim]} if feature_dim in cube.coords else {}
        scaled = cube.astype(np.float64)
        rng = pre["mask"]["valid_range"]
        if rng is not None:
            scaled = scaled.where((scaled >= rng[0]) & (scaled <= rng[1]))
        scaled = (scaled - xr.DataArray(offset, dims=[feature_dim], coords=coord)) / xr.DataArray(
            width, dims=[feature_dim], coords=coord
        )
        kept = scaled.isel({feature_dim: meta["kept_features"]})
        scaled = scaled.where(np.isfinite(kept).all(feature_dim))
        scaled = scaled.transpose(*cube.dims)
        if split is not None:
            scaled = split_feature_dims(scaled, feature_dim, split).transpose(*original.dims)
        scaled.attrs = {}
        _write_cube(scaled, run.path("preprocess", "cube.zarr"), "data")
        return outputs + ["cube.zarr"], info


class Fit(Stage):
    """Fit PPA on the preprocessed samples (a cube through the xarray adapter); save it."""

    name = "fit"
    config = ("model", "seed")
    inputs = ("preprocess",)

    def run(self, run):
        params = dict(run.config["model"])
        model = PPA(random_state=run.config["seed"], **params)
        what = f"PPA({', '.join(f'{k}={v!r}' for k, v in params.items())})"
        progress = step_reporter(run.stream, label="fit")
        meta = preprocess_info(run)
        if meta.get("layout") == "cube":
            cube = _open_cube(run.path("preprocess", "cube.zarr"), "data")
            run.log(
                f"  fit: {what} on the cube {dict(cube.sizes)}, features along "
                f"{meta['feature_dim']!r} ({meta['n_valid']:,} valid samples)"
            )
            # the no-data value the load stage applied, recorded by the model
            load_info = (read_marker(run.dir("load")) or {}).get("info") or {}
            cube.encoding["ppa_dask_nodata"] = load_info.get("nodata")
            model.fit(
                cube,
                feature_dim=fit_dim(meta["feature_dim"]),
                nan_policy="drop_samples",
                progress=progress,
            )
        else:
            X = samples(run)
            run.log(
                f"  fit: {what} on {X.shape[0]:,} x {X.shape[1]} samples ({X.numblocks[0]} chunks)"
            )
            model.fit(X, progress=progress)
        _save_model(model, run.path("fit", "model.zarr"))
        info = {
            "degrees": [int(g) for g in model.degrees_],
            "n_passes": int(model.n_passes_),
            "residual_cache": model.residual_cache_,
            "solver": model.solver_,
            "explained_variance": np.asarray(model.explained_variance_).tolist(),
        }
        run.log(
            f"  fit: degrees {' '.join(map(str, info['degrees']))}, {model.n_passes_} "
            f"passes, solver {model.solver_}, residual cache {model.residual_cache_}"
        )
        return ["model.zarr"], info


class Transform(Stage):
    """Write the components of the preprocessed samples (Zarr, GeoTIFF or NetCDF)."""

    name = "transform"
    config = ("transform",)
    inputs = ("preprocess", "fit")

    def _n_out(self, run, model):
        k = run.config["transform"]["components"]
        # checked before the first stage when the data's shape was known from metadata
        refusal = too_many_components("transform.components", k, model.n_components_, "the model")
        if refusal is not None:
            raise PipelineError(refusal)
        return model.n_components_ if k is None else k

    def run(self, run):
        model = fitted_model(run)
        k = self._n_out(run, model)
        meta = preprocess_info(run)
        fmt = components_format(run.config)
        name = COMPONENT_FILES[fmt]
        target = run.path("transform", name)
        if meta.get("layout") == "cube":
            cube = _open_cube(run.path("preprocess", "cube.zarr"), "data")
            comp = model.transform(cube).isel(component=slice(0, k))
            if fmt == "zarr":
                _write_cube(comp, target, "components")
            else:
                # GeoTIFF / NetCDF: the CRS and transform, coordinates and attributes of the
                # input file (ppa_dask.store.write_result)
                _, source, _ = loaded(run)
                comp = comp.rename("components")
                comp.attrs = _component_attrs(run.config["preprocess"]["scale"])
                store.write_result(comp, target, like=source, name="components")
            run.log(
                f"  transform: {k} component images {dict(comp.sizes)} written to {name} "
                "(masked samples NaN)"
            )
        else:
            X = samples(run)
            R = model.transform(X)[:, :k]
            _write_table(R, target, attrs={"components": k})
            run.log(f"  transform: {X.shape[0]:,} x {k} components written")
        return [name], {"components": int(k), "format": fmt}


class Evaluate(Stage):
    """Reconstruction errors of PPA and PCA for each number of components (JSON, CSV and
    Markdown)."""

    name = "evaluate"
    config = ("evaluate",)
    inputs = ("preprocess", "fit")

    def run(self, run):
        model = fitted_model(run)
        X = samples(run)
        meta = preprocess_info(run)
        sets = [("train", X)]
        if meta.get("n_test"):
            sets.append(("test", _open_table(run.path("preprocess", "test.zarr"))))
        result, outputs = {}, ["reconstruction_error.json"]
        for label, data in sets:
            ppa_errors = np.asarray(model.reconstruction_errors(data), dtype=float)
            ks = list(range(1, len(ppa_errors)))
            part = {
                "n_samples": int(data.shape[0]),
                "k": ks,
                "ppa_mse": [float(ppa_errors[k]) for k in ks],
                "total_variance": float(ppa_errors[0]),
                # the fit's numerical rank: no ratio from k = rank on (rounding over rounding)
                "rank": int(model.rank_),
            }
            if run.config["evaluate"]["pca"]:
                pca_errors, tails, method = pca_reconstruction_errors(
                    X, X_eval=None if label == "train" else data
                )
                rows = error_rows(pca_errors, ppa_errors, ks, rank=int(model.rank_))
                where = (
                    "the preprocessed training samples (the fit's own)"
                    if label == "train"
                    else "the held-out test samples (models fitted on the training samples)"
                )
                caption = (
                    "MSE: mean over samples of the squared Euclidean reconstruction error "
                    f"summed over features, on {where}. PCA: {method}. PPA: "
                    "PPA.reconstruction_errors (one pass)."
                )
                stem = "reconstruction_error" + ("" if label == "train" else "_test")
                write_error_csv(run.path("evaluate", f"{stem}.csv"), rows)
                write_error_markdown(
                    run.path("evaluate", f"{stem}.md"), rows, float(pca_errors[0]), caption
                )
                outputs += [f"{stem}.csv", f"{stem}.md"]
                part.update(
                    pca_mse=[r[1] for r in rows],
                    ppa_over_pca_percent=[r[3] for r in rows],
                    pca_method=method,
                    # sums of the discarded training eigenvalues, k = 0..d-1: a check of the
                    # training errors (equal up to rounding)
                    pca_discarded_eigenvalues=[float(t) for t in tails],
                    pca_total_variance=float(pca_errors[0]),
                )
                run.log.plain()
                # the demo prints this table: the same header as its own table always had
                scope = "" if label == "train" else f", {label} samples"
                run.log.plain(
                    f"Reconstruction error with k components (n={data.shape[0]:,}, "
                    f"d={data.shape[1]}; total variance {float(pca_errors[0]):.6g}){scope}:"
                )
                run.log.plain(format_error_table(rows))
                run.log.plain()
            result[label] = part
        write_json(run.path("evaluate", "reconstruction_error.json"), result)
        first = result["train"]["ppa_mse"]
        return sorted(outputs), {"ppa_mse_k1_train": first[0] if first else None}


class Plots(Stage):
    """PNGs: the reconstruction-error curves and the first components."""

    name = "plots"
    config = ("plots",)
    inputs = ("preprocess", "transform", "evaluate")

    def run(self, run):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        cfg = run.config["plots"]
        outputs = []
        errors = read_json_file(run.path("evaluate", "reconstruction_error.json"))
        relative = all("pca_mse" in part for part in errors.values())
        fig, axes = plt.subplots(
            1, 2 if relative else 1, figsize=(9 if relative else 5, 3.5), squeeze=False
        )
        ax = axes[0, 0]
        for label, part in errors.items():
            ax.plot(part["k"], part["ppa_mse"], "o-", label=f"PPA, {label}")
            if "pca_mse" in part:
                ax.plot(part["k"], part["pca_mse"], "s--", label=f"PCA, {label}")
        ax.set_xlabel("components k")
        ax.set_ylabel("reconstruction MSE")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        if relative:
            ax = axes[0, 1]
            for label, part in errors.items():
                # the ratios stop at the rank (None past it: rounding over rounding)
                shown = [
                    (k, p)
                    for k, p in zip(part["k"], part["ppa_over_pca_percent"])
                    if p is not None
                ]
                ax.plot([k for k, _ in shown], [p for _, p in shown], "o-", label=label)
            ax.axhline(100.0, color="grey", lw=0.8)
            ax.set_xlabel("components k")
            ax.set_ylabel("PPA MSE / PCA MSE (%)")
            ax.legend(fontsize=8)
        fig.suptitle(f"{run.config['name']}: reconstruction error")
        fig.tight_layout()
        fig.savefig(run.path("plots", "reconstruction_error.png"), dpi=cfg["dpi"])
        plt.close(fig)
        outputs.append("reconstruction_error.png")

        n_show = cfg["components"]
        meta = preprocess_info(run)
        if n_show:
            fmt = components_format(run.config)
            comp_path = run.path("transform", COMPONENT_FILES[fmt])
            if meta.get("layout") == "cube":
                if fmt == "zarr":
                    comp = _open_cube(comp_path, "components")
                else:
                    variable = store.sources.components_variable(comp_path)
                    comp = store.open_cube(comp_path, variable, "component")
                extra = [d for d in comp.dims if d != "component"][:-2]
                if extra:  # a time axis: the first time step
                    comp = comp.isel({d: 0 for d in extra})
                k = min(n_show, comp.sizes["component"])
                images = np.asarray(comp.isel(component=slice(0, k)).values)
                fig, axes = plt.subplots(1, k, figsize=(3.2 * k, 3), squeeze=False)
                for i in range(k):
                    # 2-98 percentile limits: a few extreme pixels would flatten min-max ones
                    vmin, vmax = robust_limits(images[i])
                    im = axes[0, i].imshow(
                        images[i], cmap="viridis", interpolation="nearest", vmin=vmin, vmax=vmax
                    )
                    axes[0, i].set_title(f"component {i + 1}")
                    axes[0, i].set_xticks([])
                    axes[0, i].set_yticks([])
                    fig.colorbar(im, ax=axes[0, i], shrink=0.8)
                fig.suptitle("PPA components (masked samples blank)")
            else:
                R = _open_table(comp_path)
                n = R.shape[0]
                step = max(1, n // cfg["max_points"])
                sample = np.asarray(R[::step, : min(3, R.shape[1])].compute())
                fig, ax = plt.subplots(figsize=(4.5, 4))
                if sample.shape[1] >= 2:
                    c = sample[:, 2] if sample.shape[1] > 2 else None
                    ax.scatter(
                        sample[:, 0], sample[:, 1], s=2, c=c, cmap=None if c is None else "viridis"
                    )
                    ax.set_xlabel("component 1")
                    ax.set_ylabel("component 2")
                else:
                    ax.hist(sample[:, 0], bins=60)
                    ax.set_xlabel("component 1")
                ax.set_title(f"{run.config['name']}: first components")
            fig.tight_layout()
            fig.savefig(run.path("plots", "components.png"), dpi=cfg["dpi"])
            plt.close(fig)
            outputs.append("components.png")
        return outputs, {"files": outputs}


#: The stages, in the order a run takes them; each writes under ``<run>/<NN>-<name>/``.
STAGE_ORDER = (Load(), Preprocess(), Fit(), Transform(), Evaluate(), Plots())
#: Their names, in order.
STAGES = tuple(stage.name for stage in STAGE_ORDER)
#: The folder of each stage in the run folder.
STAGE_DIRS = {stage.name: f"{i + 1:02d}-{stage.name}" for i, stage in enumerate(STAGE_ORDER)}
#: Sections of the configuration each stage depends on (besides the stages it reads from).
STAGE_CONFIG = {stage.name: stage.config for stage in STAGE_ORDER}
#: The stages whose outputs each stage reads.
STAGE_INPUTS = {stage.name: stage.inputs for stage in STAGE_ORDER}


# ---------------------------------------------------------------------------------------------
# helpers of the stages
# ---------------------------------------------------------------------------------------------


_FOREIGN = "not written by ppa_dask.datasets.write_zarr"


def _why_not_reusable(path, expected, shape, chunk_rows):
    """Why the generated Zarr array at ``path`` cannot be reused (a string), or None if it
    can: its ``ppa_dask.datasets`` record (``datasets.write_zarr``'s attributes) must match
    ``expected`` (``params`` key by key), and its shape and chunk rows must be these."""
    import zarr

    if not os.path.lexists(path):
        return "absent"
    try:
        z = zarr.open_array(path, mode="r")
        record = dict(z.attrs.get("ppa_dask.datasets") or {})
        stored_shape, stored_rows = tuple(z.shape), int(z.chunks[0])
    except Exception as exc:  # not a readable Zarr array: never replaced (not ours)
        return f"unreadable ({type(exc).__name__})"
    if not record:
        return _FOREIGN
    for key, value in expected.items():
        if key == "params":
            stored = record.get("params") or {}
            for name, v in value.items():
                if stored.get(name) != v:
                    return f"params.{name} is {stored.get(name)!r}, not {v!r}"
        elif record.get(key) != value:
            return f"{key} is {record.get(key)!r}, not {value!r}"
    if stored_shape != shape:
        return f"shape is {stored_shape}, not {shape}"
    if stored_rows != chunk_rows:
        return f"chunk rows are {stored_rows}, not {chunk_rows}"
    return None


def _first_false(mask, count):
    """Indices of the first ``count`` False entries of a 1-D Dask array (chunk by chunk)."""
    found, start = [], 0
    for block in mask.blocks:
        values = np.asarray(block.compute())
        found.extend((start + np.flatnonzero(~values)).tolist())
        start += values.size
        if len(found) >= count:
            break
    return found[:count]


def _split_seed(seed):
    """Seed of the train/test split, distinct from the seeds of the data and of the folds."""
    return child_seed(seed, 0x5A17)


def held_out_rows(index, seed, fraction):
    """Rows of a block of global row indices held out for testing (about ``fraction``)."""
    if index.size == 0:
        return np.zeros(0, dtype=bool)
    h = row_hash(int(index[0]), int(index[-1]) + 1, seed)
    return (h >> np.uint64(11)).astype(np.float64) / 2.0**53 < fraction


def _write_rows(X, keep, chunk_rows, path):
    """Write the rows of ``X`` where ``keep`` (all rows if None) as a table; returns the count."""
    rows = X if keep is None else X[keep].compute_chunk_sizes()
    n = rows.shape[0]
    _write_table(rows.rechunk((max(min(chunk_rows, n), 1), -1)), path)
    return n


def _dask_data(A):
    """The data of a DataArray as a Dask array (wrapping numpy data in one chunk)."""
    import dask.array as da

    data = A.data
    return data if isinstance(data, da.Array) else da.from_array(np.asarray(data))


def _cube_variable(ds, variable, feature_dim, where):
    if variable not in ds.data_vars:
        raise PipelineError(
            f"data.variable: {where} made no variable {variable!r} "
            f"(variables: {', '.join(ds.data_vars)})"
        )
    cube = ds[variable]
    if feature_dim not in cube.dims:
        raise PipelineError(
            f"data.feature_dim: {variable!r} has dimensions {cube.dims}, not {feature_dim!r}"
        )
    return cube
