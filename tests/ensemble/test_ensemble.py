"""Feature-bagging ensembles: members, averaging, out-of-core shared scans, store and resume."""

import json
import os

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import loopback_cluster
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.tree import DecisionTreeRegressor

from ppa_dask import PPA
from ppa_dask.ensemble import (
    FeatureBaggingClassifier,
    FeatureBaggingPPA,
    FeatureBaggingRegressor,
)
from ppa_dask.ensemble import bagging as ens_module


def linear_data(n=120, d=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 0.5 * rng.normal(size=n)
    return X, y


def curved_data(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    X = np.column_stack([t, t**2, np.sin(2 * t), t**3, 0.5 * np.cos(3 * t), 0.3 * t * t * t * t])
    return X + 0.02 * rng.normal(size=X.shape)


@pytest.fixture(scope="module")
def in_process_cluster():
    """Factory of in-process LocalClusters (threads, no network) with a given worker count."""
    from distributed import Client

    def start(n_workers):
        cluster = loopback_cluster(n_workers, dashboard_address="127.0.0.1:0")
        return cluster, Client(cluster, set_as_default=True)

    return start


# --------------------------------------------------------------------------------------------
# how members are drawn
# --------------------------------------------------------------------------------------------


class TestMemberDraws:
    def test_each_member_holds_round_qd_distinct_features_and_m_distinct_rows(self):
        X, y = linear_data(n=90, d=10)
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=25, max_features=0.35, max_samples=0.5, random_state=4
        ).fit(X, y)
        assert model.n_features_per_member_ == 4  # round(3.5) = 4
        for features, rows in zip(model.estimators_features_, model.estimators_samples_):
            assert features.tolist() == sorted(set(features.tolist()))
            assert len(features) == 4 and features.min() >= 0 and features.max() < 10
            assert rows.tolist() == sorted(set(rows.tolist())) and len(rows) == 45
        # without replacement across members too: different members draw different subsets
        assert len({tuple(f) for f in model.estimators_features_}) > 15
        assert model.n_members_per_feature_.sum() == 25 * 4

    def test_integer_max_features_and_samples_are_counts(self):
        X, y = linear_data(n=50, d=8)
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=3, max_features=3, max_samples=20, random_state=0
        ).fit(X, y)
        assert {len(f) for f in model.estimators_features_} == {3}
        assert {len(r) for r in model.estimators_samples_} == {20}

    def test_every_feature_is_drawn_equally_often(self):
        # uniform subsets: each feature is in a bag with probability q
        X, y = linear_data(n=30, d=6)
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=3000, max_features=0.5, random_state=1
        )
        plan = model.bag_plan(30, 6)
        counts = np.bincount(np.concatenate([s.features for s in plan.members()]), minlength=6)
        assert np.allclose(counts / 3000, 0.5, atol=0.03)

    def test_member_b_does_not_depend_on_the_number_of_members(self):
        X, y = linear_data()
        small = FeatureBaggingRegressor(LinearRegression(), n_estimators=4, random_state=7)
        large = FeatureBaggingRegressor(LinearRegression(), n_estimators=9, random_state=7)
        small.fit(X, y)
        large.fit(X, y)
        for a, b in zip(small.estimators_features_, large.estimators_features_):
            assert np.array_equal(a, b)

    def test_same_seed_same_members_other_seed_other_members(self):
        X, y = linear_data()

        def make(s):
            return FeatureBaggingRegressor(
                DecisionTreeRegressor(max_features=0.5), n_estimators=6, random_state=s
            ).fit(X, y)

        a, b, c = make(3), make(3), make(4)
        assert np.array_equal(a.predict(X), b.predict(X))
        assert np.array_equal(a.member_seeds_, b.member_seeds_)
        assert not all(
            np.array_equal(f, g) for f, g in zip(a.estimators_features_, c.estimators_features_)
        )


# --------------------------------------------------------------------------------------------
# the ensemble's output is the average of its members on their own columns
# --------------------------------------------------------------------------------------------


