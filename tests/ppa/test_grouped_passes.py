"""Grouped passes (docs/design.md section 3.11): one task per group of blocks, the same model.

Every block's moments come back from its group and are merged in the tree of global block
indices, so the model is bit for bit the one-task-per-block model for any grouping and equal
to the in-memory fit (and the direct port) to rounding; a pass runs O(threads) tasks whatever
the chunk count; a killed worker's group is recomputed from its source blocks.
"""

import dataclasses
import os
import signal

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback
from direct_ppa import fit_direct, transform_direct
from distributed import Client, LocalCluster, wait
from distributed.diagnostics.plugin import SchedulerPlugin

from ppa_dask import datasets
from ppa_dask.cluster import local_client
from ppa_dask.ppa import drivers, kernels
from ppa_dask.ppa.estimator import PPA

X = datasets.make_curved_manifold(6_000, n_features=5, random_state=3)
PARAMS = dict(degree=(1, 2, 3), cv=2, random_state=0)
ATTRS = ("mean_", "leading_vectors_", "coefficients_", "alpha_ranges_", "explained_variance_")


def fit(groups, chunks, cache, tmp_path=None, **extra):
    params = dict(PARAMS, residual_cache=cache, **extra)
    if cache == "checkpoint":
        params["checkpoint_dir"] = str(tmp_path)
    with dask.config.set({drivers.PASS_GROUPS_CONFIG: groups}):
        return PPA(**params).fit(da.from_array(X, chunks=(chunks, -1)))


def arrays(model):
    return [np.concatenate([np.ravel(a) for a in np.atleast_1d(getattr(model, n))]) for n in ATTRS]


