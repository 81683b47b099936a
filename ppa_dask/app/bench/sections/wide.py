"""The ``wide`` sections: PPA of data with many more features than samples (the Gram path).

In process (``wide``): a fit of ``n x d`` with three components against scikit-learn's
randomized PCA, the growth of the fit time with ``d`` at a fixed ``n`` (its log-log slope) and,
for the other end of the shapes, a full PPA of a hyperspectral scene's 224 bands against a full
PCA. On the shared cluster (``wide_ooc``): ``ppa-dask fit --n-components 3`` of a float32 Zarr
field chunked along its features, against a plain scan of the store, the workers' peak memory,
and xeofs ``EOF(n_modes=3)`` on the same data.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings

import numpy as np

from ppa_dask.app.bench.harness import (
    anchor,
    interleaved,
    log_log_slope,
    make_row,
    median,
    new_pca,
    passes_of,
)
from ppa_dask.app.bench.sampler import start_sampler, stop_sampler
from ppa_dask.app.bench.sizes import MEMORY_TARGET
from ppa_dask.ppa.estimator import PPA
from ppa_dask.store import write_array
from ppa_dask.utils.warnings import RankDeficientWarning

#: Candidate degrees of the wide fits (chosen per step by 2-fold CV).
WIDE_DEGREES = (1, 2, 3)
#: Latent modes of the synthetic fields (the first with a curved echo).
FIELD_MODES = 8


def field_block(n, start, stop, seed=0, dtype=np.float64):
    """Columns ``start .. stop-1`` of a synthetic field of ``n`` dates: a few spatial modes with
    decaying amplitudes over seeded date series, the first echoed quadratically in another
    pattern (a curved leading mode), plus noise. Each column depends only on the seed and its
    index, so any chunking gives the same field.

    Examples
    --------
    >>> a = field_block(5, 0, 10)
    >>> bool(np.allclose(np.hstack([field_block(5, 0, 4), field_block(5, 4, 10)]), a))
    True
    """
    series = np.random.default_rng([seed, 0]).normal(size=(n, FIELD_MODES))
    series *= 2.0 ** -np.arange(FIELD_MODES) * 4.0
    out = np.empty((n, stop - start), dtype=dtype)
    step = 4096
    for first in range(start // step * step, stop, step):  # blocks aligned on 4096 columns
        rng = np.random.default_rng([seed, 1, first])
        patterns = rng.normal(size=(FIELD_MODES + 1, step))
        block = series @ patterns[:FIELD_MODES]
        block += np.outer(series[:, 0] ** 2 / 4.0, patterns[FIELD_MODES]) * 0.5
        block += 0.1 * rng.normal(size=(n, step))
        a, b = max(start, first), min(stop, first + step)
        out[:, a - start : b - start] = block[:, a - first : b - first]
    return out


def _field_chunk(block_info=None, seed=0, dtype=np.float32):
    info = block_info[None]
    (first, last), (start, stop) = info["array-location"]
    return field_block(last - first, start, stop, seed=seed, dtype=dtype)


def section_wide(s, say):
    rows = []
    n, d = s["wide_n"], s["wide_d"]
    X = field_block(n, 0, d)
    with warnings.catch_warnings():
        # fewer samples than features: PPA's rank is the samples'
        warnings.simplefilter("ignore", RankDeficientWarning)
        PPA(n_components=3, degree=WIDE_DEGREES, random_state=0).fit(X[:, :2000])  # warm-up
        funcs = {
            "ppa": lambda: PPA(n_components=3, degree=WIDE_DEGREES, random_state=0).fit(X),
            "pca": lambda: new_pca(n_components=3, svd_solver="randomized", random_state=0).fit(X),
        }
        times, fitted = interleaved(funcs, s["wide_repeats"])
    t_ppa, t_pca = median(times["ppa"]), median(times["pca"])
    say(f"wide in memory: PPA {t_ppa:.3f} s ({fitted['ppa'].solver_}), PCA {t_pca:.3f} s")
    rows.append(
        make_row(
            "wide_memory",
            f"wide data in memory, {n:,} x {d:,}, PPA(n_components=3, degree 1..3 by CV)",
            'scikit-learn PCA(3, svd_solver="randomized") fit',
            t_ppa,
            t_pca,
            t_ppa / t_pca,
            "PPA / PCA",
            ("<=", 5.0),
            passes=passes_of(fitted["ppa"]),
            times=times,
            solver=fitted["ppa"].solver_,
        )
    )

    points = []
    n_cost = s["wide_cost_n"]
    for d_cost in s["wide_cost_d"]:
        X = field_block(n_cost, 0, d_cost)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RankDeficientWarning)
            funcs = {
                "ppa": lambda X=X: PPA(n_components=3, degree=WIDE_DEGREES, random_state=0).fit(X),
                "pca": lambda X=X: new_pca(
                    n_components=3, svd_solver="randomized", random_state=0
                ).fit(X),
            }
            times, fitted = interleaved(funcs, s["cost_repeats"])
        points.append(
            dict(
                n=n_cost,
                d=d_cost,
                ppa_s=median(times["ppa"]),
                pca_s=median(times["pca"]),
                passes=passes_of(fitted["ppa"]),
                solver=fitted["ppa"].solver_,
                times=times,
            )
        )
        say(f"wide cost d={d_cost:,}: PPA {points[-1]['ppa_s']:.3f} s")
        del X
    xs = [p["d"] for p in points]
    ppa_slope = log_log_slope(xs, [p["ppa_s"] for p in points])
    pca_slope = log_log_slope(xs, [p["pca_s"] for p in points])
    rows.append(
        make_row(
            "wide_cost_d",
            f"cost growth in d, wide data: fit time against d = {xs[0]:,} .. {xs[-1]:,} "
            f"(n = {n_cost:,}), PPA(n_components=3, degree 1..3 by CV); log-log slope",
            "randomized PCA(3) fit, same sizes",
            points[-1]["ppa_s"],
            points[-1]["pca_s"],
            ppa_slope,
            f"slope PPA (PCA {pca_slope:.2f})" if pca_slope is not None else "slope PPA",
            ("<=", 1.2),
            passes=points[-1]["passes"],
            points=points,
            ppa_slope=ppa_slope,
            pca_slope=pca_slope,
        )
    )

    n_full, d_full = s["wide_full"]
    X = field_block(n_full, 0, d_full)
    funcs = {
        "ppa": lambda: PPA(random_state=0).fit(X),
        "pca": lambda: new_pca().fit(X),  # scikit-learn's own choice for the shape
    }
    times, fitted = interleaved(funcs, s["wide_full_repeats"])
    t_ppa, t_pca = median(times["ppa"]), median(times["pca"])
    say(f"full PPA {n_full:,} x {d_full}: PPA {t_ppa:.2f} s, PCA {t_pca:.2f} s")
    rows.append(
        make_row(
            "wide_full_bands",
            f"full PPA in memory, {n_full:,} x {d_full} (a scene's bands), degree 1..5 by CV",
            "scikit-learn PCA() fit (its default solver), all components",
            t_ppa,
            t_pca,
            t_ppa / t_pca,
            "PPA / PCA",
            ("<=", 8.0),
            passes=passes_of(fitted["ppa"]),
            times=times,
        )
    )
    return rows


def section_wide_ooc(s, say, tmp):
    import dask.array as da
    from dask.utils import format_bytes
    from distributed import default_client

    client = default_client()
    n, d, width = s["wide_ooc_n"], s["wide_ooc_d"], s["wide_ooc_chunk"]
    path = os.path.join(tmp, "field.zarr")
    field = da.map_blocks(
        _field_chunk,
        dtype=np.float32,
        chunks=((n,), (width,) * (d // width) + (d % width,) * bool(d % width)),
    )
    write_array(field, path)
    X = da.from_zarr(path)
    nbytes = X.nbytes
    limit = min(w["memory_limit"] for w in client.scheduler_info(n_workers=-1)["workers"].values())
    figure = (
        f"wide out of core: ppa-dask fit --n-components 3 of a {n:,} x {d:,} float32 Zarr "
        f"field ({format_bytes(nbytes)}, chunks of {n:,} x {width:,}) on 2 workers"
    )
    X.sum().compute()  # warm-up: the page cache and the workers' first calls
    scans, fits = [], []
    command = [
        sys.executable, "-m", "ppa_dask", "fit", path, os.path.join(tmp, "wide-model.zarr"),
        "--n-components", "3", "--degree", "1-3", "--scheduler", client.scheduler.address,
        "--overwrite",
    ]  # fmt: skip
    client.run(start_sampler)
    for _ in range(s["wide_ooc_repeats"]):
        t0 = time.perf_counter()
        X.sum().compute()
        scans.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        fits.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise RuntimeError(f"ppa-dask fit failed ({done.returncode}): {done.stderr[-2000:]}")
    samples = client.run(stop_sampler)
    model = PPA.load(os.path.join(tmp, "wide-model.zarr"))
    t_fit, t_scan = median(fits), median(scans)
    peaks = [v["peak"] for v in samples.values() if v]
    peak = max(peaks) / limit if peaks else None
    say(f"wide out of core: fit {t_fit:.1f} s, scan {t_scan:.1f} s, peak {peak:.0%}")
    times = {"ppa": fits, "scan": scans}
    rows = [
        make_row(
            "wide_ooc_scan",
            figure,
            "plain scan of the store (sum)",
            t_fit,
            t_scan,
            t_fit / t_scan,
            "fit / scan",
            ("<=", 15.0),
            passes=passes_of(model),
            times=times,
            solver=model.solver_,
            note="the command's whole run, Python start and imports included",
        ),
        make_row(
            "wide_ooc_memory",
            figure + ", peak worker memory (sampled every 20 ms in the workers)",
            "worker memory limit",
            t_fit,
            ratio=peak,
            ratio_label="peak / limit",
            target=("<", MEMORY_TARGET),
            peaks_bytes=peaks,
            limit_bytes=limit,
        ),
    ]
    xeofs = anchor("xeofs.single")
    if xeofs is None:
        rows.append(
            make_row(
                "wide_ooc_xeofs",
                figure,
                "xeofs EOF(n_modes=3) fit + scores",
                status="not installed (xeofs; pip install 'ppa-dask[bench]')",
            )
        )
        return rows
    import xarray as xr

    cells = xr.DataArray(
        X, dims=("time", "cell"), coords={"time": np.arange(n), "cell": np.arange(d)}
    )

    def eof():
        m = xeofs.EOF(n_modes=3, random_state=0)
        m.fit(cells, dim="time")
        return m.scores().compute()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        eof_times, _ = interleaved({"xeofs": eof}, s["wide_ooc_repeats"])
    t_eof = median(eof_times["xeofs"])
    say(f"wide out of core: xeofs {t_eof:.1f} s")
    rows.append(
        make_row(
            "wide_ooc_xeofs",
            figure,
            "xeofs EOF(n_modes=3) fit + scores (in this process, on the cluster)",
            t_fit,
            t_eof,
            t_fit / t_eof,
            "PPA / xeofs",
            passes=passes_of(model),
            times={"ppa": fits, **eof_times},
        )
    )
    return rows
