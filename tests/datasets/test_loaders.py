"""The bundled real data sets: integrity, the paper's shapes, and agreement with the raw files.

The loaders read only package data (ppa_dask/datasets/data/). Each bundled file is a compressed,
byte-for-byte copy of a raw file whose SHA-256 PROVENANCE.md records (taken from the raw file when
it was bundled), so the raw files are rebuilt here with the standard library (lzma/gzip, checked
against those checksums) and each loaded array is compared with an independent reading of them
(numpy.loadtxt / csv, not the loaders' parsers). Nothing outside the repository is read; the
literal spot values (copied from the raw files) pin the parsing a second way.
"""

import csv
import gzip
import hashlib
import lzma
import re
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from ppa_dask import datasets as ds
from ppa_dask.datasets import loaders as _loaders
from ppa_dask.utils.warnings import NoDataWarning

DATA = resources.files("ppa_dask.datasets") / "data"
COVID_CSV = "dpc-covid19-ita-andamento-nazionale-2020-02-24_2020-04-30.csv"

# The paper's Table 1 (Laparra et al., 2014): n samples x d dimensions.
TABLE_1 = {
    "magic_gamma": (19020, 10),
    "japanese_vowels": (9961, 12),
    "page_blocks": (5473, 10),
    "sat": (6435, 36),
    "segmentation": (2310, 16),
    "vehicles": (846, 18),
}


@pytest.fixture(scope="module")
def paper():
    return {name: ds.load_paper_dataset(name) for name in ds.PAPER_DATASETS}


def _counts(y):
    values, counts = np.unique(y, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist()))


# ------------------------------------------------------ integrity of the bundle ---


def _provenance_table():
    text = (DATA / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"[0-9a-f]{64}", cells[3]):
            rows[cells[0]] = {"original": cells[1], "bytes": int(cells[2]), "sha256": cells[3]}
    return rows


