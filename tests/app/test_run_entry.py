"""``ppa-dask run`` checks through one entry, each check once, before anything runs.

The walk is cli.run_run -> pipeline.prepare_run (the file validated, its cluster file read, the
data's metadata, the run folder) -> Run.execute; the CLI coordinates no sibling's checks.
These tests count the checks on that walk and the order of the refusals.
"""

from __future__ import annotations

import os

import dask
import pytest
import yaml

from ppa_dask.app import cli, demo
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import folder as run_folder
from ppa_dask.app.pipeline import run as pipeline_run
from ppa_dask.app.pipeline import schema

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


def test_check_reads_the_pipeline_and_its_cluster_file_once(tmp_path, monkeypatch, capsys):
    cluster = os.path.join(ROOT, "cluster", "local.yaml")
    path = _file(tmp_path, cluster=cluster)
    loads = _counting(monkeypatch, pipeline_run, "load_pipeline")
    reads = _counting(monkeypatch, pipeline_run, "read_cluster_config")
    folders = _counting(monkeypatch, run_folder.RunFolder, "check")
    assert main(["run", path, "--check", "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.endswith(f"{path}: valid\n")
    assert len(loads) == 1 and len(reads) == 1
    assert reads[0] == (cluster,)
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
    sessions = _counting(monkeypatch, cli, "command_session")
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
    reads = _counting(monkeypatch, pipeline_run, "read_cluster_config")
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
