"""Seeded fuzzing of the three file kinds read back: a model file, a member file and a member
store's manifest, each mutated a few hundred ways (flipped bytes, truncation, appended junk,
shuffled JSON, deep nesting). Every outcome is either a correct load (the loaded model
transforms exactly as the intact one) or the kind's documented error (ModelFileError with a
documented reason; MemberStoreError), each read within 10 s and 400 MB (tracemalloc's peak)."""

import collections
import os
import random
import shutil
import time
import tracemalloc

import numpy as np
import pytest
from mutations import mutate
from sklearn.linear_model import LinearRegression

from ppa_dask import PPA
from ppa_dask.store import ModelFileError, load_model, save_model
from ppa_dask.store.members import (
    MemberStore,
    MemberStoreError,
    read_member_file,
    write_member_file,
)

# hundreds of mutated model and member files
pytestmark = pytest.mark.slow


REASONS = {
    "missing",
    "not-a-model",
    "future-version",
    "tampered",
    "truncated",
    "unknown-class",
    "invalid",
    "old-format",
    "mismatch",
}
CASES = 300
SECONDS, MEGABYTES = 10.0, 400.0


def _measured(read):
    tracemalloc.start()
    start = time.perf_counter()
    try:
        try:
            value = read()
            outcome = "loaded"
        except ModelFileError as exc:
            assert exc.reason in REASONS, exc
            value, outcome = None, f"ModelFileError:{exc.reason}"
        except MemberStoreError:
            value, outcome = None, "MemberStoreError"
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    seconds = time.perf_counter() - start
    assert seconds < SECONDS and peak < MEGABYTES, (outcome, seconds, peak)
    return outcome, value


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(0).normal(size=(200, 3))


def test_mutated_model_files_load_correctly_or_raise_model_file_error(tmp_path, data):
    model = PPA(degree=range(1, 4), random_state=0).fit(data)
    intact = save_model(model, tmp_path / "intact.zarr")
    expected = model.transform(data)
    files = sorted(
        os.path.relpath(os.path.join(r, f), intact) for r, _, fs in os.walk(intact) for f in fs
    )
    rng, counts = random.Random(27), collections.Counter()
    for i in range(CASES):
        target = str(tmp_path / f"m{i}.zarr")
        shutil.copytree(intact, target)
        # the record and array metadata most often: they are what a reader parses
        name = rng.choice(files + ["zarr.json"] * 8 + [f for f in files if f.endswith(".json")])
        with open(os.path.join(target, name), "rb") as f:
            kind, mutated = mutate(rng, f.read())
        with open(os.path.join(target, name), "wb") as f:
            f.write(mutated)
        outcome, loaded = _measured(lambda t=target: load_model(t))
        if loaded is not None:
            assert np.array_equal(loaded.transform(data), expected), (name, kind)
        counts[outcome] += 1
        shutil.rmtree(target)
    print(f"\nmodel files, {CASES} mutations: {dict(counts)}")
    assert counts["loaded"] < CASES  # (the mutations do damage)


def test_mutated_member_files_load_correctly_or_raise_model_file_error(tmp_path, data):
    import zipfile

    y = data @ [1.0, 2.0, 3.0]
    member = LinearRegression().fit(data, y)
    intact = tmp_path / "member.npz"
    write_member_file(intact, member, 0, {"features": [0, 1, 2]})
    raw = intact.read_bytes()
    with zipfile.ZipFile(intact) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}
    rng, counts = random.Random(2027), collections.Counter()
    for i in range(CASES):
        target = tmp_path / f"m{i}.npz"
        if rng.random() < 0.5:  # the archive's bytes
            kind, mutated = mutate(rng, raw)
            target.write_bytes(mutated)
        else:  # one entry's content, archived again (its CRC right)
            name = rng.choice([*entries, "record.json", "record.json"])
            kind, mutated = mutate(rng, entries[name])
            with zipfile.ZipFile(target, "w") as archive:
                for n, v in entries.items():
                    archive.writestr(n, mutated if n == name else v)
        outcome, loaded = _measured(
            lambda t=target: read_member_file(t, 0, {"features": [0, 1, 2]})
        )
        if loaded is not None:
            assert np.array_equal(loaded.predict(data), member.predict(data)), kind
        counts[outcome] += 1
        target.unlink()
    print(f"\nmember files, {CASES} mutations: {dict(counts)}")
    assert counts["loaded"] < CASES


def test_mutated_manifests_open_the_same_store_or_raise_member_store_error(tmp_path):
    identity = {"fit": "fuzz", "params": {"n_estimators": 4, "features": [0, 1, 2]}}
    folder = tmp_path / "store"
    MemberStore(folder, identity)
    intact = (folder / "manifest.json").read_bytes()
    rng, counts = random.Random(72), collections.Counter()
    for _ in range(CASES):
        kind, mutated = mutate(rng, intact)
        (folder / "manifest.json").write_bytes(mutated)
        outcome, store = _measured(lambda: MemberStore(folder, identity))
        if store is not None:
            assert store.identity == identity
        counts[outcome] += 1
    print(f"\nmanifests, {CASES} mutations: {dict(counts)}")
    assert counts["loaded"] < CASES
