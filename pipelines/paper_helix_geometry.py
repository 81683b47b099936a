#!/usr/bin/env python
"""Curvature and torsion of PPA's first curvilinear feature on helices: PPA paper Sec. 5.2.

    python pipelines/paper_helix_geometry.py [--output DIR] [--repeats 10] [--workers 2]
        [--seed 0] [--quick] [--n-helices-4d 30]

Fig. 5 (3-D): the helix ``(a cos t, a sin t, b t)`` with a = 2, b = 0.8 (1.5 turns,
``ppa_dask.datasets.make_helix``), Gaussian noise of standard deviation 0.1, 0.3 and 0.6, 2000
points (the paper's 1000 training + 1000 cross-validation samples: PPA chooses each step's degree
in 1..15 by 2-fold cross-validation, two halves of about 1000 points, then fits on all 2000).
The Frenet-Serret curvatures of the first curvilinear feature, evaluated exactly at the points
whose first PPA coefficient lies in its central 90 % (``ppa_dask.geometry.frenet_serret``),
against the theory kappa = a / (a^2 + b^2), tau = b / (a^2 + b^2). ``--repeats`` independent
draws per noise level (one Dask task each).

Fig. 6 (4-D): ``--n-helices-4d`` helices with radius a and pitch b drawn uniformly in [0.1, 1],
padded with a zero coordinate and randomly rotated in 4-D, at three noise levels proportional to
the radius (0.05 a, 0.15 a, 0.3 a: the relative noise of the 3-D case); chi_1, chi_2 against
theory and chi_3 against its theoretical 0.

Written to DIR: ``helix3d_curvatures.{csv,md}``, ``helix3d_draws.csv``,
``helix4d_curvatures.{csv,md}``, ``helix4d_summary.{csv,md}``, ``fig5_helix_frames.png``,
``fig6_helix4d_curvatures.png``, ``report.md``, ``summary.json``.

``--quick``: 1 draw per noise level, 4 helices in 4-D.
"""

from __future__ import annotations

import os

import numpy as np

from ppa_dask.app.experiments import helix_curvatures, helix_geometry_task
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
from ppa_dask.utils.seeds import task_seed

A, B = 2.0, 0.8
NOISE_3D = (0.1, 0.3, 0.6)
RELATIVE_NOISE_4D = (0.05, 0.15, 0.3)
RADIUS_RANGE = (0.1, 1.0)
#: below this pitch / radius ratio a 1.5-turn helix folds back over its first principal axis
#: (make_helix's docstring), so no single polynomial of that axis can follow it
FOLD_RATIO = 0.4


def parse_args(argv=None):
    parser = base_parser(__doc__.split("\n\n")[0], "paper-results/helix-geometry")
    parser.add_argument(
        "--n-helices-4d",
        type=int,
        default=None,
        help="number of random (a, b) helices in 4-D (default 30; quick 4)",
    )
    parser.add_argument(
        "--n-samples",
        type=int,
        default=2000,
        help="points per helix (training + cross-validation; default 2000)",
    )
    args = quick_defaults(parser.parse_args(argv), repeats=(1, 10), n_helices_4d=(4, 30))
    if args.n_helices_4d < 0 or args.n_samples < 100:
        parser.error("--n-helices-4d must be >= 0 and --n-samples >= 100")
    return args


#: The paper's degrees of the first polynomial at the three noise levels (Fig. 5 caption).
PAPER_DEGREES_3D = (12, 14, 12)
#: Options of the test suite's smaller rerun of a saved record (a subset of its cells).
REDUCED = ("--repeats", "1", "--n-helices-4d", "2")


