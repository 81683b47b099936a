"""The cube notebook runs end to end (small cube) and shows what it claims: components as
images, an exact round trip with the clouds kept as NaN, PPA at or below PCA, three components
that carry the three latent fields, a reloaded model giving identical components."""

import json
import os

import pytest
from notebook_runner import execute_notebook
from notebook_runner import outputs as _outputs

# runs a notebook in a kernel
pytestmark = pytest.mark.slow


SMALL = "N_BANDS = 12\nNY, NX = 40, 36\nNOISE = 0.002\nSEED = 1\nOUTPUT = {output!r}\n"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    out = tmp_path_factory.mktemp("notebook")
    return execute_notebook("cube_xarray.ipynb", SMALL.format(output=str(out)), out), out


def test_notebook_shows_the_components_as_images(executed):
    nb, out = executed
    images = [o for o in _outputs(nb) if "image/png" in o.get("data", {})]
    assert len(images) >= 4  # the data, the components, the error curves, a reconstruction
    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    # it worked in its own folder only
    assert sorted(os.listdir(out)) == ["cube.zarr", "ppa.zarr"]


def test_notebook_results_hold(executed):
    nb, _ = executed
    text = "".join(o.get("text", "") for o in _outputs(nb) if o.output_type == "stream")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("SUMMARY ")]
    summary = json.loads(line[len("SUMMARY ") :])
    assert summary["lazy_components"] and summary["reloaded_identical"]
    assert summary["mask_kept"] and summary["round_trip_error"] < 1e-5
    for ppa, pca in zip(summary["ppa_errors"], summary["pca_errors"]):
        assert ppa <= pca * (1 + 1e-9)
    # the three leading components determine each of the three latent fields
    assert min(summary["latent_r2"].values()) > 0.8
    assert 0 < summary["n_fitted"] < 40 * 36
