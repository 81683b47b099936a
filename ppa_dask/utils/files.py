"""Atomic file writes, bounded reads of the JSON files the package reads back, and reads of
regular files only.

Every file a user or a run folder hands the package is read only if it is a regular file (or
a folder where one is expected): a FIFO blocks the open until a writer comes, a character
device such as /dev/zero never ends, so :func:`open_regular` opens without blocking and reads
only a regular file, and :func:`check_regular` refuses, by what it is, a path a library opens
(rasterio, pandas, zarr), both with :class:`NotARegularFile` naming it.

Everything the package writes goes to a hidden temporary sibling first and is renamed into place
(a rename within one folder is atomic on POSIX file systems), so a process killed mid-write
never leaves a partial file at the target path.

A JSON file read back (a model file's metadata, a member file's record, a member store's
manifest, a run folder's records) may be damaged or forged, so :func:`read_json_file` and
:func:`parse_json` bound what reading it can cost before anything is parsed: at most
``max_bytes`` (:data:`MAX_JSON_BYTES` by default) of strict UTF-8, nested at most
``max_depth`` (:data:`MAX_JSON_DEPTH`) lists and objects deep. Everything that goes wrong is a
:class:`JSONFileError` naming the file, which each reader turns into its own documented error.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
import uuid

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "JSONFileError",
    "NotARegularFile",
    "check_regular",
    "check_writable",
    "file_kind",
    "open_regular",
    "parse_json",
    "read_json_file",
    "SETTLE_SECONDS",
    "remove_path",
    "temp_sibling",
    "write_json_atomic",
    "write_text_atomic",
]

#: Largest JSON file read back (bytes): the largest record the library writes is a few hundred
#: KB (an ensemble of many members); parsing 16 MiB costs well under a second and 200 MB.
MAX_JSON_BYTES = 16 * 2**20
#: Deepest nesting of lists and objects read back: the library writes fewer than 30 levels (an
#: ensemble of pipelines), and every reader of the tree recurses once per level.
MAX_JSON_DEPTH = 100


class JSONFileError(ValueError):
    """A JSON file that cannot be read within the bounds (too large, not UTF-8, not JSON, nested
    too deep); the message names the file, ``problem`` says what is wrong with it."""

    def __init__(self, name, problem):
        super().__init__(f"{name}: {problem}")
        self.name, self.problem = name, problem


#: The kinds of file a read refuses, by what ``stat`` says (a read of one could block for ever,
#: a FIFO, or never end, a character device such as /dev/zero).
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISREG, "a regular file"),
)


def file_kind(path, follow=True):
    """What is at ``path``, in words (``"a FIFO (named pipe)"``, ``"a character device"``,
    ``"a regular file"``, ...), following symbolic links unless ``follow`` is false; None
    when nothing is there (or a link leads nowhere).

    Examples
    --------
    >>> import tempfile
    >>> file_kind(tempfile.mkdtemp()), file_kind("/dev/null"), file_kind("/nowhere/x")
    ('a folder', 'a character device', None)
    """
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "a special file")


class NotARegularFile(ValueError):
    """A path a reader refuses to read: a FIFO, a device or a socket (``kind`` says which);
    the message names the path (after ``what``, the option or file it is) and what was
    expected."""

    def __init__(self, path, kind, what="", folder=False):
        expected = "a regular file or a folder" if folder else "a regular file"
        said = f"{what} {os.fspath(path)!r}" if what else repr(os.fspath(path))
        super().__init__(
            f"{said} is {kind}, not {expected}; ppa-dask reads only regular files"
            + (" and folders" if folder else "")
        )
        self.path, self.kind = os.fspath(path), kind


def open_regular(path, mode="rb", what=""):
    """Open ``path`` for reading only if it is a regular file, without ever blocking on it.

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer; what
    was opened is then asked (``fstat``) and read only if it is a regular file (a character
    device such as /dev/zero never ends). A folder raises ``IsADirectoryError`` as ``open``
    does; anything else :class:`NotARegularFile` naming the path (``what`` before it).

    Examples
    --------
    >>> open_regular("/dev/zero")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ppa_dask.utils.files.NotARegularFile: '/dev/zero' is a character device, not a regular file; ...
    """
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode_bits = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode_bits):
            raise IsADirectoryError(21, "Is a directory", os.fspath(path))
        if not stat.S_ISREG(mode_bits):
            kind = next((k for test, k in _KINDS if test(mode_bits)), "a special file")
            raise NotARegularFile(path, kind, what)
        f = open(fd, mode, closefd=True)  # noqa: SIM115 (returned open, for the caller)
        raw = getattr(f, "buffer", f)
        getattr(raw, "raw", raw).name = os.fspath(path)  # named by its path, as open() names it
        return f
    except BaseException:
        os.close(fd)
        raise


def check_regular(path, what, folder=False):
    """Refuse, before anything opens it, a ``path`` that is not a regular file (or, with
    ``folder``, a folder): a FIFO, a device or a socket, named, also behind a symbolic link.

    Opening a FIFO blocks until a writer comes and a character device such as /dev/zero never
    ends, so every read of a file a user or a run folder holds asks here first. A missing
    path passes: the reader then says it is missing in its own words.

    Raises
    ------
    NotARegularFile
        A ``ValueError``: ``<what> '<path>' is a FIFO (named pipe), not a regular file``, and
        so on.

    Examples
    --------
    >>> check_regular("/dev/zero", "INPUT")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ppa_dask.utils.files.NotARegularFile: INPUT '/dev/zero' is a character device, not a regular ...
    """
    kind = file_kind(path)
    if kind is None or kind == "a regular file" or (folder and kind == "a folder"):
        return
    raise NotARegularFile(path, kind, what, folder)


def temp_sibling(path, tag="tmp"):
    """A fresh hidden name beside ``path``: ``<dir>/.<name>.<tag>-<random>``.

    Examples
    --------
    >>> os.path.basename(temp_sibling("/data/model.zarr")).startswith(".model.zarr.tmp-")
    True
    """
    parent, base = os.path.split(os.fspath(path))
    if not base:
        raise ValueError(f"path {path!r} has no final component")
    return os.path.join(parent, f".{base}.{tag}-{uuid.uuid4().hex[:12]}")


#: Seconds :func:`remove_path` keeps removing a folder that is still being written into.
SETTLE_SECONDS = 10.0


def remove_path(path, settle=SETTLE_SECONDS):
    """Remove a file or a folder tree (a symbolic link is removed, never followed).

    A folder is removed again until it is gone, for at most ``settle`` seconds: when one task
    of a parallel write fails (a full disk), Dask raises at once while the other tasks may still
    be writing their parts into the folder, and a removal that lists it before their last file
    appears leaves the folder behind.

    Examples
    --------
    >>> import tempfile
    >>> folder = os.path.join(tempfile.mkdtemp(), "parts")
    >>> os.makedirs(os.path.join(folder, "a"))
    >>> remove_path(folder)
    >>> os.path.lexists(folder)
    False
    """
    if os.path.isdir(path) and not os.path.islink(path):
        deadline = time.monotonic() + settle
        shutil.rmtree(path, ignore_errors=True)
        while os.path.lexists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
            shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def write_text_atomic(path, text, fsync=True):
    """Write ``text`` to ``path`` through a temporary sibling and an atomic rename.

    Examples
    --------
    >>> import tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "note.txt")
    >>> write_text_atomic(p, "done\\n")
    >>> open(p).read()
    'done\\n'
    """
    tmp = temp_sibling(path)
    try:
        with open(tmp, "w") as f:
            f.write(text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove_path(tmp)
        raise


def write_json_atomic(path, obj, indent=2, sort_keys=False, default=None):
    """Write ``obj`` as JSON (with a final newline) atomically; see :func:`write_text_atomic`."""
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default) + "\n"
    write_text_atomic(path, text)


def _depth_exceeds(obj, max_depth):
    """Whether ``obj`` nests lists/dicts more than ``max_depth`` deep (walked level by level,
    without recursion)."""
    level, depth = [obj] if isinstance(obj, (list, dict)) else [], 0
    while level:
        depth += 1
        if depth > max_depth:
            return True
        below = []
        for node in level:
            values = node.values() if isinstance(node, dict) else node
            below.extend(v for v in values if isinstance(v, (list, dict)))
        level = below
    return False


def parse_json(data, name, max_bytes=MAX_JSON_BYTES, max_depth=MAX_JSON_DEPTH):
    """Parse the JSON text ``data`` (bytes) of the file ``name`` within the bounds.

    Raises
    ------
    JSONFileError
        More than ``max_bytes``, not UTF-8, not JSON, or nested deeper than ``max_depth``.

    Examples
    --------
    >>> parse_json(b'{"a": [1, 2]}', "f.json")
    {'a': [1, 2]}
    >>> parse_json(b"[" * 200 + b"]" * 200, "f.json")
    Traceback (most recent call last):
    ...
    ppa_dask.utils.files.JSONFileError: f.json: nested more than 100 lists/objects deep
    """
    if len(data) > max_bytes:
        raise JSONFileError(name, f"larger than the {max_bytes} bytes a JSON record may hold")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONFileError(name, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(text)
    except RecursionError:  # (json's own limit, near the interpreter's recursion limit)
        raise JSONFileError(name, f"nested more than {max_depth} lists/objects deep") from None
    except ValueError as exc:  # JSONDecodeError, and integers of more digits than allowed
        raise JSONFileError(name, f"not valid JSON ({exc})") from None
    if _depth_exceeds(obj, max_depth):
        raise JSONFileError(name, f"nested more than {max_depth} lists/objects deep")
    return obj


def read_json_file(path, max_bytes=MAX_JSON_BYTES, max_depth=MAX_JSON_DEPTH):
    """Read the JSON file at ``path`` within the bounds of :func:`parse_json` (its size is
    checked before anything is read). OSError (FileNotFoundError, ...) passes through.

    Examples
    --------
    >>> import tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "r.json")
    >>> write_json_atomic(p, {"stages": []})
    >>> read_json_file(p)
    {'stages': []}
    >>> read_json_file(p, max_bytes=8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ppa_dask.utils.files.JSONFileError: .../r.json: larger than the 8 bytes a JSON record may hold
    """
    path = os.fspath(path)
    try:
        f = open_regular(path)  # a FIFO would block the read, a device never end it
    except (NotARegularFile, IsADirectoryError) as exc:
        kind = getattr(exc, "kind", "a folder")
        raise JSONFileError(path, f"{kind}, not a regular file") from None
    with f:
        if os.fstat(f.fileno()).st_size > max_bytes:
            raise JSONFileError(path, f"larger than the {max_bytes} bytes a JSON record may hold")
        data = f.read(max_bytes + 1)  # (a file growing meanwhile is still bounded)
    return parse_json(data, path, max_bytes, max_depth)


def check_writable(path, what):
    """Refuse a local ``path`` whose nearest existing folder cannot be written (the commands
    create missing parent folders): a probe folder is made there and removed again.

    ``what`` names the path in the refusal (``"--output"``, ``"MODEL"``): a ``ValueError``
    such as ``--output 'out/run' cannot be written: cannot create anything in '/data' (...)``.

    >>> import tempfile
    >>> check_writable(os.path.join(tempfile.mkdtemp(), "new", "run"), "--output")
    """
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(folder):
        if os.path.lexists(folder):
            raise ValueError(f"{what} {path!r}: {folder!r} exists and is not a folder")
        folder = os.path.dirname(folder)
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ppa-dask-probe-", dir=folder))
    except OSError as exc:
        raise ValueError(
            f"{what} {path!r} cannot be written: cannot create anything in {folder!r} "
            f"({exc.strerror or exc})"
        ) from None
