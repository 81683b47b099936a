#!/usr/bin/env python
"""Multi-information reduction on the six UCI data sets: PPA paper Sec. 5.4, Table 3.

    python pipelines/paper_multi_information.py [--output DIR] [--repeats 10] [--workers 2]
        [--seed 0] [--quick] [--datasets magic_gamma,sat,...]
        [--estimators auto,histogram,kde]

For every data set (features scaled to [0, 1]) and repetition (the same random half/half
splits as ``paper_dimensionality_reduction.py`` with the same ``--seed``; one Dask task each),
PCA, PPA and PPA-GD are fitted on the training half and the multi-information reduction
``Delta I = sum_j h(x_j) - sum_j h(r_j)`` (all three maps preserve volume, so the Jacobian term
is 0) is estimated in bits per dimension on the held-out half and on the training half, with
each marginal-entropy estimator of ``--estimators``:

* ``auto`` (the documented setting of Table 3): scipy's spacing estimators, integer-valued
  features dequantised (uniform noise over their quantisation step, seeded, identical on both
  sides; see ``ppa_dask.information``);
* ``histogram``: equal-width histogram (sqrt(n) bins) with the Miller-Madow correction,
  dequantised;
* ``kde``: Gaussian kernel density estimate with Silverman's bandwidth on the data as
  published (no dequantisation), an over-smoothing, "paper-like" estimator.

The rank of every data set's feature matrix is computed (``covariance_rank``); where it is
below the dimension the true ``Delta I`` is infinite and every number of the row is an
estimator floor. The report explains each mismatch with the paper that the run shows
(a rank-deficient data set, a reduction of the opposite sign) from quantities it computes.
Written to DIR:

* ``table3_multi_information.{csv,md}``: the documented setting (held-out half, ``auto``),
  mean and standard deviation over the splits, beside the paper's Table 3 and the deviation;
* ``table3_multi_information_kde.{csv,md}``: the same with the KDE;
* ``multi_information_all.{csv,md}``: every half x estimator x method;
* ``table3_multi_information.png``; ``report.md``, ``summary.json``.

``--quick``: 600 rows per data set, 1 repetition, at most 5 PPA-GD evaluations per step.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.stats

from ppa_dask.app.experiments import (
    DATASET_LABELS,
    METHOD_LABELS,
    METHODS,
    multi_information_task,
    scaled_paper_dataset,
    split_seed,
)
from ppa_dask.app.reproductions import make_record, recorded_command, seeds_of, write_record
from ppa_dask.app.scripts.figures import new_figure, save_figure
from ppa_dask.app.scripts.options import csv_list, paper_datasets_parser
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
from ppa_dask.datasets import load_paper_dataset
from ppa_dask.information import RANK_RTOL, covariance_rank

#: The paper's Table 3 (bits per dimension): PCA, PPA, PPA-GD.
PAPER_TABLE3 = {
    "magic_gamma": (0.35, 0.42, 0.47),
    "japanese_vowels": (0.38, 0.45, 0.49),
    "page_blocks": (0.16, 0.23, 0.25),
    "sat": (1.76, 1.78, 1.82),
    "segmentation": (1.20, 1.23, 1.34),
    "vehicles": (1.32, 1.49, 1.38),
}
#: The estimators run by default; the first is the documented setting of Table 3.
ESTIMATORS = ("auto", "histogram", "kde")
#: Every estimator ``--estimators`` accepts (``ppa_dask.information.marginal_entropies``).
KNOWN_ESTIMATORS = ("auto", "vasicek", "van es", "ebrahimi", "correa", "histogram", "kde")
#: The estimator of the main table (the documented setting).
MAIN_ESTIMATOR = "auto"
#: The over-smoothing estimator of the second table.
KDE_ESTIMATOR = "kde"
#: Estimators applied to the data as published: a KDE has no trouble with ties, and the
#: paper-like comparison is with the raw values.
NO_DEQUANTIZE = ("kde",)
ESTIMATOR_LABELS = {
    "auto": "spacing estimator (scipy 'auto'), dequantised",
    "vasicek": "Vasicek spacing estimator, dequantised",
    "van es": "Van Es spacing estimator, dequantised",
    "ebrahimi": "Ebrahimi spacing estimator, dequantised",
    "correa": "Correa spacing estimator, dequantised",
    "histogram": "histogram (sqrt(n) bins, Miller-Madow), dequantised",
    "kde": "Gaussian KDE (Silverman bandwidth), no dequantisation",
}
#: The issue's tolerance for "reproduced" (bits per dimension).
TOLERANCE = 0.1
#: Segmentation's exact dependencies, as (column, formula, coefficients on other columns).
SEGMENTATION_DEPENDENCIES = (
    ("INTENSITY-MEAN", "(R + G + B) / 3", {"RAWRED-MEAN": 1 / 3, "RAWGREEN-MEAN": 1 / 3,
                                           "RAWBLUE-MEAN": 1 / 3}),
    ("EXRED-MEAN", "2R - G - B", {"RAWRED-MEAN": 2, "RAWGREEN-MEAN": -1, "RAWBLUE-MEAN": -1}),
    ("EXGREEN-MEAN", "2G - R - B", {"RAWGREEN-MEAN": 2, "RAWRED-MEAN": -1, "RAWBLUE-MEAN": -1}),
    ("EXBLUE-MEAN", "2B - R - G", {"RAWBLUE-MEAN": 2, "RAWRED-MEAN": -1, "RAWGREEN-MEAN": -1}),
)  # fmt: skip
HALVES = ("test", "train")
QUICK_SAMPLES = 600
QUICK_GD_ITER = 5


def _add_estimator_option(parser):
    parser.add_argument(
        "--estimators",
        type=csv_list(str),
        default=list(ESTIMATORS),
        help=f"comma-separated marginal-entropy estimators (default: {','.join(ESTIMATORS)}; "
        f"{MAIN_ESTIMATOR!r} required, the documented setting) from "
        f"{', '.join(KNOWN_ESTIMATORS)}",
    )


def _add_dequantize_option(parser):
    parser.add_argument(
        "--no-dequantize",
        type=csv_list(str),
        default=list(NO_DEQUANTIZE),
        help="estimators applied to the values as published, without dequantisation "
        f"(default: {','.join(NO_DEQUANTIZE)}; 'none': dequantise for every estimator)",
    )


def _check_estimators(args, error):
    unknown = [e for e in args.estimators if e not in KNOWN_ESTIMATORS]
    if unknown:
        error(f"unknown estimators {unknown}; choose from {', '.join(KNOWN_ESTIMATORS)}")
    if MAIN_ESTIMATOR not in args.estimators:
        error(f"--estimators must include {MAIN_ESTIMATOR!r}, the setting of Table 3")
    args.estimators = list(dict.fromkeys(args.estimators))
    if args.no_dequantize == ["none"]:
        args.no_dequantize = []
    unknown = [e for e in args.no_dequantize if e not in KNOWN_ESTIMATORS]
    if unknown:
        error(f"--no-dequantize: unknown estimators {unknown}; choose from "
              f"{', '.join(KNOWN_ESTIMATORS)} or none")  # fmt: skip


def parse_args(argv=None):
    parse = paper_datasets_parser(
        __doc__.split("\n\n")[0],
        "paper-results/multi-information",
        QUICK_GD_ITER,
        add_options=lambda parser: (_add_estimator_option(parser), _add_dequantize_option(parser)),
        check=_check_estimators,
    )
    return parse(argv)


def dataset_facts(name):
    """Rank, dimension and the spikiness of one scaled data set (all rows), for the report.

    Examples
    --------
    >>> facts = dataset_facts("vehicles")
    >>> facts["rank"], facts["n_features"]
    (18, 18)
    """
    X = scaled_paper_dataset(name)
    _, names = _raw_with_names(name)
    skew = scipy.stats.skew(X, axis=0)
    top_share = np.array(
        [np.unique(X[:, j], return_counts=True)[1].max() / X.shape[0] for j in range(X.shape[1])]
    )
    order = np.argsort(-np.abs(skew))[:3]
    return dict(
        rank=covariance_rank(X),
        n_features=int(X.shape[1]),
        most_skewed=[(names[j], float(skew[j])) for j in order],
        largest_tie=(names[int(top_share.argmax())], float(top_share.max())),
    )


def _raw_with_names(name):
    bunch = load_paper_dataset(name, return_X_y=False)
    return np.asarray(bunch.data, dtype=np.float64), list(bunch.feature_names)


def segmentation_dependencies():
    """Largest absolute residual of each of Segmentation's exact column formulas (raw units).

    Examples
    --------
    >>> all(r < 1e-4 for _, _, r in segmentation_dependencies())
    True
    """
    X, names = _raw_with_names("segmentation")
    out = []
    for column, formula, coefs in SEGMENTATION_DEPENDENCIES:
        fit = sum(c * X[:, names.index(other)] for other, c in coefs.items())
        out.append((column, formula, float(np.abs(X[:, names.index(column)] - fit).max())))
    return out


def main(argv=None):
    args = parse_args(argv)
    estimators = tuple(args.estimators)
    out = prepare_output(args.output)
    specs = [
        dict(
            dataset=name,
            seed=split_seed(args.seed, name, r),
            repeat=r,
            max_samples=QUICK_SAMPLES if args.quick else None,
            methods=METHODS,
            estimators=estimators,
            no_dequantize=tuple(e for e in estimators if e in args.no_dequantize),
            gd_max_iter=args.gd_max_iter,
        )
        for name in args.datasets
        for r in range(args.repeats)
    ]
    with Timer() as timer:
        results = run_fanout(
            multi_information_task, specs, args.workers, label="multi-information"
        )
    facts = {name: dataset_facts(name) for name in args.datasets}

    stats = {}  # (dataset, half, estimator, method) -> (mean, std)
    long_rows = []
    for name in args.datasets:
        res = [r for r in results if r["dataset"] == name]
        for half in HALVES:
            for est in estimators:
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
        # a split of a full-rank set is rank deficient only with fewer rows than columns
        facts[name]["split_rank"] = min(r["rank"][h] for r in res for h in HALVES)
        facts[name]["n_splits"] = len(res)

    blocks = {est: _block_rows(args.datasets, stats, est, facts) for est in estimators}
    main_rows = blocks[MAIN_ESTIMATOR]
    summary = {}
    for name, row in zip(args.datasets, main_rows):
        summary[name] = dict(
            {method: row[method] for method in METHODS},
            ppa_above_pca=bool(row["ppa"] > row["pca"]),
            ppa_above_pca_every_estimate=bool(
                all(
                    stats[name, h, e, "ppa"][0] > stats[name, h, e, "pca"][0]
                    for h in HALVES
                    for e in estimators
                )
            ),
            deviation={m: row[f"dev_{m}"] for m in METHODS},
            within_tolerance=row["within"],
            rank=facts[name]["rank"],
            n_features=facts[name]["n_features"],
            rank_deficient=facts[name]["rank"] < facts[name]["n_features"],
            by_estimator={
                est: {m: stats[name, "test", est, m][0] for m in METHODS} for est in estimators
            },
            paper=dict(zip(METHODS, PAPER_TABLE3[name])),
        )

    sections = [_setting_text(args, estimators)]
    sections.append(
        _write_block(out, "table3_multi_information", main_rows, MAIN_ESTIMATOR, args.repeats)
    )
    if KDE_ESTIMATOR in blocks:
        sections.append(
            _write_block(
                out,
                "table3_multi_information_kde",
                blocks[KDE_ESTIMATOR],
                KDE_ESTIMATOR,
                args.repeats,
            )
        )
    sections.append(_rank_text(args.datasets, facts))
    explanations = _explanations(args.datasets, blocks, facts, stats)
    sections += explanations
    verdict = _verdict(args.datasets, blocks, facts)
    sections.append(verdict["text"])

    wide_rows = []
    for name in args.datasets:
        for half in HALVES:
            for est in estimators:
                row = dict(dataset=DATASET_LABELS[name], half=half, estimator=est)
                for method in METHODS:
                    row[method] = stats[name, half, est, method][0]
                wide_rows.append(row)
    sections.append(
        write_table(
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
            md_columns=[
                ("dataset", "Database"),
                ("half", "half"),
                ("estimator", "entropy estimator"),
            ]
            + [(m, METHOD_LABELS[m]) for m in METHODS],
            md_rows=wide_rows,
            title="Every estimate (bits per dimension, mean over splits)",
        )
    )

    figure = _figure(out, args.datasets, stats, [e for e in (MAIN_ESTIMATOR, KDE_ESTIMATOR)
                                                 if e in estimators])  # fmt: skip
    verdict_numbers = {k: v for k, v in verdict.items() if k != "text"}
    write_summary(out, args, timer.elapsed, summary=summary, verdict=verdict_numbers)
    write_report(
        out,
        "PPA paper Sec. 5.4: multi-information reduction (Table 3)",
        command_line(__file__, argv),
        sections,
        [figure],
        timer.elapsed,
    )

    print(
        f"\nMulti-information reduction, bits/dim ({args.repeats} splits, held-out half; "
        f"{timer.elapsed:.1f} s) -> {out}"
    )
    for est in (MAIN_ESTIMATOR, KDE_ESTIMATOR):
        if est not in blocks:
            continue
        print(f"\n{ESTIMATOR_LABELS[est]}")
        print(f"{'data set':16s} {'rank':>7s} {'PCA':>6s} {'PPA':>6s} {'PPA-GD':>7s}   paper")
        for name, row in zip(args.datasets, blocks[est]):
            paper = "/".join(f"{v:.2f}" for v in PAPER_TABLE3[name])
            print(
                f"{DATASET_LABELS[name]:16s} {row['rank_text']:>7s} {row['pca']:6.2f} "
                f"{row['ppa']:6.2f} "
                f"{row['ppa_gd']:7.2f}   {paper}"
            )
    print("\n" + verdict["text"])
    if args.record:
        write_record(args.record, make_table3_record(args, argv, specs, results, timer.elapsed))
        print(f"record -> {args.record}")
    return dict(output=out, summary=summary, stats=stats, results=results, verdict=verdict)


#: Options of the test suite's smaller rerun of a saved Table 3 (a subset of its cells).
REDUCED = ("--repeats", "2", "--datasets", "vehicles,page_blocks")


def make_table3_record(args, argv, specs, results, elapsed):
    """The reproduction record of a run: one cell per split, method, half and estimator."""
    cells = [
        dict(
            dataset=r["dataset"],
            seed=r["seed"],
            method=method,
            half=half,
            estimator=est,
            delta_i=r["delta_i"][method][half][est],
        )
        for r in results
        for method in METHODS
        for half in HALVES
        for est in args.estimators
    ]
    paper = {name: dict(zip(METHODS, PAPER_TABLE3[name])) for name in args.datasets}
    common = dict(
        value="delta_i", rows=["dataset"], column="method", over="seed", paper=paper,
        digits=2, tolerance=TOLERANCE, labels=METHOD_LABELS, row_labels=DATASET_LABELS,
        row_headers=["data set"], range=True,
    )  # fmt: skip
    tables = [
        dict(common, name="table3", where=dict(half="test", estimator=MAIN_ESTIMATOR),
             title="Table 3: Delta I (bits/dim), held-out half, spacing estimator, "
             "dequantised"),
        dict(common, name="table3_train", where=dict(half="train", estimator=MAIN_ESTIMATOR),
             title="Table 3 on the training half (spacing estimator, dequantised)"),
    ]  # fmt: skip
    tables.append(
        dict(common, name="estimators", rows=["dataset", "estimator"], where=dict(half="test"),
             paper={f"{name} / {est}": paper[name] for name in args.datasets
                    for est in args.estimators},
             row_labels={}, row_headers=["data set", "estimator"],
             title="Table 3 by marginal-entropy estimator, held-out half (values as published, "
             f"not dequantised, for: {', '.join(args.no_dequantize) or 'none'})")
    )  # fmt: skip
    figures = [dict(name="table3", kind="bars", table="table3", ylabel="Delta I (bits/dim)")]
    if KDE_ESTIMATOR in args.estimators:
        tables.append(
            dict(common, name="table3_kde", where=dict(half="test", estimator=KDE_ESTIMATOR),
                 title="Table 3 with the Gaussian KDE on the data as published, held-out half")
        )  # fmt: skip
        figures.append(
            dict(name="table3_kde", kind="bars", table="table3_kde", ylabel="Delta I (bits/dim)")
        )
    # the record is named by its file (the main run and its variants: other estimators, ...)
    return make_record(
        os.path.splitext(os.path.basename(args.record))[0],
        "Multi-information reduction of PCA, PPA and PPA-GD on the six UCI data sets",
        "Laparra et al. 2014, Sec. 5.4, Table 3",
        recorded_command(__file__, argv),
        seeds=seeds_of(specs, args.seed),
        keys=["dataset", "seed", "method", "half", "estimator"],
        cells=cells,
        tables=tables,
        figures=figures,
        reduced=REDUCED,
        run_seconds=elapsed,
    )


def _block_rows(datasets, stats, est, facts):
    rows = []
    for name in datasets:
        f = facts[name]
        row = dict(
            dataset=DATASET_LABELS[name], key=name, rank=f["rank"], n_features=f["n_features"]
        )
        row["n_splits"] = f["n_splits"]
        row["rank_text"] = f"{f['rank']} of {f['n_features']}"
        if f["rank"] < f["n_features"]:
            row["rank_text"] += " (Delta I infinite: values are estimator floors)"
        for i, method in enumerate(METHODS):
            m, s = stats[name, "test", est, method]
            row[method] = m
            row[f"{method}_std"] = s
            row[f"{method}_pm"] = pm(m, s)
            row[f"paper_{method}"] = PAPER_TABLE3[name][i]
            row[f"dev_{method}"] = m - PAPER_TABLE3[name][i]
        row["ppa_minus_pca"] = row["ppa"] - row["pca"]
        row["paper_ppa_minus_pca"] = PAPER_TABLE3[name][1] - PAPER_TABLE3[name][0]
        # the criterion: PCA and PPA within the tolerance
        row["within"] = bool(max(abs(row["dev_pca"]), abs(row["dev_ppa"])) <= TOLERANCE)
        row["within_text"] = "yes" if row["within"] else "no"
        rows.append(row)
    return rows


def _write_block(out, stem, rows, est, repeats):
    md_cols = [("dataset", "Database"), ("rank_text", "rank of X")]
    md_cols += [(f"{m}_pm", METHOD_LABELS[m]) for m in METHODS]
    md_cols += [(f"paper_{m}", f"paper {METHOD_LABELS[m]}", ".2f") for m in METHODS]
    md_cols += [("dev_pca", "PCA - paper", "+.2f"), ("dev_ppa", "PPA - paper", "+.2f")]
    md_cols += [("ppa_minus_pca", "PPA - PCA", "+.2f"), ("within_text", f"within {TOLERANCE}")]
    csv_cols = [("dataset", "dataset"), ("rank", "rank"), ("n_features", "n_features")]
    for m in METHODS:
        csv_cols += [(m, m), (f"{m}_std", f"{m}_std"), (f"paper_{m}", f"paper_{m}")]
        csv_cols += [(f"dev_{m}", f"dev_{m}")]
    csv_cols += [("ppa_minus_pca", "ppa_minus_pca"), ("within", "within_tolerance")]
    return write_table(
        out,
        stem,
        csv_cols,
        rows,
        md_columns=md_cols,
        title=f"Table 3, {ESTIMATOR_LABELS[est]}: multi-information reduction (bits per "
        f"dimension) on the held-out half, mean ± std over {repeats} split(s)",
    )


def _setting_text(args, estimators):
    rows = "all rows" if not args.quick else f"{QUICK_SAMPLES} rows (--quick)"
    return (
        "**The documented setting.** Every feature is scaled to [0, 1] over the whole data "
        f"set ({rows}); PCA, PPA (degrees 1-5 by 2-fold cross-validation) and PPA-GD are fitted "
        "on a random half; Delta I = sum_j h(x_j) - sum_j h(r_j) is estimated on the held-out "
        f"half with the {ESTIMATOR_LABELS[MAIN_ESTIMATOR]} (repeated values get uniform noise "
        "over their quantisation step, the same noise on both sides); mean ± std over "
        f"{args.repeats} random split(s), base seed {args.seed}. Estimators run: "
        + ", ".join(f"`{e}` ({ESTIMATOR_LABELS[e]})" for e in estimators)
        + "."
    )


def _rank_text(datasets, facts):
    lines = [
        "**Rank of each feature matrix** (eigenvalues of the correlation matrix below "
        f"{RANK_RTOL:g} x the largest count as zero; `ppa_dask.information.covariance_rank`):",
        "",
    ]
    for name in datasets:
        f = facts[name]
        text = f"- {DATASET_LABELS[name]}: rank {f['rank']} of {f['n_features']}"
        if f["rank"] < f["n_features"]:
            text = (
                f"- {DATASET_LABELS[name]}: **rank {f['rank']} of {f['n_features']}: Delta I is "
                "infinite; the values shown are estimator floors**"
            )
        elif f["split_rank"] < f["n_features"]:
            text += f" (a split has rank {f['split_rank']}: fewer rows than columns)"
        lines.append(text)
    return "\n".join(lines)


def _explanations(datasets, blocks, facts, stats):
    main = {row["key"]: row for row in blocks[MAIN_ESTIMATOR]}
    kde = {row["key"]: row for row in blocks[KDE_ESTIMATOR]} if KDE_ESTIMATOR in blocks else {}
    texts = []
    for name in datasets:
        row = main[name]
        if row["within"]:
            continue
        f = facts[name]
        ours = f"PCA {row['pca']:.2f} / PPA {row['ppa']:.2f}"
        paper = f"{row['paper_pca']:.2f} / {row['paper_ppa']:.2f}"
        spread = (
            f"split-to-split std up to {max(row['pca_std'], row['ppa_std']):.2f}"
            if row["n_splits"] > 1
            else "one split"
        )
        k = kde.get(name)
        kde_text = f" The KDE gives PCA {k['pca']:.2f} / PPA {k['ppa']:.2f}." if k else ""
        if f["rank"] < f["n_features"]:
            text = (
                f"**{DATASET_LABELS[name]}: rank {f['rank']} of {f['n_features']}.** The "
                "feature matrix "
                f"has {f['n_features'] - f['rank']} exact linear dependencies, so x lives on a "
                f"{f['rank']}-dimensional subspace: its multi-information is infinite, and PCA "
                "and PPA turn each null direction into an output coordinate of (numerically) "
                "constant value, of differential entropy -inf. The true Delta I is +inf; a "
                f"finite value (ours {ours}, the paper's {paper}) measures the resolution of "
                "the estimator, here the dequantisation noise of the integer-valued columns, "
                "not the data."
                + (
                    f" The KDE, without dequantisation, sees only the file's rounding in the "
                    f"null directions and gives PCA {k['pca']:.2f} / PPA {k['ppa']:.2f}."
                    if k
                    else ""
                )
                + " Any finite value, the paper's included, is such a floor: it depends on "
                "the estimator's resolution, so the paper's numbers cannot be derived from "
                "the data as published."
            )
            if name == "segmentation":
                deps = "; ".join(
                    f"{col} = {formula} (max |residual| {res:.0e})"
                    for col, formula, res in segmentation_dependencies()
                )
                text += (
                    f" The dependencies (R, G, B the RAWRED, RAWGREEN, RAWBLUE means): {deps}; "
                    "the residuals are the rounding of the data file."
                )
        elif (row["pca"] < 0 <= row["paper_pca"]) or (row["ppa"] < 0 <= row["paper_ppa"]):
            skew = ", ".join(f"{col} {s:.0f}" for col, s in f["most_skewed"])
            tie_col, tie_share = f["largest_tie"]
            text = (
                f"**{DATASET_LABELS[name]}: opposite sign.** The documented setting gives "
                f"{ours} where "
                f"the paper reports {paper} ({spread}). After the "
                "[0, 1] scaling a few outliers squash features into narrow spikes (skewness "
                f"{skew}; {100 * tie_share:.0f} % of the rows share one value of {tie_col}). A "
                "consistent estimator gives those spiky marginals very low entropy; a rotation "
                "mixes them into components closer to Gaussian, of higher entropy, so the sum "
                "of marginal entropies grows and Delta I < 0 is a property of the scaled data, "
                "not an estimation failure."
            )
            if k:
                text += (
                    f"{kde_text} This over-smoothing estimator pulls every marginal towards a "
                    "Gaussian's entropy and hides the spikes; "
                    + (
                        "its Delta I is positive, so the sign on this data set is set by the "
                        "estimator's smoothing, and the paper's positive values are what an "
                        "over-smoothing estimator gives."
                        if min(k["pca"], k["ppa"]) > 0
                        else "even so its Delta I is not positive in this run."
                    )
                )
        else:
            text = (
                f"**{DATASET_LABELS[name]}: deviation beyond {TOLERANCE}.** The documented "
                "setting "
                f"gives {ours} against the paper's {paper} (deviation {row['dev_pca']:+.2f} / "
                f"{row['dev_ppa']:+.2f}, {spread}); the matrix is "
                "full rank and the sign agrees, so this is an estimator and sampling "
                "difference, not an obstruction." + kde_text
            )
        texts.append(text)
    return texts


def _verdict(datasets, blocks, facts):
    lines = ["**Verdict.**", ""]
    verdict = {}
    for est, rows in blocks.items():
        above = [r["key"] for r in rows if r["ppa"] > r["pca"]]
        within = [r["key"] for r in rows if r["within"]]
        verdict[est] = dict(
            ppa_above_pca_every_row=len(above) == len(rows),
            n_within=len(within),
            within=within,
        )
        not_above = [DATASET_LABELS[r["key"]] for r in rows if r["ppa"] <= r["pca"]]
        lines.append(
            f"- {ESTIMATOR_LABELS[est]}: PPA > PCA in every row: "
            + ("**yes**" if not not_above else f"**no** (not in {', '.join(not_above)})")
            + f"; within {TOLERANCE} bits/dim of the paper (PCA and PPA): {len(within)} of "
            f"{len(rows)}"
            + (f" ({', '.join(DATASET_LABELS[k] for k in within)})" if within else "")
            + "."
        )
    deficient = [n for n in datasets if facts[n]["rank"] < facts[n]["n_features"]]
    main = {r["key"]: r for r in blocks[MAIN_ESTIMATOR]}
    flipped = [
        n for n in datasets if any(main[n][m] < 0 <= main[n][f"paper_{m}"] for m in ("pca", "ppa"))
    ]
    all_six = [est for est, v in verdict.items() if v["n_within"] == len(datasets)]
    verdict["rank_deficient"] = deficient
    verdict["sign_differs"] = flipped
    verdict["estimators_matching_every_row"] = all_six
    lines.append("")
    if all_six:
        lines.append(f"Every row is within {TOLERANCE} of the paper with: {', '.join(all_six)}.")
    elif deficient or flipped:
        reasons = []
        if deficient:
            reasons.append(
                ", ".join(
                    f"{DATASET_LABELS[n]} is rank {facts[n]['rank']} of {facts[n]['n_features']}"
                    for n in deficient
                )
                + " (true Delta I infinite: every finite value, the paper's included, is an "
                "estimator floor)"
            )
        if flipped:
            reasons.append(
                ", ".join(DATASET_LABELS[n] for n in flipped)
                + " has Delta I < 0 under the documented setting while the paper's is "
                "positive (the sign depends on the estimator's smoothing)"
            )
        lines.append(
            "**The paper's values cannot all come from the data as published with one "
            f"estimator setting:** {'; '.join(reasons)}. None of the {len(blocks)} "
            f"estimator(s) of this run reproduces all {len(datasets)} rows within "
            f"{TOLERANCE}."
        )
    else:
        lines.append(
            f"No estimator of this run reproduces every row within {TOLERANCE}, and the run "
            "shows no rank deficiency or sign reversal to explain it."
        )
    verdict["text"] = "\n".join(lines)
    return verdict


def _figure(out, datasets, stats, estimators):
    fig, axes = new_figure(
        len(estimators), 1, figsize=(1.6 * len(datasets) + 2, 3.6 * len(estimators))
    )
    x = np.arange(len(datasets))
    width = 0.26
    colors = {"pca": "0.5", "ppa": "tab:red", "ppa_gd": "tab:blue"}
    for ax, est in zip(axes[:, 0], estimators):
        for i, method in enumerate(METHODS):
            means = [stats[name, "test", est, method][0] for name in datasets]
            stds = [stats[name, "test", est, method][1] for name in datasets]
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
        ax.set_xticks(x, [DATASET_LABELS[name] for name in datasets], fontsize=9)
        ax.set_ylabel("Delta I (bits per dimension)")
        ax.axhline(0, color="k", lw=0.5)
        ax.legend(fontsize=8)
        ax.set_title(f"Table 3, held-out half: {ESTIMATOR_LABELS[est]}", fontsize=10)
    return os.path.basename(save_figure(fig, out, "table3_multi_information.png"))


if __name__ == "__main__":
    main()
