"""``ppa-dask run`` checks through one entry, each check once, before anything runs.

The walk is cli.run_run -> pipeline.prepare_run (the file validated, its cluster file read, the
data's metadata, the run folder) -> the session (the cluster opened from the configuration
read, not from the file) -> Run.execute; the CLI coordinates no sibling's checks. These tests
count the checks on that walk and the order of the refusals, and the reads of a cluster file
over a whole command (``run`` and ``fit``), the opening of its cluster included.
"""

from __future__ import annotations

import contextlib
import os

import dask
import numpy as np
import pytest
import yaml

from ppa_dask import PPA
from ppa_dask.app import cli, demo, session
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import folder as run_folder
from ppa_dask.app.pipeline import run as pipeline_run
from ppa_dask.app.pipeline import schema
from ppa_dask.cluster import client as cluster_client
from ppa_dask.cluster import files as cluster_files
from ppa_dask.store import save_model, write_array

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _file(tmp_path, **extra):
    config = {
        "name": "entry",
        "data": {"source": "generated", "kind": "curved", "n_samples": 300, "n_features": 4},
        "model": {"degree": [1, 2], "cv": 2},
        "plots": {"components": 0, "dpi": 30},
        **extra,
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _cluster_file_reads(monkeypatch):
    """The names of the cluster files read, whoever reads them: every read of one goes through
    the strict YAML loader of ppa_dask.cluster.files (read_cluster_config)."""
    names = []
    original = cluster_files.load_yaml

    def counted(stream):
        names.append(getattr(stream, "name", stream))
        return original(stream)

    monkeypatch.setattr(cluster_files, "load_yaml", counted)
    return names


def _local_clusters(monkeypatch):
    """The options of every local cluster opened; none starts (the session computes in this
    process, as with --scheduler threads), so the whole command runs in seconds."""
    opened = []

    @contextlib.contextmanager
    def recorded(**options):
        opened.append(options)
        with dask.config.set(scheduler="threads"):
            yield None

    monkeypatch.setattr(cluster_client, "local_client", recorded)
    return opened


def _file_options(path):
    with open(path) as f:
        return yaml.safe_load(f)["options"]


@pytest.mark.parametrize("given", ["in the pipeline", "--cluster"])
def test_a_run_reads_its_cluster_file_once_and_opens_what_it_read(
    tmp_path, monkeypatch, capsys, given
):
    cluster = os.path.join(ROOT, "cluster", "local.yaml")
    path = _file(tmp_path, cluster=cluster) if given == "in the pipeline" else _file(tmp_path)
    option = ["--cluster", cluster] if given == "--cluster" else []
    reads = _cluster_file_reads(monkeypatch)
    opened = _local_clusters(monkeypatch)
    assert main(["run", path, *option, "-o", str(tmp_path / "run")]) == 0
    assert f"connecting: cluster from {cluster}" in capsys.readouterr().out
    # read once, before anything ran; the session opened the file's cluster from that read
    assert reads == [cluster]
    assert len(opened) == 1
    assert {k: opened[0][k] for k in _file_options(cluster)} == _file_options(cluster)
    assert (tmp_path / "run" / "summary.json").exists()


def test_fit_reads_its_cluster_file_once_and_opens_what_it_read(tmp_path, monkeypatch, capsys):
    cluster = tmp_path / "one.yaml"
    cluster.write_text("type: local\noptions: {n_workers: 1, memory_limit: 1GiB}\n")
    data = tmp_path / "data.zarr"
    write_array(np.random.default_rng(0).normal(size=(200, 4)), data)
    reads = _cluster_file_reads(monkeypatch)
    opened = _local_clusters(monkeypatch)
    model = tmp_path / "model.zarr"
    assert main(["fit", str(data), str(model), "--degree", "2", "--cluster", str(cluster)]) == 0
    assert f"connecting: cluster from {cluster}" in capsys.readouterr().out
    assert reads == [str(cluster)]
    assert [(o["n_workers"], o["memory_limit"]) for o in opened] == [(1, "1GiB")]
    assert model.exists()


@pytest.mark.parametrize("command", ["fit", "transform", "demo"])
def test_a_bad_cluster_file_is_refused_before_any_work(tmp_path, monkeypatch, capsys, command):
    cluster = tmp_path / "bad.yaml"
    cluster.write_text("type: local\noptions: {n_workerz: 2}\n")
    data = tmp_path / "data.zarr"
    X = np.random.default_rng(0).normal(size=(200, 4))
    write_array(X, data)
    save_model(PPA(degree=2).fit(X), tmp_path / "model.zarr")
    opens = _counting(monkeypatch, cli.store, "open_source")
    loads = _counting(monkeypatch, cli.store, "load_model")
    sessions = _counting(monkeypatch, cluster_client, "local_client")
    out = tmp_path / "out"
    argv = {
        "fit": ["fit", str(data), str(out)],
        "transform": ["transform", str(tmp_path / "model.zarr"), str(data), str(out)],
        "demo": ["demo", "--output", str(out)],
    }[command]
    assert main([*argv, "--cluster", str(cluster)]) == 2
    assert "options.n_workerz: unknown key (did you mean 'n_workers'?)" in capsys.readouterr().err
    # no input opened, no model read, no cluster started, nothing written
    assert opens == [] and loads == [] and sessions == [] and not out.exists()


def test_check_reads_the_pipeline_and_its_cluster_file_once(tmp_path, monkeypatch, capsys):
    cluster = os.path.join(ROOT, "cluster", "local.yaml")
    path = _file(tmp_path, cluster=cluster)
    loads = _counting(monkeypatch, pipeline_run, "load_pipeline")
    reads = _cluster_file_reads(monkeypatch)
    folders = _counting(monkeypatch, run_folder.RunFolder, "check")
    assert main(["run", path, "--check", "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.endswith(f"{path}: valid\n")
    assert len(loads) == 1 and reads == [cluster]
    assert folders == []  # --check does not look at the run folder
    assert not (tmp_path / "out").exists()


def test_a_run_checks_its_folder_before_and_once_under_the_lock(tmp_path, monkeypatch):
    path = _file(tmp_path)
    loads = _counting(monkeypatch, pipeline_run, "load_pipeline")
    folders = _counting(monkeypatch, run_folder.RunFolder, "check")
    with dask.config.set(scheduler="threads"):
        code = main(["run", path, "--scheduler", "threads", "-o", str(tmp_path / "run")])
    assert code == 0
    assert len(loads) == 1
    # once before a cluster starts (the command's words), once under the folder's lock
    assert [args[1:] for args in folders] == [("--output", str(tmp_path / "run")), ()]
    assert (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize("bad", ["a file", "a foreign folder"])
def test_a_bad_output_is_refused_before_a_cluster_starts(tmp_path, monkeypatch, capsys, bad):
    path = _file(tmp_path)
    out = tmp_path / "out"
    if bad == "a file":
        out.write_text("not a run folder")
        expected = f"--output '{out}' exists and is not a folder"
    else:
        out.mkdir()
        (out / "mine.txt").write_text("x")
        expected = "is a folder that is not empty and not a ppa-dask run folder"
    # the command calls session.command_session when it runs (cli.py loads it on first use)
    sessions = _counting(monkeypatch, session, "command_session")
    assert main(["run", path, "-o", str(out)]) == 2
    assert expected in capsys.readouterr().err
    assert sessions == []
    # nothing written
    if bad == "a file":
        assert out.read_text() == "not a run folder"
    else:
        assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_a_bad_pipeline_file_is_refused_before_its_cluster_file_is_read(tmp_path, monkeypatch):
    path = _file(tmp_path, cluster=str(tmp_path / "absent.yaml"), seed=-1)
    reads = _cluster_file_reads(monkeypatch)
    with pytest.raises(schema.PipelineError, match="seed: expected an integer >= 0"):
        pipeline_run.prepare_run(path)
    assert reads == []


@pytest.mark.parametrize("part", [[], ["--cube"], ["--no-cube"]])
def test_the_demo_checks_its_output_folder_first_and_once(tmp_path, monkeypatch, capsys, part):
    # demo.run_demo is the command's one entry: the folder is refused (in the words the CLI has
    # always used) before the other options, and before a cluster starts
    out = tmp_path / "out"
    out.write_text("a file")
    probes = _counting(monkeypatch, demo, "check_writable")
    sessions = _counting(monkeypatch, demo, "command_session")
    assert main(["demo", "--output", str(out), "--n-features", "2", *part]) == 2
    assert f"--output '{out}' exists and is not a folder" in capsys.readouterr().err
    assert probes == [] and sessions == [] and out.read_text() == "a file"
    out.unlink()
    with pytest.raises(demo.DemoError, match="--n-features must be >= 4"):
        main_args = cli.build_parser().parse_args(
            ["demo", "--output", str(out), "--n-features", "2"]
        )
        demo.run_demo(main_args)
    assert len(probes) == 1  # the folder checked once (writable), then the option refused
