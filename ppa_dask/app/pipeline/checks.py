"""The checks of a configuration against its data, made before the first stage.

Sizes and counts the stages would fail on, or spend their time on, found from the
configuration and the inputs' metadata alone (:func:`check_pipeline_data`): memory for a
generated data set, the model's degrees, folds and components (in the fit's own words,
:meth:`ppa_dask.PPA.check_shape`), and chunkings under which a pass is mostly scheduling.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from ppa_dask import datasets, store
from ppa_dask.app.pipeline.schema import DEFAULT_CHUNK_ROWS, PipelineError, dims_of
from ppa_dask.ppa.estimator import PPA
from ppa_dask.utils.params import too_many_components

__all__ = [
    "FEW_CHUNKS",
    "GENERATOR_MEMORY_FACTOR",
    "MANY_CHUNKS",
    "SMALL_CHUNK_BYTES",
    "check_pipeline_data",
    "too_many_components",
]

#: A pass over chunks under this many bytes is mostly scheduling (a task costs milliseconds
#: whatever its chunk holds) ...
SMALL_CHUNK_BYTES = 2**20
#: ... once there are more than this many of them (a hundred small chunks cost well under a
#: second a pass; a small data set split in a few small chunks is not worth a word)
FEW_CHUNKS = 100
#: Past this many chunks a pass is mostly scheduling whatever their size.
MANY_CHUNKS = 10**5
#: The generators' peak memory as a multiple of the array they return (their temporaries;
#: measured 2.3-2.9 for make_curved_manifold and make_helix with 6 and 60 features).
GENERATOR_MEMORY_FACTOR = 3


def _planned_data(config):
    """What the fit will see, from the configuration and the inputs' metadata alone:
    ``(n_rows, n_features, layout)`` with ``n_rows`` an upper bound (masked and held-out rows
    leave later), or None when it cannot be known so (a CSV or Parquet table's rows, an input
    that does not open: the load stage says why)."""
    data = config["data"]
    source = data.get("source")
    try:
        if source == "generated":
            return int(data["n_samples"]), int(data["n_features"]), "table"
        if source == "dataset":
            X = datasets.TABLE_LOADERS[data["name"]](return_X_y=True)[0]
            return int(np.shape(X)[0]), int(np.shape(X)[1]), "table"
        if source == "make_cube":
            bound = inspect.signature(datasets.make_cube).bind_partial(**data["params"])
            bound.apply_defaults()
            a = bound.arguments
            return int(a["ny"] * a["nx"] * (a["n_times"] or 1)), int(a["n_bands"]), "cube"
        if source == "zarr":
            shape = store.open_input(data["path"], variable=data.get("variable")).shape
            return (int(shape[0]), int(shape[1]), "table") if len(shape) == 2 else None
        if source == "xarray" or source in store.sources.CUBE_FORMATS:
            fmt = "zarr" if source == "xarray" else source
            cube = store.open_source(
                data["path"],
                variable=data.get("variable"),
                feature_dim=data.get("feature_dim"),
                concat_dim=data.get("concat_dim", "time"),
                format=fmt,
                front="pipeline",
            )
            sizes = dict(cube.data.sizes)
            d = math.prod(sizes.pop(dim) for dim in dims_of(cube.feature_dim))
            return int(math.prod(sizes.values())), int(d), "cube"
    except store.SourceError as exc:
        if exc.key == "feature_dim" and isinstance(data.get("feature_dim"), list):
            raise  # feature dimensions that are not there: told before the run
        return None
    except Exception:  # noqa: BLE001 - not known from metadata; the load stage reports it
        return None
    return None


def _suggested_chunk_rows(n, d):
    """Rows per chunk for ``n x d`` float64 samples: the default, or more when that leaves
    chunks under :data:`SMALL_CHUNK_BYTES` or a tenth of :data:`MANY_CHUNKS` chunks."""
    rows = max(DEFAULT_CHUNK_ROWS, -(-SMALL_CHUNK_BYTES // (8 * d)), -(-n // (MANY_CHUNKS // 10)))
    return min(rows, n)


def _chunking_warning(n, d, chunk_rows):
    from dask.utils import format_bytes

    rows = max(min(chunk_rows, n), 1)
    count, nbytes = -(-n // rows), rows * d * 8
    if count <= MANY_CHUNKS and (nbytes >= SMALL_CHUNK_BYTES or count <= FEW_CHUNKS):
        return None
    better = _suggested_chunk_rows(n, d)
    chunks = -(-n // better)
    return (
        f"data.chunk_rows {chunk_rows}: {n:,} x {d} samples in {count:,} chunks of "
        f"{format_bytes(nbytes)}; a pass over them is mostly scheduling. chunk_rows: {better} "
        f"gives {chunks:,} chunk{'s' if chunks > 1 else ''} of {format_bytes(better * d * 8)}"
    )


def check_pipeline_data(config, where="pipeline"):
    """Check a validated configuration against its data before anything is written.

    The sizes and counts the stages would fail on, or spend their time on, found from the
    configuration and the inputs' metadata (:func:`_planned_data`): a ``generated`` data set
    without ``data.path`` larger than this process can hold while generating it; the model's
    degrees, folds and components against the data's shape, in the words of
    :meth:`ppa_dask.PPA.check_shape` (the fit's own); ``transform.components`` against the
    components the model will have, in the CLI's words (:func:`too_many_components`); and a
    chunking under which a pass is mostly scheduling (chunks under :data:`SMALL_CHUNK_BYTES`
    when there are more than :data:`FEW_CHUNKS` of them, or more than :data:`MANY_CHUNKS`).

    Parameters
    ----------
    config : dict
        From :func:`~ppa_dask.app.pipeline.load_pipeline` or
        :func:`~ppa_dask.app.pipeline.validate_pipeline`.
    where : str
        Name used in error messages (the file name).

    Returns
    -------
    warnings : list of str
        The chunking warning, with the chunking suggested instead (empty when none).

    Raises
    ------
    PipelineError
        For what the run would refuse later, or could not hold.

    Examples
    --------
    >>> from ppa_dask.app.pipeline import validate_pipeline
    >>> config = validate_pipeline({"name": "x", "data": {"source": "generated",
    ...     "n_samples": 1000, "n_features": 6}, "transform": {"components": 99}})
    >>> check_pipeline_data(config, "p.yaml")
    Traceback (most recent call last):
    ...
    ppa_dask.app.pipeline.schema.PipelineError: p.yaml: transform.components 99: the model (6 features,
    model.n_components: null) has 6 components
    """
    data = config["data"]
    if data.get("source") == "generated" and data.get("path") is None:
        import psutil
        from dask.utils import format_bytes

        n, d = int(data["n_samples"]), int(data["n_features"])
        need = n * d * 8 * GENERATOR_MEMORY_FACTOR
        available = psutil.virtual_memory().available
        if need > available:
            raise PipelineError(
                f"{where}: data.n_samples: {n:,} x {d} generated samples are "
                f"{format_bytes(n * d * 8)} (float64), and generating them in this process "
                f"takes about {GENERATOR_MEMORY_FACTOR} times that, more than its "
                f"{format_bytes(available)} of available memory: set data.path to write them "
                "blockwise to a Zarr store on the cluster, or ask for fewer samples"
            )
    try:
        planned = _planned_data(config)
    except store.SourceError as exc:
        raise PipelineError(f"{where}: data.feature_dim: {exc}") from None
    if planned is None:
        return []
    n, d, layout = planned
    params = dict(config["model"])
    try:
        available = PPA(random_state=config["seed"], **params).check_shape(n, d)
    except (TypeError, ValueError) as exc:
        raise PipelineError(
            f"{where}: model: {exc} (the data: at most {n:,} samples x {d} features)"
        ) from None
    k = params.get("n_components")
    refusal = too_many_components(
        "transform.components",
        config["transform"].get("components"),
        available,
        f"the model ({d} features, model.n_components: {'null' if k is None else k})",
    )
    if refusal is not None:
        raise PipelineError(f"{where}: {refusal}")
    if layout == "table":
        warning = _chunking_warning(n, d, data["chunk_rows"])
        return [] if warning is None else [warning]
    return []
