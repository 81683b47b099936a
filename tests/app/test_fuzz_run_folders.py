"""Seeded fuzzing of a run folder's own files: the run record (``.ppa-dask-run.json``) and the
stages' completion markers (``_complete.json``), mutated the ways of tests/store/test_fuzz_files.py
(flipped bytes, truncation, appended junk, shuffled JSON, deep nesting) and by fields of another
type, then the pipeline run again on the folder.

Every outcome is one of two: the run resumes and its results are the intact run's (a damaged
marker only makes its stage run again), or it is refused with exit 2 and one line naming the
run record, which is left as it was. Never a traceback, never a path outside the stage folder
fingerprinted (an output named ``../../..`` would have the whole disk walked)."""

import json
import os
import random
import shutil

import pytest
from mutations import mutate

from ppa_dask import store
from ppa_dask.app import pipeline
from ppa_dask.app.cli import main

# mutated run folders, each resumed by a pipeline run
pytestmark = pytest.mark.slow


PIPELINE = """pipeline: 1
name: fuzz
output: run
seed: 0
data: {source: generated, n_samples: 400, n_features: 4}
model: {degree: [1, 2], cv: 2}
evaluate: {pca: true}
plots: {components: 0}
"""
STAGES = ["01-load", "02-preprocess", "03-fit", "04-transform", "05-evaluate", "06-plots"]
RECORD, MARKER, RESULT = (
    ".ppa-dask-run.json",
    "_complete.json",
    "05-evaluate/reconstruction_error.json",
)
# values of another type for a marker's fields, and names reaching out of the stage folder
ODD_VALUES = [None, "x", [], {}, 1e308, -1, True, [[[]]], {"layout": "cube"}]
ESCAPES = ["../../..", "/", "a/../../../.."]


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-run")
    (root / "p.yaml").write_text(PIPELINE)
    assert _run(root / "p.yaml", root / "run") == 0
    return root


def _run(config, out):
    return main(["run", str(config), "-o", str(out), "--scheduler", "threads"])


def _resumed_or_refused(intact, folder, capsys, record_before):
    """Run the pipeline on ``folder``; assert the outcome is one of the two allowed."""
    capsys.readouterr()
    status = _run(intact / "p.yaml", folder)
    out, err = capsys.readouterr()
    if status == 0:
        assert (folder / RESULT).read_text() == (intact / "run" / RESULT).read_text()
        return "resumed", out
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1, (status, err)
    # the record is not one, or one whose list of stage folders lost a name (a flipped byte)
    assert (
        f"{RECORD} is not a ppa-dask run record" in lines[0]
        or f"was not written by ppa-dask (the folder's {RECORD} does not list it)" in lines[0]
    ), lines
    assert (folder / RECORD).read_bytes() == record_before  # never replaced
    return "refused", out


def _copy(intact, tmp_path, name):
    folder = tmp_path / name
    shutil.copytree(intact / "run", folder)
    return folder


def test_mutated_run_records_resume_or_are_refused_in_one_line(intact, tmp_path, capsys):
    rng = random.Random(20261203)
    original = (intact / "run" / RECORD).read_bytes()
    outcomes = {"resumed": 0, "refused": 0}
    for case in range(24):
        folder = _copy(intact, tmp_path, f"r{case}")
        _, data = mutate(rng, original)
        (folder / RECORD).write_bytes(data)
        outcome, _ = _resumed_or_refused(intact, folder, capsys, data)
        outcomes[outcome] += 1
        shutil.rmtree(folder)
    # both outcomes occur: shuffled JSON is still a record, flipped bytes mostly are not
    assert outcomes["resumed"] and outcomes["refused"], outcomes


def test_mutated_markers_make_their_stage_run_again_with_the_same_results(
    intact, tmp_path, capsys
):
    rng = random.Random(3)
    reran = 0
    for case in range(8):
        folder = _copy(intact, tmp_path, f"m{case}")
        stage = rng.choice(STAGES[2:])  # the later stages: each case reruns from its stage on
        path = folder / stage / MARKER
        marker = json.loads(path.read_bytes())
        if case % 2:
            _, data = mutate(rng, path.read_bytes())
        else:  # a field of another type, the key still matching
            marker[rng.choice(["outputs", "info", "wall_time_s"])] = rng.choice(ODD_VALUES)
            data = json.dumps(marker).encode()
        path.write_bytes(data)
        outcome, log = _resumed_or_refused(intact, folder, capsys, (folder / RECORD).read_bytes())
        assert outcome == "resumed"
        reran += f"stage {stage.split('-')[1]}: started" in log
        shutil.rmtree(folder)
    assert reran >= 4  # the typed fields always, most byte mutations too


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_marker_naming_an_output_outside_its_folder_is_not_used(
    intact, tmp_path, capsys, monkeypatch, escape
):
    folder = _copy(intact, tmp_path, "escape")
    path = folder / "06-plots" / MARKER
    marker = json.loads(path.read_text())
    marker["outputs"] = {escape: "0" * 64}
    path.write_text(json.dumps(marker))
    seen = []

    def fingerprint(target):
        seen.append(os.path.realpath(target))
        return store.sources.fingerprint(target)

    monkeypatch.setattr(pipeline.folder, "fingerprint", fingerprint)
    outcome, log = _resumed_or_refused(intact, folder, capsys, (folder / RECORD).read_bytes())
    assert outcome == "resumed" and "stage plots: started" in log, log
    assert "stage evaluate: skipped" in log  # the others were intact
    # only the stages' own outputs were fingerprinted, never the named path
    plots = os.path.realpath(folder / "06-plots")
    assert os.path.realpath(os.path.join(plots, escape)) not in seen
    assert all(p.startswith(os.path.realpath(folder) + os.sep) for p in seen), seen


def test_a_load_marker_claiming_a_cube_without_its_dimension_reruns_the_load(
    intact, tmp_path, capsys
):
    folder = _copy(intact, tmp_path, "cube")
    path = folder / "01-load" / MARKER
    marker = json.loads(path.read_text())
    marker["info"]["layout"] = "cube"  # the key still matches: only the form can tell
    path.write_text(json.dumps(marker))
    # another degree: the fit runs again and reads what the load recorded
    (tmp_path / "p.yaml").write_text(PIPELINE.replace("[1, 2]", "[1, 2, 3]"))
    capsys.readouterr()
    assert _run(tmp_path / "p.yaml", folder) == 0
    log = capsys.readouterr().out
    assert "stage load: started" in log and "stage fit: started" in log, log
