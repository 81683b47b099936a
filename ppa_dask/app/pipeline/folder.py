"""The run folder: whose it is, who is using it, and which of its stages are complete.

A run folder is one the library made: :meth:`RunFolder.claim` creates the run in a new or empty
folder and writes :data:`RUN_RECORD` there (format, versions, the pipeline's name, the SHA-256
of its configuration, the times, and the stage folders it created); a non-empty folder without
that record is refused before anything is written, and a stage folder the record does not list
is never removed. Inside a stage folder a rerun removes only what the run recorded writing
there (the names a stage asked for, recorded in the run record before it wrote them, and its
marker's outputs) with their hidden temporaries: a user's own file beside them stays. The
run folder's own files (:data:`RUN_RECORD`, :data:`LOG`, ...) must be regular files: a
symbolic link, a FIFO or a device in their place is refused before anything is written, so
nothing is ever written through a link to a file outside. While a run uses the folder it
holds :data:`RUN_LOCK` (O_CREAT | O_EXCL; pid, host and start time); a stale lock (same host,
process gone) is taken over with a note. A stage is complete when its folder holds
:data:`MARKER`, written last, whose fingerprints of the stage's outputs
(:func:`ppa_dask.store.sources.fingerprint`) still match.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import socket

from ppa_dask.app.pipeline.schema import FORMAT_VERSION, PipelineError
from ppa_dask.store.sources import fingerprint
from ppa_dask.utils.files import (
    check_writable,
    file_kind,
    read_json_file,
    remove_path,
    write_json_atomic,
)
from ppa_dask.utils.version import VERSION

__all__ = [
    "LOG",
    "MARKER",
    "RUN_LOCK",
    "RUN_RECORD",
    "RunFolder",
    "fingerprint",
    "now",
    "read_marker",
    "sha256",
    "write_json",
]

#: The completion marker of a stage (written last).
MARKER = "_complete.json"
#: The record that makes a folder a run folder: written by the library into the empty folder it
#: creates the run in, listing the stage folders it made there (the only ones it ever removes).
RUN_RECORD = ".ppa-dask-run.json"
#: The lock file of the run using a run folder (pid, host, start time); removed at its end.
RUN_LOCK = ".ppa-dask-run.lock"
#: The run's log, appended to by every run in the folder.
LOG = "pipeline.log"
#: The files of the run folder itself that a run reads, writes or appends to.
_OWN_FILES = (RUN_RECORD, RUN_LOCK, LOG, "pipeline.yaml", "summary.json")


def _canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def sha256(obj):
    """SHA-256 of ``obj``'s canonical JSON (keys sorted): the keys of markers and records."""
    return hashlib.sha256(_canonical(obj).encode()).hexdigest()


def read_marker(stage_dir):
    """A stage's completion marker, or None when absent, unreadable or not of the form the
    library writes (the stage then runs again and rewrites it); read within the bounds of
    :func:`~ppa_dask.utils.files.read_json_file`."""
    try:
        marker = read_json_file(os.path.join(stage_dir, MARKER))
    except (OSError, ValueError):
        return None
    return marker if _is_marker(marker) else None


def _is_marker(marker):
    """Whether ``marker`` has the form :meth:`RunFolder.write_marker` writes: a damaged one must not make
    a resumed run fail later (a field of another type), nor fingerprint a path outside its
    stage folder (an output named ``../..`` would have the whole disk walked)."""
    if not isinstance(marker, dict) or not isinstance(marker.get("key"), str):
        return False
    outputs, info, wall = marker.get("outputs"), marker.get("info"), marker.get("wall_time_s")
    if not isinstance(outputs, dict) or not all(
        _is_output_name(name) and isinstance(value, str) for name, value in outputs.items()
    ):
        return False
    if not isinstance(wall, (int, float)) or isinstance(wall, bool) or not math.isfinite(wall):
        return False
    if info is None:
        return True
    if not isinstance(info, dict) or info.get("layout", "table") not in ("table", "cube"):
        return False
    names, nodata = info.get("feature_names"), info.get("nodata")
    if names is not None and not (
        isinstance(names, list) and all(isinstance(n, str) for n in names)
    ):
        return False
    if nodata is not None and (not isinstance(nodata, (int, float)) or isinstance(nodata, bool)):
        return False
    if info.get("layout") == "cube":
        dims = info.get("feature_dim")
        return isinstance(dims, str) or (
            isinstance(dims, list) and bool(dims) and all(isinstance(d, str) for d in dims)
        )
    return True


