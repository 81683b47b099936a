#!/usr/bin/env python
"""Principal curves, surfaces and volumes of MagicGamma with PPA: PPA paper Sec. 5.3, Fig. 7.

    python pipelines/paper_principal_surfaces.py [--output DIR] [--repeats 5] [--workers 2]
        [--seed 0] [--quick] [--dataset magic_gamma]

PPA (degree per step in 1..5 by 2-fold cross-validation) is fitted on a random half of the data
set (features scaled to [0, 1]); ``--repeats`` independent halves, one Dask task each. For each
fit, the principal curve, surface and volume (the inverse of the first 1, 2, 3 PPA
coefficients) are compared with PCA's line, plane and 3-space by the relative reconstruction
MSE (100 x MSE / MSE_PCA) on the training and the held-out half. The first fit is drawn over
the data (``ppa_dask.plotting.principal_grids``): as in the paper's Fig. 7, the first row shows
the data (blue), the principal curve (red) and an inverted uniform grid in the first two PPA
coefficients (grey) projected on the input dimensions [2,5], [3,9], [4,3], [5,7], [9,1]
(1-based); the second row three camera positions of input dimensions [3,5,10] with an inverted
5 x 5 x 5 grid in the first three PPA coefficients. Written to DIR:
``principal_manifolds.{csv,md}``, ``fig7_principal_surfaces.png``, ``report.md``,
``summary.json``.

``--quick``: 2000 rows, 1 repetition.
"""

from __future__ import annotations

import os

from ppa_dask.app.experiments import (
    principal_surface_task,
    scaled_paper_dataset,
)
from ppa_dask.app.reproductions import make_record, recorded_command, seeds_of, write_record
from ppa_dask.app.scripts.figures import new_figure, save_figure
from ppa_dask.app.scripts.options import base_parser, quick_defaults
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
from ppa_dask.datasets import PAPER_DATASETS
from ppa_dask.utils.seeds import task_seed

#: input dimension pairs of the paper's first row (1-based, MagicGamma) and its 3-D view
PAPER_PAIRS = ((2, 5), (3, 9), (4, 3), (5, 7), (9, 1))
PAPER_TRIPLE = (3, 5, 10)
VIEWS = ((25, -60), (15, 30), (60, 120))
QUICK_SAMPLES = 2000


def parse_args(argv=None):
    parser = base_parser(__doc__.split("\n\n")[0], "paper-results/principal-surfaces")
    parser.add_argument(
        "--dataset",
        default="magic_gamma",
        choices=PAPER_DATASETS,
        help="data set (default: magic_gamma, the paper's)",
    )
    return quick_defaults(parser.parse_args(argv), repeats=(1, 5))


#: Options of the test suite's smaller rerun of a saved record (a subset of its cells).
REDUCED = ("--repeats", "1")
MANIFOLDS = ("curve", "surface", "volume")


def make_surface_record(args, argv, specs, results, elapsed):
    """The reproduction record of a run: per split, manifold and half the relative MSE."""
    cells = [
        dict(
            dataset=r["dataset"],
            seed=r["seed"],
            manifold=name,
            half=half,
            relative_mse=r[f"{half}_relative"][j],
        )  # fmt: skip
        for r in results
        for j, name in enumerate(MANIFOLDS[: r["train_relative"].shape[0]])
        for half in ("train", "test")
    ]
    table = dict(name="fig7", value="relative_mse", rows=["manifold"], column="half",
                 over="seed", digits=1, row_headers=["PPA's principal"],
                 title=f"Fig. 7 ({args.dataset}): MSE of the projection on PPA's principal "
                 "curve, surface and volume, % of PCA's line, plane and 3-space")  # fmt: skip
    return make_record(
        "ppa_principal_surfaces",
        "Principal curves, surfaces and volumes of PPA against PCA's",
        "Laparra et al. 2014, Sec. 5.3, Fig. 7",
        recorded_command(__file__, argv),
        seeds=seeds_of(specs, args.seed),
        keys=["dataset", "seed", "manifold", "half"],
        cells=cells,
        tables=[table],
        figures=[dict(name="fig7", kind="bars", table="fig7", ylabel="% of PCA's MSE")],
        reduced=REDUCED,
        run_seconds=elapsed,
    )


def input_views(d):
    """2-D pairs and the 3-D triple of input dimensions (0-based) to draw for ``d`` features."""
    if d >= 10:
        return [(i - 1, j - 1) for i, j in PAPER_PAIRS], tuple(i - 1 for i in PAPER_TRIPLE)
    pairs = [(i, (i + 1) % d) for i in range(min(d, 5))]
    return pairs, (0, 1, 2)


