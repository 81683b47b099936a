"""Configuration files are read strictly: a key given twice in one mapping is an error naming the
file, the key and both lines (PyYAML's ``safe_load`` silently keeps the last value), for the
pipeline files and the cluster files alike; everything else reads as ``safe_load`` reads it."""

import pytest
import yaml

from ppa_dask.app.cli import main
from ppa_dask.cluster import ClusterConfigError, read_cluster_config
from ppa_dask.utils.yamlfile import DuplicateKeyError, load_yaml, read_yaml_file

DOCUMENTS = [
    "a: 1\nb: [1, 2, {c: 3}]\n",
    "defaults: &d {x: 1, y: 2}\nrun:\n  <<: *d\n  y: 5\n",  # a merged key may be overridden
    "- {a: 1}\n- {a: 2}\n",  # the same key in two mappings
    "1: one\n'1': string one\n",
    "",
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_documents_without_duplicates_read_as_safe_load_reads_them(text):
    assert load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text, key, line, first",
    [
        ("a: 1\nb: 2\na: 3\n", "a", 3, 1),
        ("outer:\n  inner: {k: 1, k: 2}\n", "k", 2, 2),
        ("items:\n  - name: x\n    size: 1\n    name: y\n", "name", 4, 2),
        ("1: one\n1: uno\n", 1, 2, 1),
    ],
)
def test_a_duplicate_key_is_an_error_naming_it_and_its_lines(tmp_path, text, key, line, first):
    path = tmp_path / "conf.yaml"
    path.write_text(text)
    assert yaml.safe_load(text) is not None  # PyYAML alone accepts it
    with pytest.raises(DuplicateKeyError) as info:
        read_yaml_file(path)
    assert str(info.value) == (
        f"{path}: duplicate key {key!r} on line {line} (first on line {first}); a key may "
        "appear only once in a mapping"
    )
    assert isinstance(info.value, yaml.YAMLError) and isinstance(info.value, ValueError)


def test_the_cluster_file_is_read_strictly(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text("type: local\noptions:\n  n_workers: 2\n  n_workers: 8\n")
    expected = (
        f"{path}: duplicate key 'n_workers' on line 4 (first on line 3); a key may appear only "
        "once in a mapping"
    )
    with pytest.raises(ClusterConfigError) as info:
        read_cluster_config(path)
    assert str(info.value) == expected
    # the command line refuses it before anything runs: exit 2, one line
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("name: p\ndata: {source: dataset, name: vehicles}\n")
    assert main(["run", str(pipeline), "--cluster", str(path), "--check"]) == 2
    assert capsys.readouterr().err == f"ppa-dask: error: {expected}\n"
    path.write_text("type: local\noptions:\n  n_workers: 2\n")
    assert read_cluster_config(path)["options"]["n_workers"] == 2
