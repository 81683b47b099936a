"""Refusing a hostile file costs little: each bomb of issue 27 (a model file's metadata claiming
1.5e9 values, a zstd chunk unpacking to 2 GB, a billion chunks of one value, a member file's
record deflated from a GiB of spaces, a .npy header claiming 4e8 values, records nested 900 and
3000 deep, a range of 1e15 degrees, a member store's manifest that is not an object) is refused
with the file kind's one documented error, read in a child process whose time and peak memory
(``ru_maxrss`` above its peak after reading the intact file once) are measured.

The bounds are generous for a shared, noisy machine (10 s, 400 MB) but far below what the same
files cost before the checks (86 s at 12 GB, 4.2 GB, more than 90 s, 5.4 GB and 45 s, 3.3 GB).
The child's address space is capped at 3 GB above its start, so a reader without bounds fails
the test with a MemoryError instead of taking the machine.
"""

import os
import shutil

import hostile
import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from ppa_dask import PPA
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import PipelineError, load_pipeline
from ppa_dask.store import ModelFileError, load_model, save_model
from ppa_dask.store.members import MemberStore, MemberStoreError, write_member_file
from ppa_dask.utils.files import MAX_JSON_BYTES

# hostile files read in a child process each
pytestmark = pytest.mark.slow


SECONDS, MEGABYTES = 10.0, 400.0


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    """An intact model file, member file and member store, written once for the module."""
    root = tmp_path_factory.mktemp("intact")
    X = np.random.default_rng(0).normal(size=(200, 3))
    model = save_model(PPA(degree=range(1, 4), random_state=0).fit(X), root / "model.zarr")
    member = root / "member_00000.npz"
    write_member_file(
        member, LinearRegression().fit(X, X @ [1.0, 2.0, 3.0]), 0, {"features": [0, 1, 2]}
    )
    store = root / "store"
    MemberStore(store, {"fit": "hostile"})
    return {"model": model, "member": str(member), "store": str(store), "X": X}


def _copy(intact, kind, tmp_path):
    source = intact[kind]
    target = tmp_path / os.path.basename(source)
    if os.path.isdir(source):
        shutil.copytree(source, target)
    else:
        shutil.copy(source, target)
    return str(target)


MODEL_BOMBS = [
    # (id, builder, op, outcome, part of the message)
    (
        "metadata-shape-1.5e9",
        hostile.metadata_shape_bomb,
        "model_info",
        "ModelFileError:tampered",
        r"array 'coefficients_' has shape \[1500000000\] in its zarr.json, its record says",
    ),
    (
        "chunk-shape-1-of-1e9",
        hostile.chunk_shape_bomb,
        "load_model",
        "ModelFileError:tampered",
        r"array 'coefficients_' has shape \[1000000000\]",
    ),
    (
        "chunk-grid-not-ours",
        lambda p: hostile.edit_array_metadata(
            p,
            "coefficients_",
            lambda m: m["chunk_grid"]["configuration"].update(chunk_shape=[1, 1, 1]),
        ),
        "load_model",
        "ModelFileError:tampered",
        r"has the chunk grid .*one chunk of its shape",
    ),
    (
        "zstd-bomb-2GB-in-61KB",
        hostile.zstd_bomb,
        "load_model",
        "ModelFileError:tampered",
        r"chunk c/0/0/0 of array 'coefficients_' is \d+ bytes, more than its \d+ bytes",
    ),
    (
        "zstd-bomb-64MB-in-2KB",
        lambda p: hostile.zstd_bomb(p, unpacked=64 * 2**20),
        "load_model",
        "ModelFileError:truncated",
        r"array 'coefficients_' cannot be read: its chunk c/0/0/0 does not decompress into",
    ),
    (
        "nested-900-resealed",
        lambda p: hostile.nested_record(p, 900),
        "load_model",
        "ModelFileError:not-a-model",
        r"zarr.json cannot be read \(.*nested more than 100 lists/objects deep\)",
    ),
    (
        "nested-3000-unsealed",
        lambda p: hostile.nested_record(p, 3000, reseal=False),
        "model_info",
        "ModelFileError:not-a-model",
        r"nested more than 100 lists/objects deep",
    ),
    (
        "range-of-1e15-degrees",
        hostile.range_record,
        "load_model",
        "ModelFileError:invalid",
        r"range\(1, 1000000000000000\) holds 999999999999999 values",
    ),
    (
        "range-to-float-1e15",
        lambda p: hostile.range_record(p, 1e15),
        "load_model",
        "ModelFileError:invalid",
        r"a range holds 1 to 3 ints",
    ),
    (
        "range-of-1e5-degrees",
        lambda p: hostile.range_record(p, 10**5),
        "load_model",
        "ModelFileError:invalid",
        r"more than 1000 candidate degrees",
    ),
]

