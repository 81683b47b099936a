#!/usr/bin/env python
"""VSK toy experiment (Campi et al. 2021, section 6.1): NB, SVM and SVM-VSK on 12 toy data sets.

    python pipelines/vsk_toy.py --output vsk-toy [--n-reps 3] [--workers 2] [--seed 1992]

The population: 5000 samples in 64 features, two exactly balanced classes. Class ``+1`` draws
feature ``k`` from ``N(mu_k, s_k)`` and class ``-1`` from ``N(mu_k + delta_k, t_k)``, with
``mu ~ U(0, 20)``, ``delta ~ U(0, 2)``, ``s ~ U(0, 2)``, ``t ~ U(0, 4.5)`` per feature (the
ranges lost from the paper's text are those of the authors' published script), then white noise
``N(0, 1)`` is added and every feature is scaled to [0, 1].

Each data set ``(N, n_k)``, ``N`` in {100, 500, 2500} and ``n_k`` in {2, 4, 16, 64}: ``n_k``
randomly pre-selected features and ``N`` rows (``N / 2`` per class); a third of each class
(``N / 6`` rows) is the test set, the rest the training set. Naive Bayes is trained on the
training set plus the population rows not drawn (the a-priori knowledge); SVM on the training
set; SVM-VSK on the training set augmented with the naive-Bayes posterior ``P(+1 | x)``. SVM and
SVM-VSK, linear and Gaussian, are tuned by 5-fold CV by weighted F1 over ``C = 2^-6..2^5`` and
``gamma = 10^-6..10^1``. Score: weighted F1 on the test set. Each (data set, repetition, kernel)
is one Dask task on a LocalCluster; repetition ``r`` draws its features and rows from a seed
made of ``(seed, N, n_k, r)``. For ``n_k = 2`` the spectral ratios of ``K`` and ``K_Psi`` on the
training set (gamma = 1) are recorded (the paper's Tables 1-2), with the quantities of
Proposition 2 for the linear kernel.

Writes into ``--output``: ``toy_results.csv`` (one row per task), ``toy_f1.{csv,md}`` (mean and
std of the weighted F1 per data set and kernel), ``toy_spectral.{csv,md}`` (Tables 1-2) and
``toy_f1.png`` (the paper's Fig. 1).
"""

from __future__ import annotations

import argparse
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
from ppa_dask.app.scripts.options import add_svm_search_options, check_svm_search_options, csv_list
from ppa_dask.app.scripts.output import write_frame_table
from ppa_dask.app.scripts.selection import C_GRID, GAMMA_GRID, search_grids, svm_grid, tuned
from ppa_dask.app.scripts.tasks import cluster, fan_out
from ppa_dask.utils.seeds import task_seed

POPULATION = 5000
N_FEATURES = 64
METHODS = ("NB", "SVM", "SVM-VSK")


def make_population(seed):
    """The 5000 x 64 toy population scaled to [0, 1] and its labels (+1 first half, -1 second)."""
    rng = np.random.default_rng(task_seed(seed, 0))
    half = POPULATION // 2
    mu_a = rng.uniform(0, 20, N_FEATURES)
    s_a = rng.uniform(0, 2, N_FEATURES)
    mu_b = mu_a + rng.uniform(0, 2, N_FEATURES)
    s_b = rng.uniform(0, 4.5, N_FEATURES)
    X = np.vstack(
        [rng.normal(mu_a, s_a, (half, N_FEATURES)), rng.normal(mu_b, s_b, (half, N_FEATURES))]
    )
    X += rng.normal(0, 1, X.shape)
    lo, hi = X.min(axis=0), X.max(axis=0)
    X = (X - lo) / (hi - lo)
    y = np.repeat([1, -1], half)
    return X, y


def draw_dataset(X, y, n_samples, n_features, seed):
    """Features, balanced rows and a 2:1 train/test split; returns train, test and a-priori rows."""
    rng = np.random.default_rng(seed)
    features = np.sort(rng.choice(X.shape[1], n_features, replace=False))
    half = POPULATION // 2
    per_class = n_samples // 2
    pos = np.sort(rng.choice(half, per_class, replace=False))
    neg = np.sort(half + rng.choice(half, per_class, replace=False))
    n_test = n_samples // 6
    test = np.concatenate(
        [rng.choice(pos, n_test, replace=False), rng.choice(neg, n_test, replace=False)]
    )
    drawn = np.concatenate([pos, neg])
    train = np.setdiff1d(drawn, test)
    prior = np.setdiff1d(np.arange(POPULATION), drawn)
    Xf = X[:, features]
    return (Xf[train], y[train]), (Xf[test], y[test]), (Xf[prior], y[prior]), features


