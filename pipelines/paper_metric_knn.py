#!/usr/bin/env python
"""k-NN classification in the PPA metric on two noisy parabolas: PPA paper Sec. 5.1, Figs. 3-4.

    python pipelines/paper_metric_knn.py [--output DIR] [--repeats 20] [--workers 2] [--seed 0]
        [--quick] [--train-sizes 10,20,50,100,500] [--ks 1,3,5,7,9,11,13,15]

Two classes on parallel noisy parabolas (``ppa_dask.datasets.make_parabolas``: gap 0.4, noise
0.05), at low (0.5) and high (1.5) curvature. For each curvature the PPA degree is chosen once
by 2-fold cross-validation on 1000 samples (the paper's procedure; it found 2), as the lowest
degree whose CV error is within 1 % of the best (``--degree`` fixes it instead). For every
curvature, training size and repetition (one Dask task each; a fresh draw of training and 2000
test points), three k-NN classifiers are scored for every k: Euclidean, Mahalanobis (whitened
PCA, ``make_mahalanobis_knn``) and the generalised Mahalanobis PPA metric (whitened PPA,
``make_ppa_knn``). Written to DIR:

* ``knn_accuracy.{csv,md}``: test accuracy per curvature, training size, k and metric (mean and
  standard deviation over repetitions);
* ``knn_by_training_size.{csv,md}``: the same averaged over k;
* ``fig4_knn_accuracy.png`` (accuracy against k, one panel per curvature and training size),
  ``fig4_knn_training_size.png`` (accuracy against training size), ``fig3_ppa_metric.png``
  (the data, PPA's curvilinear grid and the unit balls of the PPA metric);
* ``report.md``, ``summary.json``.

``--quick``: training sizes 10 and 50, k in 1, 3, 5, 10 repetitions, 500 test points.
"""

from __future__ import annotations

import os

import numpy as np

from ppa_dask.app.experiments import (
    KNN_LABELS,
    KNN_METRICS,
    metric_knn_task,
    parabola_degree,
)
from ppa_dask.app.reproductions import make_record, recorded_command, seeds_of, write_record
from ppa_dask.app.scripts.figures import new_figure, save_figure
from ppa_dask.app.scripts.options import base_parser, csv_list, quick_defaults
from ppa_dask.app.scripts.output import (
    Timer,
    command_line,
    mean_std,
    pm,
    prepare_output,
    write_report,
    write_summary,
    write_table,
)
from ppa_dask.app.scripts.tasks import run_fanout
from ppa_dask.utils.seeds import task_seed

CURVATURES = {"low": 0.5, "high": 1.5}
GAP, NOISE = 0.4, 0.05


def parse_args(argv=None):
    parser = base_parser(__doc__.split("\n\n")[0], "paper-results/metric-knn")
    parser.add_argument(
        "--train-sizes",
        type=csv_list(int),
        default=None,
        help="training set sizes (default 10,20,50,100,500; quick 10,50)",
    )
    parser.add_argument(
        "--ks",
        type=csv_list(int),
        default=None,
        help="numbers of neighbours (default 1,3,...,15; quick 1,3,5)",
    )
    parser.add_argument(
        "--degree",
        type=int,
        default=None,
        help="fixed PPA degree (default: chosen by CV on 1000 samples)",
    )
    parser.add_argument(
        "--n-test", type=int, default=None, help="test points per draw (default 2000; quick 500)"
    )
    args = quick_defaults(
        parser.parse_args(argv),
        repeats=(10, 20),
        train_sizes=([10, 50], [10, 20, 50, 100, 500]),
        ks=([1, 3, 5], [1, 3, 5, 7, 9, 11, 13, 15]),
        n_test=(500, 2000),
    )
    if min(args.train_sizes) < 4 or min(args.ks) < 1 or args.n_test < 10:
        parser.error("training sizes must be >= 4, k >= 1 and --n-test >= 10")
    return args