def _is_output_name(name):
    """A relative path inside the stage folder, written as the library writes it."""
    parts = name.split("/")
    return bool(name) and not os.path.isabs(name) and ".." not in parts and "" not in parts


def _is_plain_name(name):
    """A name of an entry of the stage folder itself (no folder part, not '.' or '..')."""
    return bool(name) and "/" not in name and name not in (".", "..") and "\0" not in name


def _is_temporary_of(entry, names):
    """Whether ``entry`` is a hidden temporary the writers made beside one of ``names``
    (``.<name>.<tag>-<random>``, :func:`~ppa_dask.utils.files.temp_sibling`)."""
    return any(
        entry.startswith(f".{name}.") and entry[len(name) + 2 :].split("-")[0] in ("tmp", "old")
        for name in names
    )


def write_json(path, obj):
    """Write ``obj`` as JSON atomically (values JSON has no type for as text)."""
    write_json_atomic(path, obj, default=str)


# ---------------------------------------------------------------------------------------------
# the run folder: whose it is, and who is using it
# ---------------------------------------------------------------------------------------------


def now():
    """The local time, to the second (ISO 8601), as records and locks write it."""
    return datetime.datetime.now().isoformat(timespec="seconds")


def _read_run_record(root):
    """The run folder's record (:data:`RUN_RECORD`): None if absent; PipelineError if it is
    not one the library wrote (the folder is then not used)."""
    path = os.path.join(root, RUN_RECORD)
    if not os.path.lexists(path):
        return None
    try:
        record = read_json_file(path)
    except (OSError, ValueError) as exc:
        record = exc
    if (
        not isinstance(record, dict)
        or record.get("format") != "ppa-dask-run"
        or not isinstance(record.get("stages"), list)
    ):
        why = f" ({getattr(record, 'problem', record)})" if isinstance(record, Exception) else ""
        raise PipelineError(
            f"output {root!r}: {RUN_RECORD} is not a ppa-dask run record{why}; the folder is "
            "not used (name another output folder)"
        )
    return record


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _acquire_lock(path):
    """Create the lock file ``path`` (O_CREAT | O_EXCL: one run wins) holding this process's pid,
    host and start time; returns a note (str) when a stale lock (its process is dead, on this
    host) was taken over, else None. Raises PipelineError when another live run holds it."""
    host = socket.gethostname()
    note = None
    for _ in range(3):  # a stale lock taken over, then created again
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                json.dump({"pid": os.getpid(), "host": host, "started": now()}, f)
                f.write("\n")
            return note
        try:
            owner = read_json_file(path)
            pid, owner_host = int(owner["pid"]), str(owner["host"])
        except FileNotFoundError:
            continue  # released meanwhile: try again
        except (OSError, ValueError, KeyError, TypeError):
            raise PipelineError(
                f"the run folder is locked by {path} whose content is unreadable; if no "
                "ppa-dask run uses this folder, remove that file"
            ) from None
        if owner_host == host and pid != os.getpid() and not _pid_alive(pid):
            note = (
                f"took over the lock {path} of process {pid} on {host} (started "
                f"{owner.get('started', '?')}), which is no longer running"
            )
            remove_path(path)
            continue
        raise PipelineError(
            f"the run folder is in use by another ppa-dask run: lock file {path} is held by "
            f"pid {pid} on host {owner_host} (started {owner.get('started', '?')}); wait for "
            "it to finish, or remove the lock file if that run is gone"
        )
    raise PipelineError(f"could not take the lock file {path} (it keeps reappearing)")


