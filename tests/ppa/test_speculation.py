"""Fewer passes than steps: a pass also gathers the moments of the steps after a linear one.

A step of degree 1 is a rotation (its polynomial is zero up to rounding), so the steps after it
are known before its pass. With ``lookahead`` the pass of such a step also takes the next
steps' fold moments; when the cross-validation confirms the steps linear those steps need no
pass of their own. The model must be the one-pass-per-step model (``lookahead=0``) whatever the
data (runs of linear steps, no linear step, only linear steps, a fixed degree) and whatever the
driver (numpy, Dask with each residual cache, a LocalCluster, the shared scans of an ensemble);
the passes are counted here from the reads of the data, never taken from ``n_passes_``.
"""

import math
import threading

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import loopback_cluster, random_nonlinear

from ppa_dask import PPA
from ppa_dask.ensemble import FeatureBaggingPPA
from ppa_dask.ppa import drivers, kernels
from ppa_dask.utils.params import InvalidParameterError

ATTRIBUTES = (
    "mean_",
    "leading_vectors_",
    "coefficients_",
    "basis_intervals_",
    "alpha_ranges_",
    "residual_basis_",
    "explained_variance_",
    "residual_variance_",
    "cv_scores_",
)


def linear_runs(n=3000, d=12, seed=0):
    """One curved direction among Gaussian ones of decreasing variance, rotated: a few curved
    steps, then runs of linear ones."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1, 1, n)
    cols = [2.0 * u, 1.5 * (u**2 - 1 / 3), 0.8 * np.sin(3 * u)]
    cols += [s * rng.normal(size=n) for s in np.linspace(1.0, 0.2, d - len(cols))]
    Y = np.column_stack(cols) + 0.02 * rng.normal(size=(n, d))
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return Y @ Q.T + 3.0


def gaussian(n=2500, d=10, seed=2):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * np.linspace(2.0, 0.5, d)


DATA = {
    "linear runs": linear_runs(),
    "no linear step": random_nonlinear(n=3000, d=6, seed=11),
    "all linear": gaussian(),
}


def assert_same_model(model, reference, atol=1e-10):
    assert model.degrees_.tolist() == reference.degrees_.tolist()
    for name in ATTRIBUTES:
        expected = getattr(reference, name)
        if expected is None:
            assert getattr(model, name) is None, name
        else:
            np.testing.assert_allclose(getattr(model, name), expected, atol=atol, err_msg=name)


def expected_passes(degrees, lookahead, only_linear=False, grow=False):
    """Passes of a fit whose steps have ``degrees``: the first pass, plus one for each step not
    gathered by an earlier pass. A pass gathers ``lookahead`` steps when one of the two steps
    before it is linear (or every candidate is 1), else one; with ``grow`` (``"auto"``) it
    gathers as many as the linear steps just before it when they are more (at most
    ``AUTO_LOOKAHEAD_MAX``). A gathered step stands when every step from the gathering pass's up
    to it is linear."""
    passes, covered_to, start = 1, -1, None
    for p in range(len(degrees)):
        if p <= covered_to and all(h == 1 for h in degrees[start:p]):
            continue
        passes += 1
        start = p
        full = only_linear or 1 in degrees[max(p - 2, 0) : p]
        L = lookahead if full else min(lookahead, 1)
        if grow and full:
            run = 0  # the linear steps just before step p
            while run < p and degrees[p - 1 - run] == 1:
                run += 1
            L = max(L, min(run, drivers.AUTO_LOOKAHEAD_MAX))
        covered_to = p + L
    return passes


class CountingKernel:
    """Counts the step passes of the in-memory driver: one ``kernels.pass_kernel`` call each."""

    def __init__(self, monkeypatch):
        self.calls = 0
        kernel = kernels.pass_kernel

        def counted(*args, **kwargs):
            self.calls += 1
            return kernel(*args, **kwargs)

        monkeypatch.setattr(kernels, "pass_kernel", counted)


_LOCK = threading.Lock()
_READS = {}


class CountingReads:
    """Counts how often each source block of a Dask array is computed (the counts live in this
    module, so a copy shipped to an in-process worker counts into the same place)."""

    def __init__(self):
        self.key = len(_READS)
        _READS[self.key] = {}

    @property
    def reads(self):
        return _READS[self.key]

    def __call__(self, block, block_info=None):
        where = block_info[0]["chunk-location"]
        with _LOCK:
            self.reads[where] = self.reads.get(where, 0) + 1
        return block

    def passes(self):
        counts = set(self.reads.values())
        assert len(counts) == 1, f"blocks read unequally often: {self.reads}"
        return counts.pop()


# --------------------------------------------------------------------------------------------
# the same model, fewer passes (in memory)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lookahead", [7, 2])
@pytest.mark.parametrize("data", sorted(DATA))
def test_same_model_and_degrees_with_fewer_passes(monkeypatch, data, lookahead):
    X = DATA[data]
    params = dict(degree=(1, 2, 3, 4), cv=2, random_state=3 if data == "no linear step" else 5)
    reference = PPA(lookahead=0, **params).fit(X)
    n_steps = X.shape[1] - 1
    assert reference.n_passes_ == 1 + n_steps
    counter = CountingKernel(monkeypatch)
    model = PPA(lookahead=lookahead, **params).fit(X)
    assert_same_model(model, reference)
    np.testing.assert_allclose(model.transform(X), reference.transform(X), atol=1e-10)

    degrees = reference.degrees_.tolist()
    counted = 1 + counter.calls  # the mean and covariance pass, then the step passes
    assert model.n_passes_ == counted
    L = lookahead
    assert counted == expected_passes(degrees, L)
    linear = degrees.count(1)
    if data == "no linear step":
        assert linear == 0 and counted == 1 + n_steps
    else:
        assert counted < 1 + n_steps
        # the target of the issue, for the lookahead "auto" takes where passes read the data
        if lookahead == drivers.AUTO_LOOKAHEAD:
            assert counted <= (n_steps - linear) + math.ceil(linear / 8) + 2
    if data == "all linear":
        assert linear == n_steps
    if data == "linear runs":
        assert 0 < linear < n_steps


@pytest.mark.parametrize(
    "shape, gathers", [((3000, 12), False), ((4095, 16), False), ((8192, 16), True)]
)
def test_auto_gathers_ahead_in_memory_only_on_tables_where_it_pays(monkeypatch, shape, gathers):
    # in memory a pass is arithmetic only: on small tables the client's algebra for the steps
    # gathered ahead costs more than the passes saved (design.md 3.10), so "auto" gathers from
    # 16 features and 32 d^2 rows on
    n, d = shape
    X = linear_runs(n=n, d=d, seed=1)
    params = dict(degree=(1, 2, 3), cv=2, random_state=0)
    reference = PPA(lookahead=0, **params).fit(X)
    counter = CountingKernel(monkeypatch)
    model = PPA(**params).fit(X)
    assert_same_model(model, reference)
    counted = 1 + counter.calls
    L = drivers.AUTO_LOOKAHEAD if gathers else 0
    assert counted == expected_passes(reference.degrees_.tolist(), L, grow=gathers)
    assert (counted < d) == gathers  # d - 1 steps: fewer passes than 1 + steps only if gathering


def test_auto_gathers_ahead_on_dask_whatever_the_size():
    X = DATA["linear runs"]  # 3000 x 12: in memory "auto" would not gather
    params = dict(degree=(1, 2, 3), cv=2, random_state=0)
    reference = PPA(lookahead=0, **params).fit(X)
    counter = CountingReads()  # with the residual recomputed, every pass reads every block
    source = da.from_array(X, chunks=(700, 12)).map_blocks(counter, dtype=X.dtype)
    with dask.config.set(scheduler="synchronous"):
        model = PPA(residual_cache="recompute", **params).fit(source)
    assert_same_model(model, reference)
    passes = counter.passes()
    assert passes == expected_passes(
        reference.degrees_.tolist(), drivers.AUTO_LOOKAHEAD, grow=True
    )
    assert passes < X.shape[1]


def test_auto_gathers_as_many_steps_ahead_as_the_linear_run_before_it():
    # 39 linear steps (Gaussian data), passes counted from the reads of a recomputed residual:
    # step 1's pass gathers one step (nothing linear before it), step 3's the 7 of "auto" (a run
    # of 2 before it), step 11's 10, step 22's the 18 left (runs of 10 and 21); a fixed
    # lookahead of 7 needs passes at steps 1, 3, 11, 19, 27 and 35
    X = gaussian(n=4000, d=40, seed=3)
    params = dict(degree=(1, 2), cv=2, random_state=0)
    reference = PPA(lookahead=0, **params).fit(X)
    assert reference.degrees_.tolist() == [1] * 39
    passes = {}
    for lookahead in ("auto", 7):
        counter = CountingReads()
        source = da.from_array(X, chunks=(1000, 40)).map_blocks(counter, dtype=X.dtype)
        with dask.config.set(scheduler="synchronous"):
            model = PPA(residual_cache="recompute", lookahead=lookahead, **params).fit(source)
        assert_same_model(model, reference)
        passes[lookahead] = counter.passes()
    assert passes == {"auto": 1 + 4, 7: 1 + 6}


@pytest.mark.parametrize(
    "degree, data", [(1, "linear runs"), (3, "linear runs"), (1, "all linear")]
)
def test_fixed_degree(monkeypatch, degree, data):
    X = DATA[data]
    reference = PPA(degree=degree, lookahead=0).fit(X)
    counter = CountingKernel(monkeypatch)
    model = PPA(degree=degree, lookahead=3).fit(X)
    assert_same_model(model, reference)
    n_steps = X.shape[1] - 1
    assert model.n_passes_ == 1 + counter.calls
    if degree == 1:  # every step is linear: each pass fits 1 + 3 steps
        assert model.n_passes_ == 1 + math.ceil(n_steps / 4)
        assert model.n_passes_ == expected_passes([1] * n_steps, 3, only_linear=True)
    else:  # no step can be linear: nothing is gathered
        assert model.n_passes_ == 1 + n_steps


def test_partial_fit_stops_gathering_at_the_last_step(monkeypatch):
    X = DATA["all linear"]
    reference = PPA(n_components=5, lookahead=0, random_state=0).fit(X)
    counter = CountingKernel(monkeypatch)
    model = PPA(n_components=5, lookahead=7, random_state=0).fit(X)
    assert_same_model(model, reference)
    assert model.n_components_ == 5 and model.n_passes_ == 1 + counter.calls == 3


# --------------------------------------------------------------------------------------------
# Dask: every residual cache, a LocalCluster, the shared scans of an ensemble
# --------------------------------------------------------------------------------------------

PARAMS = dict(degree=(1, 2, 3), cv=3, random_state=2)


@pytest.fixture(scope="module")
def reference():
    return PPA(lookahead=0, **PARAMS).fit(DATA["linear runs"])


@pytest.mark.parametrize("cache", ["persist", "checkpoint", "recompute"])
def test_dask_caches_give_the_numpy_model_with_the_counted_passes(monkeypatch, reference, cache):
    X = DATA["linear runs"]
    counter = CountingReads()
    source = da.from_array(X, chunks=(700, 12)).map_blocks(counter, dtype=X.dtype)
    checkpoint_reads = []
    read = drivers._read_checkpoint

    def counted_read(path):
        checkpoint_reads.append(path)
        return read(path)

    monkeypatch.setattr(drivers, "_read_checkpoint", counted_read)
    with dask.config.set(scheduler="threads"):
        model = PPA(residual_cache=cache, lookahead=4, **PARAMS).fit(source)
    assert model.residual_cache_ == cache
    assert_same_model(model, reference)
    n_steps, n_blocks = X.shape[1] - 1, len(counter.reads)
    expected = expected_passes(reference.degrees_.tolist(), 4)
    assert expected < 1 + n_steps
    if cache == "recompute":  # every pass reads the source
        assert counter.passes() == expected
    elif cache == "persist":  # the first pass keeps the blocks it read for step 1's pass
        assert counter.passes() == 1
    else:  # the source is read by the first pass, which copies it; every step pass reads a
        # checkpoint (the copy, then the residuals)
        assert counter.passes() == 1
        assert len(checkpoint_reads) == (expected - 1) * n_blocks
    assert model.n_passes_ == expected


@pytest.mark.cluster
def test_local_cluster_gives_the_numpy_model(reference):
    from distributed import Client

    X = DATA["linear runs"]
    counter = CountingReads()
    with loopback_cluster(2) as cluster, Client(cluster, timeout="30s"):
        source = da.from_array(X, chunks=(1000, 12)).map_blocks(counter, dtype=X.dtype)
        model = PPA(residual_cache="recompute", **PARAMS).fit(source)
    assert_same_model(model, reference)
    assert (
        model.n_passes_
        == counter.passes()
        == expected_passes(reference.degrees_.tolist(), 7, grow=True)
    )
    assert model.n_passes_ < X.shape[1]


def test_shared_scans_of_an_ensemble_give_the_separate_members():
    X = DATA["linear runs"]
    counter = CountingReads()
    source = da.from_array(X, chunks=(1000, 12)).map_blocks(counter, dtype=X.dtype)
    # members of 9 of the 12 features, all 8 steps fitted
    params = dict(
        n_components=8, n_estimators=3, max_features=0.75, max_samples=0.9, random_state=4
    )
    with dask.config.set(scheduler="threads"):
        gathered = FeatureBaggingPPA(PPA(lookahead=7, **PARAMS), **params).fit(source)
        scans = counter.passes()
        plain = FeatureBaggingPPA(PPA(lookahead=0, **PARAMS), **params).fit(
            da.from_array(X, chunks=(1000, 12))
        )
    n_steps = gathered.estimators_[0].n_features_in_ - 1
    assert plain.n_passes_ == 1 + n_steps
    for mine, theirs in zip(gathered.estimators_, plain.estimators_):
        assert_same_model(mine, theirs)
        assert mine.n_passes_ == expected_passes(theirs.degrees_.tolist(), 7, grow=True)
    # a scan serves every member still fitting: as many scans as the slowest member's passes
    assert gathered.n_passes_ == scans == max(m.n_passes_ for m in gathered.estimators_)
    assert scans < 1 + n_steps


# --------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, "fast", 2.5, None])
def test_lookahead_is_checked(value):
    with pytest.raises(
        InvalidParameterError, match=r"lookahead must be one of \('auto',\) or an int >= 0"
    ):
        PPA(lookahead=value).fit(DATA["all linear"])


# --------------------------------------------------------------------------------------------
# the dashboard reads as the algorithm: task keys say what they compute
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cache", ["persist", "checkpoint"])
def test_task_keys_name_the_passes(cache):
    from dask.callbacks import Callback
    from dask.utils import key_split

    X = DATA["linear runs"]
    keys = []
    with (
        Callback(pretask=lambda key, dsk, state: keys.append(key)),
        dask.config.set(scheduler="threads"),
    ):
        model = PPA(residual_cache=cache, **PARAMS).fit(da.from_array(X, chunks=(1000, 12)))
    names = {key[0] for key in keys if isinstance(key, tuple) and str(key[0]).startswith("ppa-")}
    # a group that keeps something has a second task, named after it, holding what it keeps
    prefixes = {name.removesuffix("-kept").rsplit("-", 1)[0] for name in names}
    # one pass per step that was not gathered ahead, named by its step (1-based)
    steps = sorted(int(p.split("-")[2]) for p in prefixes if p.endswith("-pass"))
    assert "ppa-moments" in prefixes and len(steps) == model.n_passes_ - 1
    assert steps[0] == 1 and steps[-1] < X.shape[1]
    assert all(p in ("ppa-moments",) or p.endswith("-pass") for p in prefixes)
    assert {key_split(name) for name in names} == {"ppa-moments", "ppa-step"}
    # every pass is grouped (design.md 3.11), the first included: its blocks' moments are
    # merged within the groups and on the client, in the same tree, with no merge task
    merges = [key for key in keys if isinstance(key, str)]
    assert not [k for k in merges if key_split(k).startswith("combine")], merges
    assert not [k for k in merges if k.startswith("ppa-")], merges

    # deterministic, and unique per fit: other parameters on the same data give other keys
    def fitted_keys(**changes):
        seen = []
        with (
            Callback(pretask=lambda key, dsk, state: seen.append(key)),
            dask.config.set(scheduler="threads"),
        ):
            PPA(residual_cache=cache, **dict(PARAMS, **changes)).fit(
                da.from_array(X, chunks=(1000, 12))
            )
        return {key[0] for key in seen if isinstance(key, tuple)}

    assert not (names - {n for n in names if n.startswith("ppa-moments")}) & fitted_keys(
        random_state=7
    )
    if cache == "persist":  # checkpoints go to a new folder, part of their keys, every fit
        assert names <= fitted_keys()