MEMBER_BOMBS = [
    (
        "deflated-record-1GiB-of-spaces",
        hostile.deflate_bombed_record,
        "member",
        "ModelFileError:tampered",
        r"its record.json unpacks to 1073\d+ bytes, more than the 16777216",
    ),
    (
        "npy-header-4e8-float64",
        hostile.npy_header_bomb,
        "member",
        "ModelFileError:tampered",
        r"array 'coef_' \(coef_.npy\) has shape \[400000000\] and dtype <f8 in its header",
    ),
]

MANIFEST_BOMBS = [
    (
        "manifest-not-json",
        lambda d: hostile.write_manifest(d, "{not json"),
        "manifest",
        "MemberStoreError",
        r"its manifest .*manifest.json' cannot be read \(not valid JSON",
    ),
    (
        "manifest-a-list",
        lambda d: hostile.write_manifest(d, "[1, 2]"),
        "manifest",
        "MemberStoreError",
        r"holds a JSON list \(\[1, 2\]\), not the JSON object of a fit",
    ),
    (
        "manifest-nested-3000",
        lambda d: hostile.write_manifest(d, "[" * 3000 + "]" * 3000),
        "manifest",
        "MemberStoreError",
        r"nested more than 100 lists/objects deep",
    ),
    (
        "manifest-20MB",
        lambda d: hostile.write_manifest(d, '{"fit": "' + "x" * (20 * 2**20) + '"}'),
        "manifest",
        "MemberStoreError",
        r"larger than the 16777216 bytes",
    ),
]

KINDS = {"model_info": "model", "load_model": "model", "member": "member", "manifest": "store"}


@pytest.mark.parametrize(
    "build, op, outcome, message",
    [pytest.param(*row[1:], id=row[0]) for row in MODEL_BOMBS + MEMBER_BOMBS + MANIFEST_BOMBS],
)
def test_each_bomb_is_refused_with_the_documented_error_in_little_time_and_memory(
    intact, tmp_path, build, op, outcome, message
):
    import re

    kind = KINDS[op]
    target = _copy(intact, kind, tmp_path)
    build(target)
    report = hostile.read_in_child(op, target, intact[kind])
    print(f"\n{op} {os.path.basename(target)}: {report}")
    assert report["outcome"] == outcome, report
    assert re.search(message, report["message"]), report["message"]
    assert target in report["message"] or repr(target) in report["message"]
    assert report["seconds"] < SECONDS, report
    assert report["extra_mb"] < MEGABYTES, report


def test_the_intact_files_load_in_the_child(intact, tmp_path):
    """The harness itself: the files as written load (so the refusals above are the bombs')."""
    for op in ("load_model", "member", "manifest"):
        kind = KINDS[op]
        report = hostile.read_in_child(op, intact[kind], intact[kind])
        assert report["outcome"] == "loaded", report


def test_a_forged_range_stays_small_until_the_estimator_refuses_it(intact, tmp_path):
    """range(1, 1e15) in a file is refused by the decoder; an estimator given one directly
    refuses it before any list of candidates is built (this was a MemoryError)."""
    with pytest.raises(ValueError, match="more than 1000 candidate degrees"):
        PPA(degree=range(1, 10**15)).fit(intact["X"])
    with pytest.raises(ValueError, match="more than 1000 candidate degrees"):
        PPA(degree=iter(range(1, 10**15))).fit(intact["X"])
    assert PPA(degree=range(1, 4)).fit(intact["X"]).degrees_.max() <= 3