def helix_cells(results):
    """One cell per draw and quantity: 3-D chi_1, chi_2 (median along the curve) and the
    degree; 4-D the absolute relative errors of chi_1 and chi_2 and |chi_3| / chi_1."""
    cells = []
    for r in results:
        dim, i, _ = r["tag"]
        base = dict(dim=dim, noise=NOISE_3D[i] if dim == "3d" else RELATIVE_NOISE_4D[i],
                    seed=r["seed"])  # fmt: skip
        folds = bool(r["b"] / r["a"] < FOLD_RATIO)
        if dim == "3d":
            values = dict(chi1=(r["median"][0], r["theory"][0]),
                          chi2=(r["median"][1], r["theory"][1]), degree=(r["degree"], None))  # fmt: skip
        else:
            values = dict(
                chi1_relerr=(abs(r["median"][0] / r["theory"][0] - 1), 0.0),
                chi2_relerr=(abs(r["median"][1] / r["theory"][1] - 1), 0.0),
                chi3_over_chi1=(r["abs_median"][2] / r["median"][0] if r["median"][0] > 0
                                else float("nan"), 0.0),
            )  # fmt: skip
        for quantity, (value, theory) in values.items():
            cells.append(dict(base, quantity=quantity, value=float(value),
                              theory=None if theory is None else float(theory), folds=folds))  # fmt: skip
    return cells


def make_helix_record(args, argv, specs, results, elapsed):
    """The reproduction record of a run (Figs. 5 and 6)."""
    theory = helix_curvatures(A, B)
    paper = {
        str(noise): dict(chi1=float(theory[0]), chi2=float(theory[1]), degree=deg)
        for noise, deg in zip(NOISE_3D, PAPER_DEGREES_3D)
    }
    labels = dict(chi1="kappa = chi_1", chi2="tau = chi_2", degree="degree gamma_1",
                  chi1_relerr="abs rel. error chi_1", chi2_relerr="abs rel. error chi_2",
                  chi3_over_chi1="abs chi_3 / chi_1 (theory 0)")  # fmt: skip
    fig6 = dict(value="value", rows=["noise"], column="quantity", over="seed", digits=3,
                labels=labels, row_headers=["noise / a"])  # fmt: skip
    tables = [
        dict(name="fig5", title=f"Fig. 5: 3-D helix a = {A}, b = {B}, first PPA feature "
             "(paper: the helix's own curvature and torsion, and its degrees)",
             value="value", rows=["noise"], column="quantity", over="seed",
             where=dict(dim="3d"), paper=paper, digits=3, labels=labels,
             row_headers=["noise sd"]),
        dict(fig6, name="fig6", where=dict(dim="4d"),
             title="Fig. 6: 4-D rotated helices, a and b uniform in [0.1, 1]: errors against "
             "theory (all helices)"),
        dict(fig6, name="fig6_unfolded", where=dict(dim="4d", folds=False),
             title=f"Fig. 6, helices with b / a >= {FOLD_RATIO} (not folding back over their "
             "first axis)"),
    ]  # fmt: skip
    return make_record(
        "ppa_helix",
        "Curvatures of PPA's first curvilinear feature on 3-D and 4-D helices",
        "Laparra et al. 2014, Sec. 5.2, Figs. 5-6",
        recorded_command(__file__, argv),
        seeds=seeds_of(specs, args.seed),
        keys=["dim", "noise", "seed", "quantity"],
        cells=helix_cells(results),
        tables=tables,
        figures=[dict(name="fig6", kind="bars", table="fig6", ylabel="error")],
        reduced=REDUCED,
        run_seconds=elapsed,
    )


def helix_4d_parameters(base_seed, index):
    """Radius and pitch of the ``index``-th 4-D helix (uniform in RADIUS_RANGE)."""
    rng = np.random.default_rng(task_seed(base_seed, "helix4d-shape", index))
    a, b = rng.uniform(*RADIUS_RANGE, size=2)
    return float(a), float(b)