@pytest.mark.parametrize("cache", ["persist", "checkpoint", "recompute", "auto"])
@pytest.mark.parametrize("lookahead", [0, "auto"])
@pytest.mark.slow
def test_any_grouping_gives_the_ungrouped_model_bit_for_bit(cache, lookahead, tmp_path):
    ungrouped = fit(None, 500, cache, tmp_path, lookahead=lookahead)
    memory = PPA(**PARAMS, lookahead=lookahead).fit(X)
    for groups in ("auto", 1, 5, 12):
        grouped = fit(groups, 500, cache, tmp_path, lookahead=lookahead)
        for a, b in zip(arrays(grouped), arrays(ungrouped)):
            assert np.array_equal(a, b)
        assert np.array_equal(grouped.degrees_, ungrouped.degrees_)
    # 300 blocks: a group completes subtrees of the moment tree three levels deep
    ungrouped = fit(None, 20, cache, tmp_path, lookahead=lookahead)
    for groups in ("auto", 7):
        grouped = fit(groups, 20, cache, tmp_path, lookahead=lookahead)
        for a, b in zip(arrays(grouped), arrays(ungrouped)):
            assert np.array_equal(a, b)
        assert np.array_equal(grouped.degrees_, ungrouped.degrees_)
    for a, b in zip(arrays(ungrouped), arrays(memory)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_grouped_fit_matches_the_direct_port_for_any_chunking():
    reference = transform_direct(fit_direct(X, 2), X)
    for chunks in (700, 1500, 6000):
        with dask.config.set({drivers.PASS_GROUPS_CONFIG: 3}):
            model = PPA(degree=2, random_state=0).fit(da.from_array(X, chunks=(chunks, -1)))
        np.testing.assert_allclose(np.abs(model.transform(X)), np.abs(reference), atol=1e-8)


def test_a_source_whose_graph_holds_aliases_fits_grouped_as_ungrouped():
    # a series of files is a concatenation whose graph names other keys as values (aliases)
    pieces = [da.from_array(X[i : i + 2000].reshape(20, 100, 5), chunks=(5, 50, 5))
              for i in range(0, 6000, 2000)]  # fmt: skip
    cube = da.concatenate(pieces, axis=0).rechunk((30, 100, 5)).reshape(6000, 5)
    assert any(isinstance(v, tuple) and v in cube.__dask_graph__()
               for v in dict(cube.__dask_graph__()).values())  # fmt: skip
    models = []
    for groups in (None, 2):
        with dask.config.set({drivers.PASS_GROUPS_CONFIG: groups}):
            models.append(PPA(**PARAMS).fit(cube))
    for a, b in zip(*map(arrays, models)):
        assert np.array_equal(a, b)


class Tasks(Callback):
    def __init__(self):
        super().__init__()
        self.keys = []

    def _pretask(self, key, dsk, state):
        self.keys.append(key)


def name(key):
    return str(key[0] if isinstance(key, tuple) else key)


def tasks_of_a_fit(chunks, cache="persist", tmp_path=None):
    counter = Tasks()
    params = dict(degree=2, residual_cache=cache, random_state=0)
    if cache == "checkpoint":
        params["checkpoint_dir"] = str(tmp_path)
    with counter, dask.config.set({drivers.PASS_GROUPS_CONFIG: "auto", "num_workers": 2}):
        model = PPA(**params).fit(da.from_array(X, chunks=(chunks, -1)))
    return model, counter.keys


@pytest.mark.parametrize("cache", ["persist", "checkpoint", "recompute"])
@pytest.mark.slow
def test_tasks_per_pass_are_a_constant_times_the_threads_not_the_chunks(cache, tmp_path):
    for chunks in (375, 24, 2):  # 16, 250 and 3,000 chunks
        model, keys = tasks_of_a_fit(chunks, cache, tmp_path)
        # every pass, the first included (its groups read their own source blocks): 2 threads
        # x GROUPS_PER_THREAD group tasks and at most as many that hold what the groups keep
        assert len(keys) <= 2 * 2 * drivers.GROUPS_PER_THREAD * model.n_passes_
        ours = [k for k in keys if name(k).startswith(("ppa-moments", "ppa-step-"))]
        groups = [k for k in ours if not name(k).endswith("-kept")]
        assert len(groups) == 2 * drivers.GROUPS_PER_THREAD * model.n_passes_


class GraphSizes(SchedulerPlugin):
    """The tasks of every graph a client submits that the scheduler has to run, counted by
    the scheduler (the keys a graph refers to that are already in memory run nothing)."""

    def __init__(self):
        self.sizes = []

    def update_graph(self, scheduler, *, tasks, **kwargs):
        states = [scheduler.tasks[k].state if k in scheduler.tasks else None for k in tasks]
        self.sizes.append(sum(state != "memory" for state in states))


@pytest.mark.cluster
def test_a_pass_on_a_cluster_submits_a_constant_times_the_workers_tasks_at_4096_chunks():
    values = np.tile(X, (2, 1))[: 4096 * 2]  # 4,096 chunks of 2 rows
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        sizes = GraphSizes()
        cluster.scheduler.add_plugin(sizes)
        persisted = client.persist(da.from_array(values, chunks=(2, -1)))
        wait(persisted)
        for data in (da.from_array(values, chunks=(2, -1)), persisted):
            sizes.sizes.clear()
            model = PPA(degree=2, random_state=0).fit(data)
            assert model.residual_cache_ == "persist"
            # one graph per pass, each 2 tasks per worker to run: a group, the task holding
            # what it keeps (the persisted source's 4,096 blocks are in memory already)
            assert len(sizes.sizes) == model.n_passes_
            assert max(sizes.sizes) <= 2 * 2, sizes.sizes
        reference = PPA(degree=2, random_state=0).fit(values)
    for a, b in zip(arrays(model), arrays(reference)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.cluster
def test_a_persisted_source_grouped_by_owner_gives_the_ungrouped_model_bit_for_bit():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        data = client.persist(da.from_array(X, chunks=(40, -1)))  # 150 blocks, spread
        models = {}
        for groups in (None, "auto", 4):
            with dask.config.set({drivers.PASS_GROUPS_CONFIG: groups}):
                models[groups] = PPA(**PARAMS).fit(data)
    for groups in ("auto", 4):
        for a, b in zip(arrays(models[groups]), arrays(models[None])):
            assert np.array_equal(a, b)


def test_block_groups_cover_every_block_once_in_order():
    for n, g in ((1, 4), (7, 3), (100, 8), (5, 50)):
        groups = drivers.block_groups(n, g)
        assert sorted(i for grp in groups for i in grp) == list(range(n))
        assert len(groups) == min(n, g) and all(grp == sorted(grp) for grp in groups)
    owners = ["b", "a", "b", "b", "a"]
    groups = drivers.block_groups(5, 4, owners, {"a": 1, "b": 2})
    assert all(len({owners[i] for i in grp}) == 1 for grp in groups)
    with pytest.raises(ValueError, match="groups must be"):
        drivers.DaskDriver(da.from_array(X, chunks=(500, -1)), groups=0)


@pytest.mark.cluster
def test_a_killed_workers_group_is_recomputed_with_the_same_model():
    values = np.tile(X, (4, 1))
    with local_client(
        n_workers=2, threads_per_worker=1, memory_limit="2GiB", dashboard_address=None
    ) as client:
        client.wait_for_workers(2, timeout=120)
        data = da.from_array(values, chunks=(1000, -1))  # 24 blocks, a group holds several
        params = dict(degree=2, residual_cache="persist", random_state=0)
        undisturbed = PPA(**params).fit(data)
        killed = []

        def progress(step, n_steps):
            if step == 2:  # step 2's residual groups are held by the workers
                pids = client.run(os.getpid)
                holding = [w for w, keys in client.has_what().items() if keys and w in pids]
                address = sorted(holding or pids)[0]
                os.kill(pids[address], signal.SIGKILL)
                killed.append(address)

        disturbed = PPA(**params).fit(data, progress=progress)
    assert killed
    for a, b in zip(arrays(disturbed), arrays(undisturbed)):
        assert np.array_equal(a, b)


def test_a_group_sends_its_moments_and_keeps_the_rest_where_it_was_made():
    # the task the client waits for returns the moments; the kept part stays on the worker for
    # the task that holds it, and anywhere else (pickled: to the client, another worker, the
    # disk) it is the moments alone, so that task makes the kept part again from its inputs
    import pickle

    def group(x):
        return 2 * x, float(x.sum())

    x = np.arange(6.0)
    made = drivers._hand_over(group, x)
    sent = pickle.loads(pickle.dumps(made))
    assert sent.value == made.value == 15.0 and sent.kept is None
    kept = made.kept
    assert drivers._take_over(group, made, x) is kept  # taken over, not made again
    assert made.kept is None  # the handover lets go of it
    assert np.array_equal(drivers._take_over(group, sent, x), kept)  # made again


def test_a_residual_written_over_is_never_taken_for_the_one_it_replaced():
    # a held residual is written over by the next pass; asked for again (a remake of that
    # pass's kept part elsewhere) it refuses rather than apply the step twice
    spec = kernels.StepSpec(np.array([1.0, 0.0, 0.0]), 0.0, 3.0, 2)
    held = drivers._held(np.random.default_rng(0).normal(size=(3, 50)))
    before = drivers._held_residual(held).copy()
    options = dict(
        sizes=[50], starts=[0], tree=([0], kernels.fold_step_stacks, 8, 1),
        sub_block=kernels.SUB_BLOCK_ROWS, rotation=None,
    )  # fmt: skip
    read, _ = drivers._group_pass(held, [], None, (), spec, keep=False, **options)
    assert read is None and np.array_equal(drivers._held_residual(held), before)
    written, _ = drivers._group_pass(held, [], None, (), spec, keep=True, **options)
    assert np.shares_memory(drivers._held_residual(written), drivers._held_residual(held))
    with pytest.raises(RuntimeError, match="written over"):
        drivers._group_pass(held, [], None, (), spec, keep=True, **options)


class GroupWorkers(SchedulerPlugin):
    """The worker that computed each task of a pass, by pass name."""

    def __init__(self, scheduler):
        self.scheduler, self.where = scheduler, {}

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and isinstance(key, tuple) and str(key[0]).startswith("ppa-"):
            workers = {w.address for w in self.scheduler.tasks[key].who_has}
            task = str(key[0]).removesuffix("-kept").rsplit("-", 1)[0]
            self.where.setdefault(task, set()).update(workers)


@pytest.mark.cluster
def test_the_groups_of_a_zarr_source_spread_over_the_workers(tmp_path):
    # the groups share the Zarr array's handle; as a key of its own it drew every group to the
    # worker holding it, so one worker ran the whole fit
    path = str(tmp_path / "x.zarr")
    datasets.write_zarr(path, 8_000, n_features=5, chunk_rows=500, random_state=0)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        plugin = GroupWorkers(cluster.scheduler)
        cluster.scheduler.add_plugin(plugin)
        model = PPA(degree=2, random_state=0).fit(da.from_zarr(path))
    assert model.residual_cache_ == "persist"
    assert len(plugin.where) == model.n_passes_, plugin.where
    assert all(len(workers) == 2 for workers in plugin.where.values()), plugin.where


# --------------------------------------------------------------------------------------------
# the group kernel: one compiled call over a group's blocks, each block's moments its own
# --------------------------------------------------------------------------------------------


def _moments_equal(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        if key == "ahead":
            assert len(a[key]) == len(b[key])
            for x, y in zip(a[key], b[key]):
                _moments_equal(x, y)
        else:
            assert type(a[key]) is type(b[key]), key
            assert np.array_equal(a[key], b[key]), key


def _steps_and_spec(d, rng, n_steps, ahead, n_folds, degree=3):
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    steps = tuple(
        kernels.StepParams(q[:, i], 0.1 * rng.normal(size=(d, degree + 1)), 0.1, 2.0, -1.5, 1.5)
        for i in range(n_steps)
    )
    spec = kernels.StepSpec(
        q[:, n_steps], 0.05, 2.5, degree, seed=11, n_folds=n_folds,
        ahead=tuple((q[:, n_steps + 1 + j], 0.0, 2.0) for j in range(ahead)),
    )  # fmt: skip
    return q, steps, spec


@pytest.mark.parametrize("n_folds", [1, 2, 3])
@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_the_group_kernel_gives_each_block_its_own_moments_bit_for_bit(n_folds, ahead):
    rng = np.random.default_rng(n_folds * 10 + ahead)
    d = 6
    q, steps, spec = _steps_and_spec(d, rng, 2, ahead, n_folds)
    # sizes off the compiled sweep's chunk of rows, an empty block, blocks not in order
    sizes, starts = [300, 0, 1, 257, 1000, 40], [5000, 17, 900, 0, 2000, 4000]
    mean = rng.normal(size=d)
    sources = [rng.normal(size=(n, d)) + mean for n in sizes]
    residuals = [np.ascontiguousarray((x - mean).T) for x in sources]
    rotation = q[:, 1:]  # a smaller frame holding the residual after the steps
    framed = dataclasses.replace(
        spec, direction=rotation.T @ spec.direction,
        ahead=tuple((rotation.T @ e, o, s) for e, o, s in spec.ahead),
    )  # fmt: skip
    cases = [
        (sources, mean, steps, spec, None, 10_000),
        (residuals, None, steps, spec, None, 10_000),
        (residuals, None, steps[:1], framed, rotation, 10_000),
        # float32 blocks longer than the sub-block: swept a sub-block at a time and added up
        ([x.astype(np.float32) for x in sources], mean, (), spec, None, 128),
        # float64 in Fortran order (a cube's pixels, a transposed residual): put side by side
        # in C order for the compiled sweep, as pass_kernel converts them
        ([np.asfortranarray(x) for x in sources], mean, steps, spec, None, 128),
        ([np.ascontiguousarray(r.T).T for r in residuals], None, steps, spec, None, 128),
    ]
    for blocks, center, pending, s, rot, sub in cases:
        X, block_sizes, whole = kernels.side_by_side(blocks, samples=center is not None)
        assert block_sizes == sizes
        residual, stack = kernels.group_pass_kernel(
            X, sizes, starts, center, pending, s, keep=True, whole=whole, sub_block=sub,
            rotation=rot,
        )  # fmt: skip
        at = 0
        for b, (block, n, start) in enumerate(zip(blocks, sizes, starts)):
            alone_residual, alone = kernels.pass_kernel(
                block, start, center, pending, s, keep=True, sub_block=sub, rotation=rot
            )
            _moments_equal(kernels.step_moments_of_stack(stack, b), alone)
            assert np.array_equal(residual[:, at : at + n], alone_residual)
            at += n


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_blocks_all_in_fortran_order_go_through_the_group_kernel(n_blocks):
    # a batch whose every block is in Fortran order (a cube's pixels; one block alone) is put
    # side by side in C order, the compiled sweep's only layout, and gives pass_kernel's moments
    rng = np.random.default_rng(n_blocks)
    d = 5
    _, steps, spec = _steps_and_spec(d, rng, 1, 0, 2)
    mean = rng.normal(size=d)
    blocks = [np.asfortranarray(rng.normal(size=(n, d)) + mean) for n in (300, 129, 64)[:n_blocks]]
    starts = [0, 300, 429][:n_blocks]
    X, sizes, whole = kernels.side_by_side(blocks, samples=True)
    assert X.flags.c_contiguous and X.dtype == np.float64 and not any(whole)
    _, stack = kernels.group_pass_kernel(
        X, sizes, starts, mean, steps, spec, keep=False, whole=whole, sub_block=128
    )
    for b, (block, start) in enumerate(zip(blocks, starts)):
        alone = kernels.pass_kernel(block, start, mean, steps, spec, keep=False, sub_block=128)[1]
        _moments_equal(kernels.step_moments_of_stack(stack, b), alone)


def _first_parts(rng, sizes, d=4):
    parts = []
    for n in sizes:
        X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3) + rng.normal(size=d) * 5
        parts.append(kernels.first_moments(X, np.arange(0, n, 7)))
    return parts


@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_stacked_merges_are_the_dict_merges_for_any_grouping(split_every):
    # every fold against its combine_* through merge_as_tree, for consecutive and scattered
    # groups: the stacked tree (utils.compute.stacked_tree) must give the dict tree's root
    from ppa_dask.utils.compute import merge_as_tree, stacked_tree

    rng = np.random.default_rng(split_every)
    n = 77
    sizes = rng.integers(0, 60, size=n)
    sizes[[3, 40]] = 0
    first = _first_parts(rng, sizes)
    d = 5
    q, steps, spec = _steps_and_spec(d, rng, 1, 2, 2)
    step = [kernels.pass_kernel(rng.normal(size=(d, m)), 0, None, steps, spec, keep=False)[1]
            for m in sizes]  # fmt: skip
    objective = [
        kernels.objective_pass_kernel(rng.normal(size=(d, max(m, 1))), None, steps, spec)
        for m in sizes
    ]
    cases = [
        (first, kernels.combine_first_moments, kernels.fold_first_stacks, kernels.FIRST_KEYS),
        (objective, kernels.combine_objective_moments, kernels.fold_objective_stacks,
         kernels.OBJECTIVE_KEYS),
    ]  # fmt: skip
    for groups in (drivers.block_groups(n, 1), drivers.block_groups(n, 4),
                   [sorted(g) for g in np.array_split(rng.permutation(n), 5)]):  # fmt: skip
        for parts, combine, fold, keys in cases:
            ids, stacks = [], []
            for g in groups:
                i, s = stacked_tree(
                    [(0, j) for j in g], kernels.stack_moments([parts[j] for j in g], keys),
                    fold, split_every, n,
                )  # fmt: skip
                ids += i
                stacks.append(s)
            merged = {k: np.concatenate([s[k] for s in stacks]) for k in keys}
            root_ids, root = stacked_tree(ids, merged, fold, split_every, n)
            assert len(root_ids) == 1
            expected = merge_as_tree(parts, combine, split_every)
            for key in keys:
                assert np.array_equal(root[key][0], expected[key]), key
        # step moments, stacked as the group kernel stacks them (a direction axis: ahead)
        expected = merge_as_tree(step, kernels.combine_step_moments, split_every)
        ids, stacks = [], []
        for g in groups:
            stack = {
                "n": np.stack([step[j]["n"] for j in g]),
                **{k: np.stack([np.stack([step[j][k]] + [a[k] for a in step[j]["ahead"]])
                                for j in g]) for k in ("vv", "yv", "zz", "tmin", "tmax")},
            }  # fmt: skip
            i, s = stacked_tree([(0, j) for j in g], stack, kernels.fold_step_stacks,
                                split_every, n)  # fmt: skip
            ids += i
            stacks.append(s)
        merged = {k: np.concatenate([s[k] for s in stacks]) for k in stacks[0]}
        _, root = stacked_tree(ids, merged, kernels.fold_step_stacks, split_every, n)
        _moments_equal(kernels.step_moments_of_stack(root), expected)


class CountedReads:
    """An array-like read by slices (as a Zarr array is), counting the reads."""

    def __init__(self, values):
        self.values, self.reads = values, 0
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, values.ndim

    def __getitem__(self, index):
        self.reads += 1
        return self.values[index]


def test_a_group_reads_runs_of_slices_of_one_array_in_one_call_with_the_same_blocks():
    source = CountedReads(X[:1000])
    data = da.from_array(source, chunks=(37, -1))  # 28 blocks, the last one ragged
    plan = drivers.block_groups(data.numblocks[0], 3)
    readers = drivers.SourceReader.for_groups(data, plan)
    run = 4 * 37 * 5 * 8  # bytes of four blocks
    for reader, group in zip(readers, plan):
        source.reads = 0
        one_by_one = list(reader.blocks([]))
        assert source.reads == len(group)
        source.reads = 0
        batched = list(reader.blocks([], batch_bytes=run))
        assert source.reads == -(-len(group) // 4)
        assert len(batched) == len(one_by_one)
        for a, b in zip(one_by_one, batched):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    # and the fit reads each group's blocks in one call, to the same model as one task per block
    models = []
    for groups in (None, 3):
        with dask.config.set({drivers.PASS_GROUPS_CONFIG: groups}):
            source.reads = 0
            models.append(PPA(**PARAMS, residual_cache="recompute").fit(data))
            reads = source.reads
    assert reads == 3 * models[1].n_passes_
    for a, b in zip(*map(arrays, models)):
        assert np.array_equal(a, b)


def test_a_zarr_source_is_read_from_its_handle_with_the_same_blocks_and_model(tmp_path):
    # from_zarr's graph is the array's handle and one layer of getter: each group carries the
    # handle and its row ranges, not a task per block; the chunk files are read directly
    import zarr

    values = np.array(X[:1000])
    values[111:222] = 0.0  # three whole chunks of the fill value: zarr does not write them
    path = str(tmp_path / "x.zarr")
    store = zarr.create_array(store=path, shape=values.shape, chunks=(37, 5), dtype="f8")
    store[:] = values
    data = da.from_zarr(path)  # 28 blocks, the last one ragged
    blocks = [data.blocks[i].compute() for i in range(data.numblocks[0])]
    interleaved = [list(range(0, 28, 2)), list(range(1, 28, 2))]  # as groups by worker are
    for plan in [drivers.block_groups(28, n) for n in (1, 3, 28)] + [interleaved]:
        readers = drivers.SourceReader.for_groups(data, plan)
        assert all(type(r) is drivers.ArraySliceReader for r in readers)
        for reader, group in zip(readers, plan):
            for batch in (0, 4 * 37 * 5 * 8, drivers.GROUP_BATCH_BYTES):
                read = list(reader.blocks([], batch_bytes=batch))
                assert len(read) == len(group)
                for i, block in zip(group, read):
                    assert block.dtype == blocks[i].dtype and np.array_equal(block, blocks[i])
    # an array computed from the store, or held in memory, takes the general path
    for other in (data + 0, da.from_array(values, chunks=(37, -1))):
        readers = drivers.SourceReader.for_groups(other, plan)
        assert readers is not None and all(type(r) is drivers.SourceReader for r in readers)
    models = []
    for groups in (None, "auto", 3):
        with dask.config.set({drivers.PASS_GROUPS_CONFIG: groups}):
            models.append(PPA(**PARAMS, residual_cache="recompute").fit(da.from_zarr(path)))
    for grouped in models[1:]:
        for a, b in zip(arrays(grouped), arrays(models[0])):
            assert np.array_equal(a, b)