def main(argv=None):
    args = parse_args(argv)
    out = prepare_output(args.output)
    specs = [
        dict(
            dataset=args.dataset,
            seed=task_seed(args.seed, "surface", args.dataset, r),
            max_samples=QUICK_SAMPLES if args.quick else None,
            keep_model=r == 0,
        )
        for r in range(args.repeats)
    ]
    with Timer() as timer:
        results = run_fanout(
            principal_surface_task, specs, args.workers, label="principal surfaces"
        )
    names = ("curve", "surface", "volume")
    rows = []
    for r, res in enumerate(results):
        row = dict(
            repeat=r,
            seed=res["seed"],
            n_train=res["n_train"],
            degrees=" ".join(map(str, res["degrees"])),
        )
        for j, name in enumerate(names[: res["train_relative"].shape[0]]):
            row[f"{name}_train"] = res["train_relative"][j]
            row[f"{name}_test"] = res["test_relative"][j]
        rows.append(row)
    mean_row = dict(repeat="mean ± std", degrees="")
    summary = {}
    for name in names:
        for half in ("train", "test"):
            key = f"{name}_{half}"
            values = [row[key] for row in rows if key in row]
            if values:
                m, s = mean_std(values)
                mean_row[key] = pm(m, s, ".1f")
                summary[key] = float(m)
    md_rows = [
        {k: (format(v, ".1f") if isinstance(v, float) else v) for k, v in row.items()}
        for row in rows
    ] + [mean_row]
    cols = [("repeat", "repeat"), ("seed", "seed"), ("n_train", "n_train"), ("degrees", "degrees")]
    cols += [(f"{n}_{h}", f"{n}_{h}") for n in names for h in ("train", "test")]
    md_cols = [("repeat", "fit"), ("degrees", "degrees of steps 1-3")]
    md_cols += [
        (f"{n}_{h}", f"principal {n} vs PCA, {h} (%)") for n in names for h in ("train", "test")
    ]
    table = write_table(
        out,
        "principal_manifolds",
        cols,
        rows,
        md_columns=md_cols,
        md_rows=md_rows,
        title=f"{args.dataset}: relative MSE (100 x MSE / MSE_PCA) of the "
        "projection on PPA's principal curve, surface and volume",
    )
    if args.record:
        write_record(args.record, make_surface_record(args, argv, specs, results, timer.elapsed))
    figure = _figure(out, args.dataset, results[0]["model"], args.seed)
    write_summary(out, args, timer.elapsed, summary=summary, rows=rows)
    write_report(
        out,
        "PPA paper Sec. 5.3: principal curves, surfaces and volumes",
        command_line(__file__, argv),
        [table],
        [figure],
        timer.elapsed,
    )
    print(
        f"\nPrincipal curves/surfaces/volumes of {args.dataset} ({args.repeats} fits, "
        f"{timer.elapsed:.1f} s) -> {out}"
    )
    for key, value in summary.items():
        print(f"  {key:15s} {value:6.1f} % of PCA's error")
    return dict(output=out, summary=summary, rows=rows)


def _figure(out, dataset, model, base_seed):
    from ppa_dask.plotting import principal_grids

    X = scaled_paper_dataset(dataset)
    pairs, triple = input_views(X.shape[1])
    fig, _ = new_figure(0, 0, figsize=(3.4 * len(pairs), 7.6))
    top, bottom = fig.subfigures(2, 1, height_ratios=(1.0, 1.15))
    for i, pair in enumerate(pairs):
        ax = top.add_subplot(1, len(pairs), i + 1)
        principal_grids(
            model,
            X,
            dims=(0, 1),
            n_lines=7,
            input_dims=pair,
            ax=ax,
            max_scatter=4000,
            random_state=task_seed(base_seed, "fig7"),
        )
        ax.set_title(f"[{pair[0] + 1},{pair[1] + 1}]", fontsize=10)
        ax.get_legend().remove()
    for i, (elev, azim) in enumerate(VIEWS):
        ax = bottom.add_subplot(1, len(VIEWS), i + 1, projection="3d")
        principal_grids(
            model,
            X,
            dims=(0, 1, 2),
            n_lines=5,
            n_points=60,
            input_dims=triple,
            ax=ax,
            max_scatter=2500,
            random_state=task_seed(base_seed, "fig7"),
        )
        ax.view_init(elev=elev, azim=azim)
        ax.set_title(f"[{', '.join(str(t + 1) for t in triple)}], view {i + 1}", fontsize=10)
        if i:
            ax.get_legend().remove()
        else:
            ax.legend(fontsize=6, loc="upper left")
    fig.suptitle(
        f"Fig. 7: PPA principal curve (red), surface (top, grey) and volume (bottom, "
        f"5x5x5 grid) of {dataset}"
    )
    return os.path.basename(save_figure(fig, out, "fig7_principal_surfaces.png"))


if __name__ == "__main__":
    main()
