"""Strict YAML for configuration files: a key written twice in one mapping is an error.

PyYAML's ``safe_load`` keeps the last of two equal keys without a word, so a pipeline file that
sets ``degree`` twice runs with whichever came last. :class:`StrictLoader` is ``yaml.SafeLoader``
(plain data only: nothing a file names is imported or run) that refuses a duplicate key instead,
naming the file, the key and both lines. Keys brought in by a merge (``<<: *defaults``) may be
overridden, as YAML intends.

A configuration file may be anything, so reading one is bounded before and after parsing: at
most :data:`MAX_YAML_BYTES` of text, no nesting so deep that the parser would run out of stack,
and at most :data:`MAX_YAML_NODES` values once aliases are expanded (a few lines of anchors and
aliases can stand for billions of values, and every reader of the configuration walks them
all). Each is refused with a :class:`YAMLFileError` naming the file.
"""

from __future__ import annotations

import io

import yaml

from ppa_dask.utils.files import NotARegularFile, open_regular

__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "YAMLFileError",
    "DuplicateKeyError",
    "StrictLoader",
    "load_yaml",
    "read_yaml_file",
]

#: Largest configuration file read (pipeline and cluster files are a few KB).
MAX_YAML_BYTES = 2**20
#: Most values a configuration may hold with its aliases expanded.
MAX_YAML_NODES = 10**5

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLFileError(yaml.YAMLError, ValueError):
    """A configuration file refused by this reader (the message names the file and why)."""


class DuplicateKeyError(YAMLFileError):
    """A mapping of a YAML document holds the same key twice (the message names file, key, lines)."""


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises :class:`DuplicateKeyError` for a key given twice."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first.get(key)
                except TypeError:  # an unhashable key: SafeLoader reports it itself
                    continue
                mark = key_node.start_mark
                if seen is not None:
                    raise DuplicateKeyError(
                        f"{_name(mark)}: duplicate key {key!r} on line {mark.line + 1} (first on "
                        f"line {seen}); a key may appear only once in a mapping"
                    )
                first[key] = mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _name(mark):
    # the stream's name: the file's path when read from an open file, "<unicode string>" else
    name = getattr(mark, "name", None)
    return name if name and not name.startswith("<") else "YAML document"


def load_yaml(stream):
    """Parse one YAML document (a string or an open file) with :class:`StrictLoader`.

    Examples
    --------
    >>> load_yaml("a: 1\\nb: [2, 3]\\n")
    {'a': 1, 'b': [2, 3]}
    >>> load_yaml("a: 1\\nb: 2\\na: 3\\n")
    Traceback (most recent call last):
    ...
    ppa_dask.utils.yamlfile.DuplicateKeyError: YAML document: duplicate key 'a' on line 3 ...
    """
    name = getattr(stream, "name", None)
    text = stream if isinstance(stream, str) else stream.read(MAX_YAML_BYTES + 1)
    where = name if isinstance(name, str) else "YAML document"
    if len(text) > MAX_YAML_BYTES:
        raise YAMLFileError(
            f"{where}: larger than the {MAX_YAML_BYTES} characters a configuration file may hold"
        )
    buffer = io.StringIO(text)
    buffer.name = name if isinstance(name, str) else "<unicode string>"  # named in the marks
    try:
        value = yaml.load(buffer, Loader=StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except RecursionError:
        raise YAMLFileError(f"{where}: nested too deep to be a configuration") from None
    if _exceeds(value, MAX_YAML_NODES):
        raise YAMLFileError(
            f"{where}: holds more than {MAX_YAML_NODES} values once its aliases are expanded"
        )
    return value


def _exceeds(value, limit):
    """Whether ``value`` holds more than ``limit`` values counted as its readers walk it (an
    object reached twice through aliases counted twice; a cycle never ends, so it exceeds)."""
    stack, count = [value], 0
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            return True
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple, set)):
            stack.extend(node)
    return False


def read_yaml_file(path):
    """Parse the YAML file at ``path`` strictly (see :func:`load_yaml`); errors name the file.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "c.yaml")
    >>> _ = open(p, "w").write("model:\\n  degree: 2\\n  degree: 3\\n")
    >>> read_yaml_file(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ppa_dask.utils.yamlfile.DuplicateKeyError: .../c.yaml: duplicate key 'degree' on line 3 ...
    """
    try:
        f = open_regular(path, "r")  # a FIFO would block the read, a device never end it
    except NotARegularFile as exc:
        raise YAMLFileError(str(exc)) from None
    with f:
        return load_yaml(f)
