"""One pass per step on Dask: the same model from numpy, any chunking and any worker count."""

import os
import threading

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import loopback_cluster, random_nonlinear

from ppa_dask import PPA

X = random_nonlinear(n=6000, d=6, seed=11)
PARAMS = dict(degree=(1, 2, 3, 4, 5), cv=2, random_state=3)


def fitted_attributes(model):
    return {
        name: getattr(model, name)
        for name in (
            "mean_",
            "leading_vectors_",
            "coefficients_",
            "explained_variance_",
            "alpha_ranges_",
            "residual_basis_",
            "cv_scores_",
        )
    }


@pytest.fixture(scope="module")
def reference():
    return PPA(**PARAMS).fit(X)


def assert_same_model(model, reference, atol=1e-10):
    assert model.degrees_.tolist() == reference.degrees_.tolist()
    for name, value in fitted_attributes(reference).items():
        np.testing.assert_allclose(getattr(model, name), value, atol=atol, err_msg=name)
    np.testing.assert_allclose(np.asarray(model.transform(X)), reference.transform(X), atol=atol)


@pytest.mark.parametrize("chunks", [(6000, 6), (1000, 6), (777, 4)])
@pytest.mark.parametrize("cache", ["persist", "checkpoint", "recompute"])
def test_dask_chunkings_give_the_numpy_model(reference, chunks, cache):
    model = PPA(residual_cache=cache, **PARAMS).fit(da.from_array(X, chunks=chunks))
    assert model.residual_cache_ == cache
    assert_same_model(model, reference)


def test_numpy_block_size_does_not_matter(reference):
    assert_same_model(PPA(block_rows=1001, **PARAMS).fit(X), reference)


@pytest.mark.parametrize("n_workers, cache", [(1, "auto"), (2, "auto"), (2, "checkpoint")])
@pytest.mark.cluster
def test_local_cluster_gives_the_numpy_model(reference, n_workers, cache):
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            host="127.0.0.1",
        ) as cluster,
        Client(cluster),
    ):
        Xd = da.from_array(X, chunks=(1500, 6))
        model = PPA(residual_cache=cache, **PARAMS).fit(Xd)
        assert model.residual_cache_ == ("persist" if cache == "auto" else cache)
        R = model.transform(Xd)
        assert isinstance(R, da.Array)
        np.testing.assert_allclose(R.compute(), reference.transform(X), atol=1e-10)
    assert_same_model(model, reference)