class TestAveraging:
    def test_regressor_predicts_the_mean_of_members_fitted_on_their_own_data(self):
        X, y = linear_data(n=150, d=9)
        X_test = np.random.default_rng(5).normal(size=(30, 9))
        model = FeatureBaggingRegressor(
            Ridge(alpha=0.3), n_estimators=7, max_features=0.4, max_samples=0.6, random_state=2
        ).fit(X, y)
        expected = np.zeros(30)
        for features, rows in zip(model.estimators_features_, model.estimators_samples_):
            member = Ridge(alpha=0.3).fit(X[rows][:, features], y[rows])
            expected += member.predict(X_test[:, features]) / 7
        assert np.allclose(model.predict(X_test), expected, rtol=1e-12, atol=1e-12)

    def test_regressor_on_dask_input_is_lazy_and_equal(self):
        X, y = linear_data()
        model = FeatureBaggingRegressor(LinearRegression(), n_estimators=5, random_state=0).fit(
            X, y
        )
        lazy = model.predict(da.from_array(X, chunks=(33, 10)))
        assert isinstance(lazy, da.Array)
        assert np.allclose(lazy.compute(), model.predict(X), rtol=1e-13)

    def test_classifier_averages_member_probabilities_over_all_classes(self):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(240, 6))
        labels = np.array(["ant", "bee", "cat"])
        y = labels[np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])]
        model = FeatureBaggingClassifier(
            LogisticRegression(), n_estimators=9, max_features=0.5, max_samples=0.3, random_state=1
        ).fit(X, y)
        assert model.classes_.tolist() == ["ant", "bee", "cat"]
        code = {c: k for k, c in enumerate(labels)}
        expected = np.zeros((240, 3))
        for features, rows in zip(model.estimators_features_, model.estimators_samples_):
            member = LogisticRegression().fit(
                X[rows][:, features], np.array([code[v] for v in y[rows]])
            )
            expected[:, member.classes_] += member.predict_proba(X[:, features]) / 9
        proba = model.predict_proba(X)
        assert np.allclose(proba, expected, atol=1e-12)
        assert np.allclose(proba.sum(axis=1), 1.0)
        assert np.array_equal(model.predict(X), labels[np.argmax(expected, axis=1)])

    def test_ppa_ensemble_equals_the_average_of_independently_fitted_members(self):
        X = curved_data()
        X_test = curved_data(n=200, seed=9)
        model = FeatureBaggingPPA(
            PPA(degree=(1, 2, 3)),
            n_components=2,
            n_estimators=6,
            max_features=0.5,
            max_samples=0.7,
            random_state=3,
        ).fit(X)
        total, count = np.zeros_like(X_test), np.zeros(6)
        for features, rows, seed in zip(
            model.estimators_features_, model.estimators_samples_, model.member_seeds_
        ):
            member = PPA(degree=(1, 2, 3), n_components=2, random_state=int(seed))
            member.fit(X[rows][:, features])
            rec = member.inverse_transform(member.transform(X_test[:, features]))
            total[:, features] += rec
            count[features] += 1
        held = count > 0
        expected = np.where(held, total / np.maximum(count, 1), X.mean(axis=0))
        assert np.allclose(model.reconstruct(X_test), expected, rtol=1e-10, atol=1e-12)
        # rows are a Bernoulli(p) subsample of about p n rows each, drawn from each member's
        # own seed: different members, different rows
        assert np.all(np.abs(model.n_samples_per_member_ / 1500 - 0.7) < 0.05)
        assert not np.array_equal(model.estimators_samples_[0], model.estimators_samples_[1])

    def test_a_feature_no_member_holds_is_its_training_mean(self):
        X = curved_data()
        model = FeatureBaggingPPA(
            n_components=1, n_estimators=1, max_features=2, random_state=0
        ).fit(X)
        uncovered = np.setdiff1d(np.arange(6), model.estimators_features_[0])
        rec = model.reconstruct(X[:5])
        assert np.allclose(rec[:, uncovered], X.mean(axis=0)[uncovered])

    def test_reconstruction_error_is_the_per_sample_squared_error(self):
        X = curved_data()
        model = FeatureBaggingPPA(
            n_components=1, n_estimators=4, max_features=0.7, random_state=0
        ).fit(X)
        error = model.reconstruction_error(X)
        assert np.allclose(error, ((X - model.reconstruct(X)) ** 2).sum(axis=1))
        assert model.score(X) == pytest.approx(-error.mean())
        assert np.allclose(model.score_samples(X), -error)
        # more components reconstruct better on the training data
        model2 = FeatureBaggingPPA(
            n_components=2, n_estimators=4, max_features=0.7, random_state=0
        ).fit(X)
        assert model2.reconstruction_error(X).mean() < error.mean()


# --------------------------------------------------------------------------------------------
# out of core: all members of a FeatureBaggingPPA from one scan per step
# --------------------------------------------------------------------------------------------

_READS = {"n": 0}


def _count_read(block):
    _READS["n"] += 1
    return block


