"""The gap study's pieces (bagging paper S.1, issue 26 part 3) against independent computations.

* The signal mixture f = (1 - nu) f_weak + nu f_strong: the MARSadd function written out here
  at nu = 1, the weak linear signal at nu = 0, the same rows and noise for every nu.
* The residualizers are the named scikit-learn estimators, and the partial MI is the MI of
  their residuals computed here by hand.
* The joint mutual information I((FI, II); gap) is scikit-learn's estimate for one column and
  the Gaussian closed form for two.
* The saved records' summaries are the summaries of their saved settings (the test suite's
  reduced rerun, tests/app/test_reproductions.py, reproduces the settings themselves).
* Depth-T dyadic trees: FI = 2T/d exactly without bagging, and the closed form at T = 1 with it.
"""

import importlib.util
import math

import numpy as np
import paths
import pytest

from ppa_dask.app import reproductions as rep

ROOT = paths.ROOT


def load(name):
    path = ROOT / "pipelines" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_gap_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gap = load("stability_generalization")
depth = load("stability_tree_depth")


def test_the_mixture_is_the_strong_target_at_nu_1_and_the_weak_one_at_nu_0():
    n, seed = 400, 3
    X1, y1 = gap.marsadd(n, seed, 1.0)
    X0, y0 = gap.marsadd(n, seed, 0.0)
    Xh, yh = gap.marsadd(n, seed, 0.5)
    assert np.array_equal(X1, X0) and np.array_equal(X1, Xh)  # the same rows for every nu
    x = X1
    strong = (0.1 * np.exp(4 * x[:, 0]) + 4 / (1 + np.exp(-20 * (x[:, 1] - 0.5)))
              + 3 * x[:, 2] + 2 * x[:, 3] + x[:, 4])  # fmt: skip
    weak = math.sqrt(6.2962 * 12 / 10) * x.sum(axis=1)
    noise = y1 - strong
    np.testing.assert_allclose(y0 - noise, weak, rtol=1e-12)
    np.testing.assert_allclose(yh - noise, 0.5 * weak + 0.5 * strong, rtol=1e-12)
    # the noise: Var(mu) / sigma^2 = 3.52
    assert noise.std() == pytest.approx(math.sqrt(6.2962 / 3.52), rel=0.1)
    # the weak signal has the strong one's variance on [0, 1]^10, its weight on every feature
    big = np.random.default_rng(0).uniform(size=(200_000, 10))
    assert gap.f_weak(big).var() == pytest.approx(gap.f_strong(big).var(), rel=0.02)
    assert gap.f_strong(big).var() == pytest.approx(6.2962, rel=0.02)
    coef = np.linalg.lstsq(np.column_stack([np.ones(n), x]), y0 - noise, rcond=None)[0][1:]
    np.testing.assert_allclose(coef, coef[0], rtol=1e-9)
    # and the pipeline's data for the task is this draw
    data = gap.split_data("marsadd", 200, 200, seed, 0.0)
    order = np.random.default_rng([seed, 23]).permutation(400)
    np.testing.assert_array_equal(data[1], y0[order[:200]])


def test_nu_out_of_range_and_unknown_residualizers_are_refused(capsys):
    for argv, match in [
        (["--nu", "1.5"], "--nu must lie in \\[0, 1\\]"),
        (["--residualizers", "rf,svm"], "unknown residualizers \\['svm'\\]"),
        (["--first-settings", "0"], "--first-settings must be >= 1"),
    ]:
        with pytest.raises(SystemExit) as info:
            gap.parse_args(argv)
        assert info.value.code == 2
        assert __import__("re").search(match, capsys.readouterr().err)