def toy_task(seed, n_samples, n_features, rep, kernel, C_grid, gamma_grid, cv):
    """One (data set, repetition, kernel): NB, SVM, SVM-VSK weighted F1 and the diagnostics."""
    import warnings

    from sklearn.metrics import f1_score
    from sklearn.naive_bayes import GaussianNB
    from sklearn.svm import SVC
    from threadpoolctl import threadpool_limits

    from ppa_dask.vsk import NaiveBayesScaling, make_svm_vsk, spectral_ratio, vsk_gram

    t0 = time.perf_counter()
    X, y = make_population(seed)
    (Xtr, ytr), (Xte, yte), (Xpr, ypr), features = draw_dataset(
        X, y, n_samples, n_features, task_seed(seed, n_samples, n_features, rep)
    )
    row = {
        "N": n_samples,
        "n_k": n_features,
        "rep": rep,
        "kernel": kernel,
        "n_train": len(ytr),
        "n_test": len(yte),
        "features": " ".join(map(str, features)),
    }
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nb = GaussianNB().fit(np.vstack([Xtr, Xpr]), np.concatenate([ytr, ypr]))
        row["f1_NB"] = f1_score(yte, nb.predict(Xte), average="weighted")

        svm = tuned(SVC(kernel=kernel), svm_grid(kernel, "", C_grid, gamma_grid), cv)
        svm.fit(Xtr, ytr)
        row["f1_SVM"] = f1_score(yte, svm.predict(Xte), average="weighted")
        row["params_SVM"] = str(svm.best_params_)

        psi = NaiveBayesScaling(extra_X=Xpr, extra_y=ypr)
        vsk = tuned(
            make_svm_vsk(kernel, psi=psi), svm_grid(kernel, "svc__", C_grid, gamma_grid), cv
        )
        vsk.fit(Xtr, ytr)
        row["f1_SVM-VSK"] = f1_score(yte, vsk.predict(Xte), average="weighted")
        row["params_SVM-VSK"] = str(vsk.best_params_)

        if n_features == 2:
            # Tables 1-2: the training set, gamma = 1, psi = the a-priori NB posterior
            p = psi.fit(Xtr, ytr).transform(Xtr)
            K = vsk_gram(Xtr, None, kernel, 1.0)
            KP = vsk_gram(Xtr, p, kernel, 1.0)
            row["C_K"] = spectral_ratio(K)
            row["C_KPsi"] = spectral_ratio(KP)
            row["trK_over_trKPsi"] = np.trace(K) / np.trace(KP)
    row["seconds"] = time.perf_counter() - t0
    return row


def summarize(results):
    """Mean/std of the weighted F1 per data set, kernel and method; the spectral table."""
    import pandas as pd

    df = pd.DataFrame(results)
    rows = []
    for (kernel, N, nk), g in df.groupby(["kernel", "N", "n_k"], sort=True):
        r = {"kernel": kernel, "N": N, "n_k": nk, "reps": len(g)}
        for m in METHODS:
            r[f"{m} mean"] = g[f"f1_{m}"].mean()
            r[f"{m} std"] = g[f"f1_{m}"].std(ddof=1) if len(g) > 1 else 0.0
        r["VSK - SVM"] = r["SVM-VSK mean"] - r["SVM mean"]
        rows.append(r)
    f1 = pd.DataFrame(rows)
    spec = df[df["n_k"] == 2]
    if "C_K" in spec:
        spec = (
            spec.groupby(["kernel", "N"], sort=True)[["C_K", "C_KPsi", "trK_over_trKPsi"]]
            .mean()
            .reset_index()
        )
        # Proposition 2 (linear): C(K_Psi) * tr(K) / tr(K_Psi) <= C(K) on non-negative data
        spec["tr-scaled C_KPsi"] = spec["C_KPsi"] * spec["trK_over_trKPsi"]
    else:
        spec = pd.DataFrame()
    return df, f1, spec