class TestSharedScans:
    def test_one_scan_per_step_for_all_members(self):
        X = curved_data(n=1200)
        k, B = 2, 5
        source = da.from_array(X, chunks=(200, 6)).map_blocks(_count_read, dtype=X.dtype)
        _READS["n"] = 0
        with dask.config.set(scheduler="synchronous"):
            model = FeatureBaggingPPA(
                PPA(degree=(1, 2, 3)),
                n_components=k,
                n_estimators=B,
                max_features=0.7,
                max_samples=0.8,
                random_state=2,
            ).fit(source)
        assert model.n_passes_ == 1 + k
        assert _READS["n"] == 6 * (1 + k)  # 6 chunks, each read once per pass, for all members
        # one member alone, fitted out of core without a kept residual, reads as much: B
        # separate fits would read B times as much
        _READS["n"] = 0
        with dask.config.set(scheduler="synchronous"):
            PPA(degree=(1, 2, 3), n_components=k, residual_cache="recompute", random_state=0).fit(
                source
            )
        assert _READS["n"] == 6 * (1 + k)

    # members on every row read their features in place and take their first moments from the
    # whole chunk's; members on some rows get copies: both must be the in-memory members
    @pytest.mark.parametrize("max_samples", [0.8, None])
    @pytest.mark.parametrize("dtype", [np.float64, np.float32])
    def test_shared_scan_members_equal_in_memory_members(self, max_samples, dtype):
        X = curved_data(n=1200).astype(dtype)
        params = dict(
            estimator=PPA(degree=(1, 2, 3, 4)),
            n_components=2,
            n_estimators=5,
            max_features=0.7,
            max_samples=max_samples,
            random_state=2,
        )
        in_memory = FeatureBaggingPPA(**params).fit(X)
        with dask.config.set(scheduler="synchronous"):
            out_of_core = FeatureBaggingPPA(**params).fit(da.from_array(X, chunks=(250, 6)))
        assert np.array_equal(in_memory.n_samples_per_member_, out_of_core.n_samples_per_member_)
        for a, b in zip(in_memory.estimators_, out_of_core.estimators_):
            assert np.array_equal(a.degrees_, b.degrees_)
            assert np.allclose(a.leading_vectors_, b.leading_vectors_, atol=1e-10)
        assert np.allclose(in_memory.reconstruct(X), out_of_core.reconstruct(X), atol=1e-9)
        assert np.allclose(in_memory.feature_mean_, out_of_core.feature_mean_)

    def test_a_nan_in_a_column_no_member_uses_changes_no_member(self):
        # the whole chunk's first moments are not finite there: each member takes its own
        X = curved_data(n=1000)
        params = dict(n_components=1, n_estimators=3, max_features=2, random_state=4)
        plan = FeatureBaggingPPA(**params).bag_plan(*X.shape).members()
        unused = np.setdiff1d(np.arange(6), np.concatenate([m.features for m in plan]))
        assert unused.size  # the seed leaves a column out
        damaged = X.copy()
        damaged[::7, unused[0]] = np.nan
        with dask.config.set(scheduler="synchronous"):
            clean = FeatureBaggingPPA(**params).fit(da.from_array(X, chunks=(300, 6)))
            fitted = FeatureBaggingPPA(**params).fit(da.from_array(damaged, chunks=(300, 6)))
        for a, b in zip(clean.estimators_, fitted.estimators_):
            assert np.allclose(a.mean_, b.mean_, rtol=0, atol=1e-12)
            assert np.allclose(a.leading_vectors_, b.leading_vectors_, rtol=0, atol=1e-12)
            assert np.allclose(a.coefficients_[0], b.coefficients_[0], rtol=0, atol=1e-10)

    def test_chunking_does_not_change_the_ensemble(self):
        X = curved_data(n=1000)
        params = dict(
            n_components=1, n_estimators=4, max_features=0.5, max_samples=0.6, random_state=5
        )
        with dask.config.set(scheduler="synchronous"):
            a = FeatureBaggingPPA(**params).fit(da.from_array(X, chunks=(1000, 6)))
            b = FeatureBaggingPPA(**params).fit(da.from_array(X, chunks=(137, 6)))
        assert np.allclose(a.reconstruct(X), b.reconstruct(X), atol=1e-10)
        lazy = b.reconstruct(da.from_array(X, chunks=(300, 6)))
        assert isinstance(lazy, da.Array)
        assert np.allclose(lazy.compute(), b.reconstruct(X))

    def test_a_failing_member_names_itself_and_stops_the_others(self):
        X = curved_data(n=40)
        with dask.config.set(scheduler="synchronous"):
            with pytest.raises(ValueError, match=r"member \d+ \(\d+ rows"):
                # degree 9 with 2 folds needs 20 rows per fold: too few rows per member
                FeatureBaggingPPA(
                    PPA(degree=(1, 9)),
                    n_components=1,
                    n_estimators=3,
                    max_samples=0.5,
                    random_state=0,
                ).fit(da.from_array(X, chunks=(10, 6)))


