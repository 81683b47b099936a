"""Removing a partial write: a folder still being written into by the tasks of a failed
parallel write is removed once they are done, within a bound."""

import os
import shutil
import threading
import time

from ppa_dask.utils import files


def test_a_folder_whose_last_part_lands_after_the_removal_is_removed_again(tmp_path, monkeypatch):
    # one task of a parallel write failed (a full disk) and Dask raised at once; another task's
    # part lands while the folder is being removed, so the removal's last rmdir finds it not
    # empty and the folder stays (what a single rmtree with ignore_errors left in CI)
    folder = tmp_path / ".out.parquet.tmp-1"
    folder.mkdir()
    (folder / "part.0.parquet").write_bytes(b"x")
    real, calls = shutil.rmtree, []

    def rmtree_racing_a_writer(path, ignore_errors=False):
        real(path, ignore_errors=ignore_errors)
        if not calls:  # the state the race leaves: the folder, holding the late part
            os.makedirs(path)
            with open(os.path.join(path, "part.7.parquet"), "wb") as f:
                f.write(b"late")
        calls.append(path)

    monkeypatch.setattr(files.shutil, "rmtree", rmtree_racing_a_writer)
    files.remove_path(str(folder))
    assert not folder.exists() and len(calls) == 2


def test_a_folder_written_into_for_a_while_is_gone_once_its_writer_stops(tmp_path):
    # a real writer thread adding parts every 10 ms for about 0.3 s, stopping (as a task's
    # writer does) when the folder is gone
    folder = tmp_path / "parts"
    folder.mkdir()
    started = threading.Event()

    def writer():
        for i in range(30):
            try:
                with open(folder / f"part.{i}", "wb") as f:
                    f.write(b"x" * 1000)
            except FileNotFoundError:
                return
            started.set()
            time.sleep(0.01)

    thread = threading.Thread(target=writer)
    thread.start()
    started.wait(5)
    files.remove_path(str(folder))
    thread.join(5)
    files.remove_path(str(folder))  # nothing left to do: returns at once
    assert not folder.exists()


def test_the_wait_is_bounded_when_the_folder_cannot_be_removed(tmp_path, monkeypatch):
    folder = tmp_path / "stuck"
    folder.mkdir()
    monkeypatch.setattr(files.shutil, "rmtree", lambda path, ignore_errors=False: None)
    t0 = time.monotonic()
    files.remove_path(str(folder), settle=0.3)
    assert 0.3 <= time.monotonic() - t0 < 3 and folder.exists()
