"""The seed policy (ppa_dask.utils.seeds): the same accepted and refused ``random_state`` at
every public entry point, the child-seed derivations, and the numbers of seeded functions
unchanged by the refactor that put every seed mechanism in one module.
"""

from __future__ import annotations

import hashlib
import zlib

import numpy as np
import paths
import pytest
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestRegressor
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
from ppa_dask.stability import instability
from ppa_dask.store import open_array
from ppa_dask.utils import seeds
from ppa_dask.utils.params import InvalidParameterError
from ppa_dask.utils.seeds import task_seed
from ppa_dask.vsk import scaling

ROOT = paths.ROOT

# --------------------------------------------------------------------------------------------
# numbers unchanged: outputs of seeded functions against the code before the refactor
# --------------------------------------------------------------------------------------------


#: Decimals kept of generator outputs computed with BLAS before their digest (see _probe).
BLAS_DECIMALS = 12


def _digest(a, decimals=None):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    if decimals is not None:
        a = np.round(a, decimals) + 0.0  # + 0.0: one zero, whatever the sign of a rounded -0
    return hashlib.sha256(a.tobytes()).hexdigest()[:16]


def _probe():
    """Seed-dependent outputs of public functions: ints exactly, arrays by digest.

    The same function, run against the tree of commit 8ea1b9b (``git archive HEAD``, before any
    seed code moved, with ``bagging.resolve_seed`` in place of ``seeds.ensemble_seed``), gave
    :data:`PINNED`. Outputs of PPA fits are rounded to 9 decimals (BLAS summation order may
    differ between machines); generator outputs that pass through BLAS (a QR rotation, a matrix
    product) to 12: their last bits follow OpenBLAS's kernel for the processor (SkylakeX and
    Haswell kernels differ there, and 8ea1b9b's code gives the same digests as today's under
    each, exactly and rounded); other generator outputs and seeds are compared exactly.
    """
    out = {}
    out["helix"] = _digest(datasets.make_helix(64, n_features=4, random_state=7), BLAS_DECIMALS)
    out["curved"] = _digest(
        datasets.make_curved_manifold(64, n_features=5, random_state=3), BLAS_DECIMALS
    )
    out["rotation"] = _digest(datasets.rotation_matrix(4, random_state=5), BLAS_DECIMALS)
    out["helix_generator"] = _digest(
        datasets.make_helix(16, random_state=np.random.default_rng(1))
    )
    out["rows_big_seed"] = _digest(
        datasets.generate_rows("curved", 10, 30, n_features=4, random_state=2**40), BLAS_DECIMALS
    )
    blocks = datasets.make_demo_blocks(50, n_features=4, random_state=4, block_rows=20)
    out["demo_blocks"] = _digest(np.vstack(list(blocks)), BLAS_DECIMALS)
    dask_array = datasets.generated_dask_array("helix", 40, 3, chunks=15, random_state=9)
    out["dask_array"] = _digest(dask_array.compute())
    cube = datasets.make_cube(n_bands=4, ny=6, nx=6, random_state=2)
    out["cube"] = _digest(cube["reflectance"].values)
    out["parabolas"] = _digest(datasets.make_parabolas(20, random_state=3)[0])

    out["bag_seed_int"] = seeds.ensemble_seed(12)
    out["bag_seed_generator"] = seeds.ensemble_seed(np.random.default_rng(1))
    out["bag_seed_randomstate"] = seeds.ensemble_seed(np.random.RandomState(1))

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    # a pipeline: nested random_state parameters are set from the member's seed
    member = make_pipeline(PCA(n_components=2, svd_solver="randomized"), DecisionTreeRegressor())
    reg = FeatureBaggingRegressor(
        member, n_estimators=3, max_features=0.5, max_samples=0.8, random_state=5
    ).fit(X, y)
    out["bag_member_seeds"] = [int(s) for s in reg.member_seeds_]
    out["bag_features"] = [np.asarray(s).tolist() for s in reg.estimators_features_]
    out["bag_predict"] = _digest(reg.predict(X), 9)
    ens = FeatureBaggingPPA(
        PPA(degree=2, cv=2),
        n_components=1,
        n_estimators=2,
        max_features=3,
        max_samples=0.7,
        random_state=np.random.default_rng(3),
    ).fit(X)
    out["bagppa_seed"] = int(ens.seed_)
    out["bagppa_member_seeds"] = [int(s) for s in ens.member_seeds_]
    plan = bagging.BagPlan(11, 60, 6, 3, 3, 0.5)
    specs = plan.members()
    out["plan_specs"] = [s.to_json() for s in specs]
    out["plan_redraws"] = [
        plan.without(specs[0], axis, 2, coupling).to_json()
        for axis in ("feature", "instance")
        for coupling in ("shared", "independent")
    ]

    Xp = rng.normal(size=(200, 3))
    out["ppa_fold_seed"] = [
        PPA(degree=(1, 2), cv=2, random_state=rs).fit(Xp).fold_seed_
        for rs in (0, 123, np.random.RandomState(4))
    ]
    out["ppa_transform"] = _digest(
        PPA(degree=(1, 2), cv=2, random_state=3).fit(Xp).transform(Xp), 9
    )

    Xq = np.floor(rng.normal(size=(50, 3)) * 3)
    out["dequantize"] = _digest(entropy.dequantize(Xq, random_state=4))
    out["dequantize_default"] = _digest(entropy.dequantize(Xq))
    h = entropy.marginal_entropy(Xq[:, 0], random_state=2)
    out["marginal_entropy"] = round(float(np.sum(h)), 9)

    out["task_seed"] = [
        task_seed(0, "sat", 3),
        task_seed(5, 1, 2),
        task_seed(2**40, "split", "x", 0),
    ]

    def fields(result):
        return {
            k: _digest(np.asarray(v, dtype=float), 9)
            for k, v in sorted(vars(result).items())
            if isinstance(v, (np.ndarray, float, int)) and not isinstance(v, bool)
        }

    forest = RandomForestRegressor(n_estimators=3)
    res = instability.feature_instability(forest, X, y, random_state=6, n_features=2)
    out["feature_instability"] = fields(res)
    res = instability.instance_instability(Ridge(), X, y, random_state=7, n_instances=3)
    out["instance_instability"] = fields(res)

    yc = (X[:, 0] > 0).astype(int)
    out["svm_keep"] = scaling.SVMExtraction(n_keep=2, random_state=3).fit(X, yc).keep_.tolist()
    ppa_scaling = scaling.PPAScaling(n_components=1, degree=(1, 2), random_state=1)
    out["ppa_scaling"] = _digest(ppa_scaling.fit(X[:, :3], yc).transform(X[:, :3]), 9)
    # the keys the VSK scripts use (they had a task_seed of their own before this was pinned)
    out["vsk_task_seed"] = [task_seed(1992, 100, 5, 2), task_seed(0, 0)]
    return out