def main(argv=None):
    args = parse_args(argv)
    out = prepare_output(args.output)
    with Timer() as timer:
        degrees, cv_scores = {}, {}
        for level, c in CURVATURES.items():
            degrees[level], cv_scores[level] = parabola_degree(
                c, seed=task_seed(args.seed, "parabola-degree", level), gap=GAP, noise=NOISE
            )
            if args.degree is not None:
                degrees[level] = args.degree
        specs = [
            dict(
                level=level,
                curvature=c,
                gap=GAP,
                noise=NOISE,
                n_train=n,
                n_test=args.n_test,
                ks=tuple(args.ks),
                degree=degrees[level],
                seed=task_seed(args.seed, "knn", level, n, r),
            )
            for level, c in CURVATURES.items()
            for n in args.train_sizes
            for r in range(args.repeats)
        ]
        results = run_fanout(metric_knn_task, specs, args.workers, label="metric k-NN")

    acc = {}  # (level, n) -> (mean, std) arrays of shape (3, len(ks))
    for level in CURVATURES:
        for n in args.train_sizes:
            stack = [
                r["accuracy"]
                for s, r in zip(specs, results)
                if s["level"] == level and r["n_train"] == n
            ]
            acc[level, n] = mean_std(np.array(stack))
    rows, size_rows, summary = [], [], {}
    for level, c in CURVATURES.items():
        for n in args.train_sizes:
            m, s = acc[level, n]
            for j, k in enumerate(args.ks):
                row = dict(curvature=c, level=level, n_train=n, k=k, degree=degrees[level])
                for i, metric in enumerate(KNN_METRICS):
                    row[metric] = m[i, j]
                    row[f"{metric}_std"] = s[i, j]
                    row[f"{metric}_pm"] = pm(m[i, j], s[i, j], ".3f")
                rows.append(row)
            over_k = np.nanmean(m, axis=1)
            size_row = dict(curvature=c, level=level, n_train=n, degree=degrees[level])
            for i, metric in enumerate(KNN_METRICS):
                size_row[metric] = over_k[i]
                size_row[f"{metric}_k_spread"] = float(np.nanmax(m[i]) - np.nanmin(m[i]))
            size_rows.append(size_row)
            summary[f"{level}|{n}"] = dict(
                size_row, ppa_ahead=bool(over_k[2] >= max(over_k[0], over_k[1]))
            )
    metric_cols = [(f"{m}_pm", KNN_LABELS[m]) for m in KNN_METRICS]
    t_acc = write_table(
        out,
        "knn_accuracy",
        [(k, k) for k in ("curvature", "n_train", "k", "degree")]
        + [(col, col) for m in KNN_METRICS for col in (m, f"{m}_std")],
        rows,
        md_columns=[("curvature", "curvature", ".1f"), ("n_train", "training size"), ("k", "k")]
        + metric_cols,
        title=f"Fig. 4: k-NN test accuracy, mean ± std over {args.repeats} draws",
    )
    t_size = write_table(
        out,
        "knn_by_training_size",
        [(k, k) for k in ("curvature", "n_train", "degree")]
        + [(col, col) for m in KNN_METRICS for col in (m, f"{m}_k_spread")],
        size_rows,
        md_columns=[
            ("curvature", "curvature", ".1f"),
            ("n_train", "training size"),
            ("degree", "PPA degree"),
        ]
        + [(m, f"{KNN_LABELS[m]} (mean over k)") for m in KNN_METRICS]
        + [(f"{m}_k_spread", f"{KNN_LABELS[m]} spread over k") for m in KNN_METRICS],
        title="Accuracy averaged over k (and its range over k: sensitivity to k)",
    )

    figures = [
        _figure4(out, acc, args),
        _figure4_sizes(out, acc, args),
        _figure3(out, degrees, args.seed),
    ]
    write_summary(
        out, args, timer.elapsed, degrees=degrees, degree_cv_scores=cv_scores, summary=summary
    )
    write_report(
        out,
        "PPA paper Sec. 5.1: k-NN in the PPA metric",
        command_line(__file__, argv),
        [t_size, t_acc],
        figures,
        timer.elapsed,
    )

    print(f"\nMetric k-NN ({args.repeats} draws, {timer.elapsed:.1f} s) -> {out}")
    print(
        f"PPA degree (CV on 1000 samples, 1% parsimony rule): {degrees}; CV errors "
        + "; ".join(f"{k}: {np.round(v, 4).tolist()}" for k, v in cv_scores.items())
    )
    print(
        f"{'curvature':>9s} {'n_train':>7s}  "
        + "  ".join(f"{m:>11s}" for m in KNN_METRICS)
        + "   (accuracy, mean over k)"
    )
    for row in size_rows:
        print(
            f"{row['curvature']:9.1f} {row['n_train']:7d}  "
            + "  ".join(f"{row[m]:11.3f}" for m in KNN_METRICS)
        )
    if args.record:
        write_record(args.record, make_knn_record(args, argv, specs, results, timer.elapsed))
    return dict(output=out, degrees=degrees, summary=summary, accuracy=acc, rows=rows)