@pytest.mark.cluster
def test_a_persisted_residual_stays_where_it_was_computed():
    # each group's residual is one key, held by a task beside the one that made it, and the
    # next pass's group runs where it lies; only the moments go to the client (which merges
    # them), so no residual block moves between workers; the source blocks the first pass kept
    # are read by step 1's pass where they lie, then released
    import time

    from distributed import Client

    Xd = da.from_array(random_nonlinear(n=24000, d=6, seed=2), chunks=(1500, 6))
    with loopback_cluster(2) as cluster, Client(cluster) as client:
        PPA(residual_cache="persist", **PARAMS).fit(Xd)
        deadline = time.monotonic() + 10
        while any(client.has_what().values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        held = [key for keys in client.has_what().values() for key in keys]
        moved = [
            key
            for worker in cluster.workers.values()
            for record in worker.transfer_incoming_log
            for key in record["keys"]
        ]
        nbytes = sum(
            record["total"]
            for worker in cluster.workers.values()
            for record in worker.transfer_incoming_log
        )
        assert client.nthreads() and len(cluster.workers) == 2
    passes = [key for key in moved if "-pass-" in str(key) or Xd.name in str(key)]
    assert not passes, passes[:3]
    assert not held, held[:3]  # nothing of the fit is left in the workers' memory
    assert nbytes < 16 * 1500 * 6 * 8  # far less than the 16 residual blocks


@pytest.mark.cluster
def test_the_source_is_read_once_and_released_after_step_one():
    # with a persisted residual the first pass's groups keep the source blocks they read,
    # step 1's pass reads them from memory, and they are released once step 1's residual is
    # kept (the release goes with step 2's graph, just after it: a release sent just before a
    # graph holds the graph back for the client's batching interval): from step 3 on no pass
    # finds a source block in the workers' memory
    from distributed import Client
    from distributed.diagnostics.plugin import SchedulerPlugin

    class SourceInMemory(SchedulerPlugin):
        def __init__(self, scheduler, name):
            self.scheduler, self.name, self.seen, self.blocks = scheduler, name, {}, {}

        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "processing" and "-pass-" in str(key):
                held = sum(  # the first pass's groups, each holding the blocks it read
                    str(k[0] if isinstance(k, tuple) else k).startswith("ppa-moments-")
                    and str(k[0] if isinstance(k, tuple) else k).endswith("-kept")
                    and t.state == "memory"
                    for k, t in self.scheduler.tasks.items()
                )
                blocks = sum(
                    self.name in str(k) and t.state == "memory"
                    for k, t in self.scheduler.tasks.items()
                )
                step = str(key).split("-pass-")[0]
                self.seen[step] = max(self.seen.get(step, 0), held)
                self.blocks[step] = max(self.blocks.get(step, 0), blocks)

    Xd = da.from_array(random_nonlinear(n=12000, d=6, seed=2), chunks=(1500, 6))
    with loopback_cluster(2) as cluster, Client(cluster):
        plugin = SourceInMemory(cluster.scheduler, Xd.name)
        cluster.scheduler.add_plugin(plugin, name="source-in-memory")
        model = PPA(residual_cache="persist", lookahead=0, **PARAMS).fit(Xd)
    assert model.n_passes_ == 1 + 5
    steps = sorted(plugin.seen)
    assert len(steps) == 5, plugin.seen
    assert plugin.seen[steps[0]] == 2  # step 1 reads the 2 groups of kept blocks
    assert all(plugin.seen[s] == 0 for s in steps[2:]), plugin.seen
    # the groups read the source themselves: no source block is ever a key in memory
    assert not any(plugin.blocks.values()), plugin.blocks


def held_passes(monkeypatch, writable=True):
    """Each grouped pass over a held residual: (did its new residual share the held one's
    memory, was the held residual left as it was). ``writable=False`` hands the passes a
    read-only view, as a residual received from another worker can be."""
    from ppa_dask.ppa import drivers, kernels

    seen, real_pass, real_held = [], kernels.group_pass_kernel, drivers._held_residual

    def held_residual(source):
        held = real_held(source)
        if held is not None and not writable:
            held = held.view()
            held.flags.writeable = False
        return held

    def group_pass_kernel(X, sizes, starts, center, *args, keep=True, **kwargs):
        before = X.copy() if center is None else None
        residual, stack = real_pass(X, sizes, starts, center, *args, keep=keep, **kwargs)
        if before is not None and keep:
            seen.append((np.shares_memory(X, residual), np.array_equal(X, before)))
        return residual, stack

    monkeypatch.setattr(drivers, "_held_residual", held_residual)
    monkeypatch.setattr(kernels, "group_pass_kernel", group_pass_kernel)
    return seen


@pytest.mark.parametrize("writable", [True, False])
def test_a_held_residual_is_written_over_by_the_next_pass_when_it_may_be(
    reference, monkeypatch, writable
):
    # a held group's next residual goes where the last one was (no new memory to fault in
    # per pass), the same model either way; a read-only residual is never written
    seen = held_passes(monkeypatch, writable)
    model = PPA(residual_cache="persist", **PARAMS).fit(da.from_array(X, chunks=(1000, 6)))
    assert_same_model(model, reference)
    assert len(seen) >= 3
    if writable:
        assert all(shared and not unchanged for shared, unchanged in seen), seen
    else:
        assert not any(shared for shared, _ in seen) and all(same for _, same in seen), seen


def test_dask_in_gives_lazy_dask_out(reference):
    Xd = da.from_array(X, chunks=(1000, 6))
    model = PPA(**PARAMS).fit(Xd)
    R = model.transform(Xd)
    Xr = model.inverse_transform(R[:, :3])
    J = model.jacobian(Xd[:50])
    assert all(isinstance(a, da.Array) for a in (R, Xr, J))
    assert R.chunks[0] == Xd.chunks[0] and J.shape == (50, 6, 6)
    np.testing.assert_allclose(
        Xr.compute(), reference.inverse_transform(reference.transform(X)[:, :3]), atol=1e-10
    )
    np.testing.assert_allclose(J.compute(), reference.jacobian(X[:50]), atol=1e-10)
    np.testing.assert_allclose(
        model.reconstruction_errors(Xd), reference.reconstruction_errors(X), rtol=1e-10
    )


class CountingReads:
    """Counts how often each source block is computed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reads = {}

    def __call__(self, block, block_info=None):
        key = block_info[0]["chunk-location"]
        with self.lock:
            self.reads[key] = self.reads.get(key, 0) + 1
        return block


@pytest.mark.parametrize(
    "cache, reads_per_block", [("persist", 1), ("checkpoint", 1), ("recompute", 6)]
)
def test_one_pass_over_the_data_per_step(cache, reads_per_block):
    counter = CountingReads()
    source = da.from_array(X, chunks=(1000, 6)).map_blocks(counter, dtype=X.dtype)
    with dask.config.set(scheduler="threads"):
        model = PPA(residual_cache=cache, **PARAMS).fit(source)
    # mean/covariance pass + one pass per step (5 steps); persisted residuals are not re-read
    assert model.n_passes_ == 1 + 5
    assert set(counter.reads.values()) == {reads_per_block}


class RecordingCheckpoints:
    """Wraps the checkpoint writer: which checkpoint folders exist at each write."""

    def __init__(self, root, write):
        self.root, self.write, self.seen = root, write, []

    def __call__(self, path, block):
        self.write(path, block)
        self.seen.append((path, block.shape, sorted(_checkpoint_folders(self.root))))


def _checkpoint_folders(root):
    import glob
    import os

    return [os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "*", "pass-*"))]


# the first checkpoint is the first pass's copy of each source block as read: (rows, features)
SOURCE_COPY = (1000, 6)


@pytest.mark.parametrize(
    "every, written",
    [
        # the copy serves step 1's pass besides the interval's: a residual checkpoint is
        # written at the passes it would be if step 1 read the source and wrote one
        (1, {"pass-001": SOURCE_COPY, "pass-003": 5, "pass-004": 4, "pass-005": 3}),
        # the default: a checkpoint serves two passes, the second re-applies one more step
        (2, {"pass-001": SOURCE_COPY, "pass-004": 4}),
    ],
)
def test_checkpoints_are_on_disk_shrink_and_are_removed(
    reference, tmp_path, monkeypatch, every, written
):
    from ppa_dask.ppa import drivers as _drivers

    recorder = RecordingCheckpoints(str(tmp_path), _drivers._write_checkpoint)
    monkeypatch.setattr(_drivers, "_write_checkpoint", recorder)
    monkeypatch.setattr(_drivers, "CHECKPOINT_EVERY", every)
    with dask.config.set(scheduler="threads"):
        model = PPA(residual_cache="checkpoint", checkpoint_dir=str(tmp_path), **PARAMS).fit(
            da.from_array(X, chunks=(1000, 6))
        )
    assert model.residual_cache_ == "checkpoint"
    assert model.n_passes_ == 1 + 5
    assert_same_model(model, reference)
    # one file per chunk and checkpoint: the first pass (mean and scatter) writes a copy of the
    # source blocks, then every ``every``-th pass a residual; the last pass writes none
    by_pass = {}
    for path, shape, _ in recorder.seen:
        by_pass.setdefault(os.path.basename(os.path.dirname(path)), []).append(shape)
    assert sorted(by_pass) == sorted(written)
    # a residual is stored feature-major in the subspace it lies in: a row fewer per step
    # fitted before its pass (a narrow checkpoint is compacted as soon as its subspace shrinks)
    for folder, shapes in by_pass.items():
        want = written[folder] if isinstance(written[folder], tuple) else (written[folder], 1000)
        assert shapes == [want] * 6, folder
    # never more than two checkpoints (the one being read and the one being written) at once
    assert max(len(folders) for _, _, folders in recorder.seen) <= 2
    # nothing is left behind
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "frame, subspace, every_shrink_up_to, compacted",
    [
        (10, 9, 0, False),  # a persisted residual waits until its subspace is below 70 %
        (10, 7, 0, True),
        (10, 9, 16, True),  # a narrow checkpoint: at every shrink
        (16, 15, 16, True),
        (64, 63, 16, False),  # a wide one: the rotation costs more than the bytes it saves
        (64, 44, 16, True),
        (10, 10, 16, False),  # nothing to gain
    ],
)
def test_when_a_kept_residual_moves_to_its_subspace(
    frame, subspace, every_shrink_up_to, compacted
):
    from ppa_dask.ppa.drivers import ResidualFrame, StepSpec

    rng = np.random.default_rng(frame + subspace)
    d = 70
    basis = np.linalg.qr(rng.normal(size=(d, frame)))[0]
    current = ResidualFrame(basis)
    spec = StepSpec(basis[:, 0], 0.0, 1.0, 1, 0, 2, subspace=basis[:, frame - subspace :])
    after, rotation = current.plan(spec, True, d, every_shrink_up_to)
    assert (rotation is not None) == compacted
    assert after.size(d) == (subspace if compacted else frame)
    if compacted:  # the rotation takes the current frame's coordinates to the subspace's
        np.testing.assert_allclose(basis @ rotation, spec.subspace, atol=1e-12)
    assert current.plan(spec, False, d, every_shrink_up_to) == (current, None)


def test_checkpoints_are_removed_when_the_fit_fails(tmp_path, monkeypatch):
    from ppa_dask.ppa import algebra as _algebra

    calls = {"n": 0}
    fit_step = _algebra.fit_step

    def failing_second_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("interrupted")
        return fit_step(*args, **kwargs)

    monkeypatch.setattr(_algebra, "fit_step", failing_second_step)
    with dask.config.set(scheduler="threads"), pytest.raises(RuntimeError, match="interrupted"):
        PPA(residual_cache="checkpoint", checkpoint_dir=str(tmp_path), **PARAMS).fit(
            da.from_array(X, chunks=(1000, 6))
        )
    assert calls["n"] == 2
    assert list(tmp_path.iterdir()) == []


def test_auto_checkpoints_when_the_residual_does_not_fit_in_memory(reference, monkeypatch):
    from ppa_dask.ppa import drivers as _drivers

    monkeypatch.setattr(_drivers, "_cluster_memory_bytes", lambda: 1.0 * X.nbytes)
    with dask.config.set(scheduler="threads"):
        model = PPA(**PARAMS).fit(da.from_array(X, chunks=(1000, 6)))
        assert model.residual_cache_ == "checkpoint"
        monkeypatch.setattr(_drivers, "_workers_share_local_disk", lambda: False)
        assert PPA(**PARAMS).fit(da.from_array(X, chunks=(1000, 6))).residual_cache_ == "recompute"
    assert_same_model(model, reference)


def test_float32_dask_input_is_computed_in_float64(reference):
    model = PPA(**PARAMS).fit(da.from_array(X.astype(np.float32), chunks=(1000, 6)))
    ref32 = PPA(**PARAMS).fit(X.astype(np.float32).astype(np.float64))
    assert_same_model(model, ref32)
    assert model.transform(da.from_array(X, chunks=(1000, 6))).dtype == np.float64


def test_nan_in_a_lazy_transform_is_reported_when_computed(reference):
    bad = X.copy()
    bad[4321, 2] = np.nan
    R = reference.transform(da.from_array(bad, chunks=(1000, 6)))
    with pytest.raises(ValueError, match=r"NaN.*columns \[2\].*row 4321"):
        R.compute()
