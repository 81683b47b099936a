#!/usr/bin/env python
"""Feature instability of FeatureBaggingPPA reconstructions against q and B on the UCI data sets.

    python pipelines/stability_ppa.py [--output DIR] [--workers 2] [--small]
        [--datasets abalone cpu_act house_8l diabetes] [--components 1]

For each data set (standardised features, ``--n-samples`` random rows), feature ratio ``q`` and
number of members ``B`` the pipeline builds ``FeatureBaggingPPA(PPA(degree=(1, 2, 3)),
n_components=k, n_estimators=B, max_features=q)`` and measures its feature instability, the mean
over features ``j`` of the mean squared change of the k-component reconstruction on the other
features when ``j`` is removed (in squared standardised units): by brute force with shared
coupling (only the members that held ``j`` are refitted) and, for ``q < 1``, out of bag (the
members that never held ``j``; no refits). It also records the ensemble's reconstruction error
on held-out rows. Each (data set, q, B) is a Dask task.

Writes ``results.csv``, ``report.md`` and ``ppa_fi.png`` (FI against B per q, with
``B = d (1 - q) / q`` marked).
"""

from __future__ import annotations

import os
import time

import numpy as np

from ppa_dask.app.scripts.figures import matplotlib_headless, save_figure
from ppa_dask.app.scripts.options import stability_parser
from ppa_dask.app.scripts.output import (
    command_line,
    fmt,
    markdown_table,
    write_csv,
    write_grid_report,
)
from ppa_dask.app.scripts.tasks import run_settings
from ppa_dask.datasets import REGRESSION_DATASETS, load_regression_dataset


def parse_args(argv=None):
    p = stability_parser(__doc__.split("\n\n")[0], "stability-ppa")
    p.add_argument("--datasets", nargs="+", default=None, choices=REGRESSION_DATASETS)
    p.add_argument("--n-samples", type=int, default=None, help="rows per data set (default 2000)")
    p.add_argument("--components", type=int, default=1, help="k, components per member")
    p.add_argument(
        "--ratios",
        type=float,
        nargs="+",
        default=None,
        help="feature ratios q (default 0.25 0.5 0.75 1; small: 0.5 0.75 1)",
    )
    p.add_argument(
        "--members",
        type=int,
        nargs="+",
        default=None,
        help="ensemble sizes B (default 1 2 4 8 16 32; small: 1 4 16)",
    )
    return p.parse_args(argv)


