#!/usr/bin/env python
"""VSK kernel regression on the Italian ICU series (Campi et al. 2021, section 6.2).

    python pipelines/vsk_covid_icu.py --output vsk-covid-icu [--n-shapes 200] [--workers 2]

Data: the national series of the Protezione Civile (``ppa_dask.datasets.load_covid_italy``),
2020-02-24 to 2020-04-26 (63 days): ICU patients (``terapia_intensiva``) to learn, the first 58
days for training and the last 5 for testing. The input is the day, scaled to [0, 1] over the
training days (so the test days lie a little beyond 1).

Learners: the Gaussian kernel regression network (KRN; ``KernelRidge`` with ``alpha = nu``) on
the day alone, and KRN-VSK with the scaling functions

* ``aux``: the total cases, the daily new cases and the current positives of the same day
  (a-priori knowledge observed on every day, as in the paper: a 1-nearest-neighbour lookup of
  the series prefitted on all 63 days);
* ``fit``: a growth-and-decline curve ``a exp(-((log(1 + t) - b) / c)^2)`` fitted to the
  training ICU series with ``scipy.optimize.curve_fit`` (the paper's model fit of the
  function itself; it extrapolates to the test days);
* ``aux+fit``: both.

psi columns are min-max scaled over the training days. For 200 shape parameters ``eps`` in
[0.5, 20] (kernel ``exp(-(eps r)^2)``, i.e. ``gamma = eps^2``) and ``nu`` in {0, 1e-4}: the
condition number of the training kernel matrix (``K``, ``K_Psi``, and ``K + nu I``) and the
rounded mean absolute error (RME) on the 5 test days. The shape parameters are fanned out in
batches as Dask tasks on a LocalCluster.

Writes into ``--output``: ``covid_sweep.csv`` (every eps, nu, learner), ``covid_best.{csv,md}``
(the paper's Table 3: RME at the best eps, plus the number and range of eps with RME below a
threshold), ``covid_condition_rme.png`` (Fig. 2: condition number and RME against eps) and
``covid_best_predictions.png`` (Fig. 3: predictions at the best eps for nu = 0 and 1e-4).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from ppa_dask.app.reproductions import (
    add_record_option,
    make_record,
    recorded_command,
    write_record,
)
from ppa_dask.app.scripts.figures import matplotlib_headless, save_figure
from ppa_dask.app.scripts.output import write_frame_table
from ppa_dask.app.scripts.tasks import cluster, fan_out
from ppa_dask.datasets import load_covid_italy

N_TRAIN = 58
LEARNERS = ("KRN", "KRN-VSK aux", "KRN-VSK fit", "KRN-VSK aux+fit")
AUX = ("totale_casi", "nuovi_positivi", "totale_positivi")


def growth_curve(t, a, b, c):
    """Rise and decline of the ICU occupancy: a log-normal-shaped bump in scaled time."""
    return a * np.exp(-(((np.log1p(t) - b) / c) ** 2))


def rounded_mean_error(y, pred):
    """The paper's RME: the mean absolute error rounded half down (to whole patients)."""
    me = float(np.mean(np.abs(np.asarray(y) - np.asarray(pred))))
    return math.floor(me) if me - math.floor(me) <= 0.5 else math.ceil(me)


def make_psi(name, t_all, aux_all):
    """The scaling function of a learner (None for the plain KRN)."""
    from sklearn.frozen import FrozenEstimator
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import FeatureUnion

    from ppa_dask.vsk import CurveFitRegressor, ModelScaling

    # a-priori series: known on every day, looked up by day
    aux = ModelScaling(
        FrozenEstimator(KNeighborsRegressor(n_neighbors=1).fit(t_all[:, None], aux_all))
    )
    fit = ModelScaling(
        CurveFitRegressor(
            growth_curve, p0=(4000.0, 0.5, 0.3), bounds=([0, -5, 1e-3], [1e6, 5, 10])
        )
    )
    return {
        "KRN": None,
        "KRN-VSK aux": aux,
        "KRN-VSK fit": fit,
        "KRN-VSK aux+fit": FeatureUnion([("aux", aux), ("fit", fit)]),
    }[name]


