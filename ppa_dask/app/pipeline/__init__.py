"""Batch pipelines described by YAML files: load -> preprocess -> fit -> transform -> evaluate
-> plots, each stage writing under the run folder, a rerun resuming where a killed run stopped.

A pipeline file (see ``pipelines/*.yaml``)::

    pipeline: 1                  # format version
    name: magic-gamma
    description: optional text
    output: runs/magic-gamma     # the run folder (default: runs/<name>)
    seed: 0                      # data generation, train/test split, cross-validation folds
    cluster: null                # a cluster file (cluster/*.yaml); CLI options win
    data:                        # where the samples come from (one of the sources below)
      source: dataset
      name: magic_gamma
      chunk_rows: 65536          # rows per chunk of the tables the pipeline writes
    preprocess:
      scale: minmax              # every feature to [0, 1] over the valid samples ("none": as is)
      test_fraction: 0.5         # samples held out for testing (tables; default 0)
      mask:
        nonfinite: drop          # samples with a NaN/inf are left out ("error": refuse them)
        valid_range: null        # [lo, hi]: values outside count as missing (fill values)
    model:                       # PPA parameters (random_state is the seed)
      degree: [1, 2, 3, 4, 5]
      cv: 2
      n_components: null
      whiten: false
      extrapolation: linear
      residual_cache: auto
      solver: auto               # covariance | gram (wide data) | auto
    transform:
      components: 3              # components written (null: all)
      format: zarr               # zarr | geotiff | netcdf | same (see below)
    evaluate: {pca: true}        # reconstruction MSE of PPA and PCA for k = 1..steps, on the
                                 # training samples and (test_fraction > 0) the held-out ones
    plots: {components: 3, max_points: 20000, dpi: 100}   # PNGs: components, error curves

Data sources (``data.source``):

* ``zarr`` -- a 2-D (samples x features) Zarr array, or ``variable`` of a Zarr group, by local
  path or fsspec URL (``path``); read in place, not copied.
* ``xarray`` -- ``variable`` of an xarray Zarr store (``path``) with a ``feature_dim`` (e.g.
  ``band``); every other dimension is a sample dimension (a cube). Read in place.
  ``feature_dim`` may list several dimensions (``[time, band]``, for ``xarray``, ``netcdf``
  and ``geotiff``): the features span them all, scaled and fitted as one merged dimension and
  recorded by the model, whose ``inverse_transform`` restores them.
* ``dataset`` -- a data set bundled with ppa-dask (``name``: ``magic_gamma``, ``sat``, ...; any
  ``ppa_dask.datasets.load_<name>`` returning ``(X, y)``), written to the run folder.
* ``make_cube`` -- a synthetic hyperspectral cube, ``ppa_dask.datasets.make_cube(**params)``
  written to the run folder; ``variable`` (default ``reflectance``) along ``feature_dim``
  (default ``band``).
* ``generated`` -- ``ppa_dask.datasets`` generators (``kind``: ``curved`` or ``helix``,
  ``n_samples``, ``n_features``, ``params``), written to Zarr in the run folder. With ``path``
  (a local folder) the samples are generated chunk by chunk on the cluster
  (``ppa_dask.datasets.write_zarr``, ``chunk_rows`` rows per chunk, never all in this process)
  into that Zarr array, which a later run reuses when its recorded generator, seed, sizes,
  parameters and chunk rows match (and rewrites otherwise). The values are the same either way.

Cubes are fitted through the xarray adapter (``PPA().fit(cube, feature_dim=...)``): masked
pixels are left out and come back NaN in the component images; tables are fitted on the valid
(scaled) samples.

The transform stage writes the components to ``04-transform/components.zarr`` (``format:
zarr``, the default), or in the format of the input file: ``geotiff`` writes
``components.tif`` (one band per component, the input's CRS and transform; ``data.source``
must be ``geotiff``), ``netcdf`` writes ``components.nc`` (the input's coordinates and global
attributes, CF ``long_name`` and ``units``: ``"1"`` after min-max scaling, else the input's;
any cube source), and ``same`` is the input's own format (``geotiff`` / ``netcdf`` for those
sources, ``zarr`` for ``zarr`` / ``xarray``). Any other combination is refused before the
run starts, naming ``transform.format``. The file is one of the stage's fingerprinted
outputs, like every other.

Relative paths (``output``, ``data.path``, ``cluster``) are relative to the current directory.

The run folder holds one folder per stage (``01-load`` ... ``06-plots``), ``pipeline.yaml`` (the
validated configuration with every default filled in), ``pipeline.log`` and ``summary.json``.

**Whose folder it is.** A run folder is one the library made: it creates the run in a new or
empty folder and writes ``.ppa-dask-run.json`` there (format, versions, the pipeline's name, the
SHA-256 of the configuration, the times, and the stage folders it created). A non-empty folder
without that record is refused before anything is written, and a stage folder the record does
not list is never removed (not by ``--force`` either). While a run uses the folder it holds
``.ppa-dask-run.lock`` (created with O_CREAT | O_EXCL; pid, host and start time): a second run
on the folder is refused with the owner's pid and host, and the lock of a run whose process is
gone (same host, pid not running: a killed batch job) is taken over with a note in the log.
The lock is removed when the run ends, also when it fails.

Files are read strictly: a key given twice in one mapping is an error naming the file, the key
and both lines (``ppa_dask.utils.yamlfile``).

**Resuming.** A stage is complete when its folder holds ``_complete.json``, written last (by an
atomic rename) after every output of the stage. The marker records a key, the SHA-256 of the
stage's configuration, of the keys of the stages it reads from and of the fingerprints of the
external inputs (file names, sizes and modification times of an input store), and the
fingerprints of its own outputs. A rerun skips a stage whose marker has the same key and whose
outputs are unchanged, and reruns it from an empty folder otherwise; a changed configuration or
input therefore reruns that stage and every stage after it. A killed run leaves no marker in the
stage it was in, so rerunning the same command resumes there.

**The package, by concept.** :mod:`.schema` (the configuration: every key, its check and
default; :func:`validate_pipeline`, :func:`load_pipeline`), :mod:`.checks` (the configuration
against the data's metadata before the first stage: :func:`check_pipeline_data`),
:mod:`.folder` (the run folder: its record, lock and completion markers), :mod:`.stages` (the
stages as objects, in their order: :data:`STAGE_ORDER`), :mod:`.error_tables` (the evaluate
stage's tables) and :mod:`.run` (:class:`Run`, which takes the stages in order, and
:func:`run_pipeline`).
"""

