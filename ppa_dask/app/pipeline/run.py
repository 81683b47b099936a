"""A pipeline run: the stages of :data:`~ppa_dask.app.pipeline.stages.STAGE_ORDER`, in order, in
one run folder, each skipped when complete for the same configuration and inputs.

:class:`Run` claims the folder (:class:`~ppa_dask.app.pipeline.folder.RunFolder`), keys each
stage (the SHA-256 of its configuration sections, of the keys of the stages it reads from and of
the fingerprints of its external inputs), skips a stage whose marker has that key and whose
outputs are unchanged, and reruns it from an empty folder otherwise; :func:`run_pipeline` is the
library's one call.
"""

from __future__ import annotations

import os
import sys
import time

from ppa_dask.app.pipeline.checks import check_pipeline_data
from ppa_dask.app.pipeline.folder import LOG, RunFolder, now, read_marker, sha256, write_json
from ppa_dask.app.pipeline.schema import FORMAT_VERSION, load_pipeline, validate_pipeline
from ppa_dask.app.pipeline.stages import STAGE_DIRS, STAGE_ORDER, STAGES
from ppa_dask.app.session import read_cluster_option
from ppa_dask.cluster import read_cluster_config
from ppa_dask.utils.files import write_text_atomic
from ppa_dask.utils.progress import Reporter
from ppa_dask.utils.version import VERSION

__all__ = ["Run", "prepare_run", "run_pipeline"]