def sweep_task(data, learner, nu, eps_values):
    """Condition numbers and RME of one learner for a batch of shape parameters."""
    import warnings

    from threadpoolctl import threadpool_limits

    from ppa_dask.vsk import condition_number, make_krn_vsk, vsk_gram

    t_all, y = data["t"], data["y"]
    aux_all = np.column_stack([data[k] for k in AUX])
    ttr = t_all[:N_TRAIN, None]
    rows, preds = [], []
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ill-conditioned solves are the point here
        for eps in eps_values:
            model = make_krn_vsk(
                make_psi(learner, t_all, aux_all), alpha=nu, gamma=eps**2, rescale="minmax"
            )
            model.fit(ttr, y[:N_TRAIN])
            Z = model[0].transform(ttr)  # the augmented training points
            K = vsk_gram(Z, None, "rbf", eps**2)
            pred = model.predict(t_all[:, None])
            rows.append(
                {
                    "learner": learner,
                    "nu": nu,
                    "eps": eps,
                    "gamma": eps**2,
                    "cond": condition_number(K),
                    "cond_reg": condition_number(K + nu * np.eye(len(K))),
                    "ME": float(np.mean(np.abs(y[N_TRAIN:] - pred[N_TRAIN:]))),
                    "RME": rounded_mean_error(y[N_TRAIN:], pred[N_TRAIN:]),
                }
            )
            preds.append(pred)
    return rows, preds


def summarize(df, threshold):
    import pandas as pd

    out = []
    for (nu, learner), g in df.groupby(["nu", "learner"], sort=False):
        best = g.loc[g["RME"].idxmin()]
        good = g[g["RME"] <= threshold]
        finite = g["cond"][np.isfinite(g["cond"])]
        out.append(
            {
                "nu": nu,
                "learner": learner,
                "best eps": best["eps"],
                "RME at best eps": int(best["RME"]),
                f"# eps with RME <= {threshold:g}": len(good),
                "good eps range": f"[{good['eps'].min():.2f}, {good['eps'].max():.2f}]"
                if len(good)
                else "-",
                "median cond(K)": float(g["cond"].median()),
                "median cond(K + nu I)": float(g["cond_reg"].median()),
                "# eps with cond = inf": int((~np.isfinite(g["cond"])).sum()),
                "min finite cond(K)": float(finite.min()) if len(finite) else np.inf,
            }
        )
    return pd.DataFrame(out)


def plot(df, best_preds, data, dates, output):
    plt = matplotlib_headless()
    nus = sorted(df["nu"].unique())
    fig, axes = plt.subplots(len(nus), 2, figsize=(12, 3.8 * len(nus)), squeeze=False)
    cap = 1.0 / np.finfo(float).eps
    for row, nu in zip(axes, nus):
        for j, learner in enumerate(LEARNERS):
            g = df[(df["nu"] == nu) & (df["learner"] == learner)].sort_values("eps")
            if not len(g):
                continue
            # nu > 0: the matrix the regression inverts is K + nu I
            cond = g["cond" if nu == 0 else "cond_reg"].to_numpy()
            shown = np.where(np.isfinite(cond), cond, np.nan)
            row[0].semilogy(g["eps"], shown, color=f"C{j}", label=learner)
            inf = ~np.isfinite(cond)
            row[0].plot(g["eps"][inf], np.full(inf.sum(), cap), "x", color=f"C{j}", ms=3)
            row[1].semilogy(g["eps"], np.maximum(g["RME"], 1), color=f"C{j}", label=learner)
        row[0].set_title(
            f"condition number of {'K' if nu == 0 else 'K + nu I'} (x: singular), nu = {nu:g}"
        )
        row[1].set_title(f"RME on the 5 test days, nu = {nu:g}")
        for ax in row:
            ax.set_xlabel("shape parameter eps (gamma = eps^2)")
            ax.legend(fontsize=7)
    save_figure(fig, output, "covid_condition_rme.png", dpi=120)

    fig, axes = plt.subplots(1, len(nus), figsize=(6.5 * len(nus), 4), squeeze=False)
    days = np.arange(len(data["y"]))
    for ax, nu in zip(axes[0], nus):
        ax.plot(days, data["y"], "k.", ms=4, label="ICU patients")
        ax.axvline(N_TRAIN - 0.5, color="gray", ls=":")
        for j, learner in enumerate(LEARNERS):
            if (nu, learner) in best_preds:
                eps, rme, pred = best_preds[(nu, learner)]
                ax.plot(days, pred, color=f"C{j}", label=f"{learner} (eps={eps:.2f}, RME={rme})")
        ax.set_ylim(0, 1.3 * data["y"].max())
        ax.set_xticks(days[::14], [str(d)[5:] for d in dates[::14]])
        ax.set_title(f"best-eps predictions, nu = {nu:g} (test: right of the dotted line)")
        ax.legend(fontsize=7)
    save_figure(fig, output, "covid_best_predictions.png", dpi=120)


