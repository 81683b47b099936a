"""Feature and instance instability: definitions, closed forms, coupling, out-of-bag estimates
and the paper's claims (FI falls with q; finite B approaches infinite bagging)."""

import itertools
import math

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from ppa_dask import PPA
from ppa_dask.ensemble import FeatureBaggingPPA, FeatureBaggingRegressor
from ppa_dask.stability import (
    bagging_rounds,
    feature_instability,
    feature_stability_bound,
    instance_instability,
    instance_stability_bound,
)


def linear_data(n=60, d=6, seed=0, noise=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + noise * rng.normal(size=n)
    X_eval = rng.normal(size=(40, d))
    return X, y, X_eval


def brute_force_fi(make, X, y, X_eval):
    """FI of a deterministic learner, straight from the definition."""
    f = make().fit(X, y).predict(X_eval)
    terms = []
    for j in range(X.shape[1]):
        keep = np.delete(np.arange(X.shape[1]), j)
        g = make().fit(X[:, keep], y).predict(X_eval[:, keep])
        terms.append(np.mean((f - g) ** 2))
    return np.array(terms)


def brute_force_ii(make, X, y, X_eval, rows):
    f = make().fit(X, y).predict(X_eval)
    terms = []
    for i in rows:
        keep = np.delete(np.arange(X.shape[0]), i)
        g = make().fit(X[keep], y[keep]).predict(X_eval)
        terms.append(np.mean((f - g) ** 2))
    return np.array(terms)


# --------------------------------------------------------------------------------------------
# the definitions, on learners without bagging randomness
# --------------------------------------------------------------------------------------------


class TestDefinitions:
    @pytest.mark.parametrize(
        "make", [LinearRegression, lambda: DecisionTreeRegressor(max_depth=3, random_state=0)]
    )
    def test_fi_and_ii_of_a_deterministic_learner_equal_brute_force(self, make):
        X, y, X_eval = linear_data()
        fi = feature_instability(make(), X, y, X_eval=X_eval, client=False)
        expected = brute_force_fi(make, X, y, X_eval)
        assert np.allclose(fi.terms, expected, rtol=1e-10, atol=1e-14)
        assert fi.value == pytest.approx(expected.mean(), rel=1e-10)
        assert fi.stderr == 0.0 and fi.population == 6 and fi.n_refits == 6
        ii = instance_instability(
            make(), X, y, X_eval=X_eval, instances=np.arange(60), client=False
        )
        assert np.allclose(
            ii.terms, brute_force_ii(make, X, y, X_eval, range(60)), rtol=1e-10, atol=1e-14
        )

    def test_q_equal_one_bagging_is_the_learner_itself(self):
        X, y, X_eval = linear_data()
        single = feature_instability(LinearRegression(), X, y, X_eval=X_eval, client=False)
        bagged = feature_instability(
            FeatureBaggingRegressor(
                LinearRegression(), n_estimators=1, max_features=1.0, random_state=0
            ),
            X,
            y,
            X_eval=X_eval,
            client=False,
        )
        assert np.allclose(single.terms, bagged.terms, rtol=1e-10)

    def test_ppa_is_compared_on_the_features_both_fits_share(self):
        rng = np.random.default_rng(1)
        t = rng.uniform(-1, 1, 400)
        X = np.column_stack([t, t**2, np.sin(2 * t), 0.5 * t**3]) + 0.05 * rng.normal(
            size=(400, 4)
        )
        ppa = PPA(degree=(1, 2, 3), random_state=0)
        fi = feature_instability(ppa, X, n_components=1, client=False)
        full = PPA(degree=(1, 2, 3), n_components=1, random_state=0).fit(X)
        f = full.inverse_transform(full.transform(X))
        expected = []
        for j in range(4):
            keep = np.delete(np.arange(4), j)
            part = PPA(degree=(1, 2, 3), n_components=1, random_state=0).fit(X[:, keep])
            g = part.inverse_transform(part.transform(X[:, keep]))
            expected.append(np.mean(((f[:, keep] - g) ** 2).sum(axis=1)))
        assert np.allclose(fi.terms, expected, rtol=1e-9)

    def test_feature_bagged_ppa_refit_equals_member_by_member_brute_force(self):
        rng = np.random.default_rng(2)
        t = rng.uniform(-1, 1, 500)
        X = np.column_stack([t, t**2, np.sin(2 * t), t**3, np.cos(t)]) + 0.03 * rng.normal(
            size=(500, 5)
        )
        model = FeatureBaggingPPA(
            PPA(degree=2), n_components=1, n_estimators=5, max_features=0.6, random_state=4
        )
        fi = feature_instability(model, X, client=False)
        plan = model.bag_plan(*X.shape)

        def output(specs):
            total, count = np.zeros_like(X), np.zeros(5)
            for spec in specs:
                m = PPA(degree=2, n_components=1, random_state=spec.seed).fit(X[:, spec.features])
                total[:, spec.features] += m.inverse_transform(m.transform(X[:, spec.features]))
                count[spec.features] += 1
            return np.where(count > 0, total / np.maximum(count, 1), X.mean(axis=0))

        f = output(plan.members())
        for j in range(5):
            g = output([plan.without_feature(s, j, "shared") for s in plan.members()])
            keep = np.delete(np.arange(5), j)
            assert fi.terms[j] == pytest.approx(
                np.mean(((f - g)[:, keep] ** 2).sum(axis=1)), rel=1e-9
            )

    def test_classifier_instability_compares_class_probabilities(self):
        X, y, X_eval = linear_data(n=80)
        labels = (y > 0).astype(int)
        fi = feature_instability(
            DecisionTreeClassifier(max_depth=2, random_state=0),
            X,
            labels,
            X_eval=X_eval,
            client=False,
        )
        f = (
            DecisionTreeClassifier(max_depth=2, random_state=0)
            .fit(X, labels)
            .predict_proba(X_eval)
        )
        j = 0
        g = (
            DecisionTreeClassifier(max_depth=2, random_state=0)
            .fit(X[:, 1:], labels)
            .predict_proba(X_eval[:, 1:])
        )
        assert fi.terms[j] == pytest.approx(np.mean(((f - g) ** 2).sum(axis=1)))


# --------------------------------------------------------------------------------------------
# closed forms: exact leave-one-out from one inverse per member
# --------------------------------------------------------------------------------------------


LINEAR_MEMBERS = [
    LinearRegression(),
    LinearRegression(fit_intercept=False),
    Ridge(alpha=3.0),
    Ridge(alpha=0.5, fit_intercept=False),
]


class TestClosedForms:
    @pytest.mark.parametrize("base", LINEAR_MEMBERS, ids=lambda e: repr(e))
    @pytest.mark.parametrize(
        "bagging",
        [
            dict(max_features=1.0),
            dict(max_features=0.5, max_samples=0.7),
            dict(max_features=0.7, max_samples=25),
        ],
    )
    def test_closed_form_equals_brute_force_refits(self, base, bagging):
        X, y, X_eval = linear_data(n=60, d=8, seed=3)
        model = FeatureBaggingRegressor(base, n_estimators=6, random_state=5, **bagging)
        every_third = {"instances": np.arange(0, 60, 3)}
        for axis, fn, kw in (
            ("feature", feature_instability, {}),
            ("instance", instance_instability, every_third),
        ):
            refit = fn(model, X, y, X_eval=X_eval, method="refit", client=False, **kw)
            closed = fn(model, X, y, X_eval=X_eval, method="closed_form", client=False, **kw)
            assert np.allclose(closed.terms, refit.terms, rtol=1e-10, atol=1e-15), axis
            assert closed.n_refits == refit.n_refits

    def test_minimum_norm_interpolators_with_more_features_than_rows(self):
        # the Gram-matrix (dual) form: m < s, no intercept
        rng = np.random.default_rng(0)
        X = rng.normal(size=(20, 40))
        y = X @ rng.normal(size=40) + rng.normal(size=20)
        X_eval = rng.normal(size=(30, 40))
        model = FeatureBaggingRegressor(
            LinearRegression(fit_intercept=False),
            n_estimators=4,
            max_features=0.8,
            max_samples=0.75,
            random_state=1,
        )
        for fn in (feature_instability, instance_instability):
            refit = fn(model, X, y, X_eval=X_eval, method="refit", client=False)
            closed = fn(model, X, y, X_eval=X_eval, method="closed_form", client=False)
            assert np.allclose(closed.terms, refit.terms, rtol=1e-10)

    def test_closed_form_refuses_what_it_cannot_do(self):
        X, y, _ = linear_data()
        with pytest.raises(ValueError, match="LinearRegression or Ridge"):
            feature_instability(DecisionTreeRegressor(), X, y, method="closed_form")
        with pytest.raises(ValueError, match="coupling='shared'"):
            feature_instability(
                FeatureBaggingRegressor(LinearRegression(), random_state=0),
                X,
                y,
                method="closed_form",
                coupling="independent",
            )
        with pytest.raises(ValueError, match="fit_intercept=True needs more rows"):
            feature_instability(LinearRegression(), X[:4], y[:4], method="closed_form")


# --------------------------------------------------------------------------------------------
# coupling
# --------------------------------------------------------------------------------------------


class TestCoupling:
    def test_shared_coupling_keeps_every_bag_without_j_and_swaps_j_for_the_next_draw(self):
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=40, max_features=0.4, max_samples=0.5, random_state=2
        )
        plan = model.bag_plan(50, 10)
        for j in range(10):
            for spec in plan.members():
                new = plan.without_feature(spec, j, "shared")
                assert np.array_equal(new.samples, spec.samples) and new.seed == spec.seed
                if j not in spec.features:
                    assert new.same_as(spec)
                else:
                    removed = set(spec.features) - set(new.features)
                    added = set(new.features) - set(spec.features)
                    assert removed == {j} and len(added) == 1 and j not in new.features
                    # the replacement is fixed by the member's seed: asking again gives it again
                    assert plan.without_feature(spec, j, "shared").same_as(new)

    def test_independent_coupling_redraws_the_bags_of_the_removed_axis(self):
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=40, max_features=0.4, random_state=2
        )
        plan = model.bag_plan(50, 10)
        redrawn = [plan.without_feature(s, 3, "independent") for s in plan.members()]
        untouched = [s for s, r in zip(plan.members(), redrawn) if 3 not in s.features]
        assert all(3 not in r.features and len(r.features) == 4 for r in redrawn)
        changed = sum(
            not r.same_as(s) for s, r in zip(plan.members(), redrawn) if 3 not in s.features
        )
        assert changed > 0.8 * len(untouched)

    def test_shared_refit_reuses_bags_without_j_and_equals_refitting_everything(self):
        X, y, X_eval = linear_data(n=80, d=6)
        model = FeatureBaggingRegressor(
            DecisionTreeRegressor(max_depth=3, max_features=0.7),
            n_estimators=10,
            max_features=0.5,
            random_state=7,
        )
        fi = feature_instability(model, X, y, X_eval=X_eval, client=False)
        plan = model.bag_plan(80, 6)
        specs = plan.members()
        assert fi.n_refits == sum(len(s.features) for s in specs)  # only bags holding j
        from ppa_dask.ensemble.bagging import fit_member

        def predict(members):
            return np.mean(
                [
                    fit_member(s, X, y, model.member_template()).predict(X_eval[:, s.features])
                    for s in members
                ],
                axis=0,
            )

        f = predict(specs)
        for j in (0, 4):
            g = predict([plan.without_feature(s, j, "shared") for s in specs])  # refit all
            assert fi.terms[j] == pytest.approx(np.mean((f - g) ** 2), rel=1e-12, abs=1e-15)

    def test_independent_refit_costs_more_and_is_less_stable(self):
        X, y, X_eval = linear_data(n=80, d=6)
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=8, max_features=0.5, random_state=7
        )
        shared = feature_instability(model, X, y, X_eval=X_eval, client=False)
        independent = feature_instability(
            model, X, y, X_eval=X_eval, coupling="independent", client=False
        )
        assert independent.n_refits > shared.n_refits
        assert independent.value > shared.value