def main(argv=None):
    args = parse_args(argv)
    out = prepare_output(args.output)
    specs = []
    for i, noise in enumerate(NOISE_3D):
        for r in range(args.repeats):
            specs.append(
                dict(
                    tag=("3d", i, r),
                    a=A,
                    b=B,
                    noise=noise,
                    n_features=3,
                    n_samples=args.n_samples,
                    seed=task_seed(args.seed, "helix3d", i, r),
                    keep_arrays=r == 0,
                )
            )
    for h in range(args.n_helices_4d):
        a, b = helix_4d_parameters(args.seed, h)
        for i, rel in enumerate(RELATIVE_NOISE_4D):
            specs.append(
                dict(
                    tag=("4d", i, h),
                    a=a,
                    b=b,
                    noise=rel * a,
                    n_features=4,
                    n_samples=args.n_samples,
                    seed=task_seed(args.seed, "helix4d", h, i),
                )
            )
    with Timer() as timer:
        results = run_fanout(helix_geometry_task, specs, args.workers, label="helix geometry")
    res3 = [r for r in results if r["tag"][0] == "3d"]
    res4 = [r for r in results if r["tag"][0] == "4d"]

    # 3-D table
    theory = helix_curvatures(A, B)
    rows3, draws3, summary3 = [], [], {}
    for i, noise in enumerate(NOISE_3D):
        res = [r for r in res3 if r["tag"][1] == i]
        med = np.array([r["median"] for r in res])
        mean = np.array([r["mean"] for r in res])
        std = np.array([r["std"] for r in res])
        deg = [r["degree"] for r in res]
        row = dict(
            noise=noise,
            kappa_theory=theory[0],
            tau_theory=theory[1],
            degree_median=float(np.median(deg)),
            degrees=" ".join(map(str, deg)),
        )
        for j, name in enumerate(("kappa", "tau")):
            m, s = mean_std(med[:, j])
            row[f"{name}_median"] = m
            row[f"{name}_median_std"] = s
            row[f"{name}_median_pm"] = pm(m, s, ".3f")
            row[f"{name}_mean"] = float(mean[:, j].mean())
            row[f"{name}_spread"] = float(std[:, j].mean())
            row[f"{name}_mean_pm"] = pm(row[f"{name}_mean"], row[f"{name}_spread"], ".3f")
            row[f"{name}_relative_error"] = m / theory[j] - 1
        rows3.append(row)
        summary3[noise] = dict(
            kappa=row["kappa_median"],
            tau=row["tau_median"],
            kappa_relative_error=row["kappa_relative_error"],
            tau_relative_error=row["tau_relative_error"],
            degrees=deg,
        )
        for r in res:
            draws3.append(
                dict(
                    noise=noise,
                    seed=r["seed"],
                    degree=r["degree"],
                    n_points=r["n_points"],
                    kappa_median=r["median"][0],
                    tau_median=r["median"][1],
                    kappa_mean=r["mean"][0],
                    kappa_std=r["std"][0],
                    tau_mean=r["mean"][1],
                    tau_std=r["std"][1],
                )
            )
    t3 = write_table(
        out,
        "helix3d_curvatures",
        [
            (k, k)
            for k in (
                "noise",
                "kappa_theory",
                "kappa_median",
                "kappa_median_std",
                "kappa_mean",
                "kappa_spread",
                "kappa_relative_error",
                "tau_theory",
                "tau_median",
                "tau_median_std",
                "tau_mean",
                "tau_spread",
                "tau_relative_error",
                "degree_median",
                "degrees",
            )
        ],
        rows3,
        md_columns=[
            ("noise", "noise", ".1f"),
            ("kappa_theory", "kappa theory"),
            ("kappa_median_pm", "kappa PPA (median)"),
            ("kappa_mean_pm", "kappa PPA (mean ± sd along curve)"),
            ("tau_theory", "tau theory"),
            ("tau_median_pm", "tau PPA (median)"),
            ("tau_mean_pm", "tau PPA (mean ± sd along curve)"),
            ("degrees", "degree gamma_1 per draw"),
        ],
        title=f"Fig. 5: 3-D helix a = {A}, b = {B}; curvature (chi_1) and torsion (chi_2) of "
        f"the first PPA feature. Median over the central 90 % of the curve, then mean ± "
        f"std over {args.repeats} draws; and mean ± sd along the curve (mean over draws)",
    )
    write_table(out, "helix3d_draws", [(k, k) for k in draws3[0]], draws3)

    # 4-D tables
    rows4, summary4, t4_md = [], {}, ""
    for r in res4:
        _, i, h = r["tag"]
        rows4.append(
            dict(
                helix=h,
                a=r["a"],
                b=r["b"],
                pitch_ratio=r["b"] / r["a"],
                folds=bool(r["b"] / r["a"] < FOLD_RATIO),
                relative_noise=RELATIVE_NOISE_4D[i],
                noise=r["noise"],
                degree=r["degree"],
                chi1_theory=r["theory"][0],
                chi1=r["median"][0],
                chi2_theory=r["theory"][1],
                chi2=r["median"][1],
                chi3_theory=0.0,
                chi3=r["median"][2],
                abs_chi3=r["abs_median"][2],
            )
        )
    if rows4:
        write_table(
            out,
            "helix4d_curvatures",
            [(k, k) for k in rows4[0]],
            rows4,
            md_columns=[
                ("helix", "helix"),
                ("a", "a"),
                ("b", "b"),
                ("relative_noise", "noise / a", ".2f"),
                ("degree", "gamma_1"),
                ("chi1_theory", "chi_1 theory"),
                ("chi1", "chi_1 PPA"),
                ("chi2_theory", "chi_2 theory"),
                ("chi2", "chi_2 PPA"),
                ("abs_chi3", "abs chi_3 PPA (theory 0)"),
            ],
            title="Fig. 6: 4-D rotated helices, median curvatures along the first PPA feature",
        )
        srows = []
        for rel in RELATIVE_NOISE_4D:
            for subset, keep in (
                ("all", lambda row: True),
                (f"b/a >= {FOLD_RATIO}", lambda row: not row["folds"]),
            ):
                sel = [row for row in rows4 if row["relative_noise"] == rel and keep(row)]
                if not sel:
                    continue
                err1 = [abs(row["chi1"] / row["chi1_theory"] - 1) for row in sel]
                err2 = [abs(row["chi2"] / row["chi2_theory"] - 1) for row in sel]
                ratio3 = [
                    row["abs_chi3"] / row["chi1"] if row["chi1"] > 0 else np.inf for row in sel
                ]
                srows.append(
                    dict(
                        relative_noise=rel,
                        helices=subset,
                        n=len(sel),
                        chi1_median_relative_error=float(np.median(err1)),
                        chi2_median_relative_error=float(np.median(err2)),
                        chi3_over_chi1_median=float(np.median(ratio3)),
                    )
                )
        summary4 = {f"{row['relative_noise']}|{row['helices']}": row for row in srows}
        t4_md = write_table(
            out,
            "helix4d_summary",
            [(k, k) for k in srows[0]],
            srows,
            md_columns=[
                ("relative_noise", "noise / a", ".2f"),
                ("helices", "helices"),
                ("n", "n"),
                ("chi1_median_relative_error", "median abs rel. error chi_1"),
                ("chi2_median_relative_error", "median abs rel. error chi_2"),
                ("chi3_over_chi1_median", "median abs chi_3 / chi_1"),
            ],
            title="Fig. 6 summary: 4-D helices",
        )

    if args.record:
        write_record(args.record, make_helix_record(args, argv, specs, results, timer.elapsed))
    figures = [_figure5(out, res3)]
    if rows4:
        figures.append(_figure6(out, rows4))
    write_summary(
        out, args, timer.elapsed, theory=theory.tolist(), helix3d=summary3, helix4d=summary4
    )
    write_report(
        out,
        "PPA paper Sec. 5.2: differential geometry of PPA curvilinear features",
        command_line(__file__, argv),
        [t3, t4_md],
        figures,
        timer.elapsed,
    )

    print(
        f"\nHelix geometry ({args.repeats} draws per noise level, {args.n_helices_4d} 4-D "
        f"helices; {timer.elapsed:.1f} s) -> {out}"
    )
    print(f"theory: kappa = {theory[0]:.4f}, tau = {theory[1]:.4f}")
    for row in rows3:
        print(
            f"noise {row['noise']:.1f}: kappa {row['kappa_median']:.4f} "
            f"({100 * row['kappa_relative_error']:+.1f}%), tau {row['tau_median']:.4f} "
            f"({100 * row['tau_relative_error']:+.1f}%), degrees {row['degrees']}"
        )
    for _key, row in summary4.items():
        print(
            f"4-D noise/a {row['relative_noise']:.2f} ({row['helices']}, n={row['n']}): "
            f"|chi1 err| {100 * row['chi1_median_relative_error']:.1f}%, "
            f"|chi2 err| {100 * row['chi2_median_relative_error']:.1f}%, "
            f"|chi3|/chi1 {row['chi3_over_chi1_median']:.3f}"
        )
    return dict(
        output=out, helix3d=rows3, helix4d=rows4, helix4d_summary=summary4, results=results
    )