# -------------------------------------------------------------------------------------------
# the command line: one line naming the file and the array
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage, names",
    [
        (
            lambda p: _truncate(os.path.join(p, "coefficients_", "zarr.json")),
            "coefficients_/zarr.json",
        ),
        (lambda p: _truncate(os.path.join(p, "zarr.json")), "zarr.json"),
        (lambda p: hostile.nested_record(p, 900), "zarr.json"),
        (hostile.metadata_shape_bomb, "array 'coefficients_'"),
    ],
    ids=["array-zarr.json-truncated", "group-zarr.json-truncated", "nested-900", "shape"],
)
def test_info_of_a_damaged_model_file_is_one_line_naming_file_and_array(
    intact, tmp_path, capsys, damage, names
):
    target = _copy(intact, "model", tmp_path)
    damage(target)
    assert main(["info", target]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("ppa-dask: error: ") and target in err[0] and names in err[0], err
    assert "Unterminated string" not in err[0] or "zarr.json" in err[0]


def _truncate(path):
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text[: len(text) // 2])


def test_a_damaged_array_metadata_is_a_model_file_error_naming_it(intact, tmp_path):
    target = _copy(intact, "model", tmp_path)
    _truncate(os.path.join(target, "coefficients_", "zarr.json"))
    with pytest.raises(ModelFileError, match=r"coefficients_/zarr.json of array 'coefficients_'"):
        load_model(target)


def test_a_manifest_that_matches_still_opens_and_one_of_another_fit_is_refused(intact, tmp_path):
    store = _copy(intact, "store", tmp_path)
    MemberStore(store, {"fit": "hostile"})  # the same fit: opens
    with pytest.raises(MemberStoreError, match="holds members of a different fit"):
        MemberStore(store, {"fit": "another"})
    assert MAX_JSON_BYTES == 16 * 2**20


# -------------------------------------------------------------------------------------------
# pipeline files, cluster files and run records
# -------------------------------------------------------------------------------------------


def _pipeline(tmp_path, body):
    path = tmp_path / "p.yaml"
    path.write_text("pipeline: 1\nname: hostile\noutput: run\n" + body)
    return path


@pytest.mark.parametrize(
    "body, message",
    [
        ("notes: '" + "x" * (2 * 2**20) + "'\n", "larger than the 1048576 characters"),
        # a billion values in nine lines of anchors (each alias is a list of ten of the last)
        (
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9)
            ),
            "holds more than 100000 values once its aliases are expanded",
        ),
        ("deep: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deep to be a configuration"),
    ],
    ids=["2MB", "alias-bomb", "nested-5000"],
)
def test_a_hostile_pipeline_file_is_refused_naming_it(tmp_path, capsys, body, message):
    import time

    path = _pipeline(tmp_path, body)
    start = time.perf_counter()
    with pytest.raises(PipelineError, match=message) as info:
        load_pipeline(path)
    assert str(path) in str(info.value)
    assert time.perf_counter() - start < SECONDS
    assert main(["run", str(path), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_hostile_cluster_file_is_refused_naming_it(tmp_path):
    from ppa_dask.cluster import ClusterConfigError, read_cluster_config

    path = tmp_path / "cluster.yaml"
    path.write_text("kind: local\nworkers: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ClusterConfigError, match="nested too deep") as info:
        read_cluster_config(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "text, why",
    [
        ("[" * 3000 + "]" * 3000, "nested more than 100 lists/objects deep"),
        ("[1, 2]", ""),
        ("{not json", "not valid JSON"),
    ],
    ids=["nested-3000", "a-list", "not-json"],
)
def test_a_damaged_run_record_is_one_line_naming_it(tmp_path, capsys, text, why):
    path = _pipeline(tmp_path, "data: {source: generated, n_samples: 1000, n_features: 5}\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".ppa-dask-run.json").write_text(text)
    assert main(["run", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".ppa-dask-run.json is not a ppa-dask run record" in err[0], err
    assert why in err[0]
    assert (out / ".ppa-dask-run.json").read_text() == text  # never replaced