def _decompress(entry):
    blob = entry.read_bytes()
    return lzma.decompress(blob) if entry.name.endswith(".xz") else gzip.decompress(blob)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """The raw data collection rebuilt from the bundle: every file at its original path (as
    PROVENANCE.md names it), its bytes checked against the raw file's recorded SHA-256."""
    root = tmp_path_factory.mktemp("raw")
    for name, row in _provenance_table().items():
        data = _decompress(DATA / name)
        assert hashlib.sha256(data).hexdigest() == row["sha256"], name
        path = root / row["original"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


@pytest.fixture(scope="module")
def UCI(raw):
    return raw / "uci"


def test_every_bundled_file_is_listed_in_provenance_with_its_checksum():
    table = _provenance_table()
    bundled = sorted(e.name for e in DATA.iterdir() if e.is_file() and e.name != "PROVENANCE.md")
    assert sorted(table) == bundled
    for name in bundled:
        raw = _decompress(DATA / name)
        assert len(raw) == table[name]["bytes"], name
        assert hashlib.sha256(raw).hexdigest() == table[name]["sha256"], name


def test_loader_checksums_agree_with_provenance():
    table = _provenance_table()
    listed = {Path(row["original"]).name: row["sha256"] for row in table.values()}
    assert listed == _loaders._SHA256


def test_bundle_is_compressed_and_small():
    table = _provenance_table()
    bundled = sum(len((DATA / name).read_bytes()) for name in table)
    raw = sum(row["bytes"] for row in table.values())
    assert bundled < 3_000_000 and bundled < raw / 3


def test_corrupted_bundle_is_refused_with_a_clear_error(monkeypatch):
    raw = _decompress(DATA / "vehicle.dat.xz")
    monkeypatch.setattr(
        _loaders, "_compressed_bytes",
        lambda name: (name + ".xz", lzma.compress(raw.replace(b"van", b"car", 1))),
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"vehicle\.dat\.xz.*corrupted.*SHA-256"):
        ds.load_vehicles()
    monkeypatch.setattr(_loaders, "_compressed_bytes", lambda name: (name + ".xz", b"not xz"))
    with pytest.raises(ValueError, match=r"vehicle\.dat\.xz.*cannot be decompressed"):
        ds.load_vehicles()


@pytest.mark.slow
def test_loaders_read_only_the_bundled_files(tmp_path):
    # An audit hook records every file opened while all the loaders run (after the package is
    # imported); apart from Python modules imported on the way, each must be a bundled file.
    script = textwrap.dedent(
        """
        import sys
        from importlib import resources
        from ppa_dask import datasets as ds
        # what the package imports on first use (ppa_dask.utils.lazy), imported before the hook
        import sklearn.utils
        from ppa_dask.datasets import loaders
        opened = []
        def hook(event, args):
            if event == "open" and isinstance(args[0], str):
                opened.append(args[0])
        sys.addaudithook(hook)
        for name in ds.PAPER_DATASETS:
            ds.load_paper_dataset(name)
        ds.load_breast_cancer_wisconsin(); ds.load_abalone(); ds.load_cpu_act()
        ds.load_house_8l(); ds.load_covid_italy()
        data = str(resources.files("ppa_dask.datasets") / "data")
        print(data)
        for path in opened:
            if not path.endswith((".py", ".pyc", ".so")):
                print(path)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    data, *opened = out.stdout.split()
    bundled = {e.name for e in DATA.iterdir() if e.is_file() and e.name != "PROVENANCE.md"}
    assert {Path(p).parent for p in opened} == {Path(data)}, opened
    assert {Path(p).name for p in opened} == bundled


# ------------------------------------------------------- the paper's Table 1 ---


@pytest.mark.slow
def test_paper_datasets_have_table_1_shapes(paper):
    assert tuple(TABLE_1) == ds.PAPER_DATASETS
    assert ds.PAPER_SHAPES == TABLE_1
    for name, (X, y) in paper.items():
        assert X.shape == TABLE_1[name], name
        assert X.dtype == np.float64 and y.shape == (X.shape[0],), name
        assert np.isfinite(X).all(), name


def test_paper_datasets_have_the_documented_classes(paper):
    assert _counts(paper["magic_gamma"][1]) == {"g": 12332, "h": 6688}
    assert _counts(paper["japanese_vowels"][1]).keys() == set(range(1, 10))
    assert _counts(paper["page_blocks"][1]) == {1: 4913, 2: 329, 3: 28, 4: 88, 5: 115}
    assert _counts(paper["sat"][1]) == {1: 1533, 2: 703, 3: 1358, 4: 626, 5: 707, 7: 1508}
    assert _counts(paper["segmentation"][1]) == {
        c: 330 for c in ["BRICKFACE", "CEMENT", "FOLIAGE", "GRASS", "PATH", "SKY", "WINDOW"]
    }
    assert _counts(paper["vehicles"][1]) == {"bus": 218, "opel": 212, "saab": 217, "van": 199}


@pytest.mark.slow
def test_train_and_test_files_are_concatenated_in_order():
    for load, n_train, n_test in [
        (ds.load_sat, 4435, 2000),
        (ds.load_segmentation, 210, 2100),
        (ds.load_japanese_vowels, 4274, 5687),
    ]:
        full = load(return_X_y=False)
        train, test = load(subset="train"), load(subset="test")
        assert full.n_train == n_train and len(test[0]) == n_test
        np.testing.assert_array_equal(full.data, np.vstack([train[0], test[0]]))
        np.testing.assert_array_equal(full.target, np.concatenate([train[1], test[1]]))


def test_unknown_paper_dataset_and_subset_are_rejected():
    with pytest.raises(ValueError, match="unknown PPA paper data set 'iris'.*magic_gamma"):
        ds.load_paper_dataset("iris")
    with pytest.raises(ValueError, match="subset must be one of 'all', 'train', 'test'"):
        ds.load_sat(subset="validation")


# --------------------------------------------------------- Japanese Vowels ---


def test_japanese_vowels_speakers_follow_the_uci_block_order():
    b = ds.load_japanese_vowels(return_X_y=False)
    u, y = b.utterance, b.target
    assert u.max() + 1 == 640 and np.all(np.diff(u) >= 0)
    speaker = np.array([y[u == k][0] for k in range(640)])
    assert all(np.all(y[u == k] == speaker[k]) for k in range(640))  # one speaker per utterance
    np.testing.assert_array_equal(np.bincount(speaker[:270])[1:], [30] * 9)
    ae_test = [31, 35, 88, 44, 29, 24, 40, 50, 29]  # UCI documentation, speakers 1..9
    np.testing.assert_array_equal(np.bincount(speaker[270:])[1:], ae_test)
    lengths = np.bincount(u)
    assert lengths.min() >= 7 and lengths.max() <= 29  # UCI: 7-29 frames per utterance


def test_japanese_vowels_test_speaker_boundaries_are_where_the_voice_changes():
    # The test file's speakers are derived from documented block counts, not read from the
    # file.  Check them against the voices: 1-NN on utterance (mean, std) features trained on
    # ae.train must agree with the labels, and moving any speaker boundary in ae.test by 1-3
    # utterances must agree less.
    from sklearn.neighbors import KNeighborsClassifier

    b = ds.load_japanese_vowels(return_X_y=False)
    frames = [b.data[b.utterance == k] for k in range(640)]
    feats = np.array([np.r_[f.mean(axis=0), f.std(axis=0)] for f in frames])
    speaker = np.array([b.target[b.utterance == k][0] for k in range(640)])
    mu, sd = feats[:270].mean(axis=0), feats[:270].std(axis=0)
    pred = (
        KNeighborsClassifier(1)
        .fit((feats[:270] - mu) / sd, speaker[:270])
        .predict((feats[270:] - mu) / sd)
    )
    agreement = np.mean(pred == speaker[270:])
    assert agreement > 0.9
    counts = np.bincount(speaker[270:])[1:]
    for k in range(8):
        for shift in [-3, -2, -1, 1, 2, 3]:
            moved = counts.copy()
            moved[k] += shift
            moved[k + 1] -= shift
            assert np.mean(pred == np.repeat(np.arange(1, 10), moved)) < agreement, (k, shift)


def test_japanese_vowels_frames_match_the_raw_files(UCI):
    parts = []
    for f in ["ae.train", "ae.test"]:
        rows = np.loadtxt(UCI / f)
        parts.append(rows[~np.all(rows == 1.0, axis=1)])
    np.testing.assert_array_equal(ds.load_japanese_vowels()[0], np.vstack(parts))


def test_japanese_vowels_spot_values():
    X, _ = ds.load_japanese_vowels()
    assert X[0, 0] == 1.860936 and X[0, 11] == 0.088728  # first line of ae.train
    assert X[-1, 0] == 1.177449 and X[-1, 11] == 0.224688  # last frame of ae.test


# ------------------------------------------------------------ Segmentation ---


def test_segmentation_drops_the_three_degenerate_attributes():
    full = ds.load_segmentation(all_features=True, return_X_y=False)
    paper = ds.load_segmentation(return_X_y=False)
    assert full.data.shape == (2310, 19) and paper.data.shape == (2310, 16)
    keep = [j for j, n in enumerate(full.feature_names) if n not in ds.SEGMENTATION_DROPPED]
    assert len(keep) == 16 and paper.feature_names == [full.feature_names[j] for j in keep]
    np.testing.assert_array_equal(paper.data, full.data[:, keep])
    # the justification in the docstring: the dropped columns are constant or near-constant
    pixel_count = full.data[:, full.feature_names.index("REGION-PIXEL-COUNT")]
    assert np.all(pixel_count == 9)
    dropped = [full.feature_names.index(n) for n in ds.SEGMENTATION_DROPPED]
    assert max(len(np.unique(full.data[:, j])) for j in dropped) <= 4
    assert min(len(np.unique(paper.data[:, j])) for j in range(16)) > 200


def test_segmentation_matches_the_raw_files(UCI):
    X = np.vstack([np.loadtxt(UCI / f, delimiter=",", skiprows=5, usecols=range(1, 20))
                   for f in ["segmentation.data", "segmentation.test"]])  # fmt: skip
    y = np.concatenate([np.loadtxt(UCI / f, delimiter=",", skiprows=5, usecols=0, dtype=str)
                        for f in ["segmentation.data", "segmentation.test"]])  # fmt: skip
    names = (UCI / "segmentation.data").read_text().splitlines()[3].split(",")
    b = ds.load_segmentation(all_features=True, return_X_y=False)
    np.testing.assert_array_equal(b.data, X)
    np.testing.assert_array_equal(b.target, y)
    assert b.feature_names == names


# ---------------------------------------------- the other paper data sets ---


def test_magic_page_blocks_sat_vehicles_match_the_raw_files(paper, UCI):
    magic = UCI / "magic04.data"
    raw_x = np.loadtxt(magic, delimiter=",", usecols=range(10))
    raw_y = np.loadtxt(magic, delimiter=",", usecols=10, dtype=str)
    np.testing.assert_array_equal(paper["magic_gamma"][0], raw_x)
    np.testing.assert_array_equal(paper["magic_gamma"][1], raw_y)
    pb = np.loadtxt(UCI / "page-blocks.data")
    np.testing.assert_array_equal(paper["page_blocks"][0], pb[:, :10])
    np.testing.assert_array_equal(paper["page_blocks"][1], pb[:, 10])
    sat = np.vstack([np.loadtxt(UCI / f, delimiter="\t", skiprows=1)
                     for f in ["sat.trn.tsv", "sat.tst.tsv"]])  # fmt: skip
    np.testing.assert_array_equal(paper["sat"][0], sat[:, :36])
    np.testing.assert_array_equal(paper["sat"][1], sat[:, 36])
    veh = UCI / "vehicle.dat"
    np.testing.assert_array_equal(paper["vehicles"][0], np.loadtxt(veh, usecols=range(18)))
    np.testing.assert_array_equal(paper["vehicles"][1], np.loadtxt(veh, usecols=18, dtype=str))


def test_first_and_last_rows_spot_values(paper):
    X, y = paper["magic_gamma"]
    assert X[0, 0] == 28.7967 and X[0, 9] == 81.8828 and y[0] == "g"
    assert X[-1, 0] == 187.1814 and X[-1, 9] == 272.3174 and y[-1] == "h"
    X, y = paper["page_blocks"]
    np.testing.assert_array_equal(X[0], [5, 7, 35, 1.4, 0.4, 0.657, 2.33, 14, 23, 6])
    np.testing.assert_array_equal(X[-1], [8, 1, 8, 0.125, 1.0, 1.0, 8.0, 8, 8, 1])
    assert (y[0], y[-1]) == (1, 4)
    X, y = paper["sat"]
    assert X[0, 0] == 92 and X[0, 35] == 87 and y[0] == 3  # first data row of sat.trn
    assert X[4435, 0] == 80 and y[4435] == 3  # first data row of sat.tst
    assert X[-1, 0] == 60 and X[-1, 35] == 92 and y[-1] == 5
    X, y = paper["vehicles"]
    assert X[0, 0] == 95 and X[0, 17] == 197 and y[0] == "van"
    assert X[-1, 0] == 85 and X[-1, 17] == 190 and y[-1] == "van"
    X, y = paper["segmentation"]  # 16 columns: the first two are the region centroid
    assert X[0, 0] == 140 and X[0, 1] == 125 and y[0] == "BRICKFACE"
    assert X[-1, 0] == 124 and X[-1, -1] == -2.0293121 and y[-1] == "CEMENT"


# ------------------------------------------------------------ other data sets ---


def test_breast_cancer_drops_ids_and_incomplete_rows():
    b = ds.load_breast_cancer_wisconsin(return_X_y=False)
    assert b.data.shape == (683, 9) and np.isfinite(b.data).all()
    assert _counts(b.target) == {2: 444, 4: 239}  # the VSK paper's 444 benign, 239 malignant
    assert b.data.min() == 1 and b.data.max() == 10  # scores 1..10; ids (~1e6) are gone
    np.testing.assert_array_equal(b.data[0], [5, 1, 1, 1, 2, 1, 3, 1, 1])
    assert b.ids[0] == 1000025 and b.ids[-1] == 897471


def test_breast_cancer_matches_the_raw_file(UCI):
    with open(UCI / "breast-cancer-wisconsin.data", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    complete = [r for r in rows if "?" not in r]
    assert len(rows) - len(complete) == 16
    raw = np.array(complete, dtype=float)
    X, y = ds.load_breast_cancer_wisconsin()
    np.testing.assert_array_equal(X, raw[:, 1:10])
    np.testing.assert_array_equal(y, raw[:, 10])


def test_abalone_sex_encodings_agree():
    onehot = ds.load_abalone(return_X_y=False)
    codes, _ = ds.load_abalone(sex="codes")
    drop, rings = ds.load_abalone(sex="drop")
    assert onehot.data.shape == (4177, 10) and codes.shape == (4177, 8) and drop.shape == (4177, 7)
    assert onehot.feature_names[:3] == ["Sex_M", "Sex_F", "Sex_I"]
    np.testing.assert_array_equal(onehot.data[:, :3].sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.argmax(onehot.data[:, :3], axis=1), codes[:, 0])
    np.testing.assert_array_equal(np.array(["M", "F", "I"])[codes[:, 0].astype(int)], onehot.sex)
    np.testing.assert_array_equal(onehot.data[:, 3:], drop)
    np.testing.assert_array_equal(codes[:, 1:], drop)
    assert _counts(onehot.sex) == {"F": 1307, "I": 1342, "M": 1528}  # UCI documentation
    assert rings.dtype == np.int64 and rings.min() == 1 and rings.max() == 29
    np.testing.assert_array_equal(drop[0], [0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15])
    assert rings[0] == 15 and rings[-1] == 12
    with pytest.raises(ValueError, match="sex must be one of 'onehot', 'codes', 'drop'"):
        ds.load_abalone(sex="binary")


def _arff_rows(path):
    lines = path.read_text(encoding="latin-1").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().lower() == "@data") + 1
    return [line.split(",") for line in lines[start:] if line.strip() and not line.startswith("%")]


@pytest.mark.slow
def test_arff_sets_match_the_raw_files(UCI):
    rows = _arff_rows(UCI / "abalone.arff")
    drop, rings = ds.load_abalone(sex="drop")
    np.testing.assert_array_equal(drop, np.array([r[1:8] for r in rows], dtype=float))
    np.testing.assert_array_equal(rings, np.array([r[8] for r in rows], dtype=int))
    np.testing.assert_array_equal(ds.load_abalone(return_X_y=False).sex, [r[0] for r in rows])
    for load, f, shape in [(ds.load_cpu_act, "cpu_act.arff", (8192, 21)),
                           (ds.load_house_8l, "house_8L.arff", (22784, 8))]:  # fmt: skip
        raw = np.array(_arff_rows(UCI / f), dtype=float)
        X, y = load()
        assert X.shape == shape
        np.testing.assert_array_equal(X, raw[:, :-1])
        np.testing.assert_array_equal(y, raw[:, -1])


@pytest.mark.slow
def test_regression_sets_spot_values():
    X, y = ds.load_cpu_act()
    assert X.shape == (8192, 21) and np.isfinite(X).all()
    assert X[0, 0] == 6 and X[0, 20] == 1851864 and y[0] == 90 and y[-1] == 80
    assert y.min() >= 0 and y.max() <= 100  # usr is a percentage
    X, y = ds.load_house_8l()
    assert X.shape == (22784, 8) and np.isfinite(X).all()
    assert X[0, 0] == 7074 and y[0] == 130600 and y[-1] == 117700


# ------------------------------------------------------------ COVID-19 Italy ---


def test_covid_series_is_daily_and_internally_consistent():
    d = ds.load_covid_italy()
    dates = d["date"]
    assert dates.dtype == np.dtype("datetime64[D]")
    assert dates[0] == np.datetime64("2020-02-24") and dates[-1] == np.datetime64("2020-04-30")
    assert len(dates) == 67 and np.all(np.diff(dates) == np.timedelta64(1, "D"))
    assert all(len(v) == 67 for v in d.values())
    for k in ["terapia_intensiva", "totale_casi", "nuovi_positivi", "deceduti", "tamponi"]:
        assert np.isfinite(d[k]).all(), k
    # the columns are where their names say: cumulative cases = current + recovered + dead,
    # and the daily new cases are the increments of the cumulative count
    np.testing.assert_array_equal(
        d["totale_casi"], d["totale_positivi"] + d["dimessi_guariti"] + d["deceduti"]
    )
    np.testing.assert_array_equal(np.diff(d["totale_casi"]), d["nuovi_positivi"][1:])
    assert d["terapia_intensiva"][0] == 26 and d["terapia_intensiva"][-1] == 1694
    # casi_testati starts late: blank (NaN) before, finite after
    tested = np.isfinite(d["casi_testati"])
    assert not tested[0] and tested[-1] and np.all(np.diff(tested.astype(int)) >= 0)


def test_covid_window_of_the_vsk_paper():
    d = ds.load_covid_italy(start="2020-02-24", end=np.datetime64("2020-04-26"))
    assert len(d["date"]) == 63  # the paper's 58 training + 5 test days
    full = ds.load_covid_italy()
    np.testing.assert_array_equal(d["terapia_intensiva"], full["terapia_intensiva"][:63])
    import datetime

    one = ds.load_covid_italy(start=datetime.date(2020, 3, 1), end="2020-03-01")
    assert one["date"].tolist() == [datetime.date(2020, 3, 1)]


def test_covid_matches_the_raw_file(raw):
    with open(raw / "covid19-italy" / COVID_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    d = ds.load_covid_italy()
    assert [str(x) for x in d["date"]] == [r["data"][:10] for r in rows]
    for k in d:
        if k == "date":
            continue
        raw = np.array([float(r[k]) if r[k] else np.nan for r in rows])
        np.testing.assert_array_equal(d[k], raw)


def test_covid_bad_windows_are_rejected():
    with pytest.raises(ValueError, match=r"start \(2020-04-01\) is after end \(2020-03-01\)"):
        ds.load_covid_italy(start="2020-04-01", end="2020-03-01")
    with pytest.raises(ValueError, match="no days between.*2020-02-24 to 2020-04-30"):
        ds.load_covid_italy(start="2021-01-01")
    with pytest.raises(ValueError, match="start must be a date"):
        ds.load_covid_italy(start="yesterday")
    with pytest.raises(ValueError, match="end must be a date"):
        ds.load_covid_italy(end=20200426)


# ------------------------------------------------------------ scikit-learn use ---


@pytest.mark.slow
def test_bunch_carries_names_and_matches_the_tuple():
    for load in [ds.load_magic_gamma, ds.load_page_blocks, ds.load_vehicles, ds.load_cpu_act]:
        X, y = load()
        b = load(return_X_y=False)
        np.testing.assert_array_equal(b.data, X)
        np.testing.assert_array_equal(b.target, y)
        assert len(b.feature_names) == X.shape[1] and len(b.files) == 1


@pytest.mark.slow
def test_docstring_examples_hold():
    import doctest

    result = doctest.testmod(_loaders, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0


# ------------------------------------------------- the Landsat 8 crop (GeoTIFFs) ---

LANDSAT = DATA / "landsat8"


def _landsat_provenance():
    """(bundled files, properties) as data/landsat8/PROVENANCE.md states them."""
    text = (LANDSAT / "PROVENANCE.md").read_text(encoding="utf-8")
    bundled_part = text.split("## The bundled files", 1)[1].split("## What the files hold", 1)
    files, props = {}, {}
    for line in bundled_part[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"[0-9a-f]{64}", cells[3]):
            files[cells[0]] = {"band": cells[1], "bytes": int(cells[2]), "sha256": cells[3]}
    for line in bundled_part[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("property", "---"):
            props[cells[0]] = cells[1]
    return files, props


def _read_bands_with_rasterio():
    """The three bundled files read with rasterio directly (not through the loader)."""
    import rasterio

    files, _ = _landsat_provenance()
    out = {}
    for name, row in files.items():
        with rasterio.open(LANDSAT / name) as src:
            out[row["band"]] = {
                "data": src.read(),
                "crs": src.crs.to_epsg(),
                "transform": tuple(src.transform)[:6],
                "nodata": src.nodata,
                "tags": src.tags(),
            }
    return out


def test_landsat_files_are_listed_in_their_provenance_with_checksums():
    files, _ = _landsat_provenance()
    bundled = sorted(e.name for e in LANDSAT.iterdir() if e.name != "PROVENANCE.md")
    assert sorted(files) == bundled and len(bundled) == 3
    for name, row in files.items():
        blob = (LANDSAT / name).read_bytes()
        assert len(blob) == row["bytes"], name
        assert hashlib.sha256(blob).hexdigest() == row["sha256"], name
        assert name == f"{ds.LANDSAT_SCENE_ID}_{row['band']}.TIF"
    assert {row["band"]: row["sha256"] for row in files.values()} == _loaders._LANDSAT_SHA256
    # small enough to ship: under 1.5 MB for the three bands
    assert sum(row["bytes"] for row in files.values()) < 1_500_000


def test_landsat_crop_is_what_its_provenance_says():
    _, props = _landsat_provenance()
    raw = _read_bands_with_rasterio()
    assert sorted(raw) == list(ds.LANDSAT_BANDS) == ["B2", "B3", "B4"]
    rows, cols = (int(v) for v in props["rows, columns"].split(","))
    transform = tuple(float(v) for v in props["transform (a, b, c, d, e, f)"].split(","))
    for band, r in raw.items():
        assert r["data"].shape == (1, rows, cols) and r["data"].dtype == props["dtype"], band
        assert f"EPSG:{r['crs']}" == props["CRS"], band
        assert r["transform"] == transform, band
        assert r["nodata"] is None and props["no-data tag"] == "none", band
        assert r["tags"]["LANDSAT_SCENE_ID"] == ds.LANDSAT_SCENE_ID
        assert r["tags"]["LANDSAT_BAND"] == band

    # the fill, counted here from the raw arrays: 0 in every band at once, never in some only
    stack = np.concatenate([raw[b]["data"] for b in ds.LANDSAT_BANDS])
    zero = stack == int(props["fill value"])
    assert zero.all(axis=0).sum() == int(props["fill pixels (0 in every band)"])
    assert (zero.any(axis=0) & ~zero.all(axis=0)).sum() == int(
        props["pixels 0 in some bands only"]
    )
    assert round(zero.all(axis=0).mean(), 6) == float(props["fill fraction"])
    assert 0.05 < zero.all(axis=0).mean() < 0.5  # fill included, yet mostly scene

    # the loader's cube holds the same values in band order, on the files' grid
    cube = ds.load_landsat_crop()
    assert cube.dims == ("band", "y", "x") and cube.dtype == np.uint16
    assert cube.band.values.tolist() == list(ds.LANDSAT_BANDS)
    np.testing.assert_array_equal(cube.values, stack)
    a, _, c, _, e, f = transform
    np.testing.assert_allclose(cube.x.values, c + a * (np.arange(cols) + 0.5))
    np.testing.assert_allclose(cube.y.values, f + e * (np.arange(rows) + 0.5))
    assert cube.rio.crs.to_epsg() == raw["B2"]["crs"]
    assert tuple(cube.rio.transform())[:6] == transform
    assert cube.attrs["scene_id"] == ds.LANDSAT_SCENE_ID


def test_landsat_paths_are_the_package_data_files_in_band_order():
    paths = ds.load_landsat_crop(return_paths=True)
    assert [Path(p).name for p in paths] == [
        f"{ds.LANDSAT_SCENE_ID}_{band}.TIF" for band in ds.LANDSAT_BANDS
    ]
    assert {Path(p).resolve().parent for p in paths} == {Path(str(LANDSAT)).resolve()}


def test_landsat_corrupted_or_missing_file_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "landsat8"
    folder.mkdir(parents=True)
    for entry in LANDSAT.iterdir():
        (folder / entry.name).write_bytes(entry.read_bytes())
    monkeypatch.setattr(_loaders, "_data_dir", lambda: tmp_path / "data")
    assert ds.load_landsat_crop(return_paths=True)[0].startswith(str(folder))
    b3 = folder / f"{ds.LANDSAT_SCENE_ID}_B3.TIF"
    blob = bytearray(b3.read_bytes())
    blob[-100] ^= 0xFF
    b3.write_bytes(bytes(blob))
    for kwargs in ({}, {"return_paths": True}):
        with pytest.raises(ValueError, match=r"_B3\.TIF'.*corrupted.*SHA-256"):
            ds.load_landsat_crop(**kwargs)
    (folder / f"{ds.LANDSAT_SCENE_ID}_B2.TIF").unlink()
    with pytest.raises(FileNotFoundError, match=r"_B2\.TIF'.*missing.*landsat8"):
        ds.load_landsat_crop(return_paths=True)


def test_landsat_cube_without_rioxarray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rioxarray", None)  # import rioxarray -> ImportError
    with pytest.raises(ImportError, match=r"rioxarray.*ppa-dask\[formats\].*return_paths"):
        ds.load_landsat_crop()
    assert len(ds.load_landsat_crop(return_paths=True)) == 3


@pytest.mark.parametrize("declared", ["where", "nodata"])
def test_landsat_fit_on_the_valid_pixels_equals_the_fit_of_them_stacked_by_hand(declared):
    # The crop as a user fits it: the zeros declared missing on the cube (cube.where, or the
    # reader's nodata=0). The model must be the one fitted on the valid pixels stacked by hand
    # (band order, row-major pixels), the components NaN in every band outside the scene, and
    # no no-data warning (the fill is declared).
    import warnings

    from ppa_dask import PPA

    cube = ds.load_landsat_crop()
    rows = cube.values.reshape(3, -1).T.astype(np.float64)
    fill = (rows == 0).all(axis=1)
    by_hand = PPA(degree=3, random_state=0).fit(rows[~fill])
    scene = cube.where(cube != 0) if declared == "where" else ds.load_landsat_crop(nodata=0)
    assert np.array_equal(scene.isnull().all("band").values.ravel(), fill)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoDataWarning)
        model = PPA(degree=3, random_state=0).fit(scene, feature_dim="band")
    assert model.n_features_in_ == 3
    if declared == "nodata":
        assert model.xarray_layout_["nodata"] == 0
    np.testing.assert_allclose(model.coefficients_, by_hand.coefficients_, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(model.mean_, by_hand.mean_, rtol=1e-12)
    comps = model.transform(scene).values.reshape(3, -1).T
    assert np.isnan(comps[fill]).all() and np.isfinite(comps[~fill]).all()
    np.testing.assert_allclose(comps[~fill], by_hand.transform(rows[~fill]), rtol=1e-9, atol=1e-6)


def test_landsat_crop_fitted_with_its_zeros_warns_once_naming_the_fill():
    # read without a declared no-data value, the crop is a file with untagged fill: its fit
    # warns, naming the value and the fraction counted here
    import warnings

    from ppa_dask import PPA

    cube = ds.load_landsat_crop()
    share = float((cube == 0).all("band").mean())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PPA(degree=2, random_state=0).fit(cube, feature_dim="band")
    nodata = [w for w in caught if issubclass(w.category, NoDataWarning)]
    assert len(nodata) == 1
    assert str(nodata[0].message).startswith(f"0 fills {share:.1%} of the samples in every band")
