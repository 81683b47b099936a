"""The VSK experiment pipelines run end to end (small settings) on a LocalCluster.

Each pipeline fans its repetitions / grid points out as Dask tasks and writes CSV + markdown
tables and PNG figures; the checks are on what the tables must satisfy (scores in range, the
paper's inequalities on the real kernel matrices, one row per task) and on reproducibility.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pandas as pd
import paths
import pytest

from ppa_dask.app.scripts import output, selection
from ppa_dask.datasets import load_breast_cancer_wisconsin

# the VSK pipelines end to end on a LocalCluster
pytestmark = pytest.mark.cluster


PIPELINES = str(paths.PIPELINES)


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(PIPELINES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from ppa_dask.cluster import local_client

    with local_client(
        n_workers=2,
        dashboard_address="127.0.0.1:0",
        local_directory=tmp_path_factory.mktemp("dask"),
    ) as c:
        yield c


def _files(path):
    return sorted(os.listdir(path))


def test_toy_pipeline_end_to_end(client, tmp_path):
    toy = _load("vsk_toy")
    out = toy.run(
        str(tmp_path),
        n_samples=(100,),
        n_features=(2,),
        kernels=("linear", "rbf"),
        n_reps=2,
        seed=3,
        C_grid=(0.5, 8.0),
        gamma_grid=(1.0,),
        cv=3,
        client=client,
        verbose=False,
    )
    assert _files(tmp_path) == [
        "toy_f1.csv",
        "toy_f1.md",
        "toy_f1.png",
        "toy_results.csv",
        "toy_spectral.csv",
        "toy_spectral.md",
    ]
    res = out["results"]
    assert len(res) == 1 * 1 * 2 * 2  # N x n_k x reps x kernels, one row per task
    f1 = res[["f1_NB", "f1_SVM", "f1_SVM-VSK"]].to_numpy()
    assert np.all((f1 >= 0) & (f1 <= 1))
    # 100 rows: 16 test rows per class, the rest for training
    assert set(res["n_test"]) == {32} and set(res["n_train"]) == {68}
    spec = out["spectral"].set_index("kernel")
    # Corollary 1 on the toy training set: the Gaussian VSK is more expressive
    assert spec.loc["rbf", "C_KPsi"] >= spec.loc["rbf", "C_K"]
    # Proposition 2 (data in [0, 1], psi a probability)
    assert spec.loc["linear", "trK_over_trKPsi"] <= 1
    assert spec.loc["linear", "tr-scaled C_KPsi"] <= spec.loc["linear", "C_K"]
    md = (tmp_path / "toy_f1.md").read_text()
    assert md.count("\n| linear |") == 1 and md.count("\n| rbf |") == 1


def test_toy_tasks_are_reproducible_and_draw_balanced_data():
    toy = _load("vsk_toy")
    X, y = toy.make_population(3)
    assert X.shape == (5000, 64) and X.min() == 0 and X.max() == 1
    (Xtr, ytr), (Xte, yte), (Xpr, ypr), feats = toy.draw_dataset(X, y, 500, 4, seed=11)
    assert len(feats) == 4 and (ytr == 1).sum() == (ytr == -1).sum()
    assert (yte == 1).sum() == (yte == -1).sum() == 500 // 6
    assert len(ytr) + len(yte) + len(ypr) == 5000
    kw = dict(
        seed=3,
        n_samples=100,
        n_features=2,
        rep=0,
        kernel="linear",
        C_grid=(1.0,),
        gamma_grid=(1.0,),
        cv=2,
    )
    a, b = toy.toy_task(**kw), toy.toy_task(**kw)
    a.pop("seconds"), b.pop("seconds")
    assert a == b


def test_breast_cancer_pipeline_end_to_end(client, tmp_path):
    bc = _load("vsk_breast_cancer")
    out = bc.run(
        str(tmp_path),
        n_splits=2,
        seed=0,
        kernels=("linear",),
        kept=(0, 5),
        C_grid=(0.25, 4.0),
        gamma_grid=(1.0,),
        cv=3,
        client=client,
        verbose=False,
    )
    assert _files(tmp_path) == [
        "bc_f1.png",
        "bc_methods.csv",
        "bc_methods.md",
        "bc_results.csv",
        "bc_svm_e.csv",
        "bc_svm_e.md",
        "bc_svm_e.png",
    ]
    res = out["results"]
    # per split: NB, SVM, SVM-S, SVM-VSK and SVM-E for each kept feature
    assert len(res) == 2 * (4 + 2)
    assert res["f1"].between(0.85, 1.0).all()  # the data are easy: every method is good
    ssel = res[res["method"] == "SVM-S"]["kept"]
    assert all(len(k.split()) == 2 for k in ssel)
    methods = out["methods"]
    assert set(methods["method"]) >= {"NB", "SVM", "SVM-S", "SVM-VSK", "SVM-E (best kept)"}
    assert set(out["svm_e"]["kept feature"]) == {0, 5}


def test_breast_cancer_splits_are_halves():
    bc = _load("vsk_breast_cancer")
    train, test = bc.split(683, 0, 1)
    assert len(train) == 342 and len(test) == 341
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(683))
    assert not np.array_equal(bc.split(683, 0, 0)[0], train)


def test_covid_pipeline_end_to_end(client, tmp_path):
    cov = _load("vsk_covid_icu")
    out = cov.run(
        str(tmp_path),
        n_shapes=6,
        # shape parameters where the plain kernel matrix is non-singular (cond(K) finite: from
        # about eps = 20 on the 58 training days), so Proposition 1 compares finite numbers
        eps_range=(20.0, 60.0),
        nus=(0.0, 1e-4),
        learners=("KRN", "KRN-VSK aux"),
        batch=3,
        client=client,
        verbose=False,
    )
    assert _files(tmp_path) == [
        "covid_best.csv",
        "covid_best.md",
        "covid_best_predictions.png",
        "covid_condition_rme.png",
        "covid_sweep.csv",
    ]
    sweep = out["sweep"]
    assert len(sweep) == 6 * 2 * 2
    assert (sweep["RME"] >= 0).all() and (sweep["RME"] == sweep["RME"].round()).all()
    # Proposition 1 on the real kernel matrices: VSK never worse conditioned at the same eps
    plain = sweep[(sweep["learner"] == "KRN") & (sweep["nu"] == 0)].set_index("eps")["cond"]
    vsk = sweep[(sweep["learner"] == "KRN-VSK aux") & (sweep["nu"] == 0)].set_index("eps")["cond"]
    assert np.isfinite(plain).all() and np.isfinite(vsk).all()
    assert (vsk < plain).all()
    best = out["best"]
    assert len(best) == 4 and best["RME at best eps"].min() >= 0


def test_rounded_mean_error_rounds_half_down():
    cov = _load("vsk_covid_icu")
    assert cov.rounded_mean_error([10, 10], [9.5, 9.5]) == 0  # ME 0.5 -> 0
    assert cov.rounded_mean_error([10, 10], [9.4, 9.4]) == 1  # ME 0.6 -> 1
    assert cov.rounded_mean_error([0.0], [3.2]) == 3


def test_pipeline_tables_are_markdown_pipe_tables(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.12345, np.nan]})
    text = output.write_frame_table(df, str(tmp_path), "t", "T")
    assert text.splitlines()[2:] == ["| a | b |", "|---|---|", "| 1 | 0.123 |", "| 2 | nan |"]
    assert pd.read_csv(tmp_path / "t.csv").shape == (2, 2)


def test_blockwise_diagnostics_on_the_cluster_equal_dense(client):
    """Tiles as tasks on worker processes (the persisted chunks must outlive the graph calls)."""
    import dask.array as da

    from ppa_dask.vsk import (
        blockwise_condition_number,
        blockwise_spectral_ratio,
        condition_number,
        spectral_ratio,
        vsk_gram,
    )

    rng = np.random.default_rng(0)
    X, P = rng.uniform(size=(240, 3)), rng.uniform(size=(240, 1))
    Xd, Pd = da.from_array(X, chunks=(50, 3)), da.from_array(P, chunks=(50, 1))
    K = vsk_gram(X, P, "rbf", 300.0)
    assert blockwise_spectral_ratio(Xd, Pd, "rbf", 300.0, tile_rows=64) == pytest.approx(
        spectral_ratio(K), rel=1e-10
    )
    assert blockwise_condition_number(Xd, Pd, "rbf", 300.0, tile_rows=120) == pytest.approx(
        condition_number(K), rel=1e-6
    )


def test_weighted_f1_is_scikit_learns_weighted_f1_to_the_bit():
    # the grid searches score with selection.weighted_f1 (scikit-learn's checks of the labels
    # took half the breast cancer pipeline's time); it must be the same float, or ties
    # between grid points could break differently
    import warnings

    from sklearn.metrics import f1_score

    rng = np.random.default_rng(7)
    names = np.array(["benign", "malignant", "other", "x", "y"])
    for i in range(600):
        n = int(rng.integers(1, 80))
        y_true = rng.integers(0, int(rng.integers(1, 4)), n)
        y_pred = rng.integers(0, int(rng.integers(1, 5)), n)  # labels absent from either side
        if i % 3 == 0:
            y_true, y_pred = names[y_true], names[y_pred]
        elif i % 3 == 1:
            y_true, y_pred = 2 * y_true + 2, 2 * y_pred + 2  # the breast cancer labels 2 / 4
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zero divisions: scikit-learn warns, both give 0
            expected = f1_score(y_true, y_pred, average="weighted")
        assert selection.weighted_f1(y_true, y_pred) == expected, (y_true, y_pred)
    with pytest.raises(ValueError, match="one length, got 3 and 2 labels"):
        selection.weighted_f1([1, 2, 2], [1, 2])


def test_tuned_search_scores_as_the_f1_weighted_search():
    # the same cross-validated scores and the same choice as scoring="f1_weighted", on the
    # breast cancer split the pipeline uses (SVM and SVM-VSK, Gaussian kernel)
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    from ppa_dask.vsk import make_svm_vsk

    bc = _load("vsk_breast_cancer")
    X, y = load_breast_cancer_wisconsin()
    train, test = bc.split(len(y), 0, 1)
    Xtr, _ = bc._scaled(X, train, test)
    for estimator, prefix in ((SVC(kernel="rbf"), ""), (make_svm_vsk("rbf"), "svc__")):
        grid = selection.svm_grid("rbf", prefix, (2.0**-6, 0.5, 8.0, 32.0), (1e-6, 0.1, 1.0, 10.0))
        ours = selection.tuned(estimator, grid, cv=5).fit(Xtr, y[train])
        theirs = GridSearchCV(estimator, grid, cv=5, scoring="f1_weighted").fit(Xtr, y[train])
        for key in [f"split{i}_test_score" for i in range(5)] + ["mean_test_score"]:
            np.testing.assert_array_equal(ours.cv_results_[key], theirs.cv_results_[key])
        assert ours.best_params_ == theirs.best_params_