def plot(f1, output):
    """The paper's Fig. 1 (``toy_f1.png``): weighted F1 of NB, SVM and SVM-VSK per data set, one
    panel per kernel."""
    plt = matplotlib_headless()
    kernels = sorted(f1["kernel"].unique())
    fig, axes = plt.subplots(len(kernels), 1, figsize=(11, 3.6 * len(kernels)), squeeze=False)
    for ax, kernel in zip(axes[:, 0], kernels):
        g = f1[f1["kernel"] == kernel].sort_values(["N", "n_k"])
        x = np.arange(len(g))
        for j, m in enumerate(METHODS):
            ax.bar(
                x + (j - 1) * 0.27, g[f"{m} mean"], 0.27, yerr=g[f"{m} std"], label=m, capsize=2
            )
        ax.set_xticks(x, [f"N={N}\nn_k={nk}" for N, nk in zip(g["N"], g["n_k"])], fontsize=8)
        lo = max(0.0, float(np.nanmin(g[[f"{m} mean" for m in METHODS]].to_numpy())) - 0.1)
        ax.set_ylim(lo, 1.0)
        ax.set_ylabel("weighted F1 (test)")
        ax.set_title(f"{'Gaussian' if kernel == 'rbf' else 'linear'} kernel")
        ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, output, "toy_f1.png", dpi=120)


def run(
    output,
    n_samples=(100, 500, 2500),
    n_features=(2, 4, 16, 64),
    kernels=("linear", "rbf"),
    n_reps=3,
    seed=1992,
    C_grid=C_GRID,
    gamma_grid=GAMMA_GRID,
    cv=5,
    client=None,
    n_workers=2,
    verbose=True,
):
    """Run the experiment, write the tables and the figure into ``output``; return the tables."""
    os.makedirs(output, exist_ok=True)
    tasks = [
        dict(
            seed=seed,
            n_samples=N,
            n_features=nk,
            rep=r,
            kernel=k,
            C_grid=tuple(C_grid),
            gamma_grid=tuple(gamma_grid),
            cv=cv,
        )
        # the largest data sets first, so the long tasks do not trail at the end
        for N in sorted(n_samples, reverse=True)
        for nk in n_features
        for r in range(n_reps)
        for k in kernels
    ]
    t0 = time.perf_counter()
    with cluster(client=client, workers=n_workers) as c:
        results = fan_out(c, toy_task, tasks)
    elapsed = time.perf_counter() - t0
    df, f1, spec = summarize(results)
    df.to_csv(os.path.join(output, "toy_results.csv"), index=False)
    text = write_frame_table(
        f1,
        output,
        "toy_f1",
        "Toy data: weighted F1 on the test set (mean, std over repetitions)",
        note=f"{n_reps} repetition(s), seed {seed}; NB trained on the training set plus the "
        f"population rows not drawn; SVM / SVM-VSK tuned by {cv}-fold CV over C in "
        f"{_grid_text(C_grid)} (and gamma in {_grid_text(gamma_grid)}).",
    )
    if len(spec):
        text += "\n" + write_frame_table(
            spec,
            output,
            "toy_spectral",
            "Spectral ratios on the training sets, n_k = 2, gamma = 1 (paper's Tables 1-2)",
            note="Gaussian: C(K_Psi) >= C(K) (Corollary 1). Linear: Proposition 2 bound "
            "C(K_Psi) tr(K)/tr(K_Psi) <= C(K) on non-negative data.",
        )
    plot(f1, output)
    if verbose:
        print(text)
        print(f"{len(tasks)} tasks in {time.perf_counter() - t0:.1f} s; written to {output}")
    return {"results": df, "f1": f1, "spectral": spec, "seconds": elapsed}


def _grid_text(values):
    return "{" + ", ".join(f"{v:g}" for v in values) + "}"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="vsk-toy", help="output folder (default ./vsk-toy)")
    parser.add_argument(
        "--n-samples", type=csv_list(int), default=(100, 500, 2500), help="e.g. 100,500,2500"
    )
    parser.add_argument(
        "--n-features", type=csv_list(int), default=(2, 4, 16, 64), help="e.g. 2,4,16,64"
    )
    parser.add_argument(
        "--n-reps", type=int, default=3, help="repetitions per data set (default 3)"
    )
    parser.add_argument("--seed", type=int, default=1992)
    add_svm_search_options(parser)
    parser.add_argument(
        "--workers", type=int, default=2, help="LocalCluster worker processes (0: in process)"
    )
    add_record_option(parser)
    args = parser.parse_args(argv)
    check_svm_search_options(args, parser.error)
    if args.n_reps < 1 or args.cv < 2 or args.workers < 0:
        parser.error("--n-reps must be >= 1, --cv >= 2 and --workers >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    out = run(
        args.output,
        args.n_samples,
        args.n_features,
        args.kernels,
        args.n_reps,
        args.seed,
        *search_grids(args.coarse_grid),
        args.cv,
        None,
        args.workers,
    )
    if args.record:
        write_record(args.record, make_toy_record(args, argv, out))
    return out


