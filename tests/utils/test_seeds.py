"""The seed policy (ppa_dask.utils.seeds): the same accepted and refused ``random_state`` at
every public entry point, the child-seed derivations, and what a seed promises: the same draws
whatever the chunking, the scheduler or the order of the tasks, other draws for other seeds,
and the documented derivations redone here with numpy's own API.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import zlib

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from ppa_dask import PPA, datasets
from ppa_dask.ensemble import bagging
from ppa_dask.ensemble.bagging import (
    FeatureBaggingClassifier,
    FeatureBaggingPPA,
    FeatureBaggingRegressor,
)
from ppa_dask.geometry.neighbors import make_ppa_knn
from ppa_dask.information import entropy
from ppa_dask.ppa import kernels
from ppa_dask.stability import instability
from ppa_dask.store import open_array
from ppa_dask.utils import seeds
from ppa_dask.utils.params import InvalidParameterError
from ppa_dask.utils.seeds import task_seed
from ppa_dask.vsk import scaling

# --------------------------------------------------------------------------------------------
# seeds that mean what they say: the same draws whatever the chunking, the scheduler or the
# order of the tasks; other draws for other seeds; the documented derivation, redone here
# --------------------------------------------------------------------------------------------


def _chunked_rows(kind, n, d, seed, cuts):
    bounds = [0, *cuts, n]
    return np.vstack(
        [
            datasets.generate_rows(kind, a, b, d, random_state=seed)
            for a, b in itertools.pairwise(bounds)
        ]
    )


@pytest.mark.parametrize("kind, d", [("helix", 3), ("curved", 5)])
def test_generated_rows_do_not_depend_on_how_they_are_cut(kind, d):
    n, seed = 70_000, 11
    whole = datasets.generate_rows(kind, 0, n, d, random_state=seed)
    # cuts inside the first generation block and across the boundary of the second (65,536);
    # pieces of two rows at least: the rotation of a single row goes through BLAS's
    # matrix-vector product, whose last bit may differ from the matrix product's
    for cuts in ([2], [7, 5000, 65_535], [65_536], [30_000, 65_537, 69_998]):
        np.testing.assert_array_equal(_chunked_rows(kind, n, d, seed, cuts), whole)
    blocks = datasets.make_demo_blocks(
        n, n_features=d, kind=kind, random_state=seed, block_rows=9_999
    )
    np.testing.assert_array_equal(np.vstack(list(blocks)), whole)
    # fewer rows asked for: a prefix of the same rows
    np.testing.assert_array_equal(
        datasets.generate_rows(kind, 0, 100, d, random_state=seed), whole[:100]
    )


def test_a_generated_dask_array_is_the_same_for_any_chunks_and_scheduler():
    import dask

    reference = datasets.make_helix(3_000, n_features=4, random_state=5)
    for chunks in (3_000, 1_000, 333, 97):
        x = datasets.generated_dask_array("helix", 3_000, 4, chunks=chunks, random_state=5)
        for scheduler, workers in (("synchronous", 1), ("threads", 1), ("threads", 4)):
            with dask.config.set(scheduler=scheduler, num_workers=workers):
                np.testing.assert_array_equal(
                    x.compute(), reference, err_msg=f"{chunks} {workers}"
                )


def test_the_cube_is_the_same_for_any_chunks():
    whole = datasets.make_cube(n_bands=3, ny=10, nx=6, random_state=4)["reflectance"].values
    for rows in (1, 3, 7):
        cube = datasets.make_cube(n_bands=3, ny=10, nx=6, random_state=4, chunks={"y": rows})
        np.testing.assert_array_equal(cube["reflectance"].values, whole)


def test_fold_labels_and_bag_rows_depend_on_the_row_not_the_chunk():
    n = 5_000
    for seed in (0, 3, 2**40 + 1):
        labels = kernels.fold_labels(0, n, seed, 3)
        parts = [kernels.fold_labels(a, b, seed, 3) for a, b in ((0, 1), (1, 1234), (1234, n))]
        np.testing.assert_array_equal(np.concatenate(parts), labels)
        # every fold gets about a third of the rows (a hash, not a sort of the row order)
        assert np.all(np.abs(np.bincount(labels, minlength=3) / n - 1 / 3) < 0.03)
    plan = bagging.BagPlan(8, n, 6, 4, 3, 0.5)
    for spec in plan.members():
        mask = spec.row_mask(0, n)
        np.testing.assert_array_equal(
            np.concatenate([spec.row_mask(0, 777), spec.row_mask(777, n)]), mask
        )
        assert abs(mask.mean() - 0.5) < 0.03


def test_ppa_folds_and_degrees_do_not_depend_on_chunking():
    import dask.array as da

    X = datasets.make_curved_manifold(600, n_features=4, random_state=2)
    fitted = [PPA(degree=(1, 2, 3), cv=3, random_state=9).fit(X)]
    for chunks in (600, 250, 77):
        fitted.append(
            PPA(degree=(1, 2, 3), cv=3, random_state=9).fit(da.from_array(X, chunks=(chunks, -1)))
        )
    first = fitted[0]
    for model in fitted[1:]:
        assert model.fold_seed_ == first.fold_seed_
        assert list(model.degrees_) == list(first.degrees_)
        np.testing.assert_allclose(model.cv_scores_, first.cv_scores_, rtol=1e-9, atol=1e-12)


def test_bag_members_are_functions_of_the_seed_and_their_index():
    plan = bagging.BagPlan(21, 300, 10, 12, 4, 0.6)
    members = plan.members()
    # asked for one at a time, in any order, from threads at once: the same members
    order = np.random.default_rng(0).permutation(len(members))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        shuffled = dict(zip(order, pool.map(plan.member, order)))
    for b, spec in enumerate(members):
        assert shuffled[b].same_as(spec), b
    # a larger ensemble keeps the members of the smaller one
    larger = bagging.BagPlan(21, 300, 10, 30, 4, 0.6).members()
    assert all(a.same_as(b) for a, b in zip(members, larger))
    # members differ from one another, and from the members of another seed
    assert len({tuple(s.features) for s in members}) > 1
    assert len({s.seed for s in members}) == len(members)
    other = bagging.BagPlan(22, 300, 10, 12, 4, 0.6).members()
    assert not any(a.same_as(b) for a, b in zip(members, other))


def test_an_ensembles_members_do_not_depend_on_the_order_they_are_fitted_in():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 6))
    y = X[:, 0] + 0.1 * rng.normal(size=80)
    a = FeatureBaggingRegressor(
        DecisionTreeRegressor(), n_estimators=4, max_features=3, random_state=7
    ).fit(X, y)
    # the same members fitted one by one, last first, from the plan
    specs = a.bag_plan(*X.shape).members()
    template = a.member_template()
    alone = [bagging.fit_member(spec, X, y, template) for spec in reversed(specs)][::-1]
    assert [int(s.seed) for s in specs] == [int(s) for s in a.member_seeds_]
    for spec, features in zip(specs, a.estimators_features_):
        np.testing.assert_array_equal(spec.features, features)
    expected = np.mean([m.predict(X[:, s.features]) for m, s in zip(alone, specs)], axis=0)
    np.testing.assert_allclose(a.predict(X), expected, rtol=1e-12, atol=1e-12)


def test_task_seeds_separate_their_keys():
    grid = [
        task_seed(0, task, rep, split)
        for task in ("sat", "vehicles", 3)
        for rep in range(100)
        for split in range(5)
    ]
    assert len(set(grid)) == len(grid)
    # keys are not concatenated: shifting a digit or a letter between keys changes the seed
    assert task_seed(0, 1, 23) != task_seed(0, 12, 3)
    assert task_seed(0, "a", "b") != task_seed(0, "ab") != task_seed(0, "b", "a")
    assert task_seed(0, 1) != task_seed(1, 0) and task_seed(0, 1) != task_seed(0, 1, 1)
    # (numpy's SeedSequence takes trailing zero words as absent: the keys (k,) and (k, 0), or
    # (k, "") with crc32("") = 0, name one stream; changing that would change every seed)
    # a pure function of its keys: computed concurrently, in another order, the same
    keys = [(s, "split", r) for s in range(3) for r in range(50)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        concurrent_seeds = list(pool.map(lambda k: task_seed(*k), reversed(keys)))[::-1]
    assert concurrent_seeds == [task_seed(*k) for k in keys]


# a seeded call of each generator, and of the entry points whose output is itself a draw of
# many values (a few features drawn out of four may coincide for two seeds)
DRAWS = [
    "make_helix",
    "make_curved_manifold",
    "rotation_matrix",
    "generate_rows",
    "make_demo_blocks",
    "generated_dask_array",
    "write_zarr",
    "make_cube",
    "make_parabolas",
    "dequantize",
    "FeatureBaggingPPA",
    "instance_instability",
]


@pytest.mark.parametrize("entry", DRAWS)
def test_other_seeds_give_other_draws(entry, tmp_path):
    call = ENTRY_POINTS[entry]
    draws = [np.asarray(call(seed, tmp_path), dtype=float) for seed in (0, 1, 2**33)]
    for i, j in itertools.combinations(range(3), 2):
        assert not np.array_equal(draws[i], draws[j]), (entry, i, j)


def test_the_rotation_is_the_documented_draw():
    # rotation_matrix's docstring: the Q factor of the QR decomposition of a standard normal
    # n x n matrix drawn from SeedSequence([seed, 2**32 - 1]), columns signed so that
    # diag(R) > 0, the first column negated if det(Q) < 0. Redone with numpy's API:
    for seed, n in ((5, 4), (0, 3), (2**40, 6)):
        z = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 2**32 - 1])))
        q, r = np.linalg.qr(z.standard_normal((n, n)))
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        if np.linalg.det(q) < 0:
            q[:, 0] = -q[:, 0]
        np.testing.assert_allclose(datasets.rotation_matrix(n, random_state=seed), q, atol=1e-13)


def test_bag_features_are_the_documented_draw():
    # member b of seed s keeps the first k of a permutation of the features drawn from the
    # key stream (s, b, 0): numpy's SeedSequence of the keys, a PCG64 generator
    plan = bagging.BagPlan(13, 50, 9, 5, 4)
    for b, spec in enumerate(plan.members()):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([13, b, 0])))
        np.testing.assert_array_equal(spec.features, np.sort(rng.permutation(9)[:4]))


# --------------------------------------------------------------------------------------------
# one policy: what random_state may be, at every public entry point
# --------------------------------------------------------------------------------------------

_DATA = np.random.default_rng(0)
_X = _DATA.normal(size=(40, 4))
_Y = _X[:, 0] + 0.1 * _DATA.normal(size=40)
_YC = (_X[:, 0] > 0).astype(int)
_XQ = np.floor(_DATA.normal(size=(40, 3)) * 3)


def _write_zarr(random_state, tmp_path):
    path = tmp_path / f"d{len(list(tmp_path.iterdir()))}.zarr"
    datasets.write_zarr(path, 20, n_features=4, random_state=random_state)
    return open_array(str(path)).compute()


# name -> call(random_state, tmp_path) returning the seeded output
ENTRY_POINTS = {
    "PPA": lambda rs, _: PPA(degree=(1, 2), cv=2, random_state=rs).fit(_X).transform(_X),
    "FeatureBaggingRegressor": lambda rs, _: (
        FeatureBaggingRegressor(
            DecisionTreeRegressor(), n_estimators=2, max_features=2, random_state=rs
        )
        .fit(_X, _Y)
        .predict(_X)
    ),
    "FeatureBaggingClassifier": lambda rs, _: (
        FeatureBaggingClassifier(
            DecisionTreeClassifier(), n_estimators=2, max_features=2, random_state=rs
        )
        .fit(_X, _YC)
        .predict_proba(_X)
    ),
    "FeatureBaggingPPA": lambda rs, _: (
        FeatureBaggingPPA(
            PPA(degree=2), n_components=1, n_estimators=2, max_features=3, random_state=rs
        )
        .fit(_X)
        .member_seeds_
    ),
    "make_helix": lambda rs, _: datasets.make_helix(20, random_state=rs),
    "make_curved_manifold": lambda rs, _: datasets.make_curved_manifold(20, 4, random_state=rs),
    "rotation_matrix": lambda rs, _: datasets.rotation_matrix(4, random_state=rs),
    "generate_rows": lambda rs, _: datasets.generate_rows("curved", 0, 9, 4, random_state=rs),
    "make_demo_blocks": lambda rs, _: np.vstack(
        list(datasets.make_demo_blocks(10, n_features=4, random_state=rs))
    ),
    "generated_dask_array": lambda rs, _: datasets.generated_dask_array(
        "helix", 10, 3, chunks=5, random_state=rs
    ).compute(),
    "write_zarr": _write_zarr,
    "make_cube": lambda rs, _: (
        datasets.make_cube(n_bands=3, ny=3, nx=3, random_state=rs)["reflectance"].values
    ),
    "make_parabolas": lambda rs, _: datasets.make_parabolas(10, random_state=rs)[0],
    "dequantize": lambda rs, _: entropy.dequantize(_XQ, random_state=rs),
    "marginal_entropies": lambda rs, _: entropy.marginal_entropies(_XQ, random_state=rs),
    "marginal_entropy": lambda rs, _: entropy.marginal_entropy(_XQ[:, 0], random_state=rs),
    "multi_information_reduction": lambda rs, _: entropy.multi_information_reduction(
        _XQ, PCA().fit(_XQ), random_state=rs
    ),
    "feature_instability": lambda rs, _: (
        instability.feature_instability(Ridge(), _X, _Y, n_features=2, random_state=rs).indices
    ),
    "instance_instability": lambda rs, _: (
        instability.instance_instability(Ridge(), _X, _Y, n_instances=3, random_state=rs).indices
    ),
    "PPAScaling": lambda rs, _: (
        scaling.PPAScaling(n_components=1, degree=(1, 2), random_state=rs)
        .fit(_X[:, :3], _YC)
        .transform(_X[:, :3])
    ),
    "SVMExtraction": lambda rs, _: (
        scaling.SVMExtraction(n_keep=2, random_state=rs).fit(_X, _YC).keep_
    ),
    "make_ppa_knn": lambda rs, _: (
        make_ppa_knn(3, degree=(1, 2), random_state=rs).fit(_X, _YC).predict(_X)
    ),
}

# kind -> a factory of equal values (a generator's state is consumed by the call)
ACCEPTED = {
    "None": lambda: None,
    "numpy int": lambda: np.int64(3),
    "int beyond 2**32": lambda: 2**40 + 1,
    "Generator": lambda: np.random.default_rng(5),
    "RandomState": lambda: np.random.RandomState(5),
}
REFUSED = [-1, 1.5, True, np.bool_(False), "3", np.float64(2.0), [1]]


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_accepts_the_policy_kinds(entry, kind, tmp_path):
    call, make = ENTRY_POINTS[entry], ACCEPTED[kind]
    first = np.asarray(call(make(), tmp_path))
    if kind == "None":  # fresh randomness: the same kind of output as a seeded call
        assert first.shape == np.asarray(call(0, tmp_path)).shape
    else:  # equal seeds, equal numbers
        np.testing.assert_array_equal(np.asarray(call(make(), tmp_path)), first)


@pytest.mark.parametrize("value", REFUSED, ids=repr)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_refuses_the_same_way(entry, value, tmp_path):
    message = f"random_state must be {seeds.RANDOM_STATE.expected}, got {value!r}"
    with pytest.raises(InvalidParameterError) as info:
        ENTRY_POINTS[entry](value, tmp_path)
    assert str(info.value) == message
    # callers that caught either kind of error keep working
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_the_policy_message_lists_the_four_kinds():
    assert seeds.RANDOM_STATE.expected == (
        "None, an int >= 0, a numpy.random.Generator or a numpy.random.RandomState"
    )


# --------------------------------------------------------------------------------------------
# integer seeds and child seeds
# --------------------------------------------------------------------------------------------


def test_resolve_seed_keeps_ints_and_draws_below_high():
    assert seeds.resolve_seed(2**70) == 2**70  # an int is used as it is, any size
    for high in (seeds.SEED_MAX, seeds.DATA_SEED_MAX):
        draws = [
            seeds.resolve_seed(None, high=high),
            seeds.resolve_seed(np.random.default_rng(1), high=high),
            seeds.resolve_seed(np.random.RandomState(1), high=high),
        ]
        assert all(0 <= d < high for d in draws)
    # one draw from the generator, so it advances
    rng = np.random.default_rng(4)
    assert seeds.resolve_seed(rng) == np.random.default_rng(4).integers(seeds.DATA_SEED_MAX)
    assert seeds.resolve_seed(rng) != seeds.resolve_seed(np.random.default_rng(4))


def test_estimator_seed_is_scikit_learns_mapping():
    from sklearn.utils import check_random_state

    for s in (0, 7, 2**32 - 1):
        expected = check_random_state(s).randint(seeds.SEED_MAX)
        assert seeds.estimator_seed(s) == expected
    rs = np.random.RandomState(3)
    assert seeds.as_random_state(rs) is rs
    # beyond RandomState's own range: still deterministic, and different seeds differ
    assert seeds.estimator_seed(2**40) == seeds.estimator_seed(2**40)
    assert seeds.estimator_seed(2**40) != seeds.estimator_seed(2**40 + 1)


def test_child_seed_derivations():
    words = [3, zlib.crc32(b"sat"), 4]
    state = np.random.SeedSequence(words).generate_state(1, np.uint32)[0]
    assert seeds.child_seed(3, "sat", 4) == state
    draw = np.random.default_rng(words).integers(seeds.SEED_MAX)
    assert seeds.child_seed(3, "sat", 4, high=seeds.SEED_MAX) == draw
    assert seeds.key_rng(3, "sat", 4).random() == np.random.default_rng(words).random()


def test_task_seed_is_child_seed_of_the_base_seed_and_the_keys():
    for keys in [(0, "sat", 3), (5, 1, 2), (2**40, "split", "x", 0)]:
        assert task_seed(*keys) == seeds.child_seed(*keys)
    for keys in [(1992, 100, 5, 2), (0, 0)]:
        assert task_seed(*keys) == seeds.child_seed(*keys)


@pytest.mark.parametrize("key", [-1, 1.5, True, None, b"x"], ids=repr)
def test_bad_keys_are_refused_by_name(key):
    with pytest.raises(
        InvalidParameterError, match=f"keys must be strings or ints >= 0, got {key!r}"
    ):
        seeds.child_seed(0, key)
    with pytest.raises(ValueError, match="task keys must be strings or ints >= 0"):
        task_seed(0, "sat", key)


@pytest.mark.parametrize("base", [-1, 1.5, True, None, "0"], ids=repr)
def test_bad_base_seeds_are_refused_by_name(base):
    with pytest.raises(
        InvalidParameterError, match=f"base_seed must be an int >= 0, got {base!r}"
    ):
        task_seed(base, "sat")


def test_set_random_state_seeds_nested_parameters_from_the_seed():
    member = make_pipeline(PCA(svd_solver="randomized"), DecisionTreeRegressor())
    seeds.set_random_state(member, 9)
    names = sorted(k for k in member.get_params() if k.endswith("random_state"))
    drawn = np.random.default_rng(9).integers(seeds.SEED_MAX, size=len(names))
    assert [member.get_params()[k] for k in names] == drawn.tolist()
    assert seeds.set_random_state(DecisionTreeRegressor(), 9).random_state == 9