# --------------------------------------------------------------------------------------------
# where members are fitted: Dask tasks, any number of workers, same ensemble
# --------------------------------------------------------------------------------------------


class TestFanOut:
    def test_members_are_tasks_and_the_ensemble_does_not_depend_on_workers(
        self, in_process_cluster
    ):
        from distributed import get_task_stream

        X, y = linear_data(n=100, d=8)
        params = dict(
            estimator=DecisionTreeRegressor(max_features=0.6, max_depth=4),
            n_estimators=8,
            max_features=0.5,
            max_samples=0.8,
            random_state=11,
        )
        reference = FeatureBaggingRegressor(**params).fit(X, y).predict(X)
        for n_workers in (1, 2):
            cluster, client = in_process_cluster(n_workers)
            try:
                with get_task_stream(client) as stream:
                    model = FeatureBaggingRegressor(**params).fit(X, y)
                names = [t["key"] for t in stream.data]
                # one task per member, named for the dashboard by what it computes
                members = sorted(str(key) for key in names if str(key).startswith("bag-member-"))
                assert [key[: len("bag-member-0000")] for key in members] == [
                    f"bag-member-{b:04d}" for b in range(8)
                ]
                assert np.array_equal(model.predict(X), reference)
            finally:
                client.close()
                cluster.close()


# --------------------------------------------------------------------------------------------
# the result store: arrays and JSON, resumption
# --------------------------------------------------------------------------------------------


class TestStore:
    def test_an_interrupted_fit_resumes_from_the_store(self, tmp_path, monkeypatch):
        X, y = linear_data()
        params = dict(
            estimator=LinearRegression(),
            n_estimators=10,
            max_features=0.5,
            random_state=3,
            store=str(tmp_path / "members"),
        )
        calls = {"n": 0}
        real = ens_module.fit_member

        def interrupted(*args):
            calls["n"] += 1
            if calls["n"] > 4:
                raise KeyboardInterrupt("simulated interruption")
            return real(*args)

        monkeypatch.setattr(ens_module, "fit_member", interrupted)
        with pytest.raises(KeyboardInterrupt):
            FeatureBaggingRegressor(**params).fit(X, y)
        assert len([f for f in os.listdir(tmp_path / "members") if f.endswith(".npz")]) == 4

        calls["n"] = -100  # no more interruptions; count the fits of the resumed run
        resumed = FeatureBaggingRegressor(**params).fit(X, y)
        assert calls["n"] == -100 + 6 and resumed.n_members_loaded_ == 4
        monkeypatch.setattr(ens_module, "fit_member", real)
        fresh = FeatureBaggingRegressor(**{**params, "store": None}).fit(X, y)
        assert np.allclose(resumed.predict(X), fresh.predict(X), rtol=1e-14)

    def test_member_files_hold_arrays_and_json_never_pickle(self, tmp_path):
        X = curved_data(n=600)
        store = tmp_path / "ppa"
        FeatureBaggingPPA(n_components=1, n_estimators=3, random_state=0, store=store).fit(X)
        files = sorted(os.listdir(store))
        assert files == [
            "manifest.json",
            "member_00000.npz",
            "member_00001.npz",
            "member_00002.npz",
        ]
        json.loads((store / "manifest.json").read_text())
        for name in files[1:]:
            with np.load(store / name, allow_pickle=False) as data:  # refuses object arrays
                record = json.loads(data["record.json"])  # a text entry, not an array
                assert record["estimator"]["__estimator__"] == "PPA"
                assert data["leading_vectors_"].dtype == np.float64
                assert all(data[k].dtype.kind in "biufc" for k in data.files if k != "record.json")
        again = FeatureBaggingPPA(n_components=1, n_estimators=3, random_state=0, store=store).fit(
            X
        )
        assert again.n_members_loaded_ == 3

    def test_a_store_of_another_fit_is_refused(self, tmp_path):
        X, y = linear_data()
        FeatureBaggingRegressor(
            LinearRegression(), n_estimators=2, random_state=0, store=tmp_path
        ).fit(X, y)
        with pytest.raises(ValueError, match="different fit"):
            FeatureBaggingRegressor(
                LinearRegression(), n_estimators=2, random_state=1, store=tmp_path
            ).fit(X, y)
        with pytest.raises(ValueError, match="different fit"):
            FeatureBaggingRegressor(
                LinearRegression(), n_estimators=2, random_state=0, store=tmp_path
            ).fit(X + 1, y)

    def test_members_that_need_pickle_stay_in_memory(self, tmp_path):
        X, y = linear_data()
        with_code = make_pipeline(FunctionTransformer(np.tanh), LinearRegression())
        model = FeatureBaggingRegressor(
            with_code, n_estimators=3, random_state=0, store=tmp_path
        ).fit(X, y)
        assert os.listdir(tmp_path) == ["manifest.json"]
        assert model.predict(X).shape == (120,)

    def test_store_needs_a_fixed_seed(self, tmp_path):
        X, y = linear_data()
        with pytest.raises(ValueError, match="int random_state"):
            FeatureBaggingRegressor(LinearRegression(), store=tmp_path).fit(X, y)


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