def _release_lock(path):
    """Remove the lock file if this process still holds it (never another run's)."""
    try:
        owner = read_json_file(path)
    except (OSError, ValueError):
        return
    ours = isinstance(owner, dict) and owner.get("pid") == os.getpid()
    if ours and owner.get("host") == socket.gethostname():
        remove_path(path)


class RunFolder:
    """The folder a run writes in: its record, its lock and its stages' completion markers.

    Parameters
    ----------
    root : str
        The folder (made absolute).
    stage_dirs : sequence of str
        The names of the stage folders a run may create there, in order.

    Examples
    --------
    >>> import tempfile
    >>> folder = RunFolder(tempfile.mkdtemp(), ["01-load"])
    >>> folder.check()  # an empty folder can become a run folder
    >>> note = folder.claim({"name": "x"})
    >>> sorted(os.listdir(folder.root)), folder.record["stages"]
    (['.ppa-dask-run.json', '.ppa-dask-run.lock'], [])
    >>> folder.release()
    """

    def __init__(self, root, stage_dirs):
        self.root = os.path.abspath(root)
        self.stage_dirs = tuple(stage_dirs)
        self.record = None  # the record (RUN_RECORD), once claimed

    @property
    def lock(self):
        return os.path.join(self.root, RUN_LOCK)

    def check(self, option=None, given=None):
        """Refuse an output that cannot become a run folder, before any work starts (a file,
        or a folder that is not empty and holds no run record of the library's).
        :meth:`claim` checks again, under the folder's lock.

        With ``option`` (the command-line option naming the folder, ``--output``) and ``given``
        (the path as the command was given it), a file or a folder nothing can be written in
        is refused in the command's words (``--output 'x' exists and is not a folder``).
        """
        root = self.root
        if option is not None:
            if os.path.lexists(given) and not os.path.isdir(given):
                raise PipelineError(f"{option} {given!r} exists and is not a folder")
            check_writable(os.path.join(given, "x") if os.path.isdir(given) else given, option)
        if os.path.lexists(root) and not os.path.isdir(root):
            raise PipelineError(f"output {root!r} exists and is not a folder")
        for name in _OWN_FILES if os.path.isdir(root) else ():
            kind = file_kind(os.path.join(root, name), follow=False)
            if kind not in (None, "a regular file"):
                # a log appended through a link would write into its target, a FIFO would
                # block the run: the folder's own files are regular files or nothing
                raise PipelineError(
                    f"output {root!r}: {name} is {kind}, not a regular file; ppa-dask reads and "
                    "writes only regular files of its own there: remove it"
                )
        if (
            os.path.isdir(root)
            and set(os.listdir(root)) - {RUN_LOCK}
            and _read_run_record(root) is None
        ):
            raise self._not_a_run_folder()

    def _not_a_run_folder(self):
        return PipelineError(
            f"output {self.root!r} is a folder that is not empty and not a ppa-dask run folder "
            f"(it has no {RUN_RECORD}); nothing was written: name a new or empty folder"
        )

    def claim(self, config):
        """Make sure the folder is the library's and take its lock, before anything is
        written: a new or empty folder becomes a run folder of ``config`` (a validated
        configuration); a non-empty folder without the library's record is refused, and so is
        a folder another live run holds. Returns the stale-lock note or None."""
        root = self.root
        self.check()
        os.makedirs(root, exist_ok=True)
        note = _acquire_lock(self.lock)
        try:
            record = _read_run_record(root)  # again, now that no other run can write it
            if record is None:
                if set(os.listdir(root)) - {RUN_LOCK}:
                    raise self._not_a_run_folder()
                record = {
                    "format": "ppa-dask-run",
                    "version": FORMAT_VERSION,
                    "ppa_dask": VERSION,
                    "pipeline": config["name"],
                    "created": now(),
                    "stages": [],
                }
            foreign = [
                name
                for name in self.stage_dirs
                if os.path.lexists(os.path.join(root, name)) and name not in record["stages"]
            ]
            if foreign:
                raise PipelineError(
                    f"output {root!r}: {', '.join(foreign)} was not written by ppa-dask (the "
                    f"folder's {RUN_RECORD} does not list it); nothing was removed: move it away"
                )
            record.update(spec_sha256=sha256(config), last_run=now())
            self.record = record
            self._write_record()
        except BaseException:
            self.release()
            raise
        return note

    def release(self):
        """Remove the lock if this process holds it (never another run's)."""
        _release_lock(self.lock)

    def _write_record(self):
        write_json(os.path.join(self.root, RUN_RECORD), self.record)

    def _written(self, name):
        """The names the run recorded writing in stage folder ``name`` (:meth:`record_output`),
        those a damaged record lists that are not plain names left out."""
        outputs = self.record.get("outputs")
        names = outputs.get(name) if isinstance(outputs, dict) else None
        if not isinstance(names, list):
            return []
        return [n for n in names if isinstance(n, str) and _is_plain_name(n)]

    def record_output(self, name, output):
        """Record that the run is about to write ``output`` (a plain name) in stage folder
        ``name``: written to the record first, so a rerun removes it even when the stage was
        interrupted before its marker."""
        if not _is_plain_name(output):
            raise ValueError(f"a stage writes plain names in its folder, got {output!r}")
        outputs = self.record.get("outputs")
        if not isinstance(outputs, dict):
            outputs = self.record["outputs"] = {}
        written = self._written(name)
        if output not in written:
            outputs[name] = [*written, output]
            self._write_record()

    def empty_stage(self, name):
        """A folder ``name`` for a stage to write in, holding nothing of an earlier run: what
        the run recorded writing there (:meth:`record_output`, the marker's outputs, the
        marker) is removed with its hidden temporaries, nothing else (a user's notes beside
        them stay), and only if the record lists the folder (the library made it); recorded
        as the library's before it is created. Returns its path."""
        stage_dir = os.path.join(self.root, name)
        if os.path.lexists(stage_dir):
            if name not in self.record["stages"]:
                raise PipelineError(f"{stage_dir!r} was not written by ppa-dask; not removed")
            if os.path.islink(stage_dir) or not os.path.isdir(stage_dir):
                remove_path(stage_dir)  # (a link is removed, never followed)
            else:
                marker = read_marker(stage_dir) or {}
                ours = {MARKER, *self._written(name)}
                ours.update(n for n in marker.get("outputs", {}) if _is_plain_name(n))
                for entry in os.listdir(stage_dir):
                    if entry in ours or _is_temporary_of(entry, ours):
                        remove_path(os.path.join(stage_dir, entry))
        if name not in self.record["stages"]:
            self.record["stages"].append(name)
        if not isinstance(self.record.get("outputs"), dict):
            self.record["outputs"] = {}
        self.record["outputs"][name] = []
        self._write_record()
        os.makedirs(stage_dir, exist_ok=True)
        return stage_dir

    def complete(self, name, key):
        """The marker of stage folder ``name`` if it is complete for ``key`` (same key, every
        output fingerprinted as recorded), else None."""
        marker = read_marker(os.path.join(self.root, name))
        if marker is None or marker.get("key") != key:
            return None
        return marker if self._outputs_unchanged(marker, name) else None

    def _outputs_unchanged(self, marker, name):
        outputs = marker.get("outputs")
        if not isinstance(outputs, dict) or not outputs:
            return False
        for output, recorded in outputs.items():
            try:
                if fingerprint(os.path.join(self.root, name, output)) != recorded:
                    return False
            except FileNotFoundError:
                return False
        return True

    def fingerprints(self, name, outputs):
        """The fingerprints of the ``outputs`` of stage folder ``name`` (names inside it, or
        absolute paths), as its marker records them."""
        return {o: fingerprint(os.path.join(self.root, name, o)) for o in outputs}

    def write_marker(self, name, record):
        """Mark stage folder ``name`` complete with ``record``: written last, atomically."""
        write_json(os.path.join(self.root, name, MARKER), record)
