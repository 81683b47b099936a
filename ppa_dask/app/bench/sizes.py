"""What ``ppa-dask bench`` measures: its sizes, its sections and their rows, the fixed settings.

Examples
--------
>>> from ppa_dask.app.bench.sizes import ROW_IDS, SECTIONS
>>> SECTIONS["scaling"], ROW_IDS[0]
(('scaling',), 'fit_memory_pca')
"""

from __future__ import annotations

from ppa_dask.datasets.loaders import PAPER_TABLE2_MINUTES

#: Degree of the fixed-degree fits (the in-memory, transform, scaling and cost rows).
DEGREE = 5
#: Features of the synthetic tables.
N_FEATURES = 10
#: Worker processes of the clusters (the targets are stated for 2).
WORKERS = 2
#: Seconds to wait for a cluster's workers to come up.
WORKER_TIMEOUT = 120
#: At most this many interleaved repeats of a Table 2 data set (see ``table2_window_s``).
TABLE2_MAX_REPEATS = 201
#: Peak worker memory allowed in the out-of-core row, as a fraction of the limit.
MEMORY_TARGET = 0.60

#: The sizes of each run. ``ooc_store_factor`` is the store's size over the cluster's total
#: worker memory.
SIZES = {
    "full": dict(
        pass_chunks=(16, 256, 4096),
        pass_rows=256,
        pass_repeats=3,
        pass_slow_repeats=1,
        chunks_fit_n=1_048_576,
        fit_n=1_000_000,
        repeats=5,
        port_repeats=3,
        table2_max_samples=None,
        # a fit of a few ms: more repeats for a steady median, and at least as many as take
        # table2_window_s of PPA fits (the machine's load comes in bursts longer than a fit)
        table2_repeats=15,
        table2_window_s=1.5,
        dask_n=4_000_000,
        chunk_rows=262_144,
        cluster_memory_limit="auto",
        ooc_memory_limit="1GiB",
        ooc_store_factor=2.0,
        ooc_components=None,
        ooc_scans=2,
        cube_bands=64,
        cube_pixels=1024,
        cube_chunk_y=128,
        cube_repeats=3,
        spec_repeats=2,
        # a fresh cluster per repeat: the clusters differ more than the fits on one cluster do
        # (medians of 5 fits per cluster 0.50-0.62 s on 2 workers, 0.76-1.01 s on 1, in runs of
        # the row alone), and 5 of each put the row's median less at the mercy of one of them
        scaling_repeats=5,
        # about one fit in five on the development VM spends 0.6-1.2 s more faulting in its
        # fresh residual (performance guide, "A pass's round trips"): the median of 5 fits per
        # cluster sees past two such fits, the median of 3 past one
        scaling_fits=5,
        scaling_components=None,
        fanout_members=64,
        fanout_n=40_000,
        fanout_repeats=3,
        bag_members=32,
        bag_n=2_000_000,
        bag_repeats=2,
        cost_n=(10_000, 100_000, 1_000_000, 10_000_000),
        cost_d=(4, 8, 16, 32, 64, 128),
        cost_d_n=100_000,
        cost_repeats=3,
        first_run_samples=None,
        first_run_repeats=3,
        wide_n=1_000,
        wide_d=20_000,
        wide_repeats=3,
        wide_cost_n=500,
        wide_cost_d=(1_000, 3_000, 10_000, 30_000, 100_000),
        wide_full=(100_000, 224),
        wide_full_repeats=2,
        wide_ooc_n=1_000,
        wide_ooc_d=1_000_000,
        wide_ooc_chunk=25_000,
        wide_ooc_repeats=2,
        startup_repeats=7,
    ),
    "quick": dict(
        pass_chunks=(16, 256, 4096),
        pass_rows=256,
        pass_repeats=3,
        pass_slow_repeats=1,
        chunks_fit_n=262_144,
        fit_n=200_000,
        repeats=3,
        port_repeats=2,
        table2_max_samples=None,
        table2_repeats=7,
        table2_window_s=0.0,
        dask_n=1_000_000,
        chunk_rows=131_072,
        cluster_memory_limit="auto",
        ooc_memory_limit="1GiB",
        ooc_store_factor=1.0,
        ooc_components=None,
        ooc_scans=2,
        cube_bands=64,
        cube_pixels=512,
        cube_chunk_y=128,
        cube_repeats=2,
        spec_repeats=1,
        scaling_repeats=2,
        scaling_fits=2,
        scaling_components=None,
        fanout_members=64,
        fanout_n=10_000,
        fanout_repeats=2,
        bag_members=32,
        bag_n=500_000,
        bag_repeats=1,
        cost_n=(10_000, 100_000, 1_000_000),
        cost_d=(4, 8, 16, 32, 64),
        cost_d_n=20_000,
        cost_repeats=2,
        first_run_samples=None,
        first_run_repeats=2,
        wide_n=500,
        wide_d=10_000,
        wide_repeats=2,
        wide_cost_n=300,
        wide_cost_d=(1_000, 3_000, 10_000, 30_000),
        wide_full=(20_000, 224),
        wide_full_repeats=1,
        wide_ooc_n=500,
        wide_ooc_d=200_000,
        wide_ooc_chunk=25_000,
        wide_ooc_repeats=1,
        startup_repeats=5,
    ),
    # the test suite's size: every row, in seconds
    "tiny": dict(
        pass_chunks=(4, 16, 64),
        pass_rows=64,
        pass_repeats=1,
        pass_slow_repeats=1,
        chunks_fit_n=4_096,
        fit_n=4_000,
        repeats=1,
        port_repeats=1,
        table2_max_samples=300,
        table2_repeats=1,
        table2_window_s=0.0,
        dask_n=20_000,
        chunk_rows=8_192,
        # one cluster for every section (the out-of-core one's limit)
        cluster_memory_limit="1GiB",
        ooc_memory_limit="1GiB",
        ooc_store_factor=0.004,
        ooc_components=2,
        ooc_scans=1,
        cube_bands=4,
        cube_pixels=24,
        cube_chunk_y=12,
        cube_repeats=1,
        spec_repeats=1,
        scaling_repeats=1,
        scaling_fits=1,
        scaling_components=2,
        fanout_members=4,
        fanout_n=400,
        fanout_repeats=1,
        bag_members=2,
        bag_n=20_000,
        bag_repeats=1,
        cost_n=(1_000, 3_000),
        cost_d=(4, 6),
        cost_d_n=1_000,
        cost_repeats=1,
        first_run_samples=20_000,
        first_run_repeats=1,
        wide_n=40,
        wide_d=1_500,
        wide_repeats=1,
        wide_cost_n=30,
        wide_cost_d=(1_000, 2_000),
        wide_full=(2_000, 24),
        wide_full_repeats=1,
        wide_ooc_n=30,
        wide_ooc_d=5_000,
        wide_ooc_chunk=1_000,
        wide_ooc_repeats=1,
        startup_repeats=1,
    ),
}

