#!/usr/bin/env python
"""Multi-information reduction on the six UCI data sets: PPA paper Sec. 5.4, Table 3.

    python pipelines/paper_multi_information.py [--output DIR] [--repeats 10] [--workers 2]
        [--seed 0] [--quick] [--datasets magic_gamma,sat,...]

For every data set (features scaled to [0, 1]) and repetition (the same random half/half
splits as ``paper_dimensionality_reduction.py`` with the same ``--seed``; one Dask task each),
PCA, PPA and PPA-GD are fitted on the training half and the multi-information reduction
``Delta I = sum_j h(x_j) - sum_j h(r_j)`` (all three maps preserve volume, so the Jacobian term
is 0) is estimated in bits per dimension on the held-out half and on the training half, with
two marginal-entropy estimators: scipy's spacing estimators (``"auto"``, the main one) and an
equal-width histogram with the Miller-Madow correction (``"histogram"``). Integer-valued
features are dequantised (uniform noise over their quantisation step, seeded, identical on both
sides; see ``ppa_dask.information``). Written to DIR:

* ``table3_multi_information.{csv,md}``: held-out half, spacing estimator, mean and standard
  deviation over the splits, beside the paper's Table 3;
* ``multi_information_all.{csv,md}``: every half x estimator x method;
* ``table3_multi_information.png``; ``report.md``, ``summary.json``.

``--quick``: 600 rows per data set, 1 repetition, at most 5 PPA-GD evaluations per step.
"""

from __future__ import annotations

import os

import numpy as np
from paper_dimensionality_reduction import NAMES, split_seed

from ppa_dask.app.experiments import METHOD_LABELS, METHODS, multi_information_task
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

#: The paper's Table 3 (bits per dimension): PCA, PPA, PPA-GD.
PAPER_TABLE3 = {
    "magic_gamma": (0.35, 0.42, 0.47),
    "japanese_vowels": (0.38, 0.45, 0.49),
    "page_blocks": (0.16, 0.23, 0.25),
    "sat": (1.76, 1.78, 1.82),
    "segmentation": (1.20, 1.23, 1.34),
    "vehicles": (1.32, 1.49, 1.38),
}
ESTIMATORS = ("auto", "histogram")
HALVES = ("test", "train")
QUICK_SAMPLES = 600
QUICK_GD_ITER = 5