class TestBadInput:
    @pytest.mark.parametrize("q", [0.0, -0.2, 1.5])
    def test_ratio_q_outside_unit_interval(self, q):
        X, y = linear_data()
        with pytest.raises(
            ValueError, match=r"max_features must be .*a finite number in \(0, 1\]"
        ):
            FeatureBaggingRegressor(LinearRegression(), max_features=q).fit(X, y)

    @pytest.mark.parametrize("p", [0.0, 1.01])
    def test_ratio_p_outside_unit_interval(self, p):
        X, y = linear_data()
        with pytest.raises(ValueError, match=r"max_samples must be .*a finite number in \(0, 1\]"):
            FeatureBaggingRegressor(LinearRegression(), max_samples=p).fit(X, y)

    def test_more_features_per_member_than_features(self):
        X, y = linear_data(d=10)
        with pytest.raises(ValueError, match="max_features=11 asks for 11 features.*has 10"):
            FeatureBaggingRegressor(LinearRegression(), max_features=11).fit(X, y)

    @pytest.mark.parametrize("B", [0, -3, 2.5])
    def test_fewer_than_one_member(self, B):
        X, y = linear_data()
        with pytest.raises(ValueError, match="n_estimators .* must be an int >= 1"):
            FeatureBaggingRegressor(LinearRegression(), n_estimators=B).fit(X, y)

    def test_estimator_without_fit_or_predict(self):
        X, y = linear_data()

        class NotAnEstimator:
            def get_params(self, deep=True):
                return {}

        with pytest.raises(TypeError, match="fit"):
            FeatureBaggingRegressor(NotAnEstimator()).fit(X, y)
        from sklearn.preprocessing import StandardScaler

        with pytest.raises(TypeError, match="has no predict"):
            FeatureBaggingRegressor(StandardScaler()).fit(X, y)

    def test_y_of_the_wrong_length(self):
        X, y = linear_data(n=120)
        with pytest.raises(ValueError, match="y has 119 entries but X has 120 rows"):
            FeatureBaggingRegressor(LinearRegression()).fit(X, y[:-1])
        with pytest.raises(ValueError, match="y has 121 entries but X has 120 rows"):
            FeatureBaggingClassifier().fit(X, np.r_[y, 0] > 0)

    def test_bad_coupling(self):
        X, y = linear_data()
        with pytest.raises(ValueError, match="coupling must be one of"):
            FeatureBaggingRegressor(LinearRegression(), coupling="loose").fit(X, y)

    def test_ppa_components_must_fit_in_each_member(self):
        X = curved_data(n=200)
        with pytest.raises(ValueError, match="n_components=3 must be smaller than the 3 features"):
            FeatureBaggingPPA(n_components=3, max_features=0.5).fit(X)
        with pytest.raises(TypeError, match="must be ppa_dask.PPA"):
            FeatureBaggingPPA(estimator=LinearRegression()).fit(X)

    def test_dask_input_to_a_generic_ensemble_is_refused(self):
        X, y = linear_data()
        with pytest.raises(TypeError, match="in-memory data"):
            FeatureBaggingRegressor(LinearRegression()).fit(da.from_array(X), y)

    def test_failed_validation_leaves_input_untouched(self):
        X, y = linear_data()
        X0, y0 = X.copy(), y.copy()
        with pytest.raises(ValueError):
            FeatureBaggingRegressor(LinearRegression(), max_features=99).fit(X, y)
        assert np.array_equal(X, X0) and np.array_equal(y, y0)

    def test_wrong_width_at_prediction(self):
        X, y = linear_data()
        model = FeatureBaggingRegressor(LinearRegression(), n_estimators=2, random_state=0).fit(
            X, y
        )
        with pytest.raises(ValueError, match="features"):
            model.predict(X[:, :5])