#: The row ids of each section, in the order they are run and tabulated (``--only`` takes
#: section names).
SECTIONS = {
    "memory": ("fit_memory_pca", "fit_memory_port", "transform_memory", "inverse_memory"),
    "table2": tuple(f"table2_{name}" for name in PAPER_TABLE2_MINUTES),
    "cost": ("cost_n", "cost_d"),
    "ooc": ("ooc_step", "ooc_memory", "ooc_stability"),
    "dask": ("transform_dask", "inverse_dask"),
    "cube": ("cube_ppa3_transform", "cube_full_ppa", "cube_dask_ml", "cube_scan", "speculation"),
    "scaling": ("scaling",),
    "passes": ("pass_floor", "chunks_fit"),
    "ensembles": ("ensemble_fanout", "ensemble_shared"),
    "wide": ("wide_memory", "wide_cost_d", "wide_full_bands"),
    "wide_ooc": ("wide_ooc_scan", "wide_ooc_memory", "wide_ooc_xeofs"),
    "first_run": ("first_demo",),
    "startup": ("startup_help", "startup_import"),
}
#: Every row of a full run.
ROW_IDS = tuple(r for rows in SECTIONS.values() for r in rows)

#: Names of a PPA parameter switching speculative passes on or off, if the estimator has one.
SPECULATION_PARAMS = ("speculate", "speculative", "speculation", "lookahead")