def run_setting(setting, data):
    from ppa_dask import PPA
    from ppa_dask.ensemble import FeatureBaggingPPA
    from ppa_dask.stability import feature_instability

    X_fit, X_eval = data[setting["dataset"]]
    model = FeatureBaggingPPA(
        PPA(degree=(1, 2, 3)),
        n_components=setting["k"],
        n_estimators=setting["B"],
        max_features=setting["q"],
        random_state=setting["seed"],
    )
    start = time.perf_counter()
    refit = feature_instability(model, X_fit, X_eval=X_eval, method="refit", client=False)
    row = dict(
        dataset=setting["dataset"],
        q=setting["q"],
        B=setting["B"],
        k=setting["k"],
        d=X_fit.shape[1],
        s=refit.info["n_features_per_member"],
        FI_refit=refit.value,
        FI_refit_n_refits=refit.n_refits,
    )
    if setting["q"] < 1:
        try:
            oob = feature_instability(model, X_fit, X_eval=X_eval, method="oob", client=False)
            row["FI_oob"] = oob.value
        except ValueError:  # some feature in every member: no out-of-bag estimate
            row["FI_oob"] = None
    fitted = model.fit(X_fit)
    row["reconstruction_error"] = float(fitted.reconstruction_error(X_eval).mean())
    row["seconds"] = time.perf_counter() - start
    return row


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    names = args.datasets or (["diabetes", "abalone"] if args.small else list(REGRESSION_DATASETS))
    n = args.n_samples or (600 if args.small else 2000)
    qs = args.ratios or ([0.5, 0.75, 1.0] if args.small else [0.25, 0.5, 0.75, 1.0])
    Bs = args.members or ([1, 4, 16] if args.small else [1, 2, 4, 8, 16, 32])
    k = args.components
    data = {}
    for name in names:
        X, _ = load_regression_dataset(name, n_samples=None, seed=args.seed, standardize=True)
        rows = np.random.default_rng([args.seed, 31]).permutation(X.shape[0])
        fit_rows, eval_rows = (
            rows[: min(n, X.shape[0] * 2 // 3)],
            rows[-min(500, X.shape[0] // 3) :],
        )
        data[name] = (X[fit_rows], X[eval_rows])
    settings = [
        dict(dataset=name, q=q, B=B, k=k, seed=args.seed)
        for name in names
        for q in qs
        for B in Bs
        if int(np.floor(q * data[name][0].shape[1] + 0.5)) > k
    ]
    start = time.perf_counter()
    rows = run_settings(
        args, run_setting, settings, (data,), "FeatureBaggingPPA settings", context=dict(n=n)
    )
    write_csv(
        rows,
        os.path.join(args.output, "results.csv"),
        [
            "dataset",
            "d",
            "q",
            "s",
            "B",
            "k",
            "FI_refit",
            "FI_oob",
            "FI_refit_n_refits",
            "reconstruction_error",
            "seconds",
        ],
    )
    seconds = time.perf_counter() - start

    from ppa_dask.stability import bagging_rounds

    plt = matplotlib_headless()
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        d = data[name][0].shape[1]
        for c, q in enumerate(qs):
            pts = sorted(
                [r for r in rows if r["dataset"] == name and r["q"] == q], key=lambda r: r["B"]
            )
            if not pts:
                continue
            ax.plot(
                [r["B"] for r in pts],
                [r["FI_refit"] for r in pts],
                "o-",
                color=f"C{c}",
                label=f"q = {q}",
            )
            if q < 1:
                ax.plot(
                    [r["B"] for r in pts],
                    [r.get("FI_oob") or np.nan for r in pts],
                    "x--",
                    color=f"C{c}",
                    lw=0.8,
                )
                ax.axvline(bagging_rounds(d, q), color=f"C{c}", ls=":", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("members B (dotted: d (1 - q) / q)")
        ax.set_title(f"{name} (d = {d}), k = {k}")
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("FI of the reconstruction (x: out of bag)")
    save_figure(fig, args.output, "ppa_fi.png")

    Bmax = max(Bs)
    checks = []
    for name in names:
        at_max = {r["q"]: r["FI_refit"] for r in rows if r["dataset"] == name and r["B"] == Bmax}
        ordered = [at_max[q] for q in sorted(at_max)]
        checks.append(
            f"- {name}: FI at B = {Bmax} by q: "
            + ", ".join(f"{q}: {fmt(at_max[q])}" for q in sorted(at_max))
            + f" (increasing in q: {all(a <= b for a, b in zip(ordered, ordered[1:]))})"
        )
    lines = [
        f"Standardised features, up to {n} rows fitted per data set, FI on up to 500 held-out "
        f"rows, k = {k} components per member, PPA degrees 1..3 by 2-fold CV, shared coupling, "
        f"seed {args.seed}. Wall time {seconds:.0f} s.",
        "",
        *checks,
        "",
        markdown_table(
            rows,
            [
                "dataset",
                "d",
                "q",
                "s",
                "B",
                "FI_refit",
                "FI_oob",
                "FI_refit_n_refits",
                "reconstruction_error",
            ],
        ),
        "",
        "![FI against B](ppa_fi.png)",
        "",
    ]
    write_grid_report(
        args.output,
        "Feature instability of feature-bagged PPA reconstructions",
        command_line(__file__, argv),
        lines,
    )
    return dict(rows=rows)


if __name__ == "__main__":
    main()