def _figure5(out, res3):
    shown = [r for r in res3 if "X" in r]
    fig, axes = new_figure(2, len(shown), figsize=(4.3 * len(shown), 8.2), projection="3d")
    for col, r in enumerate(shown):
        ax = axes[0, col]
        X = r["X"]
        ax.scatter(*X.T, s=1, color="tab:blue", alpha=0.35)
        ax.set_title(f"noise {r['noise']}: data (2000 points)", fontsize=9)
        ax = axes[1, col]
        ax.plot(*r["true_curve"].T, color="c", lw=2, label="true helix")
        ax.plot(*r["curve"].T, color="0.35", lw=1.5, label="first PPA feature")
        P, F = r["frame_points"], r["frames"]
        length = 0.9
        for j, color in enumerate(("r", "g", "b")):
            ax.quiver(*P.T, *(F[:, j, :] * length).T, color=color, lw=0.8)
        ax.set_title(
            f"gamma_1 = {r['degree']}: kappa {r['median'][0]:.3f} "
            f"(theory {r['theory'][0]:.3f})\ntau {r['median'][1]:.3f} "
            f"(theory {r['theory'][1]:.3f})",
            fontsize=9,
        )
        if col == 0:
            ax.legend(fontsize=7, loc="upper left")
    for ax in axes.ravel():
        ax.tick_params(labelsize=6)
    fig.suptitle(
        "Fig. 5: first PPA curvilinear feature and its Frenet-Serret frames "
        "(tangent red, normal green, binormal blue)",
        fontsize=10,
    )
    return os.path.basename(save_figure(fig, out, "fig5_helix_frames.png"))