# --------------------------------------------------------------------------------------------
# out-of-bag estimates
# --------------------------------------------------------------------------------------------


class TestOutOfBag:
    @pytest.mark.slow
    def test_oob_estimates_the_infinite_bagging_fi_of_a_small_exact_case(self):
        # d = 4, s = 2: infinite bagging averages all 6 subsets; without j, the 3 that avoid j
        rng = np.random.default_rng(0)
        X = rng.normal(size=(40, 4))
        y = X @ np.array([1.0, -2.0, 0.5, 1.5]) + 0.3 * rng.normal(size=40)
        X_eval = rng.normal(size=(50, 4))
        subsets = list(itertools.combinations(range(4), 2))
        pred = {S: LinearRegression().fit(X[:, S], y).predict(X_eval[:, S]) for S in subsets}
        f = np.mean([pred[S] for S in subsets], axis=0)
        exact = [
            np.mean((f - np.mean([pred[S] for S in subsets if j not in S], axis=0)) ** 2)
            for j in range(4)
        ]
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=600, max_features=0.5, random_state=0
        )
        oob = feature_instability(model, X, y, X_eval=X_eval, method="oob", client=False)
        assert oob.n_refits == 0
        # Monte Carlo over 600 bags: each subset's share is 1/6 +- 1.5 %
        assert oob.value == pytest.approx(np.mean(exact), rel=0.06)
        assert np.allclose(oob.terms, exact, rtol=0.2)

    def test_oob_instance_instability_uses_members_that_never_saw_the_row(self):
        X, y, X_eval = linear_data(n=40, d=5)
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=30, max_features=0.6, max_samples=0.5, random_state=1
        )
        oob = instance_instability(model, X, y, X_eval=X_eval, method="oob", client=False)
        plan = model.bag_plan(40, 5)
        from ppa_dask.ensemble.bagging import fit_member

        outputs = [
            fit_member(s, X, y, LinearRegression()).predict(X_eval[:, s.features])
            for s in plan.members()
        ]
        f = np.mean(outputs, axis=0)
        i = 7
        g = np.mean([o for o, s in zip(outputs, plan.members()) if i not in s.samples], axis=0)
        assert oob.terms[i] == pytest.approx(np.mean((f - g) ** 2), rel=1e-12)

    def test_oob_needs_members_that_left_something_out(self):
        X, y, _ = linear_data()
        with pytest.raises(ValueError, match="needs a bagged estimator"):
            feature_instability(LinearRegression(), X, y, method="oob")
        with pytest.raises(ValueError, match="every member saw"):
            feature_instability(
                FeatureBaggingRegressor(LinearRegression(), max_features=1.0, random_state=0),
                X,
                y,
                method="oob",
            )
        with pytest.raises(ValueError, match="instance sub-bagging"):
            instance_instability(
                FeatureBaggingRegressor(LinearRegression(), random_state=0), X, y, method="oob"
            )


