"""No debris: a failed write removes its temporary, a later write removes the temporaries of
a killed writer that it can prove are stale (writer file: this host, the same target, a dead
process), and leaves everything else alone (no writer file, a live writer, another host)."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import zarr

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.store.results import WRITER_FILE, stale_temporaries


def _temporaries(folder, target):
    return sorted(n for n in os.listdir(folder) if n.startswith(f".{target}.tmp-"))


def _table(path, X, rows=100):
    z = zarr.create_array(store=str(path), shape=X.shape, chunks=(rows, X.shape[1]), dtype="f8")
    z[...] = X
    return str(path)


@pytest.mark.parametrize(
    "where", [["--scheduler", "threads"], ["--workers", "2"]], ids=["threads", "processes"]
)
@pytest.mark.cluster
def test_failed_transform_leaves_no_temporary(tmp_path, capsys, where):
    # (before the fix both left a .out.zarr.tmp-* folder beside the output)
    X = np.random.default_rng(0).normal(size=(3000, 3))
    model = str(tmp_path / "m.zarr")
    store.save_model(PPA(degree=2).fit(X), model)
    X[2900, 1] = np.nan  # in the last of 30 chunks: the others are being written meanwhile
    data = _table(tmp_path / "nan.zarr", X)
    code = main(["transform", model, data, str(tmp_path / "out.zarr"), *where])
    assert code == 2 and "NaN" in capsys.readouterr().err
    assert _temporaries(tmp_path, "out.zarr") == [] and not os.path.exists(tmp_path / "out.zarr")


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    import dask, dask.array as da, numpy as np
    from ppa_dask.store import write_array
    dask.config.set(scheduler="threads")
    # meta given: map_blocks must not call the sleeper to infer it
    slow = da.ones((4, 2), chunks=(2, 2)).map_blocks(
        lambda b: time.sleep(600) or b, meta=np.empty((0, 0))
    )
    write_array(slow, sys.argv[1])
    """
)


def _kill_a_writer_mid_write(target):
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)])
    folder = os.path.dirname(target)
    name = os.path.basename(target)
    try:
        deadline = time.monotonic() + 120
        while not any(
            os.path.exists(os.path.join(folder, t, WRITER_FILE))
            for t in _temporaries(folder, name)
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "writer never started"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return _temporaries(folder, name)


@pytest.mark.slow
def test_killed_writers_temporary_is_removed_by_the_next_write(tmp_path, capsys):
    out = tmp_path / "out.zarr"
    killed = _kill_a_writer_mid_write(out)
    assert len(killed) == 1 and stale_temporaries(out) == [str(tmp_path / killed[0])]

    # what the next write may not prove stale: no writer file, a live writer, another host
    foreign = tmp_path / ".out.zarr.tmp-foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not ours")
    for name, record in (
        ("live", {"host": socket.gethostname(), "pid": os.getpid()}),
        ("elsewhere", {"host": socket.gethostname() + "-other", "pid": 2**22 + 12345}),
    ):
        folder = tmp_path / f".out.zarr.tmp-{name}"
        folder.mkdir()
        (folder / WRITER_FILE).write_text(
            json.dumps({"writer": "ppa-dask", "target": "out.zarr", **record})
        )

    X = np.random.default_rng(1).normal(size=(300, 3))
    model = str(tmp_path / "m.zarr")
    store.save_model(PPA(degree=2).fit(X), model)
    data = _table(tmp_path / "d.zarr", X)
    assert main(["transform", model, data, str(out), "--scheduler", "threads"]) == 0
    capsys.readouterr()
    assert store.open_array(out).shape[0] == 300
    assert _temporaries(tmp_path, "out.zarr") == sorted(
        [".out.zarr.tmp-foreign", ".out.zarr.tmp-live", ".out.zarr.tmp-elsewhere"]
    )
    assert (foreign / "keep.txt").read_text() == "not ours"


def test_a_performance_report_is_written_whole_and_replaces_only_a_report(tmp_path):
    # issue 46: the report is written like every output: a temporary sibling renamed into
    # place, closed with ppa-dask's record; only a file ending with that record is replaced
    from ppa_dask.store.sinks import report_file

    report = tmp_path / "r.html"
    with report_file(report) as tmp:
        assert not report.exists() and os.path.dirname(tmp) == str(tmp_path)
        with open(tmp, "w") as f:
            f.write("<html>first</html>")
    assert report.read_text().startswith("<html>first</html>")
    with pytest.raises(FileExistsError, match="already exists"):
        with report_file(report):
            pytest.fail("no write may start over an existing report without overwrite")
    with report_file(report, overwrite=True) as tmp:
        with open(tmp, "w") as f:
            f.write("<html>second</html>")
    assert report.read_text().startswith("<html>second</html>")
    # a failed write leaves the old report and no temporary
    with pytest.raises(RuntimeError):
        with report_file(report, overwrite=True) as tmp:
            with open(tmp, "w") as f:
                f.write("<html>half")
            raise RuntimeError("the fit failed")
    assert report.read_text().startswith("<html>second</html>")
    assert os.listdir(tmp_path) == ["r.html"]
    # the user's file, a copy of a report without its last line, and a link to a report are
    # none of ppa-dask's: never replaced, even with overwrite
    lines = report.read_text().splitlines()
    (tmp_path / "mine.html").write_text("\n".join(lines[:-1]) + "\n")
    os.symlink(report, tmp_path / "link.html")
    for name in ("mine.html", "link.html"):
        with pytest.raises(FileExistsError, match="not a performance report written by"):
            with report_file(tmp_path / name, overwrite=True):
                pytest.fail("replaced a file ppa-dask did not write")
    assert (tmp_path / "mine.html").read_text().startswith("<html>second</html>")