def test_the_residualizers_are_the_named_scikit_learn_estimators():
    from sklearn.ensemble import (
        AdaBoostRegressor,
        GradientBoostingRegressor,
        RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeRegressor

    named = dict(rf=RandomForestRegressor, dt=DecisionTreeRegressor, ada=AdaBoostRegressor,
                 gbrt=GradientBoostingRegressor)  # fmt: skip
    assert set(gap.RESIDUALIZERS) == set(named)
    for name, cls in named.items():
        model = gap.make_residualizer(name, 7)
        assert type(model) is cls
        assert model.get_params()["random_state"] == 7
    with pytest.raises(ValueError, match="unknown residualizer 'svm'"):
        gap.make_residualizer("svm", 0)


def _rows(n=40, seed=0):
    rng = np.random.default_rng(seed)
    II = rng.lognormal(size=n)
    FI = II + rng.lognormal(size=n)
    g = 0.5 * II + np.sin(3 * FI) + 0.1 * rng.normal(size=n)
    return [dict(gap=a, FI=b, II=c) for a, b, c in zip(g, FI, II)]


@pytest.mark.slow
def test_partial_mi_is_the_mi_of_each_residualizers_residuals():
    from sklearn.feature_selection import mutual_info_regression

    rows, seed = _rows(), 4
    out = {r["residualizer"]: r for r in gap.dependence(rows, seed, gap.RESIDUALIZERS)}
    assert list(out) == list(gap.RESIDUALIZERS)
    z = lambda v: (v - v.mean()) / v.std()  # noqa: E731
    g, FI, II = (z(np.array([r[k] for r in rows])) for k in ("gap", "FI", "II"))
    values = set()
    for name, row in out.items():

        def resid(target, given, name=name):
            model = gap.make_residualizer(name, seed).fit(given[:, None], target)
            return target - model.predict(given[:, None])

        def mi(a, b):
            return mutual_info_regression(a[:, None], b, n_neighbors=3, random_state=seed)[0]

        assert row["PMI_FI_given_II"] == pytest.approx(mi(resid(FI, II), resid(g, II)))
        assert row["PMI_II_given_FI"] == pytest.approx(mi(resid(II, FI), resid(g, FI)))
        noise = np.mean([row["PMI_noise_given_FI"], row["PMI_perm_given_FI"]])
        assert row["PMI_II_minus_noise"] == pytest.approx(row["PMI_II_given_FI"] - noise)
        values.add(round(row["PMI_FI_given_II"], 12))
        # the residualizer-free numbers are the same in every row
        assert row["R2_FI_II"] == out["rf"]["R2_FI_II"]
        assert row["MI_joint"] == out["rf"]["MI_joint"]
    assert len(values) > 1  # the four residualizers do differ


def test_joint_mi_is_scikit_learns_for_one_column_and_the_gaussian_value_for_two():
    from sklearn.feature_selection import mutual_info_regression

    rng = np.random.default_rng(1)
    x = rng.normal(size=500)
    y = np.tanh(x) + 0.5 * rng.normal(size=500)
    ours = gap.joint_mutual_information(x[:, None], y, 3, 0)
    theirs = mutual_info_regression(x[:, None], y, n_neighbors=3, random_state=0)[0]
    assert ours == pytest.approx(theirs, rel=1e-6)
    # two correlated Gaussian inputs: I = 1/2 log(det S_zz S_yy / det S)
    cov = np.array([[1.0, 0.5, 0.6], [0.5, 1.0, 0.3], [0.6, 0.3, 1.0]])
    sample = rng.multivariate_normal(np.zeros(3), cov, size=4000)
    exact = 0.5 * math.log(np.linalg.det(cov[:2, :2]) * cov[2, 2] / np.linalg.det(cov))
    assert gap.joint_mutual_information(sample[:, :2], sample[:, 2]) == pytest.approx(
        exact, abs=0.03
    )
    # and more than either input alone carries
    assert exact > max(-0.5 * math.log(1 - 0.6**2), -0.5 * math.log(1 - 0.3**2))


GAP_RECORDS = sorted((ROOT / "results").glob("bagging_gap_*.json"))


@pytest.mark.parametrize("path", GAP_RECORDS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_a_saved_gap_records_summaries_are_those_of_its_saved_settings(path):
    record = rep.read_record(path)
    cells = rep.record_cells(record)
    residualizers = sorted({c["residualizer"] for c in cells} - {"none"})
    settings, saved = {}, {}
    for c in cells:
        group = (c["dataset"], c["nu"], c["estimator"], c["seed"])
        if c["setting"] != "all":
            settings.setdefault(group, {}).setdefault(c["setting"], {})[c["measure"]] = c["value"]
        else:
            saved[(*group, c["residualizer"], c["measure"])] = c["value"]
    groups = sorted(settings, key=str)
    for group in [groups[0], groups[-1]]:  # two groups: a few seconds each
        rows = list(settings[group].values())
        for row in gap.dependence(rows, group[3], residualizers):
            for m in gap.PMI_MEASURES:
                assert row[m] == pytest.approx(saved[(*group, row["residualizer"], m)],
                                               rel=1e-8, abs=1e-10), m  # fmt: skip
            for m in gap.PLAIN_MEASURES:
                assert row[m] == pytest.approx(saved[(*group, "none", m)], rel=1e-8,
                                               abs=1e-10), m  # fmt: skip


@pytest.mark.slow
def test_a_non_bagged_depth_T_tree_has_FI_2T_over_d_and_bagging_the_closed_form_at_T_1():
    for d in (4, 10):
        (rows,) = [depth.run_block(dict(d=d, q=1.0, seed=0, rounds=1, T_max=d - 1))]
        for r in rows:
            assert r["FI"] == 2 * r["T"] / d  # exactly, for every T < d
    # T = 1 with feature bagging: the first split goes to the first feature of the draw, so
    # E[w_1] is 1/d in each column and 1/(d-1) without j: FI = 1/(d(d-1)), whatever q;
    # B rounds add a Monte Carlo term of about 2/(B d)
    d, B = 10, 3000
    (first, *_) = depth.run_block(dict(d=d, q=0.3, seed=1, rounds=B, T_max=1))
    assert first["FI"] == pytest.approx(1 / (d * (d - 1)) + 2 / (B * d), rel=0.15)
    # the paper's example encoding (d = 2, three splits)
    counts = depth.dyadic_path(2, 3, 1.0, lambda t: None)[-1]
    assert depth.encoding(counts, 3).tolist() == [[1, 1], [1, 0], [0, 0]]


def test_a_summary_is_the_same_whether_its_settings_were_computed_or_read_back(tmp_path):
    # a record keeps gap, FI and II at 10 digits: summaries from the full-precision values of a
    # run and from those read back would differ in the last digits, and with the kNN
    # estimates' ties by more; both runs summarise the values as stored
    argv = ["--small", "--datasets", "marsadd", "--estimators", "dt", "--nu", "1", "--seeds",
            "0", "--residualizers", "dt", "--workers", "0", "--quiet", "--record",
            str(tmp_path / "gap.json")]  # fmt: skip
    computed = gap.main([*argv, "--output", str(tmp_path / "computed")])
    read_back = gap.main([*argv, "--output", str(tmp_path / "read-back")])
    assert all(r["mse_train"] is not None for r in computed["rows"])
    assert all(r["mse_train"] is None for r in read_back["rows"])  # every one from the record
    assert len(computed["summary"]) == len(read_back["summary"]) > 0
    for mine, theirs in zip(computed["summary"], read_back["summary"]):
        np.testing.assert_equal(mine, theirs)


def test_the_gap_scripts_examples_run():
    # the script's docstring examples (the paper's numbers by table, residualizer and
    # estimator; the real-data table specs) are not in the package's doctest sweep
    import doctest

    result = doctest.testmod(gap, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0


REAL_RECORD = ROOT / "results" / "bagging_gap_real.json"


def test_the_real_data_tables_show_each_residualizers_cells_beside_its_paper_column():
    # Table S.4's row "dt / abalone" is the decision-tree residualizer's PMI on abalone: the mean
    # of those cells over the seeds, beside the paper's DT-residualizer column (GBRT: 0.573,
    # where the RF residualizer's is 0.292)
    record = rep.read_record(REAL_RECORD)
    rows = {(r["label"], r["column"]): r for r in rep.table_rows(record, "s4")}
    for residualizer, paper in (("dt", 0.573), ("rf", 0.292)):
        row = rows[(f"{residualizer} / abalone", "gbrt")]
        mine = [c["value"] for c in rep.record_cells(record)
                if (c["dataset"], c["estimator"], c["residualizer"], c["measure"], c["setting"])
                == ("abalone", "gbrt", residualizer, "PMI_FI_given_II", "all")]  # fmt: skip
        assert len(mine) == len(record["seeds"]) and row["mean"] == pytest.approx(np.mean(mine))
        assert row["paper"] == paper
    # Table S.5 (dR2) has a row per data set, the same for every residualizer
    s5 = {(r["label"], r["column"]): r for r in rep.table_rows(record, "s5")}
    assert s5[("diabetes", "ada")]["paper"] == 0.469
