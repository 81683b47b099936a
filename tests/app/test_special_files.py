"""Every read is of a regular file or a folder (issue 46): a FIFO, a character device (a link to
/dev/zero) or a socket where the command line expects an input, a pipeline file, a cluster
file, a model file's chunk, an ensemble member or a run folder's own file is refused by name,
exit 2 and one line, before anything opens it. A FIFO opened for reading waits for a writer for
ever, and /dev/zero never ends: each case runs the command in a child process bounded in wall
time, so a hang fails the test instead of holding the suite."""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from ppa_dask import PPA, store
from ppa_dask.app.pipeline.folder import MARKER, RUN_LOCK, RUN_RECORD
from ppa_dask.store.encoding import ModelFileError
from ppa_dask.utils.files import NotARegularFile, open_regular, read_json_file

pytestmark = pytest.mark.slow  # child processes

#: Wall time a refusal may take in the child (the interpreter and the package's imports
#: included: about 4 s on a busy 2-core machine); a read that blocks would take for ever.
BOUND_S = 30

THREADS = ["--scheduler", "threads"]
PIPELINE = "pipeline: 1\nname: p\ndata: {source: generated, n_samples: 300, n_features: 4}\n"


def _command(*argv, cwd):
    """Run ``ppa-dask ARGV`` in a child; returns (exit status, stderr lines, seconds)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from ppa_dask.app.cli import main; sys.exit(main())"]
        + [str(a) for a in argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BOUND_S * 2,  # the hang this guards against: killed, and the test fails
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    return done.returncode, done.stderr.strip().splitlines(), time.perf_counter() - start


def _refused(cwd, expected, *argv):
    code, err, seconds = _command(*argv, cwd=cwd)
    assert code == 2 and len(err) == 1, (code, err)
    assert err[0].startswith("ppa-dask: error: ") and expected in err[0], err
    assert seconds < BOUND_S, seconds
    return err[0]


def _special(path, kind):
    """Make a FIFO, a link to /dev/zero or a listening Unix socket at ``path``."""
    if kind == "fifo":
        os.mkfifo(path)
        return None
    if kind == "device":
        os.symlink("/dev/zero", path)
        return None
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen(1)
    return s


WHAT = {
    "fifo": "is a FIFO (named pipe)",
    "device": "is a character device",
    "socket": "is a socket",
}


@pytest.mark.parametrize(
    "kind, name",
    [
        ("fifo", "in.csv"),
        ("fifo", "in.tif"),
        ("fifo", "in.nc"),
        ("device", "in.csv"),
        ("device", "in.tif"),
        ("socket", "in.csv"),
    ],
)
def test_an_input_that_is_not_a_regular_file_is_refused_by_name(tmp_path, kind, name):
    held = _special(tmp_path / name, kind)
    try:
        extra = ["--feature-dim", "band"] if name.endswith(".nc") else []
        _refused(
            tmp_path,
            f"INPUT '{name}' {WHAT[kind]}, not a regular file or a folder",
            "fit",
            name,
            "m.zarr",
            *extra,
            *THREADS,
        )
    finally:
        if held is not None:
            held.close()
    assert not (tmp_path / "m.zarr").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_pipeline_or_cluster_file_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    _special(tmp_path / "p.yaml", kind)
    said = f"'p.yaml' {WHAT[kind]}, not a regular file"
    _refused(tmp_path, said, "run", "p.yaml", *THREADS)
    _refused(tmp_path, said, "run", "p.yaml", "--check")
    (tmp_path / "d.zarr").mkdir()
    _refused(tmp_path, said, "fit", "d.zarr", "m.zarr", "--cluster", "p.yaml")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_model_file_whose_chunk_is_not_a_regular_file_is_refused(tmp_path, kind):
    X = np.random.default_rng(0).normal(size=(300, 4))
    model = tmp_path / "m.zarr"
    store.save_model(PPA(degree=2, random_state=0).fit(X), model)
    chunks = sorted(p for p in model.rglob("*") if p.is_file() and "/c/" in str(p))
    assert chunks
    chunks[0].unlink()
    _special(chunks[0], kind)
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(100, 4), dtype="f8")
    z[...] = X
    for argv in (["info", "m.zarr"], ["transform", "m.zarr", "x.zarr", "o.zarr", *THREADS]):
        _refused(tmp_path, f"is {WHAT[kind].removeprefix('is ')}, not a regular file", *argv)
    assert not (tmp_path / "o.zarr").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_input_zarr_chunk_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    X = np.random.default_rng(0).normal(size=(300, 4))
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(100, 4), dtype="f8")
    z[...] = X
    chunk = tmp_path / "x.zarr" / "c" / "1" / "0"
    chunk.unlink()
    _special(chunk, kind)
    said = f"Zarr chunk file '{chunk}' {WHAT[kind]}, not a regular file"
    _refused(tmp_path, said, "fit", "x.zarr", "m.zarr", "--degree", "2", *THREADS)


@pytest.mark.parametrize(
    "name, expected",
    [
        (RUN_LOCK, f"{RUN_LOCK} is a FIFO (named pipe), not a regular file"),
        (RUN_RECORD, f"{RUN_RECORD} is a FIFO (named pipe), not a regular file"),
        ("pipeline.log", "pipeline.log is a FIFO (named pipe), not a regular file"),
    ],
)
def test_a_run_folder_file_that_is_a_fifo_is_refused(tmp_path, name, expected):
    (tmp_path / "p.yaml").write_text(PIPELINE)
    code, err, _ = _command("run", "p.yaml", "-o", "run", *THREADS, cwd=tmp_path)
    assert code == 0, err
    (tmp_path / "run" / name).unlink(missing_ok=True)
    os.mkfifo(tmp_path / "run" / name)
    _refused(tmp_path, expected, "run", "p.yaml", "-o", "run", "--force", *THREADS)


def test_a_stage_marker_that_is_a_fifo_only_makes_its_stage_run_again(tmp_path):
    (tmp_path / "p.yaml").write_text(PIPELINE)
    code, err, _ = _command("run", "p.yaml", "-o", "run", *THREADS, cwd=tmp_path)
    assert code == 0, err
    marker = tmp_path / "run" / "03-fit" / MARKER
    marker.unlink()
    os.mkfifo(marker)
    start = time.perf_counter()
    code, err, _ = _command("run", "p.yaml", "-o", "run", *THREADS, cwd=tmp_path)
    assert code == 0 and time.perf_counter() - start < BOUND_S * 2, err
    assert json.loads(marker.read_text())["stage"] == "fit"  # a regular file again
    assert "stage fit: started" in (tmp_path / "run" / "pipeline.log").read_text()


def test_the_readers_refuse_without_opening(tmp_path):
    # in this process: the calls return at once (a blocking open would hang the test here)
    os.mkfifo(tmp_path / "f.json")
    with pytest.raises(ValueError, match="a FIFO"):
        read_json_file(tmp_path / "f.json")
    with pytest.raises(NotARegularFile, match="is a character device"):
        open_regular("/dev/zero")
    os.symlink("/dev/zero", tmp_path / "m.npz")
    with pytest.raises(ModelFileError, match="is a character device, not a member file"):
        store.members.read_member_file(str(tmp_path / "m.npz"), 0, {})
