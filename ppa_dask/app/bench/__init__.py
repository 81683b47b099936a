"""``ppa-dask bench``: every performance figure of the package beside its baseline, in one run.

Each row times PPA and the baseline it is judged against in the same process (in memory, one
BLAS thread) or on the same :class:`distributed.LocalCluster` (worker processes, one thread and
one BLAS thread each), as medians of *interleaved* repeats (A B A B ..., so a change in the load
of a shared machine hits both sides alike), and prints the row's target and whether it was met.
The command writes ``bench.json`` (every time of every repeat, the sizes, the machine),
``bench.md`` (the table as pasted into the README and docs/guide/performance.md) and PNG plots
(``cost_growth.png``, ``ratios.png``) into ``--output``.

=======================  ===================================================  =================
row                      baseline, measured in the same run                   target
=======================  ===================================================  =================
``fit_memory_pca``       scikit-learn ``PCA(svd_solver="covariance_eigh")``   <= (d - 1) fits
``fit_memory_port``      the direct port of the paper's algorithm             >= 10x faster
``table2_<data set>``    scikit-learn PCA on the same training half           <= paper's ratio
``transform_*``,         PCA ``transform`` / ``inverse_transform``            <= 2 g x PCA
``inverse_*``
``ooc_step``             a plain scan of a store 2x the workers' memory       step <= 1 scan
``ooc_memory``           the workers' memory limit                            peak < 60 %
``ooc_stability``        -                                                    no pause/restart
``cube_ppa3_transform``  xeofs ``EOF(n_modes=3)`` fit + scores                <= 0.5x
``cube_full_ppa``        xeofs ``EOF(n_modes=3)`` fit + scores                <= 1x
``cube_dask_ml``         dask-ml ``PCA(n_components=3)`` fit + transform      (reported)
``cube_scan``            a plain scan of the cube                             (reported)
``speculation``          the same fit with speculation off                    <= 0.5x
``scaling``              the same fit on one worker                           >= 1.7x faster
``ensemble_fanout``      the member fits one after another, / 2               <= 1.15x
``ensemble_shared``      the members fitted separately                        <= 0.3x
``cost_n``, ``cost_d``   PCA at the same sizes (log-log slopes)               (reported)
``wide_memory``          scikit-learn ``PCA(3, svd_solver="randomized")``     <= 5x
``wide_cost_d``          randomized PCA(3) at the same sizes (slopes in d)    slope <= 1.2
``wide_full_bands``      scikit-learn ``PCA()`` (its default solver)          <= 8x
``wide_ooc_scan``        a plain scan of a feature-chunked field              <= 15x
``wide_ooc_memory``      the workers' memory limit                            peak < 60 %
``wide_ooc_xeofs``       xeofs ``EOF(n_modes=3)`` fit + scores                (reported)
``startup_help``,        ``python -c pass`` (a fresh process each)            <= 1 s
``startup_import``
=======================  ===================================================  =================

The direct port is :mod:`.direct_port`, a literal NumPy port of the paper's algorithm that
imports nothing else of the package; the test suite holds PPA against the same module (through
tests/direct_ppa.py) as its independent check. Rows whose anchor (xeofs, dask-ml) is not
installed say "not installed" (``pip install "ppa-dask[bench]"``).

The package: :mod:`.sizes` (sizes, sections, rows), :mod:`.harness` (interleaved timing,
medians, rows and verdicts), :mod:`.sampler` (worker memory), :mod:`.sections` (one module per
group of sections), :mod:`.report` (``bench.md``, the plots, the machine), :mod:`.cli` (the
parser and the run) and :mod:`.direct_port`.

Sizes: :data:`~.sizes.SIZES` (``full`` by default, ``--quick`` a few minutes on 2 cores; ``--size tiny``
is for the test suite only). The data passes of each PPA fit (``n_passes_``) are recorded where
the estimator reports them.
"""

from ppa_dask.utils.lazy import attach as _attach

# each name is imported from its module on first use (ppa_dask.utils.lazy): the command's
# parser (.cli.add_parser) comes without the harness's Dask
__getattr__, __dir__ = _attach(
    __name__,
    {
        "add_parser": "ppa_dask.app.bench.cli",
        "run_bench": "ppa_dask.app.bench.cli",
        "interleaved": "ppa_dask.app.bench.harness",
        "log_log_slope": "ppa_dask.app.bench.harness",
        "bench_markdown": "ppa_dask.app.bench.report",
        "ROW_IDS": "ppa_dask.app.bench.sizes",
        "SECTIONS": "ppa_dask.app.bench.sizes",
        "SIZES": "ppa_dask.app.bench.sizes",
    },
)

__all__ = [
    "SIZES",
    "SECTIONS",
    "ROW_IDS",
    "add_parser",
    "run_bench",
    "interleaved",
    "log_log_slope",
    "bench_markdown",
]
