"""The ``dask`` and ``passes`` sections: transform and inverse on Dask against blockwise PCA, and
what a data pass costs against the number of chunks (grouped passes and one task per block).
"""

from __future__ import annotations

import functools
import os

import numpy as np

from ppa_dask.app.bench.harness import (
    interleaved,
    make_row,
    median,
    new_pca,
    passes_of,
)
from ppa_dask.app.bench.sizes import (
    DEGREE,
    N_FEATURES,
    WORKERS,
)
from ppa_dask.datasets import write_zarr
from ppa_dask.ppa.drivers import PASS_GROUPS_CONFIG
from ppa_dask.ppa.estimator import PPA


def section_dask(s, say, tmp):
    import dask.array as da

    n, d = s["dask_n"], N_FEATURES
    path = os.path.join(tmp, f"table-{n}.zarr")
    if not os.path.exists(path):
        write_zarr(path, n, n_features=d, chunk_rows=s["chunk_rows"], random_state=0)
    x = da.from_zarr(path)
    model = PPA(degree=DEGREE, random_state=0).fit(x)
    sample = x[: min(n, 200_000)].compute()
    pca = new_pca(n_components=d, svd_solver="covariance_eigh").fit(sample)
    z = model.transform(x).persist()
    zp = x.map_blocks(pca.transform, dtype=np.float64).persist()
    rows = []
    for row_id, label, ppa_fn, pca_fn in (
        (
            "transform_dask",
            "transform",
            lambda: model.transform(x).sum().compute(),
            lambda: x.map_blocks(pca.transform, dtype=np.float64).sum().compute(),
        ),
        (
            "inverse_dask",
            "inverse_transform",
            lambda: model.inverse_transform(z).sum().compute(),
            lambda: zp.map_blocks(pca.inverse_transform, dtype=np.float64).sum().compute(),
        ),
    ):
        ppa_fn()  # warm-up
        times, _ = interleaved({"ppa": ppa_fn, "pca": pca_fn}, s["repeats"])
        t_ppa, t_pca = median(times["ppa"]), median(times["pca"])
        rows.append(
            make_row(
                row_id,
                f"PPA {label} on Dask ({WORKERS} workers), {n:,} x {d} from Zarr "
                f"(+ sum), degree {DEGREE}",
                f"PCA {label} blockwise (map_blocks) + sum",
                t_ppa,
                t_pca,
                t_ppa / t_pca,
                "PPA / PCA",
                ("<=", 2.0 * DEGREE),
                times=times,
                rows_per_s=n / t_ppa,
            )
        )
        say(f"{row_id}: PPA {t_ppa:.2f} s, PCA {t_pca:.2f} s")
    return rows