# --------------------------------------------------------------------------------------------
# the paper's claims on a linear model with fixed seeds
# --------------------------------------------------------------------------------------------


class TestPaperClaims:
    def test_fi_falls_as_q_falls(self):
        X, y, X_eval = linear_data(n=200, d=12, seed=4)
        values = []
        for q in (1.0, 0.75, 0.5, 0.25):
            model = FeatureBaggingRegressor(
                LinearRegression(), n_estimators=60, max_features=q, random_state=0
            )
            values.append(
                feature_instability(
                    model, X, y, X_eval=X_eval, method="closed_form", client=False
                ).value
            )
        assert all(a > b for a, b in zip(values, values[1:])), values

    @pytest.mark.slow
    def test_finite_b_fi_approaches_the_large_b_value_past_d_1_minus_q_over_q(self):
        X, y, X_eval = linear_data(n=100, d=8, seed=5)
        q = 0.5
        rounds = bagging_rounds(8, q)
        assert rounds == 8

        def fi(B, seed):
            model = FeatureBaggingRegressor(
                LinearRegression(), n_estimators=B, max_features=q, random_state=seed
            )
            return feature_instability(
                model, X, y, X_eval=X_eval, method="closed_form", client=False
            ).value

        limit = fi(1500, 99)
        error = {
            B: np.mean([abs(fi(B, s) - limit) for s in range(4)])
            for B in (1, rounds // 4, rounds, 4 * rounds, 16 * rounds)
        }
        Bs = sorted(error)
        assert all(error[a] > error[b] for a, b in zip(Bs, Bs[1:])), error
        assert error[16 * rounds] < 0.1 * error[1]

    @pytest.mark.slow
    def test_bagged_fi_of_a_bounded_learner_respects_the_bound(self):
        # Proposition 4.1 for outputs in [-M, M]: the infinite-bagging FI (estimated out of bag
        # from many bags) stays below M^2/(d-1) q/(1-q)
        rng = np.random.default_rng(3)
        X = rng.normal(size=(80, 10))
        y = np.sign(X[:, 0] + X[:, 1])  # a tree's predictions stay in [-1, 1]: M = 1
        model = FeatureBaggingRegressor(
            DecisionTreeRegressor(max_depth=2, random_state=0),
            n_estimators=400,
            max_features=0.2,
            random_state=0,
        )
        oob = feature_instability(model, X, y, method="oob", client=False)
        bound = feature_stability_bound(10, 0.2, M=1.0)
        assert 0 < oob.value <= bound
        # not a vacuous bound: the same tree without bagging is above it
        single = feature_instability(
            DecisionTreeRegressor(max_depth=2, random_state=0), X, y, client=False
        )
        assert single.value > bound

    def test_bound_and_rounds_formulas(self):
        assert feature_stability_bound(11, 0.5, M=2.0) == pytest.approx(4 / 10)
        assert feature_stability_bound(5, 1.0) == math.inf
        assert instance_stability_bound(101, 0.2) == pytest.approx(0.25 / 100)
        assert bagging_rounds(100, 0.5) == 100 and bagging_rounds(100, 1.0) == 1
        # smaller q: a tighter bound and more rounds
        assert feature_stability_bound(20, 0.1) < feature_stability_bound(20, 0.3)
        assert bagging_rounds(20, 0.1) > bagging_rounds(20, 0.3)
        with pytest.raises(ValueError, match=r"q must be a finite number in \(0, 1\], got 0"):
            feature_stability_bound(10, 0.0)
        with pytest.raises(ValueError, match="n_features must be an int >= 2"):
            bagging_rounds(1, 0.5)


# --------------------------------------------------------------------------------------------
# estimates on a subset of indices; reproducibility
# --------------------------------------------------------------------------------------------


class TestEstimation:
    def test_ii_from_a_random_subset_brackets_the_full_value(self):
        X, y, X_eval = linear_data(n=300, d=5, seed=6, noise=2.0)
        model = FeatureBaggingRegressor(
            LinearRegression(), n_estimators=5, max_features=0.6, max_samples=0.5, random_state=0
        )
        full = instance_instability(model, X, y, X_eval=X_eval, method="closed_form", client=False)
        assert full.terms.size == 300 and full.stderr == 0.0
        part = instance_instability(
            model,
            X,
            y,
            X_eval=X_eval,
            method="refit",
            n_instances=60,
            random_state=3,
            client=False,
        )
        assert part.terms.size == 60 and part.stderr > 0
        assert abs(part.value - full.value) < 3 * part.stderr
        # the subset's terms are the full computation's terms at those rows
        assert np.allclose(part.terms, full.terms[part.indices], rtol=1e-9)

    @pytest.mark.cluster
    def test_same_seed_same_fi_and_ii_in_process_and_on_one_or_two_workers(self):
        from distributed import Client, LocalCluster

        X, y, X_eval = linear_data(n=80, d=6)
        model = FeatureBaggingRegressor(
            DecisionTreeRegressor(max_depth=3, max_features=0.7),
            n_estimators=6,
            max_features=0.5,
            max_samples=0.7,
            random_state=3,
        )
        reference = (
            feature_instability(model, X, y, X_eval=X_eval, client=False),
            instance_instability(
                model, X, y, X_eval=X_eval, n_instances=8, random_state=1, client=False
            ),
        )
        for n_workers in (1, 2):
            # worker threads in this process, every socket on the loopback interface
            with (
                LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=1,
                    processes=False,
                    protocol="tcp://",
                    host="127.0.0.1",
                    dashboard_address="127.0.0.1:0",
                    worker_dashboard_address=None,
                ) as cluster,
                Client(cluster),
            ):
                fi = feature_instability(model, X, y, X_eval=X_eval)
                ii = instance_instability(
                    model, X, y, X_eval=X_eval, n_instances=8, random_state=1
                )
            assert np.array_equal(fi.terms, reference[0].terms)
            assert np.array_equal(ii.terms, reference[1].terms)
            assert np.array_equal(ii.indices, reference[1].indices)