#: The numbers of neighbours the record's tables show (its cells hold every k of the run).
TABLE_KS = (1, 7, 15)
#: Options of the test suite's smaller rerun of a saved record (a subset of its cells).
REDUCED = ("--repeats", "2", "--train-sizes", "10", "--ks", "1,7")


def make_knn_record(args, argv, specs, results, elapsed):
    """The reproduction record of a run: one cell per draw, k and metric (Fig. 4)."""
    cells = [
        dict(
            level=s["level"],
            n_train=r["n_train"],
            k=k,
            metric=metric,
            seed=r["seed"],
            degree=r["degree"],
            accuracy=r["accuracy"][i, j],
        )  # fmt: skip
        for s, r in zip(specs, results)
        for i, metric in enumerate(KNN_METRICS)
        for j, k in enumerate(r["ks"])
    ]
    common = dict(value="accuracy", rows=["level", "n_train"], column="metric", over="seed",
                  digits=3, labels=KNN_LABELS, row_headers=["curvature", "training size"])  # fmt: skip
    tables = [
        dict(common, name=f"fig4_k{k}", where=dict(k=k),
             title=f"Fig. 4: k-NN test accuracy at k = {k} (curvature low 0.5, high 1.5)")
        for k in args.ks
        if k in TABLE_KS
    ]  # fmt: skip
    figures = [
        dict(name=t["name"], kind="lines", table=t["name"], x="n_train", panel="level",
             xlabel="training size", ylabel="test accuracy", panel_labels=dict(
                 low="curvature 0.5", high="curvature 1.5"))
        for t in tables if t["where"]["k"] in (1, 7)
    ]  # fmt: skip
    return make_record(
        "ppa_metric_knn",
        "k-NN in the Euclidean, Mahalanobis and PPA metrics on two noisy parabolas",
        "Laparra et al. 2014, Sec. 5.1, Fig. 4",
        recorded_command(__file__, argv),
        seeds=seeds_of(specs, args.seed),
        keys=["level", "n_train", "k", "metric", "seed"],
        cells=cells,
        tables=tables,
        figures=figures,
        reduced=REDUCED,
        run_seconds=elapsed,
    )


def _figure4(out, acc, args):
    sizes = args.train_sizes
    fig, axes = new_figure(len(CURVATURES), len(sizes), figsize=(3.0 * len(sizes), 5.6))
    colors = {"euclidean": "0.4", "mahalanobis": "tab:blue", "ppa": "tab:red"}
    for row, (level, c) in enumerate(CURVATURES.items()):
        for col, n in enumerate(sizes):
            ax = axes[row, col]
            m, s = acc[level, n]
            for i, metric in enumerate(KNN_METRICS):
                ax.errorbar(
                    args.ks,
                    m[i],
                    yerr=s[i],
                    color=colors[metric],
                    marker="o",
                    ms=3,
                    capsize=2,
                    label=KNN_LABELS[metric],
                )
            ax.set_title(f"curvature {c}, {n} training points", fontsize=9)
            ax.set_xlabel("k")
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel("test accuracy")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Fig. 4: k-NN accuracy, low (top) and high (bottom) curvature")
    return os.path.basename(save_figure(fig, out, "fig4_knn_accuracy.png"))