def run(
    output,
    n_shapes=200,
    eps_range=(0.5, 20.0),
    nus=(0.0, 1e-4),
    learners=LEARNERS,
    batch=25,
    threshold=None,
    client=None,
    n_workers=2,
    verbose=True,
):
    """Run the sweep, write the tables and figures into ``output``; return the tables."""
    import pandas as pd

    os.makedirs(output, exist_ok=True)
    series = load_covid_italy(start="2020-02-24", end="2020-04-26")
    y = series["terapia_intensiva"]
    if len(y) != 63:
        raise ValueError(f"expected 63 days from 2020-02-24 to 2020-04-26, got {len(y)}")
    days = np.arange(len(y), dtype=float)
    data = {"t": days / (N_TRAIN - 1), "y": y, **{k: series[k] for k in AUX}}
    # "good" shape parameters: test error within 10% of the mean ICU level of the test days
    threshold = 0.1 * float(y[N_TRAIN:].mean()) if threshold is None else float(threshold)
    eps = np.linspace(eps_range[0], eps_range[1], n_shapes)
    batches = [eps[i : i + batch] for i in range(0, n_shapes, batch)]
    tasks = [
        dict(data=data, learner=lr, nu=float(nu), eps_values=b)
        for nu in nus
        for lr in learners
        for b in batches
    ]
    t0 = time.perf_counter()
    with cluster(client=client, workers=n_workers) as c:
        parts = fan_out(c, sweep_task, tasks)
    elapsed = time.perf_counter() - t0
    rows = [r for part in parts for r in part[0]]
    preds = [p for part in parts for p in part[1]]
    df = pd.DataFrame(rows)
    df.to_csv(os.path.join(output, "covid_sweep.csv"), index=False)
    best = summarize(df, threshold)
    best_preds = {}
    for (nu, learner), g in df.groupby(["nu", "learner"], sort=False):
        i = g["RME"].idxmin()
        best_preds[(nu, learner)] = (df.loc[i, "eps"], int(df.loc[i, "RME"]), preds[i])
    text = write_frame_table(
        best,
        output,
        "covid_best",
        "ICU series: RME on the 5 test days at the best shape parameter (paper's Table 3)",
        floatfmt="{:.3g}",
        note=f"{n_shapes} shape parameters eps in [{eps_range[0]:g}, {eps_range[1]:g}] "
        f"(gamma = eps^2, day scaled to [0, 1] over the 58 training days); 'good' eps: RME "
        f"<= {threshold:g} (10% of the mean test-day ICU level). cond = inf: the smallest "
        "eigenvalue is <= 0 in floating point (numerically singular).",
    )
    plot(df, best_preds, data, series["date"], output)
    if verbose:
        print(text)
        print(f"{len(tasks)} tasks in {time.perf_counter() - t0:.1f} s; written to {output}")
    return {"sweep": df, "best": best, "threshold": threshold, "seconds": elapsed}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="vsk-covid-icu")
    parser.add_argument("--n-shapes", type=int, default=200)
    parser.add_argument("--eps-min", type=float, default=0.5)
    parser.add_argument("--eps-max", type=float, default=20.0)
    parser.add_argument("--nus", default="0,1e-4", help="regularisations nu, comma separated")
    parser.add_argument(
        "--learners",
        default=",".join(LEARNERS),
        help=f"learners, comma separated, of {', '.join(LEARNERS)} (default: all)",
    )
    parser.add_argument("--batch", type=int, default=25, help="shape parameters per Dask task")
    parser.add_argument("--workers", type=int, default=2, help="0 runs the tasks in process")
    add_record_option(parser)
    args = parser.parse_args(argv)
    args.learners = tuple(v.strip() for v in args.learners.split(","))
    unknown = [v for v in args.learners if v not in LEARNERS]
    if unknown:
        parser.error(f"--learners: unknown {unknown}; choose from {', '.join(LEARNERS)}")
    try:
        args.nus = tuple(float(v) for v in args.nus.split(","))
    except ValueError:
        parser.error(f"--nus: expected numbers separated by commas, got {args.nus!r}")
    if args.n_shapes < 1 or args.batch < 1 or args.workers < 0:
        parser.error("--n-shapes and --batch must be >= 1, --workers >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    out = run(
        args.output,
        args.n_shapes,
        (args.eps_min, args.eps_max),
        args.nus,
        args.learners,
        args.batch,
        None,
        None,
        args.workers,
    )
    if args.record:
        write_record(args.record, make_covid_record(args, argv, out))
    return out