# --------------------------------------------------------------------------------------------
# out of core: members and refits of a FeatureBaggingPPA from shared scans
# --------------------------------------------------------------------------------------------

_READS = {"n": 0}


def _count_read(block):
    _READS["n"] += 1
    return block


class TestOutOfCore:
    @pytest.mark.slow
    def test_dask_refits_share_scans_and_equal_the_in_memory_ones(self):
        import dask
        import dask.array as da

        rng = np.random.default_rng(0)
        t = rng.uniform(-1, 1, 1200)
        X = np.column_stack([t, t**2, np.sin(2 * t), t**3, np.cos(3 * t)]) + 0.02 * rng.normal(
            size=(1200, 5)
        )
        X_eval = X[::10]
        model = FeatureBaggingPPA(
            PPA(degree=(1, 2)),
            n_components=1,
            n_estimators=6,
            max_features=0.6,
            max_samples=0.7,
            random_state=2,
        )
        source = da.from_array(X, chunks=(300, 5)).map_blocks(_count_read, dtype=X.dtype)
        for fn, kw in ((feature_instability, {}), (instance_instability, {"instances": [5, 900]})):
            in_memory = fn(model, X, X_eval=X_eval, client=False, **kw)
            _READS["n"] = 0
            with dask.config.set(scheduler="synchronous"):
                out_of_core = fn(model, source, X_eval=X_eval, **kw)
            assert np.allclose(out_of_core.terms, in_memory.terms, rtol=1e-8)
            assert out_of_core.n_refits == in_memory.n_refits > 0
            # 6 members and all their refits: 1 + k = 2 scans of 4 chunks
            assert _READS["n"] == 4 * 2

    def test_dask_input_needs_an_evaluation_sample(self):
        import dask.array as da

        X = np.random.default_rng(0).normal(size=(100, 4))
        with pytest.raises(ValueError, match="pass X_eval"):
            feature_instability(PPA(), da.from_array(X))


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