def _figure4_sizes(out, acc, args):
    fig, axes = new_figure(1, len(CURVATURES), figsize=(9, 3.6))
    colors = {"euclidean": "0.4", "mahalanobis": "tab:blue", "ppa": "tab:red"}
    for ax, (level, c) in zip(axes[0], CURVATURES.items()):
        for i, metric in enumerate(KNN_METRICS):
            means = [np.nanmean(acc[level, n][0][i]) for n in args.train_sizes]
            ax.plot(
                args.train_sizes, means, marker="o", color=colors[metric], label=KNN_LABELS[metric]
            )
        ax.set_xscale("log")
        ax.set_xlabel("training points")
        ax.set_ylabel("test accuracy (mean over k)")
        ax.set_title(f"curvature {c}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    return os.path.basename(save_figure(fig, out, "fig4_knn_training_size.png"))


def _figure3(out, degrees, base_seed):
    """Fig. 3: the data, PPA's curvilinear grid and unit balls of the PPA metric (high curv.)."""
    from matplotlib.patches import Ellipse

    from ppa_dask import PPA
    from ppa_dask.datasets import make_parabolas
    from ppa_dask.plotting import principal_grids

    X, y = make_parabolas(
        1000,
        curvature=CURVATURES["high"],
        gap=GAP,
        noise=NOISE,
        random_state=task_seed(base_seed, "fig3"),
    )
    model = PPA(degree=degrees["high"], whiten=True).fit(X)
    fig, axes = new_figure(1, 2, figsize=(10, 4.4))
    ax = axes[0, 0]
    principal_grids(model, X, dims=(0, 1), n_lines=9, ax=ax, max_scatter=0)
    ax.get_legend().remove()
    for label, color in ((0, "tab:blue"), (1, "tab:orange")):
        ax.scatter(*X[y == label].T, s=3, color=color, alpha=0.5, label=f"class {label + 1}")
    # unit-distance loci of the whitened PPA metric, scaled by 0.25 to fit the plot
    centres = model.inverse_transform(
        np.array([[u, v] for u in np.linspace(-1.5, 1.5, 5) for v in (-1.0, 1.0)])
    )
    radius = 0.25
    for centre, M in zip(centres, model.metric(centres)):
        w, V = np.linalg.eigh(M)
        angle = np.degrees(np.arctan2(V[1, 0], V[0, 0]))
        ax.add_patch(
            Ellipse(
                centre,
                2 * radius / np.sqrt(w[0]),
                2 * radius / np.sqrt(w[1]),
                angle=angle,
                fill=False,
                color="k",
                lw=1,
            )
        )
    ax.set_aspect("equal")
    ax.set_title("input domain: PPA grid and PPA-metric balls (radius 0.25)", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    keep = [i for i, label in enumerate(labels) if label != "data"]  # the empty grid scatter
    ax.legend([handles[i] for i in keep], [labels[i] for i in keep], fontsize=7, loc="lower right")
    ax = axes[0, 1]
    R = model.transform(X)
    for label, color in ((0, "tab:blue"), (1, "tab:orange")):
        ax.scatter(*R[y == label].T, s=3, color=color, alpha=0.5)
    for c in centres:
        r = model.transform(c[None])[0]
        ax.add_patch(Ellipse(r, 2 * radius, 2 * radius, fill=False, color="k", lw=1))
    ax.set_aspect("equal")
    ax.set_xlabel("whitened alpha_1")
    ax.set_ylabel("whitened residual")
    ax.set_title("whitened PPA domain: the same balls are circles", fontsize=9)
    fig.suptitle(
        f"Fig. 3: two noisy parabolas (curvature {CURVATURES['high']}), "
        f"PPA degree {degrees['high']}"
    )
    return os.path.basename(save_figure(fig, out, "fig3_ppa_metric.png"))


if __name__ == "__main__":
    main()
