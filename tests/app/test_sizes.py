"""Sizes and counts are checked before anything is allocated or started (issue 46): a degree
range of 10^11 candidates, 10^9 folds, 10,000 local workers and a memory limit of one byte
were a MemoryError traceback, a 7.45 GiB allocation, memory climbing until the process was
killed and a cluster that never ran a task. Each is one line and exit 2, in a child process
under an address-space cap and a wall-time bound."""

import resource
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from ppa_dask.app import placement

pytestmark = pytest.mark.slow  # child processes

#: The child's address space (bytes) and wall time (s): a refusal needs neither much.
CAP_BYTES = 6 * 2**30
BOUND_S = 30


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("sizes") / "x.zarr"
    z = zarr.create_array(str(path), shape=(4000, 5), chunks=(1000, 5), dtype="f8")
    z[...] = np.random.default_rng(0).normal(size=(4000, 5))
    return path


@pytest.mark.parametrize(
    "options, expected",
    [
        (
            ["--degree", "1-100000000000", "--scheduler", "threads"],
            "argument --degree: '1-100000000000' names 100,000,000,000 candidate degrees; at "
            "most 1000 are cross-validated",
        ),
        (
            ["--cv", "1000000000", "--scheduler", "threads"],
            "X has 4000 sample(s); 1000000000-fold cross-validation needs at least as many "
            "samples as folds",
        ),
        (["--workers", "10000"], "argument --workers/-w: 10,000 local worker processes need"),
        (
            ["--workers", "1", "--memory-limit", "1B"],
            "argument --memory-limit: expected at least 256.00 MiB per worker",
        ),
    ],
)
def test_a_size_no_machine_can_take_is_refused_before_any_work(data, tmp_path, options, expected):
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from ppa_dask.app.cli import main; sys.exit(main())"]
        + ["fit", str(data), str(tmp_path / "m.zarr"), *options],
        capture_output=True,
        text=True,
        timeout=BOUND_S * 2,
        preexec_fn=_capped,
    )
    seconds = time.perf_counter() - start
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, (done.returncode, err[-5:])
    assert err[0].startswith("ppa-dask: error: ") and expected in err[0], err
    assert seconds < BOUND_S, seconds
    assert not (tmp_path / "m.zarr").exists()


def test_the_worker_count_is_bounded_by_the_memory_available():
    placement.check_local_workers(96, available=24 * 2**30)
    with pytest.raises(ValueError, match="at most 96 fit"):
        placement.check_local_workers(97, available=24 * 2**30)
    assert placement.check_memory_limit("0") == "0"  # distributed's "no limit"
    with pytest.raises(ValueError, match="at least 256.00 MiB"):
        placement.check_memory_limit("255MiB")