class Run:
    """One execution of a validated pipeline configuration in a run folder.

    Parameters
    ----------
    config : dict
        From :func:`~ppa_dask.app.pipeline.schema.validate_pipeline`.
    output : str, optional
        The run folder (default: the configuration's ``output``).
    stream : file, optional
        Where log lines go (default: stdout); also appended to ``pipeline.log``.
    force : bool, default=False
        Rerun every stage.
    clock : float, optional
        The ``time.perf_counter()`` value the log's times count from.
    """

    def __init__(self, config, output=None, stream=None, force=False, clock=None):
        self.config = config
        self.clock = clock  # perf_counter() value the log's times count from
        self.root = os.path.abspath(output or config["output"])
        self.folder = RunFolder(self.root, STAGE_DIRS.values())
        self.stream = sys.stdout if stream is None else stream
        self.force = force
        self.keys = {}  # stage -> key of its (current) completion marker
        self.times = {}
        self.skipped = []
        self.log = None
        self.running = None  # the stage running now, whose folder's names path() records
        self.data_warnings = None  # check_pipeline_data's, once checked
        self.cluster_file = None  # the configuration's cluster file, when the run uses it
        self.cluster_config = None  # the run's cluster file as read, for the session to open

    @property
    def record(self):
        """The run folder's record (``RUN_RECORD``), once claimed."""
        return self.folder.record

    def dir(self, stage):
        return os.path.join(self.root, STAGE_DIRS[stage])

    def path(self, stage, name):
        """The path of ``name`` in ``stage``'s folder; asked by the stage that is running for
        its own folder, the name is recorded as the run's before the stage writes it (a rerun
        removes only what the run recorded writing)."""
        if stage == self.running:
            self.folder.record_output(STAGE_DIRS[stage], name)
        return os.path.join(self.dir(stage), name)

    # -- orchestration ---------------------------------------------------------------------

    def check_data(self, where="pipeline"):
        """:func:`~ppa_dask.app.pipeline.checks.check_pipeline_data` for this run, once (before
        its folder is created); returns the warnings, which :meth:`execute` writes to the log."""
        if self.data_warnings is None:
            self.data_warnings = check_pipeline_data(self.config, where)
        return self.data_warnings

    def check_folder(self, option=None, given=None):
        """Refuse an output that cannot become this run's folder, before any work starts
        (:meth:`RunFolder.check`; ``option`` and ``given``: the command's words for it);
        :meth:`execute` checks again, under the folder's lock."""
        self.folder.check(option, given)

    def execute(self):
        """Run every stage in order (skipping those complete); returns the run folder."""
        warnings = self.check_data()
        note = self.folder.claim(self.config)
        try:
            self.log = Reporter(self.stream, os.path.join(self.root, LOG), self.clock)
            t_start = time.perf_counter()
            self.log(f"pipeline {self.config['name']!r}: run folder {self.root}")
            if note:
                self.log(f"  note: {note}")
            for warning in warnings:
                self.log(f"  warning: {warning}")
            _write_yaml(os.path.join(self.root, "pipeline.yaml"), self.config)
            for stage in STAGE_ORDER:
                self._stage(stage)
            self._summary()
            self.log(
                f"pipeline {self.config['name']!r}: done in "
                f"{time.perf_counter() - t_start:.1f} s "
                f"({len(self.skipped)} of {len(STAGES)} stages already complete)"
            )
        finally:
            self.folder.release()
        return self.root

    def _stage_key(self, stage, external):
        return sha256(
            {
                "format": FORMAT_VERSION,
                "ppa_dask": VERSION,
                "stage": stage.name,
                "config": {name: self.config.get(name) for name in stage.config},
                "upstream": {name: self.keys[name] for name in stage.inputs},
                "inputs": external,
            }
        )

    def _stage(self, stage):
        """Run ``stage`` (a :class:`~ppa_dask.app.pipeline.stages.Stage`) unless complete."""
        name, folder = stage.name, STAGE_DIRS[stage.name]
        external = stage.external_inputs(self.config)
        key = self._stage_key(stage, external)
        marker = self.folder.complete(folder, key) if not self.force else None
        if marker is not None:
            self.keys[name] = key
            self.times[name] = 0.0
            self.skipped.append(name)
            self.log(
                f"stage {name}: skipped (complete for this configuration and inputs, "
                f"took {marker.get('wall_time_s', 0):.1f} s)"
            )
            return
        previous = read_marker(self.dir(name))
        why = (
            "forced"
            if self.force
            else "not run before"
            if previous is None
            else "configuration, inputs or outputs changed"
            if previous.get("key") != key
            else "outputs changed"
        )
        self.log(f"stage {name}: started ({why})")
        # a stale or partial folder is removed first (only one the run record lists)
        self.folder.empty_stage(folder)
        t0 = time.perf_counter()
        self.running = name
        try:
            outputs, info = stage.run(self)
        finally:
            self.running = None
        wall = time.perf_counter() - t0
        record = {
            "stage": name,
            "key": key,
            "format": FORMAT_VERSION,
            "config": {section: self.config.get(section) for section in stage.config},
            "upstream": {upstream: self.keys[upstream] for upstream in stage.inputs},
            "inputs": external,
            "outputs": self.folder.fingerprints(folder, outputs),
            "info": info,
            "wall_time_s": round(wall, 3),
            "finished": now(),
        }
        self.folder.write_marker(folder, record)
        self.keys[name] = key
        self.times[name] = wall
        self.log(f"stage {name}: done in {wall:.1f} s")

    def _summary(self):
        summary = {
            "pipeline": self.config["name"],
            "run": self.root,
            "stages": {},
            "versions": _versions(),
        }
        for stage in STAGES:
            marker = read_marker(self.dir(stage)) or {}
            summary["stages"][stage] = {
                "folder": STAGE_DIRS[stage],
                "skipped_this_run": stage in self.skipped,
                "wall_time_s": marker.get("wall_time_s"),
                "outputs": sorted(marker.get("outputs", {})),
                "info": marker.get("info"),
            }
        write_json(os.path.join(self.root, "summary.json"), summary)


def _versions():
    import platform

    out = {"python": platform.python_version()}
    for name in ("ppa_dask", "numpy", "dask", "distributed", "zarr", "xarray"):
        try:
            out[name] = getattr(__import__(name), "VERSION", "?")
        except Exception:  # pragma: no cover
            out[name] = None
    return out