def _figure6(out, rows4):
    fig, axes = new_figure(1, 2, figsize=(10, 4.4))
    grays = {rel: str(g) for rel, g in zip(RELATIVE_NOISE_4D, (0.0, 0.4, 0.7))}
    for rel in RELATIVE_NOISE_4D:
        for folds, marker in ((False, "o"), (True, "x")):
            sel = [row for row in rows4 if row["relative_noise"] == rel and row["folds"] == folds]
            if not sel:
                continue
            label = f"noise {rel:.2f} a" + (f" (b/a < {FOLD_RATIO})" if folds else "")
            t1 = [row["chi1_theory"] for row in sel]
            axes[0, 0].scatter(
                t1,
                [row["chi1"] for row in sel],
                color=grays[rel],
                marker=marker,
                s=18,
                label=label,
            )
            t2 = [row["chi2_theory"] for row in sel]
            axes[0, 1].scatter(
                t2, [row["chi2"] for row in sel], color=grays[rel], marker=marker, s=18
            )
            axes[0, 1].scatter(
                t2,
                [row["abs_chi3"] for row in sel],
                color=grays[rel],
                marker="v" if not folds else "1",
                s=18,
            )
    for ax, name in zip(axes[0], ("chi_1", "chi_2 (circles), |chi_3| (triangles, theory 0)")):
        lo = 0.0
        hi = max(max(ax.get_xlim()), max(ax.get_ylim()))
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xlabel("theory")
        ax.set_ylabel("PPA")
        ax.set_title(name, fontsize=10)
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_yscale("symlog", linthresh=0.1)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(
        "Fig. 6: generalised curvatures of 4-D rotated helices (darker = lower noise)", fontsize=10
    )
    return os.path.basename(save_figure(fig, out, "fig6_helix4d_curvatures.png"))


if __name__ == "__main__":
    main()