class TestBadInput:
    def test_unknown_method_or_coupling(self):
        X, y, _ = linear_data()
        with pytest.raises(ValueError, match="method must be one of"):
            feature_instability(LinearRegression(), X, y, method="jackknife")
        with pytest.raises(ValueError, match="coupling must be one of"):
            feature_instability(LinearRegression(), X, y, coupling="tight")

    def test_shapes(self):
        X, y, X_eval = linear_data()
        with pytest.raises(ValueError, match="X_eval must have the 6 columns of X"):
            feature_instability(LinearRegression(), X, y, X_eval=X_eval[:, :4])
        with pytest.raises(ValueError, match="y has 59 entries but X has 60 rows"):
            instance_instability(LinearRegression(), X, y[:-1])
        with pytest.raises(ValueError, match="needs targets y"):
            feature_instability(LinearRegression(), X)
        with pytest.raises(ValueError, match="at least 2"):
            feature_instability(LinearRegression(), X[:, :1], y)
        with pytest.raises(ValueError, match=r"features must be indices in \[0, 6\)"):
            feature_instability(LinearRegression(), X, y, features=[2, 6])

    def test_dask_input_and_non_estimators(self):
        import dask.array as da

        X, y, _ = linear_data()
        with pytest.raises(TypeError, match="in-memory data"):
            feature_instability(LinearRegression(), da.from_array(X), y)
        with pytest.raises(TypeError, match="X_eval is a Dask array"):
            feature_instability(LinearRegression(), X, y, X_eval=da.from_array(X))
        with pytest.raises(TypeError, match="scikit-learn estimator"):
            feature_instability(object(), X, y)

    def test_ppa_components_must_leave_a_feature_to_remove(self):
        X, _, _ = linear_data(d=4)
        with pytest.raises(ValueError, match="1 <= k < d - 1 = 3"):
            feature_instability(PPA(), X, n_components=3)