def section_passes(s, say, tmp):
    """What a pass costs against the number of chunks: the same passes with no work (the same
    ``pass_rows`` x the fewest chunks rows, a few thousand, whose arithmetic is a fraction of a
    millisecond, from Zarr) stored in each of ``pass_chunks`` chunks, and a fit of the same
    ``chunks_fit_n`` rows stored in that many chunks, each with grouped passes (the default)
    and with one task per block (``ppa-dask.pass-groups`` None): the grouped fits of every
    chunking alternating, then the one-task-per-block ones."""
    import dask
    import dask.array as da

    def fit(path, groups):
        with dask.config.set({PASS_GROUPS_CONFIG: groups}):
            return PPA(degree=DEGREE, random_state=0).fit(da.from_zarr(path))

    def measure(kind, rows_of):
        paths, rows = {}, {}
        for chunks in s["pass_chunks"]:
            n, chunk_rows = rows_of(chunks)
            paths[chunks] = os.path.join(tmp, f"{kind}-{chunks}.zarr")
            write_zarr(
                paths[chunks], n, n_features=N_FEATURES, chunk_rows=chunk_rows, random_state=0
            )
            rows[chunks] = (n, chunk_rows)
            fit(paths[chunks], "auto")  # warm-up
        # the grouped fits of every chunking alternate with one another, so the row's ratio
        # compares fits run side by side; the one-task-per-block fits (minutes at 4,096
        # chunks, and a scheduler left holding their state) come after, alternating too
        fits = {
            (mode, c): functools.partial(fit, paths[c], setting)
            for mode, setting in (("grouped", "auto"), ("ungrouped", None))
            for c in s["pass_chunks"]
        }
        times, fitted = {}, {}
        slowest = ("ungrouped", max(s["pass_chunks"]))
        for mode in ("grouped", "ungrouped"):
            t, f = interleaved(
                {k: fn for k, fn in fits.items() if k[0] == mode},
                s["pass_repeats"],
                counts={slowest: s["pass_slow_repeats"]},
            )
            times.update(t)
            fitted.update(f)
        points = []
        for chunks in s["pass_chunks"]:
            n, chunk_rows = rows[chunks]
            grouped, ungrouped = ("grouped", chunks), ("ungrouped", chunks)
            point = dict(
                chunks=chunks,
                rows=n,
                passes=passes_of(fitted[grouped]),
                grouped_s=median(times[grouped]),
                ungrouped_s=median(times[ungrouped]),
                times={"grouped": times[grouped], "ungrouped": times[ungrouped]},
            )
            point["grouped_pass_s"] = point["grouped_s"] / point["passes"]
            point["ungrouped_pass_s"] = point["ungrouped_s"] / passes_of(fitted[ungrouped])
            say(
                f"{kind}: {chunks} chunks of {chunk_rows} rows: {point['grouped_s']:.2f} s "
                f"grouped ({1000 * point['grouped_pass_s']:.0f} ms per pass), "
                f"{point['ungrouped_s']:.2f} s one task per block "
                f"({1000 * point['ungrouped_pass_s']:.0f} ms per pass)"
            )
            points.append(point)
        return points

    # the same rows in every chunking, so the chunks' count is the only difference: as many
    # chunks of pass_rows rows as the data grew made the 4,096-chunk "floor" a fit of 10^6 rows
    floor_n = s["pass_rows"] * min(s["pass_chunks"])
    floor = measure("floor", lambda c: (floor_n, -(-floor_n // c)))
    lo, hi = floor[0], floor[-1]
    per_chunks = ", ".join(
        f"{p['chunks']}: {1000 * p['grouped_pass_s']:.0f} ms "
        f"({1000 * p['ungrouped_pass_s']:.0f} one task per block)"
        for p in floor
    )
    n = s["chunks_fit_n"]
    fits = measure("fit", lambda c: (n, -(-n // c)))
    f_lo, f_hi = fits[0], fits[-1]
    per_fit = ", ".join(
        f"{p['chunks']}: {p['grouped_s']:.2f} s ({p['ungrouped_s']:.2f} one task per block)"
        for p in fits
    )
    return [
        make_row(
            "pass_floor",
            f"the same passes with no work, per pass: PPA(degree={DEGREE}) on {WORKERS} workers "
            f"from Zarr, {floor_n:,} x {N_FEATURES} in {hi['chunks']:,} chunks, grouped passes",
            f"the same at {lo['chunks']} chunks",
            hi["grouped_pass_s"],
            lo["grouped_pass_s"],
            hi["grouped_pass_s"] / lo["grouped_pass_s"],
            f"per pass at {hi['chunks']} chunks / at {lo['chunks']}",
            ("<=", 3),
            passes=hi["passes"],
            points=floor,
            note=f"per pass by chunks: {per_chunks}",
        ),
        make_row(
            "chunks_fit",
            f"PPA(degree={DEGREE}) fit on {WORKERS} workers, {n:,} x {N_FEATURES} from Zarr in "
            f"{f_hi['chunks']:,} chunks, grouped passes",
            f"the same data in {f_lo['chunks']} chunks",
            f_hi["grouped_s"],
            f_lo["grouped_s"],
            f_hi["grouped_s"] / f_lo["grouped_s"],
            f"fit in {f_hi['chunks']} chunks / in {f_lo['chunks']}",
            passes=f_hi["passes"],
            points=fits,
            note=f"fit by chunks: {per_fit}",
        ),
    ]