def _write_yaml(path, config):
    import yaml

    write_text_atomic(path, yaml.safe_dump(config, sort_keys=False))


def run_pipeline(config, output=None, stream=None, force=False):
    """Run a pipeline (a file path or a validated configuration) in its run folder.

    Stages already complete for the same configuration and inputs are skipped (see the module
    docstring). Dask computations run on the current Client, if any.

    Parameters
    ----------
    config : str, os.PathLike or dict
        A pipeline file or a configuration mapping (validated first either way).
    output : str, optional
        Run folder (default: the configuration's ``output``).
    stream : file, optional
        Where log lines go (default: stdout); they are also appended to ``pipeline.log``.
    force : bool, default=False
        Rerun every stage.

    Returns
    -------
    root : str
        The run folder.
    """
    if isinstance(config, (str, os.PathLike)):
        config = load_pipeline(config)
    else:
        config = validate_pipeline(config)
    return Run(config, output=output, stream=stream, force=force).execute()


def prepare_run(
    path, output=None, force=False, stream=None, cluster=None, scheduler=None, check_only=False
):
    """The entry of ``ppa-dask run``: every check of a run, each once, before anything runs.

    In order: the pipeline file is read strictly and validated (:func:`load_pipeline`); its
    cluster file (``cluster:``, used unless the command names a cluster or a scheduler, and
    the command's ``--cluster`` file) is read and validated; the configuration is checked
    against its data's metadata (:func:`~ppa_dask.app.pipeline.checks.check_pipeline_data`,
    its warnings kept as ``data_warnings``); and, unless ``check_only``, the run folder: a
    file, a folder nothing can be written in, or a non-empty folder that is not a run folder
    of the library's is refused, naming ``--output`` (:meth:`RunFolder.check`).

    Parameters
    ----------
    path : str
        The pipeline file.
    output : str, optional
        The run folder (``--output``; default: the file's ``output``).
    force : bool, default=False
        Rerun every stage.
    stream : file, optional
        Where the run's log lines go.
    cluster, scheduler : str, optional
        The command's ``--cluster`` and ``--scheduler``.
    check_only : bool, default=False
        ``--check``: the run folder is not looked at.

    Returns
    -------
    Run
        Ready to :meth:`Run.execute`; ``cluster_file`` is the configuration's cluster file
        when the run uses it (else None), ``cluster_config`` the cluster file the run uses
        (``--cluster`` or ``cluster_file``) as read
        (:func:`~ppa_dask.app.session.read_cluster_option`; else None), which the command's
        session opens without reading the file again.

    Raises
    ------
    ValueError
        :class:`~ppa_dask.app.pipeline.schema.PipelineError`, the cluster file's
        ``ClusterConfigError`` or the folder's refusal: one sentence naming what is wrong.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> (folder / "p.yaml").write_text("{name: p, data: {source: dataset, name: vehicles}}")
    50
    >>> run = prepare_run(str(folder / "p.yaml"), output=str(folder / "run"))
    >>> run.config["model"]["cv"], run.cluster_file, run.cluster_config, run.data_warnings
    (2, None, None, [])
    """
    config = load_pipeline(path)
    cluster_file = None if (cluster or scheduler) else config.get("cluster")
    # validated before anything runs, and read only here: the session opens what was read
    # (--cluster local is no file; a pipeline's cluster is always one)
    if cluster:
        cluster_config = read_cluster_option(cluster)
    else:
        cluster_config = read_cluster_config(cluster_file) if cluster_file else None
    run = Run(config, output=output, stream=stream, force=force)
    run.cluster_file, run.cluster_config = cluster_file, cluster_config
    # sizes, degrees, folds and components against the data's metadata
    run.check_data(where=path)
    if not check_only:
        # a folder that is not ours, or that cannot be written, is refused before a cluster
        # starts (the command's words: --output, the path as given)
        run.check_folder("--output", output or config.get("output"))
    return run