#: Options of the test suite's smaller rerun of the saved record (a subset of its cells).
REDUCED = ("--n-samples", "100", "--n-features", "2,4", "--n-reps", "2", "--kernels", "linear")
#: The record's quantities: the weighted F1 of each method (Fig. 1) and, for n_k = 2, the
#: spectral ratios of Tables 1-2 with Proposition 2's trace ratio and scaled ratio.
F1_LABELS = {m: f"F1 {m}" for m in METHODS}
SPECTRAL_LABELS = ("C(K)", "C(K_Psi)", "tr K / tr K_Psi", "C(K_Psi) tr K / tr K_Psi")


def make_toy_record(args, argv, out):
    """The reproduction record of a run: one cell per (data set, kernel, repetition, quantity)."""
    cells = []
    for r in out["results"].to_dict("records"):
        values = {F1_LABELS[m]: r[f"f1_{m}"] for m in METHODS}
        if r["n_k"] == 2:
            ratio = r["trK_over_trKPsi"]
            values.update(
                zip(SPECTRAL_LABELS, (r["C_K"], r["C_KPsi"], ratio, r["C_KPsi"] * ratio))
            )
        N, nk, rep = int(r["N"]), int(r["n_k"]), int(r["rep"])
        seed = task_seed(args.seed, N, nk, rep)
        cells += [
            dict(N=N, n_k=nk, kernel=r["kernel"], quantity=q, rep=rep, seed=seed, value=float(v))
            for q, v in values.items()
        ]
    f1 = list(F1_LABELS.values())
    fig1 = dict(value="value", rows=["N", "n_k"], column="quantity", over="rep", digits=3,
                row_headers=["N", "n_k"], count_header="draws")  # fmt: skip
    tables = [
        dict(fig1, name=f"fig1_{k}", where=dict(kernel=k, quantity=f1),
             title=f"Fig. 1: weighted F1 on the test set, {name} kernel")
        for k, name in (("linear", "linear"), ("rbf", "Gaussian")) if k in args.kernels
    ]  # fmt: skip
    if 2 in args.n_features:
        spectral = dict(value="value", rows=["N"], column="quantity", over="rep", digits=4,
                        count_header="draws", where=dict(n_k=2))  # fmt: skip
        if "rbf" in args.kernels:
            tables.append(dict(
                spectral, name="table1", where=dict(n_k=2, kernel="rbf",
                                                    quantity=["C(K)", "C(K_Psi)"]),
                title="Table 1: spectral ratios on the training sets, Gaussian kernel "
                "(gamma = 1), n_k = 2"))  # fmt: skip
        if "linear" in args.kernels:
            tables.append(dict(
                spectral, name="table2", where=dict(n_k=2, kernel="linear", quantity=[
                    "C(K)", "C(K_Psi)", "tr K / tr K_Psi", "C(K_Psi) tr K / tr K_Psi"]),
                title="Table 2: Proposition 2's quantities, linear kernel, n_k = 2"))  # fmt: skip
    figures = [
        dict(name=t["name"], kind="bars", table=t["name"], ylabel="weighted F1 (test)")
        for t in tables
        if t["name"].startswith("fig1")
    ]
    seeds = {args.seed} | {c["seed"] for c in cells}
    return make_record(
        "vsk_toy",
        "NB, SVM and SVM-VSK on the 12 toy data sets; spectral ratios of K and K_Psi",
        "Campi et al. 2021, Sec. 6.1, Fig. 1, Tables 1-2",
        recorded_command(__file__, argv),
        seeds=sorted(seeds),
        keys=["N", "n_k", "kernel", "quantity", "rep"],
        cells=cells,
        tables=tables,
        figures=figures,
        reduced=REDUCED,
        run_seconds=out["seconds"],
    )


if __name__ == "__main__":
    main()
