#!/usr/bin/env python
"""Dimensionality reduction on the six UCI data sets: PPA paper Sec. 5.3, Fig. 8, Tables 1-2.

    python pipelines/paper_dimensionality_reduction.py [--output DIR] [--repeats 10]
        [--workers 2] [--seed 0] [--quick] [--datasets magic_gamma,sat,...]

For every data set (features scaled to [0, 1]) and repetition (a random half/half train-test
split; one Dask task each): PCA, PPA and PPA-GD are fitted on the training half, PPA choosing
each step's degree in 1..5 by 2-fold cross-validation inside it; the reconstruction MSE with
k = 1 .. d-1 retained components is measured on both halves. Written to DIR:

* ``table1_datasets.{csv,md}``: n, d, n/d and the rows used for training/test (Table 1);
* ``relative_mse.{csv,md}``: 100 x MSE / MSE_PCA per k, train and test, mean and standard
  deviation over the splits (the numbers of Fig. 8), and per split in
  ``relative_mse_splits.csv``;
* ``table2_fit_times.{csv,md}``: fit time per method in seconds, mean over splits (Table 2);
* ``fig8_relative_mse_train.png``, ``fig8_relative_mse_test.png``; ``report.md``,
  ``summary.json``.

``--quick``: 400 rows per data set, 1 repetition, at most 5 PPA-GD evaluations per step.
"""

from __future__ import annotations

import os

import numpy as np

from ppa_dask.app.experiments import (
    METHOD_LABELS,
    METHODS,
    dimensionality_reduction_task,
    scaled_paper_dataset,
    task_seed,
)
from ppa_dask.app.reports import (
    Timer,
    command_line,
    mean_std,
    new_figure,
    paper_datasets_parser,
    pm,
    prepare_output,
    run_fanout,
    save_figure,
    write_json,
    write_report,
    write_table,
)
from ppa_dask.datasets import PAPER_DATASETS, PAPER_SHAPES

NAMES = {
    "magic_gamma": "MagicGamma",
    "japanese_vowels": "Japanese Vowels",
    "page_blocks": "Pageblocks",
    "sat": "Sat",
    "segmentation": "Segmentation",
    "vehicles": "Vehicles",
}
QUICK_SAMPLES = 400
QUICK_GD_ITER = 5
#: PCA errors below this fraction of the total variance are treated as zero (ratio undefined)
ZERO_ERROR = 1e-12


def parse_args(argv=None):
    title = __doc__.split("\n\n")[0]
    parse = paper_datasets_parser(title, "paper-results/dimensionality-reduction", QUICK_GD_ITER)
    return parse(argv)


def split_seed(base_seed, dataset, repeat):
    """Seed of one random split (shared with the multi-information pipeline)."""
    return task_seed(base_seed, "split", dataset, repeat)


