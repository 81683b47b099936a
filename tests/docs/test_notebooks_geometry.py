"""The geometry notebook runs end to end (smaller helix, a MagicGamma subset) and shows what it
claims: Frenet frames that are rotations (asserted inside the notebook), the helix's curvature
and torsion recovered by the first PPA feature, a third curvature near 0 for a helix rotated into
4-D, and principal curve/surface/volume closer to the training data than PCA's."""

import json
import os

import pytest
from notebook_runner import execute_notebook
from notebook_runner import outputs as _outputs

# runs a notebook in a kernel
pytestmark = pytest.mark.slow


SMALL = "N_SAMPLES = 1500\nDEGREES = range(1, 16)\nNOISE = 0.1\nMAGIC_ROWS = 3000\nSEED = 0\n"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    out = tmp_path_factory.mktemp("notebook")
    return execute_notebook("ppa_geometry.ipynb", SMALL, out), out


def test_notebook_draws_frames_and_principal_surfaces(executed):
    nb, out = executed
    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    images = [o for o in _outputs(nb) if "image/png" in o.get("data", {})]
    assert len(images) >= 4  # helix with frames, curvature histograms, 2-D and 3-D grids
    assert os.listdir(out) == []  # it writes nothing


def test_notebook_geometry_matches_theory(executed):
    nb, _ = executed
    text = "".join(o.get("text", "") for o in _outputs(nb) if o.output_type == "stream")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("SUMMARY ")]
    summary = json.loads(line[len("SUMMARY ") :])
    assert abs(summary["kappa_relative_error"]) < 0.10  # helix, noise 0.1
    assert abs(summary["tau_relative_error"]) < 0.30
    assert abs(summary["chi1_4d_relative_error"]) < 0.05
    assert summary["chi3_over_chi1_4d"] < 0.25
    assert all(v <= 100 for v in summary["magic_relative"]["train"])
