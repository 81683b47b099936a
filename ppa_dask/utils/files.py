"""Atomic file writes: a file or folder appears at its path complete, or not at all.

Everything the package writes goes to a hidden temporary sibling first and is renamed into place
(a rename within one folder is atomic on POSIX file systems), so a process killed mid-write
never leaves a partial file at the target path.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid

__all__ = ["remove_path", "temp_sibling", "write_json_atomic", "write_text_atomic"]


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


def remove_path(path):
    """Remove a file or a folder tree (a symbolic link is removed, never followed)."""
    if os.path.isdir(path) and not os.path.islink(path):
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