def parse_args(argv=None):
    title = __doc__.split("\n\n")[0]
    parse = paper_datasets_parser(title, "paper-results/multi-information", QUICK_GD_ITER)
    return parse(argv)


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
            estimators=ESTIMATORS,
            gd_max_iter=args.gd_max_iter,
        )
        for name in args.datasets
        for r in range(args.repeats)
    ]
    with Timer() as timer:
        results = run_fanout(
            multi_information_task, specs, args.workers, label="multi-information"
        )

    stats = {}  # (dataset, half, estimator, method) -> (mean, std)
    long_rows = []
    for name in args.datasets:
        res = [r for r in results if r["dataset"] == name]
        for half in HALVES:
            for est in ESTIMATORS:
                for i, method in enumerate(METHODS):
                    values = [r["delta_i"][method][half][est] for r in res]
                    m, s = mean_std(values)
                    stats[name, half, est, method] = (float(m), float(s))
                    long_rows.append(
                        dict(
                            dataset=name,
                            half=half,
                            estimator=est,
                            method=method,
                            mean=m,
                            std=s,
                            n_splits=len(values),
                            paper=PAPER_TABLE3[name][i],
                        )
                    )

    main_rows, summary = [], {}
    for name in args.datasets:
        row = dict(dataset=NAMES[name])
        for i, method in enumerate(METHODS):
            m, s = stats[name, "test", "auto", method]
            row[method] = m
            row[f"{method}_std"] = s
            row[f"{method}_pm"] = pm(m, s)
            row[f"paper_{method}"] = PAPER_TABLE3[name][i]
        row["ppa_minus_pca"] = row["ppa"] - row["pca"]
        row["paper_ppa_minus_pca"] = PAPER_TABLE3[name][1] - PAPER_TABLE3[name][0]
        main_rows.append(row)
        summary[name] = dict(
            {method: row[method] for method in METHODS},
            ppa_above_pca=bool(row["ppa"] > row["pca"]),
            ppa_above_pca_every_estimate=bool(
                all(
                    stats[name, h, e, "ppa"][0] > stats[name, h, e, "pca"][0]
                    for h in HALVES
                    for e in ESTIMATORS
                )
            ),
            paper=dict(zip(METHODS, PAPER_TABLE3[name])),
        )
    md_cols = [("dataset", "Database")]
    md_cols += [(f"{m}_pm", METHOD_LABELS[m]) for m in METHODS]
    md_cols += [(f"paper_{m}", f"paper {METHOD_LABELS[m]}", ".2f") for m in METHODS]
    md_cols += [("ppa_minus_pca", "PPA - PCA"), ("paper_ppa_minus_pca", "paper PPA - PCA", ".2f")]
    csv_cols = [("dataset", "dataset")]
    for m in METHODS:
        csv_cols += [(m, m), (f"{m}_std", f"{m}_std"), (f"paper_{m}", f"paper_{m}")]
    t3 = write_table(
        out,
        "table3_multi_information",
        csv_cols,
        main_rows,
        md_columns=md_cols,
        title="Table 3: multi-information reduction (bits per dimension) on the "
        "held-out half, spacing estimator, mean ± std over splits",
    )

    wide_rows = []
    for name in args.datasets:
        for half in HALVES:
            for est in ESTIMATORS:
                row = dict(dataset=NAMES[name], half=half, estimator=est)
                for method in METHODS:
                    row[method] = stats[name, half, est, method][0]
                wide_rows.append(row)
    all_md = write_table(
        out,
        "multi_information_all",
        [
            ("dataset", "dataset"),
            ("half", "half"),
            ("estimator", "estimator"),
            ("method", "method"),
            ("mean", "mean"),
            ("std", "std"),
            ("n_splits", "n_splits"),
            ("paper", "paper"),
        ],
        long_rows,
        md_columns=[("dataset", "Database"), ("half", "half"), ("estimator", "entropy estimator")]
        + [(m, METHOD_LABELS[m]) for m in METHODS],
        md_rows=wide_rows,
        title="Every estimate (bits per dimension, mean over splits)",
    )

    figure = _figure(out, args.datasets, stats)
    write_json(
        out,
        "summary.json",
        dict(settings=vars(args), summary=summary, elapsed_seconds=timer.elapsed),
    )
    write_report(
        out,
        "PPA paper Sec. 5.4: multi-information reduction",
        command_line(__file__, argv),
        [t3, all_md],
        [figure],
        timer.elapsed,
    )

    print(
        f"\nMulti-information reduction, bits/dim ({args.repeats} splits, held-out half, "
        f"spacing estimator; {timer.elapsed:.1f} s) -> {out}"
    )
    print(f"{'data set':16s} {'PCA':>6s} {'PPA':>6s} {'PPA-GD':>7s}   paper PCA/PPA/PPA-GD")
    for name, row in zip(args.datasets, main_rows):
        paper = "/".join(f"{v:.2f}" for v in PAPER_TABLE3[name])
        print(
            f"{NAMES[name]:16s} {row['pca']:6.2f} {row['ppa']:6.2f} {row['ppa_gd']:7.2f}   {paper}"
        )
    return dict(output=out, summary=summary, stats=stats, results=results)


def _figure(out, datasets, stats):
    fig, axes = new_figure(1, 1, figsize=(1.6 * len(datasets) + 2, 3.8))
    ax = axes[0, 0]
    x = np.arange(len(datasets))
    width = 0.26
    colors = {"pca": "0.5", "ppa": "tab:red", "ppa_gd": "tab:blue"}
    for i, method in enumerate(METHODS):
        means = [stats[name, "test", "auto", method][0] for name in datasets]
        stds = [stats[name, "test", "auto", method][1] for name in datasets]
        ax.bar(
            x + (i - 1) * width,
            means,
            width,
            yerr=stds,
            color=colors[method],
            label=METHOD_LABELS[method],
            capsize=2,
        )
        ax.scatter(
            x + (i - 1) * width,
            [PAPER_TABLE3[name][i] for name in datasets],
            marker="_",
            s=200,
            color="k",
            zorder=3,
            label="paper's Table 3" if i == 0 else None,
        )
    ax.set_xticks(x, [NAMES[name] for name in datasets], fontsize=9)
    ax.set_ylabel("Delta I (bits per dimension)")
    ax.axhline(0, color="k", lw=0.5)
    ax.legend(fontsize=8)
    ax.set_title("Table 3: multi-information reduction (held-out half)")
    return os.path.basename(save_figure(fig, out, "table3_multi_information.png"))


if __name__ == "__main__":
    main()