#: Options of the test suite's smaller rerun of the saved record (a subset of its cells).
REDUCED = ("--nus", "0", "--learners", "KRN,KRN-VSK fit")
#: How closely a rerun reproduces the record: a solve at condition number c is exact to about
#: c x 1e-16, so the cells above 1e12 (numerically singular at nu = 0) are rounding
TOLERANCE = dict(
    rtol=1e-3,
    atol=0.0,
    unstable=dict(field="log10_cond_reg", above=12),
    why="the Gram systems are solved at condition numbers up to 1e17 (infinite, i.e. singular in "
    "float64, at most shape parameters when nu = 0), so a solve is exact only to about cond x "
    "1e-16: on an AVX-512 CPU (AMD EPYC, family 26) the reduced rerun's errors above cond 1e12 "
    "moved up to 18-fold from the record, made on another CPU, and are not compared; the 138 "
    "cells below agreed to 1.3e-4",
)


def _log10(value):
    return math.log10(value) if np.isfinite(value) and value > 0 else None


def make_covid_record(args, argv, out):
    """The reproduction record of a run: one cell per (nu, learner, eps) (Figs. 2-3, Table 3).

    The experiment has no random part (one series, a fixed split, ``curve_fit`` from a fixed
    start), so the record has no seeds and each number is one run's.
    """
    sweep, threshold = out["sweep"], out["threshold"]
    best = {key: g["RME"].idxmin() for key, g in sweep.groupby(["nu", "learner"], sort=False)}
    chosen = set(best.values())
    cells = [
        dict(
            nu=float(r.nu),
            learner=r.learner,
            eps=float(r.eps),
            log10_cond=_log10(r.cond),
            log10_cond_reg=_log10(r.cond_reg),
            ME=float(r.ME),
            RME=int(r.RME),
            best=int(i in chosen),
            good=int(threshold >= r.RME),
        )
        for i, r in zip(sweep.index, sweep.itertuples())
    ]
    labels = {lr: lr for lr in LEARNERS}
    nu_labels = {str(float(nu)): f"nu = {nu:g}" for nu in args.nus}
    shared = dict(rows=["nu"], column="learner", over="eps",
                  single="one run, no random draws", count_header="runs",
                  labels=labels, row_headers=["nu"],
                  row_labels={str(float(nu)): f"{nu:g}" for nu in args.nus})  # fmt: skip
    tables = [
        dict(shared, name="table3", value="RME", where=dict(best=1), digits=0,
             title="Table 3: RME on the 5 test days at the best shape parameter"),
        dict(shared, name="table3_eps", value="eps", where=dict(best=1), digits=2,
             title="The best shape parameter eps (gamma = eps^2) of Table 3"),
        dict(shared, name="safe_eps", value="good", digits=3, count_header="shape parameters",
             single="each the share of the shape parameters",
             title=f"Fig. 2 (right): share of the {args.n_shapes} shape parameters in "
             f"[{args.eps_min:g}, {args.eps_max:g}] with RME <= {threshold:g} (10 % of the "
             "mean test-day ICU level)"),
        dict(shared, name="fig2_cond", value="log10_cond_reg", rows=["nu", "eps"], digits=2,
             title="Fig. 2 (left): log10 condition number of K + nu I (K at nu = 0)"),
        dict(shared, name="fig2_rme", value="RME", rows=["nu", "eps"], digits=0,
             title="Fig. 2 (right): RME on the 5 test days"),
    ]  # fmt: skip
    figures = [
        dict(name="fig2_cond", kind="lines", table="fig2_cond", x="eps", panel="nu",
             xlabel="shape parameter eps", ylabel="log10 cond(K + nu I)",
             panel_labels=nu_labels),
        dict(name="fig2_rme", kind="lines", table="fig2_rme", x="eps", panel="nu",
             xlabel="shape parameter eps", ylabel="RME (patients)", panel_labels=nu_labels,
             ylim=[0, 2000]),
    ]  # fmt: skip
    return make_record(
        "vsk_covid_icu",
        "Kernel regression (KRN) and KRN-VSK on the Italian ICU series",
        "Campi et al. 2021, Sec. 6.2, Figs. 2-3, Table 3",
        recorded_command(__file__, argv),
        seeds=[],
        keys=["nu", "learner", "eps"],
        cells=cells,
        tables=tables,
        figures=figures,
        reduced=REDUCED,
        tolerance=TOLERANCE,
        run_seconds=out["seconds"],
        notes="deterministic: no random draws (one series, a fixed split, curve_fit from a "
        "fixed start); every number is one run's",
    )


if __name__ == "__main__":
    main()