# computed by _probe() on the tree of commit 8ea1b9b, before the seed code was changed
PINNED = {
    "bag_features": [[1, 2, 4], [0, 2, 5], [0, 4, 5]],
    "bag_member_seeds": [316973136, 888753469, 1912817144],
    "bag_predict": "8df1ccd4fd31c9d4",
    "bag_seed_generator": 1016164991,
    "bag_seed_int": 12,
    "bag_seed_randomstate": 1791095845,
    "bagppa_member_seeds": [1724596648, 455532821],
    "bagppa_seed": 1742692731,
    "cube": "30451b25a2846a3b",
    "curved": "86802a888c0a07ee",
    "dask_array": "47515f3497726ac1",
    "demo_blocks": "c24cb9b2e35520d1",
    "dequantize": "1de8b39ab92af864",
    "dequantize_default": "f2ab58f79ac13099",
    "feature_instability": {
        "indices": "71f6bfa4d494ae1b",
        "n_refits": "3f710ac088db3336",
        "population": "3e6357a56fbae744",
        "stderr": "ce5a9ee45cfbb55b",
        "terms": "43e748a3d0cbd968",
        "value": "1c20fc4a5ae8b9cc",
    },
    "helix": "cdddd6561bd02c97",
    "helix_generator": "0069073f43cc09f3",
    "instance_instability": {
        "indices": "c4418c2a46456f08",
        "n_refits": "161f4c0b1a18a050",
        "population": "e39fe0de715a2547",
        "stderr": "c76b35d2ac1a8549",
        "terms": "2b85aa806fd535cb",
        "value": "c4c1dad8532d3f0f",
    },
    "marginal_entropy": 2.535343509,
    "parabolas": "83a1f05f121ff02b",
    "plan_redraws": [
        {
            "excluded_rows": [],
            "features": [1, 3, 4],
            "index": 0,
            "row_fraction": 0.5,
            "row_seed": 4050633092623388606,
            "samples": None,
            "seed": 519842150,
        },
        {
            "excluded_rows": [],
            "features": [0, 1, 4],
            "index": 0,
            "row_fraction": 0.5,
            "row_seed": 4050633092623388606,
            "samples": None,
            "seed": 382726607,
        },
        {
            "excluded_rows": [2],
            "features": [1, 3, 4],
            "index": 0,
            "row_fraction": 0.5,
            "row_seed": 4050633092623388606,
            "samples": None,
            "seed": 519842150,
        },
        {
            "excluded_rows": [2],
            "features": [1, 3, 4],
            "index": 0,
            "row_fraction": 0.5,
            "row_seed": 7795947074522446078,
            "samples": None,
            "seed": 2089873528,
        },
    ],
    "plan_specs": [
        {
            "excluded_rows": [],
            "features": [1, 3, 4],
            "index": 0,
            "row_fraction": 0.5,
            "row_seed": 4050633092623388606,
            "samples": None,
            "seed": 519842150,
        },
        {
            "excluded_rows": [],
            "features": [0, 4, 5],
            "index": 1,
            "row_fraction": 0.5,
            "row_seed": 3069041504823607383,
            "samples": None,
            "seed": 1988709026,
        },
        {
            "excluded_rows": [],
            "features": [2, 3, 4],
            "index": 2,
            "row_fraction": 0.5,
            "row_seed": 8175832730801052013,
            "samples": None,
            "seed": 206870599,
        },
    ],
    "ppa_fold_seed": [209652396, 843828734, 2005877882],
    "ppa_scaling": "ca3bd8023badce90",
    "ppa_transform": "6f8c9febf7372679",
    "rotation": "e652d143e34d4336",
    "rows_big_seed": "ff91b052ed69fd6f",
    "svm_keep": [3, 5],
    "task_seed": [1155450646, 4078058680, 2069279418],
    "vsk_task_seed": [3143333539, 2968811710],
}


@pytest.fixture(scope="module")
def probed():
    return _probe()


@pytest.mark.parametrize("key", sorted(PINNED))
def test_seeded_outputs_are_those_of_the_code_before_the_refactor(probed, key):
    assert probed[key] == PINNED[key]


def test_the_probe_covers_every_pinned_value(probed):
    assert sorted(probed) == sorted(PINNED)


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
