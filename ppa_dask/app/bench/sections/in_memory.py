"""The in-process sections: PPA fits and transforms in memory against PCA and the direct port
(``memory``), the paper's Table 2 (``table2``) and the growth of the fit time (``cost``).
"""

from __future__ import annotations

import time

import numpy as np

from ppa_dask.app.bench.direct_port import fit_direct
from ppa_dask.app.bench.harness import (
    interleaved,
    log_log_slope,
    make_row,
    median,
    new_pca,
    passes_of,
)
from ppa_dask.app.bench.sizes import (
    DEGREE,
    N_FEATURES,
    TABLE2_MAX_REPEATS,
)
from ppa_dask.app.experiments import paper_split
from ppa_dask.datasets import PAPER_TABLE2_MINUTES, make_curved_manifold
from ppa_dask.ppa.estimator import PPA


def section_memory(s, say):
    n, d = s["fit_n"], N_FEATURES
    X = make_curved_manifold(n, n_features=d, random_state=0)
    small = X[: min(n, 20_000)]
    PPA(degree=DEGREE).fit(small)  # warm-up: imports, compilation, first calls
    new_pca(svd_solver="covariance_eigh").fit(small)
    fit_direct(small, DEGREE)
    funcs = {
        "ppa": lambda: PPA(degree=DEGREE).fit(X),
        "pca": lambda: new_pca(svd_solver="covariance_eigh").fit(X),
        "port": lambda: fit_direct(X, DEGREE),
    }
    times, fitted = interleaved(funcs, s["repeats"], counts={"port": s["port_repeats"]})
    t_ppa, t_pca = median(times["ppa"]), median(times["pca"])
    passes = passes_of(fitted["ppa"])
    size = f"{n:,} x {d}, degree {DEGREE}"
    rows = [
        make_row(
            "fit_memory_pca",
            f"PPA fit in memory, {size}",
            'scikit-learn PCA(svd_solver="covariance_eigh") fit',
            t_ppa,
            t_pca,
            t_ppa / ((d - 1) * t_pca),
            f"PPA / ({d - 1} PCA fits)",
            ("<=", 1.0),
            passes=passes,
            times=times,
        )
    ]
    t_port = median(times["port"])
    lead = np.max(np.abs(fitted["ppa"].leading_vectors_ - fitted["port"]["leading"]))
    rows.append(
        make_row(
            "fit_memory_port",
            f"PPA fit in memory against the direct port, {size}",
            "direct port (ppa_dask.app.bench.direct_port) fit",
            t_ppa,
            t_port,
            t_port / t_ppa,
            "port / PPA",
            (">=", 10.0),
            passes=passes,
            times=times,
            note=f"max |leading vectors PPA - port| = {lead:.1e}",
        )
    )
    say(f"fit in memory: PPA {t_ppa:.3f} s ({passes} passes), PCA {t_pca:.3f} s")

    model = fitted["ppa"]
    pca = new_pca(n_components=d, svd_solver="covariance_eigh").fit(X)
    Z, Zp = model.transform(X), pca.transform(X)
    for row_id, label, ppa_fn, pca_fn in (
        ("transform_memory", "transform", lambda: model.transform(X), lambda: pca.transform(X)),
        (
            "inverse_memory",
            "inverse_transform",
            lambda: model.inverse_transform(Z),
            lambda: pca.inverse_transform(Zp),
        ),
    ):
        times, _ = interleaved({"ppa": ppa_fn, "pca": pca_fn}, s["repeats"])
        t_ppa, t_pca = median(times["ppa"]), median(times["pca"])
        rows.append(
            make_row(
                row_id,
                f"PPA {label} in memory, {n:,} x {d}, degree {DEGREE}",
                f"PCA {label}",
                t_ppa,
                t_pca,
                t_ppa / t_pca,
                "PPA / PCA",
                ("<=", 2.0 * DEGREE),
                times=times,
                rows_per_s=n / t_ppa,
            )
        )
    return rows


def section_table2(s, say):
    rows = []
    for name, (paper_pca, paper_ppa, *_) in PAPER_TABLE2_MINUTES.items():
        train, _ = paper_split(name, seed=0, max_samples=s["table2_max_samples"])
        # the paper's protocol (app/experiments.py): degree 1..5 per step by 2-fold CV
        funcs = {
            "ppa": lambda train=train: PPA(degree=(1, 2, 3, 4, 5), cv=2, random_state=0).fit(
                train
            ),
            "pca": lambda train=train: new_pca(n_components=train.shape[1], svd_solver="full").fit(
                train
            ),
        }
        start = time.perf_counter()
        funcs["ppa"]()  # warm-up
        warm = time.perf_counter() - start
        repeats = max(
            s["table2_repeats"], min(TABLE2_MAX_REPEATS, int(s["table2_window_s"] / warm))
        )
        times, fitted = interleaved(funcs, repeats)
        t_ppa, t_pca = median(times["ppa"]), median(times["pca"])
        paper = paper_ppa / paper_pca
        rows.append(
            make_row(
                f"table2_{name}",
                f"Table 2: {name}, PPA (degree 1..5 by CV) on the training half "
                f"({train.shape[0]:,} x {train.shape[1]})",
                "scikit-learn PCA fit, same split",
                t_ppa,
                t_pca,
                t_ppa / t_pca,
                "PPA / PCA",
                ("<=", round(paper, 1)),
                passes=passes_of(fitted["ppa"]),
                times=times,
                paper_ratio=paper,
            )
        )
        say(f"table 2 {name}: PPA / PCA = {t_ppa / t_pca:.1f} (paper {paper:.1f})")
    return rows


def section_cost(s, say):
    points = {"n": [], "d": []}
    for axis, sizes in (("n", s["cost_n"]), ("d", s["cost_d"])):
        for size in sizes:
            n, d = (size, N_FEATURES) if axis == "n" else (s["cost_d_n"], size)
            X = make_curved_manifold(n, n_features=d, random_state=0)
            funcs = {
                "ppa": lambda X=X: PPA(degree=DEGREE).fit(X),
                "pca": lambda X=X: new_pca(svd_solver="covariance_eigh").fit(X),
            }
            times, fitted = interleaved(funcs, s["cost_repeats"])
            points[axis].append(
                dict(
                    n=n,
                    d=d,
                    ppa_s=median(times["ppa"]),
                    pca_s=median(times["pca"]),
                    passes=passes_of(fitted["ppa"]),
                    times=times,
                )
            )
            say(f"cost growth n={n:,} d={d}: PPA {points[axis][-1]['ppa_s']:.3f} s")
            del X
    rows = []
    for axis, fixed in (("n", f"d = {N_FEATURES}"), ("d", f"n = {s['cost_d_n']:,}")):
        pts = points[axis]
        xs = [p[axis] for p in pts]
        ppa_slope = log_log_slope(xs, [p["ppa_s"] for p in pts])
        pca_slope = log_log_slope(xs, [p["pca_s"] for p in pts])
        rows.append(
            make_row(
                f"cost_{axis}",
                f"cost growth: fit time against {axis} = {xs[0]:,} .. {xs[-1]:,} ({fixed}), "
                f"degree {DEGREE}; log-log slope",
                "PCA fit, same sizes",
                pts[-1]["ppa_s"],
                pts[-1]["pca_s"],
                ppa_slope,
                f"slope PPA (PCA {pca_slope:.2f})" if pca_slope is not None else "slope PPA",
                passes=pts[-1]["passes"],
                points=pts,
                ppa_slope=ppa_slope,
                pca_slope=pca_slope,
            )
        )
    return rows
