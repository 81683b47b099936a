"""The VSK breast cancer notebook runs end to end (coarse grids) and shows what it claims:
the three classifiers score well, the Gaussian VSK matrix is more expressive and better
conditioned than the standard one at the same shape parameter, and the blockwise spectral ratio
equals the dense one."""

import json
import os

import nbformat
import pytest

NOTEBOOK = os.path.join(os.path.dirname(__file__), os.pardir, "notebooks", "vsk_breast_cancer.ipynb")
SMALL = (
    "SEED = 1\nFAST = True\nC_GRID = [0.25, 4.0]\nGAMMA_GRID = [0.1, 1.0]\nCV = 3\n"
    "SWEEP_GAMMAS = [0.3, 3.0]\n"
)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from nbclient import NotebookClient

    out = tmp_path_factory.mktemp("notebook")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    params.source = SMALL
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(out)}})
    client.execute(env=env)
    return nb, out


def _outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def test_notebook_runs_and_draws_its_figures(executed):
    nb, out = executed
    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    images = [o for o in _outputs(nb) if "image/png" in o.get("data", {})]
    assert len(images) == 2  # diagnostics against gamma, and the scores
    assert os.listdir(out) == []  # it writes no files


def test_notebook_results_hold(executed):
    nb, _ = executed
    text = "".join(o.get("text", "") for o in _outputs(nb) if o.output_type == "stream")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("SUMMARY ")]
    summary = json.loads(line[len("SUMMARY "):])
    assert set(summary["f1"]) == {"NB", "SVM", "SVM-VSK", "SVM-E"}
    assert all(0.9 <= v <= 1.0 for v in summary["f1"].values())
    assert summary["expressive"] and summary["better_conditioned"] and summary["sweep_expressive"]
    assert summary["blockwise_agrees"]