def relative_mse(result, method, half):
    """100 x MSE / MSE_PCA for k = 1 .. d-1 (NaN where PCA's error vanishes)."""
    ref = result["pca"][f"{half}_mse"]
    err = result[method][f"{half}_mse"]
    ks = np.arange(1, ref.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = 100.0 * err[ks] / ref[ks]
    return np.where(ref[ks] > ZERO_ERROR * ref[0], rel, np.nan)


def main(argv=None):
    args = parse_args(argv)
    out = prepare_output(args.output)
    specs = [
        dict(
            dataset=name,
            seed=split_seed(args.seed, name, r),
            repeat=r,
            max_samples=QUICK_SAMPLES if args.quick else None,
            methods=METHODS,
            gd_max_iter=args.gd_max_iter,
        )
        for name in args.datasets
        for r in range(args.repeats)
    ]
    with Timer() as timer:
        results = run_fanout(
            dimensionality_reduction_task, specs, args.workers, label="dimensionality reduction"
        )
    by_set = {name: [r for r in results if r["dataset"] == name] for name in args.datasets}

    # Table 1
    t1_rows = []
    for _i, name in enumerate(args.datasets):
        n, d = scaled_paper_dataset(name).shape
        first = by_set[name][0]
        t1_rows.append(
            dict(
                index=PAPER_DATASETS.index(name) + 1,
                dataset=NAMES[name],
                n=n,
                d=d,
                ratio=n / d,
                paper_n=PAPER_SHAPES[name][0],
                n_train=first["n_train"],
                n_test=first["n_test"],
            )
        )
    t1 = write_table(
        out,
        "table1_datasets",
        [
            ("index", "#"),
            ("dataset", "Database"),
            ("n", "n (samples)"),
            ("d", "d (dimension)"),
            ("ratio", "n/d", ".0f"),
            ("paper_n", "paper's n"),
            ("n_train", "train rows"),
            ("n_test", "test rows"),
        ],
        t1_rows,
        title="Table 1: the data sets",
    )

    # relative MSE (Fig. 8)
    rel_rows, split_rows, curves, summary = [], [], {}, {}
    for name in args.datasets:
        res = by_set[name]
        d = res[0]["n_features"]
        curves[name] = {}
        for half in ("train", "test"):
            for method in METHODS:
                per_split = np.array([relative_mse(r, method, half) for r in res])
                curves[name][(method, half)] = mean_std(per_split)
                for r, values in zip(res, per_split):
                    for k, v in enumerate(values, start=1):
                        split_rows.append(
                            dict(
                                dataset=name,
                                repeat=r["seed"],
                                half=half,
                                method=method,
                                k=k,
                                relative_mse=v,
                            )
                        )
        for k in range(1, d):
            row = dict(dataset=name, k=k)
            for half in ("train", "test"):
                for method in METHODS:
                    m, s = curves[name][(method, half)]
                    row[f"{method}_{half}"] = m[k - 1]
                    row[f"{method}_{half}_std"] = s[k - 1]
                    row[f"{method}_{half}_pm"] = pm(m[k - 1], s[k - 1], ".1f")
            rel_rows.append(row)
        ppa_train = np.array([relative_mse(r, "ppa", "train") for r in res])
        ppa_test = curves[name][("ppa", "test")][0]
        gd_first = np.array([relative_mse(r, "ppa_gd", "train")[0] for r in res])
        summary[name] = dict(
            ppa_train_max=float(np.nanmax(ppa_train)),
            ppa_train_below_100_every_k=bool(
                np.all(ppa_train[np.isfinite(ppa_train)] <= 100 + 1e-9)
            ),
            ppa_test_mean_below_100_fraction=float(np.mean(ppa_test[np.isfinite(ppa_test)] < 100)),
            ppa_first_train=float(np.nanmean(ppa_train[:, 0])),
            ppa_gd_first_train=float(np.nanmean(gd_first)),
            ppa_gd_first_not_worse=bool(np.all(gd_first <= ppa_train[:, 0] + 1e-7)),
        )
    rel_cols = [("dataset", "data set"), ("k", "k")]
    rel_csv_cols = list(rel_cols)
    for half in ("train", "test"):
        for method in METHODS:
            rel_cols.append((f"{method}_{half}_pm", f"{METHOD_LABELS[method]} {half}"))
            rel_csv_cols += [
                (f"{method}_{half}", f"{method}_{half}"),
                (f"{method}_{half}_std", f"{method}_{half}_std"),
            ]
    rel_md = write_table(
        out,
        "relative_mse",
        rel_csv_cols,
        rel_rows,
        md_columns=rel_cols,
        title="Relative MSE (100 x MSE / MSE_PCA, %), mean ± std over splits (Fig. 8)",
    )
    write_table(
        out,
        "relative_mse_splits",
        [
            ("dataset", "dataset"),
            ("repeat", "split_seed"),
            ("half", "half"),
            ("method", "method"),
            ("k", "k"),
            ("relative_mse", "relative_mse"),
        ],
        split_rows,
    )

    # Table 2: fit times
    t2_rows = []
    for name in args.datasets:
        row = dict(dataset=NAMES[name])
        for method in METHODS:
            seconds = [r[method]["fit_seconds"] for r in by_set[name]]
            row[method] = float(np.mean(seconds))
            row[f"{method}_std"] = float(np.std(seconds))
        row["ppa_over_pca"] = row["ppa"] / row["pca"]
        row["gd_passes"] = float(np.mean([r["ppa_gd"]["n_passes"] for r in by_set[name]]))
        row["ppa_passes"] = float(np.mean([r["ppa"]["n_passes"] for r in by_set[name]]))
        t2_rows.append(row)
    t2 = write_table(
        out,
        "table2_fit_times",
        [
            ("dataset", "Database"),
            ("pca", "PCA (s)", ".4f"),
            ("ppa", "PPA (s)", ".4f"),
            ("ppa_gd", "PPA-GD (s)", ".3f"),
            ("ppa_over_pca", "PPA / PCA", ".1f"),
            ("ppa_passes", "PPA passes", ".1f"),
            ("gd_passes", "PPA-GD passes", ".1f"),
        ],
        t2_rows,
        title="Table 2: fit time on the training half (seconds, mean over splits; "
        "one thread per task)",
    )

    figures = [_figure(out, curves, args.datasets, half) for half in ("train", "test")]
    write_json(
        out,
        "summary.json",
        dict(settings=vars(args), summary=summary, elapsed_seconds=timer.elapsed),
    )
    write_report(
        out,
        "PPA paper Sec. 5.3: dimensionality reduction",
        command_line(__file__, argv),
        [t1, t2, rel_md],
        figures,
        timer.elapsed,
    )

    print(f"\nDimensionality reduction ({args.repeats} splits, {timer.elapsed:.1f} s) -> {out}")
    print(
        f"{'data set':16s} {'PPA train max':>13s} {'all<=100':>8s} {'test<100':>8s} "
        f"{'k=1 PPA':>8s} {'k=1 GD':>8s}   fit s: PCA / PPA / PPA-GD"
    )
    for name, row in zip(args.datasets, t2_rows):
        s = summary[name]
        print(
            f"{NAMES[name]:16s} {s['ppa_train_max']:13.1f} "
            f"{str(s['ppa_train_below_100_every_k']):>8s} "
            f"{100 * s['ppa_test_mean_below_100_fraction']:7.0f}% "
            f"{s['ppa_first_train']:8.1f} {s['ppa_gd_first_train']:8.1f}   "
            f"{row['pca']:.4f} / {row['ppa']:.3f} / {row['ppa_gd']:.2f}"
        )
    return dict(output=out, summary=summary, results=results, fit_times=t2_rows)


def _figure(out, curves, datasets, half):
    from matplotlib.ticker import MaxNLocator

    ncols = min(3, len(datasets))
    nrows = -(-len(datasets) // ncols)
    fig, axes = new_figure(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows))
    styles = {
        "pca": dict(color="k", ls="--"),
        "ppa": dict(color="tab:red", marker="o", ms=3),
        "ppa_gd": dict(color="tab:blue", marker="s", ms=3),
    }
    for ax, name in zip(axes.ravel(), datasets):
        off_scale = False
        for method in METHODS:
            m, s = curves[name][(method, half)]
            k = np.arange(1, m.shape[0] + 1)
            ax.plot(k, m, label=METHOD_LABELS[method], **styles[method])
            if method != "pca":
                ax.fill_between(k, m - s, m + s, color=styles[method]["color"], alpha=0.15)
            off_scale |= bool(np.nanmax(m) > 200)
        ax.set_ylim(0, 200 if off_scale else None)
        ax.set_title(NAMES[name] + (" (clipped at 200%)" if off_scale else ""), fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("retained dimensions k")
        ax.set_ylabel("relative MSE (%)")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(datasets) :]:
        ax.set_visible(False)
    axes.ravel()[0].legend(fontsize=8)
    fig.suptitle(f"Fig. 8: relative reconstruction MSE w.r.t. PCA, {half} data")
    return os.path.basename(save_figure(fig, out, f"fig8_relative_mse_{half}.png"))


if __name__ == "__main__":
    main()
