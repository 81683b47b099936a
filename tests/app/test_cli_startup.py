"""A command that answers in a second: ``--help``, ``--version``, a sub-command's ``--help``, a
bad argument and a missing input are answered before Dask, distributed, xarray, scikit-learn or
numba is imported (each takes seconds), and ``import ppa_dask`` loads none of them either while
``from ppa_dask import PPA`` and the documented paths keep working. Each case runs in a fresh
interpreter, which reports the heavy packages in its ``sys.modules`` afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import paths
import pytest

# child interpreters
pytestmark = pytest.mark.slow

HEAVY = ("dask", "distributed", "xarray", "sklearn", "numba")

# the command's main with ARGV (a JSON list), under a SystemExit guard; then the exit code, the
# last line of stderr and the heavy packages imported, as one JSON line on stdout
RUN_MAIN = """
import contextlib, io, json, sys
from ppa_dask.app.cli import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
heavy = sorted({m.partition(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
print(json.dumps([code, (err.getvalue().strip().splitlines() or [""])[-1], out.getvalue(), heavy]))
"""


def _child(code, *args, cwd):
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(paths.ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _main(argv, cwd):
    return _child(RUN_MAIN, json.dumps(argv), ",".join(HEAVY), cwd=cwd)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        *([command, "--help"] for command in ("demo", "run", "fit", "transform", "inverse")),
        ["info", "--help"],
        ["bench", "--help"],
    ],
    ids=" ".join,
)
def test_help_and_version_import_nothing_heavy(argv, tmp_path):
    code, _, out, heavy = _main(argv, tmp_path)
    assert code == 0 and out.strip()
    assert heavy == [], f"ppa-dask {' '.join(argv)} imported {heavy}"


@pytest.mark.parametrize(
    "argv, error",
    [
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["fit", "--degree", "x", "a.zarr", "m.zarr"], "argument --degree"),
        (["demo", "--bands", "0"], "argument --bands: must be a positive integer"),
        (["fit", "absent.zarr", "m.zarr"], "no Zarr store at"),
        (["fit", "absent.csv", "m.zarr"], "no such file 'absent.csv'"),
        (["fit", "a_B2.TIF", "a_B3.TIF", "m.zarr"], "no such file 'a_B2.TIF'"),
        (["fit", "*.nc", "m.zarr", "--feature-dim", "band"], "no files match '*.nc'"),
        (["transform", "absent.zarr", "x.csv", "out.csv"], "no model file at"),
        (["inverse", "absent.zarr", "c.csv", "out.csv"], "no model file at"),
        (["info", "absent.zarr"], "no model file at"),
        (["run", "absent.yaml"], "pipeline file 'absent.yaml' does not exist"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_bad_arguments_and_missing_inputs_answer_before_anything_heavy(argv, error, tmp_path):
    code, line, _, heavy = _main(argv, tmp_path)
    assert code == 2
    assert line.startswith("ppa-dask: error: ") and error in line, line
    assert heavy == [], f"ppa-dask {' '.join(argv)} imported {heavy} before refusing"


IMPORT_PACKAGE = """
import json, sys
import ppa_dask
heavy = sorted({m.partition(".")[0] for m in sys.modules} & set(sys.argv[1].split(",")))
from ppa_dask import PPA, NLPCA, FeatureBaggingPPA, make_ppa_knn, RankDeficientWarning
names = [PPA.__module__, NLPCA.__name__, FeatureBaggingPPA.__name__, make_ppa_knn.__name__,
         RankDeficientWarning.__name__, ppa_dask.store.__name__, ppa_dask.__version__]
print(json.dumps([heavy, names, sorted(set(ppa_dask.__all__) - set(dir(ppa_dask)))]))
"""


def test_import_ppa_dask_loads_nothing_heavy_and_its_names_still_come(tmp_path):
    heavy, names, undir = _child(IMPORT_PACKAGE, ",".join(HEAVY), cwd=tmp_path)
    assert heavy == [], f"import ppa_dask imported {heavy}"
    assert names[:2] == ["ppa_dask.ppa.estimator", "NLPCA"]
    assert names[5] == "ppa_dask.store"
    assert undir == []


# a model file of each of the library's estimators the package root defers, loaded in a process
# that imported only ppa_dask.store (the allow-list learns them from the root's table)
LOAD_ONLY = """
import json, sys
from ppa_dask import store
print(json.dumps([type(store.load_model(p)).__name__ for p in sys.argv[1:]]))
"""


def test_a_saved_model_of_a_deferred_class_loads_without_importing_it_first(tmp_path):
    import numpy as np

    from ppa_dask import NLPCA, PPA, FeatureBaggingPPA
    from ppa_dask.store import save_model

    X = np.random.default_rng(0).normal(size=(80, 3))
    models = {
        "ppa.zarr": PPA(degree=2, random_state=0),
        "nlpca.zarr": NLPCA(n_components=1, max_iter=3, n_restarts=1, random_state=0),
        "bagging.zarr": FeatureBaggingPPA(n_estimators=2, random_state=0),
    }
    for name, model in models.items():
        save_model(model.fit(X), tmp_path / name)  # (NLPCA warns that it stopped early)
    loaded = _child(LOAD_ONLY, *(str(tmp_path / n) for n in models), cwd=tmp_path)
    assert loaded == ["PPA", "NLPCA", "FeatureBaggingPPA"]