from ppa_dask.app.baseline import pca_reconstruction_errors
from ppa_dask.app.pipeline.checks import (
    FEW_CHUNKS,
    GENERATOR_MEMORY_FACTOR,
    MANY_CHUNKS,
    SMALL_CHUNK_BYTES,
    check_pipeline_data,
    too_many_components,
)
from ppa_dask.app.pipeline.error_tables import (
    error_rows,
    format_error_table,
    write_error_csv,
    write_error_markdown,
)
from ppa_dask.app.pipeline.folder import MARKER, RUN_LOCK, RUN_RECORD, RunFolder, fingerprint
from ppa_dask.app.pipeline.run import Run, prepare_run, run_pipeline
from ppa_dask.app.pipeline.schema import (
    DEFAULT_CHUNK_ROWS,
    FORMAT_VERSION,
    PipelineError,
    load_pipeline,
    validate_pipeline,
)
from ppa_dask.app.pipeline.stages import (
    STAGE_CONFIG,
    STAGE_DIRS,
    STAGE_INPUTS,
    STAGE_ORDER,
    STAGES,
    Stage,
)

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "FEW_CHUNKS",
    "FORMAT_VERSION",
    "GENERATOR_MEMORY_FACTOR",
    "MANY_CHUNKS",
    "MARKER",
    "PipelineError",
    "RUN_LOCK",
    "RUN_RECORD",
    "Run",
    "RunFolder",
    "SMALL_CHUNK_BYTES",
    "STAGES",
    "STAGE_CONFIG",
    "STAGE_DIRS",
    "STAGE_INPUTS",
    "STAGE_ORDER",
    "Stage",
    "check_pipeline_data",
    "error_rows",
    "fingerprint",
    "format_error_table",
    "load_pipeline",
    "pca_reconstruction_errors",
    "prepare_run",
    "run_pipeline",
    "too_many_components",
    "validate_pipeline",
    "write_error_csv",
    "write_error_markdown",
]
