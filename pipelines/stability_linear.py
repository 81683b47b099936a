#!/usr/bin/env python
"""Bagged least squares: instance and feature instability against p, q and B (paper section 3).

    python pipelines/stability_linear.py [--output DIR] [--workers 2] [--small]

Model: ``y = x^T beta* + eps`` with ``x ~ N(0, I_d)``, ``beta* ~ N(0, I_d / d)``,
``eps ~ N(0, sigma^2)``; ``n`` training rows, aspect ratio ``gamma = d / n``. The learner is
bagged minimum-norm least squares (``FeatureBaggingRegressor(LinearRegression(
fit_intercept=False))``): ``B`` members, each on ``m = p n`` rows and ``s = q d`` features drawn
without replacement. Instabilities are taken on the coefficient scale of Theorem 3.2,
``E ||beta - beta^l||^2``: ``X_eval = sqrt(d) I`` makes ``mean_x (x^T delta)^2 = ||delta||^2``
exactly, which is ``E_x`` for isotropic ``x``. Shared coupling throughout; every value is the
mean over ``--replicates`` data sets.

Sweeps (each setting a Dask task):

* ``double_descent``: ``B = 1`` over a grid of ``q`` for two ``p``: II and FI peak near the
  effective interpolation threshold ``gamma q = p`` (paper Figure 2);
* ``bagging``: ``p = 1`` over the ``q`` grid for several ``B``: bagging flattens the peak
  (Figure 3);
* ``rounds``: FI against ``B`` for fixed ``q``, with ``B = d (1 - q) / q`` marked
  (section 4.3).

Every setting is computed with ``method="closed_form"`` (one inverse per member) and, where the
refits are affordable (``B <= --refit-max-B``), by brute force (``method="refit"``) beside it;
``report.md`` gives the largest relative difference.

Writes ``results.csv`` (one row per setting and replicate), ``summary.csv`` (means),
``report.md`` and ``double_descent.png``, ``bagging.png``, ``rounds.png``,
``closed_vs_refit.png``.
"""

from __future__ import annotations

import math
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


def parse_args(argv=None):
    p = stability_parser(__doc__.split("\n\n")[0], "stability-linear")
    p.add_argument("--n-samples", type=int, default=None, help="training rows n (default 100)")
    p.add_argument("--gamma", type=float, default=2.0, help="aspect ratio d / n (default 2)")
    p.add_argument("--noise", type=float, default=0.5, help="noise standard deviation sigma")
    p.add_argument("--replicates", type=int, default=None, help="data sets per setting")
    p.add_argument(
        "--refit-max-B",
        type=int,
        default=None,
        help="largest B also computed by brute-force refits",
    )
    return p.parse_args(argv)


def grids(args):
    if args.small:
        n = args.n_samples or 40
        q_grid = [0.2, 0.3, 0.4, 0.45, 0.55, 0.6, 0.8, 1.0]
        Bs_bagging = [1, 5, 25]
        Bs_rounds = [1, 2, 4, 8, 16, 32]
        reps = args.replicates or 2
    else:
        n = args.n_samples or 100
        q_grid = [
            0.1,
            0.15,
            0.2,
            0.23,
            0.27,
            0.3,
            0.35,
            0.4,
            0.45,
            0.48,
            0.52,
            0.55,
            0.6,
            0.7,
            0.8,
            0.9,
            1.0,
        ]
        Bs_bagging = [1, 5, 20, 100]
        Bs_rounds = [1, 2, 4, 8, 16, 32, 64, 128, 256]
        reps = args.replicates or 4
    refit_max = 5 if args.refit_max_B is None else args.refit_max_B
    d = int(round(args.gamma * n))
    # within one of the threshold s = m the expected instability of a member is infinite (the
    # inverse Wishart moment needs |m - s| >= 2): such grid points are left out
    rows = {1.0: n, 0.5: int(np.floor(0.5 * n + 0.5))}

    def away(q, p):
        return abs(int(np.floor(q * d + 0.5)) - rows[p]) >= 2

    settings = []
    for rep in range(reps):
        for p in (1.0, 0.5):
            for q in q_grid:
                if away(q, p):
                    settings.append(dict(sweep="double_descent", p=p, q=q, B=1, rep=rep))
        for B in Bs_bagging:
            if B == 1:
                continue  # the double-descent sweep's p = 1 curve
            for q in q_grid:
                if away(q, 1.0):
                    settings.append(dict(sweep="bagging", p=1.0, q=q, B=B, rep=rep))
        for q in (0.25, 0.75):
            for B in Bs_rounds:
                settings.append(dict(sweep="rounds", p=1.0, q=q, B=B, rep=rep))
    return n, d, settings, refit_max


def make_data(n, d, noise, seed, rep):
    rng = np.random.default_rng([seed, rep])
    beta = rng.normal(size=d) / math.sqrt(d)
    X = rng.normal(size=(n, d))
    y = X @ beta + noise * rng.normal(size=n)
    return X, y


def run_setting(setting, n, d, noise, seed, refit_max):
    """One (sweep, p, q, B, replicate): FI and II, closed form and (small B) brute force."""
    from sklearn.linear_model import LinearRegression

    from ppa_dask.ensemble import FeatureBaggingRegressor
    from ppa_dask.stability import feature_instability, instance_instability

    X, y = make_data(n, d, noise, seed, setting["rep"])
    X_eval = math.sqrt(d) * np.eye(d)  # mean over rows of (x^T delta)^2 = ||delta||^2
    model = FeatureBaggingRegressor(
        LinearRegression(fit_intercept=False),
        n_estimators=setting["B"],
        max_features=setting["q"],
        max_samples=None if setting["p"] == 1.0 else setting["p"],
        random_state=int(seed * 1000 + setting["rep"]),
    )
    row = dict(
        setting,
        n=n,
        d=d,
        s=model.bag_plan(n, d).s,
        m=n if setting["p"] == 1.0 else int(np.floor(setting["p"] * n + 0.5)),
    )
    for method in ("closed_form", "refit"):
        if method == "refit" and setting["B"] > refit_max:
            continue
        start = time.perf_counter()
        quantities = (("FI", feature_instability), ("II", instance_instability))
        if setting["sweep"] == "rounds":
            quantities = quantities[:1]  # the rounds sweep is about FI
        for name, fn in quantities:
            kw = {"n_instances": n} if name == "II" else {}
            try:
                result = fn(model, X, y, X_eval=X_eval, method=method, **kw)
                row[f"{name}_{method}"] = result.value
            except ValueError as exc:  # a singular member exactly at the threshold
                row[f"{name}_{method}"] = float("nan")
                row[f"note_{method}"] = str(exc)[:120]
        row[f"seconds_{method}"] = time.perf_counter() - start
    return row


def summarise(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["sweep"], r["p"], r["q"], r["B"]), []).append(r)
    out = []
    for (sweep, p, q, B), rs in sorted(groups.items()):
        s = dict(
            sweep=sweep,
            p=p,
            q=q,
            B=B,
            n=rs[0]["n"],
            d=rs[0]["d"],
            s=rs[0]["s"],
            m=rs[0]["m"],
            replicates=len(rs),
        )
        for key in ("FI_closed_form", "II_closed_form", "FI_refit", "II_refit"):
            # (II is not computed in the rounds sweep)
            vals = [r.get(key) for r in rs if r.get(key) is not None]
            vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
            s[key] = float(np.mean(vals)) if vals else None
        out.append(s)
    return out


def figures(summary, n, d, output):
    plt = matplotlib_headless()
    gamma = d / n
    # Figure 2: double descent at B = 1
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, name in zip(axes, ("II", "FI")):
        for p, color in ((1.0, "C0"), (0.5, "C1")):
            pts = [r for r in summary if r["sweep"] == "double_descent" and r["p"] == p]
            q = [r["q"] for r in pts]
            ax.plot(
                q,
                [r[f"{name}_closed_form"] for r in pts],
                "o-",
                color=color,
                label=f"p = {p} (closed form)",
            )
            refit = [r.get(f"{name}_refit") for r in pts]
            ax.plot(
                q,
                [np.nan if v is None else v for v in refit],
                "x",
                color="k",
                label="brute-force refit" if p == 1.0 else None,
            )
            ax.axvline(p / gamma, color=color, ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("feature ratio q")
        ax.set_title(f"{name}, B = 1 (dotted: gamma q = p)")
        ax.legend(fontsize=8)
    fig.suptitle(f"Double descent of bagged least squares, n = {n}, d = {d}")
    save_figure(fig, output, "double_descent.png")

    # Figure 3: bagging flattens the peak (p = 1)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    Bs = sorted({r["B"] for r in summary if r["sweep"] in ("bagging",)} | {1})
    for ax, name in zip(axes, ("II", "FI")):
        for k, B in enumerate(Bs):
            pts = [
                r
                for r in summary
                if r["p"] == 1.0 and r["B"] == B and r["sweep"] in ("bagging", "double_descent")
            ]
            pts.sort(key=lambda r: r["q"])
            ax.plot(
                [r["q"] for r in pts],
                [r[f"{name}_closed_form"] for r in pts],
                "o-",
                color=f"C{k}",
                label=f"B = {B}",
            )
        ax.axvline(1.0 / gamma, color="grey", ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("feature ratio q")
        ax.set_title(f"{name}, p = 1")
        ax.legend(fontsize=8)
    fig.suptitle("Bagging flattens the interpolation peak")
    save_figure(fig, output, "bagging.png")

    # rounds: FI against B
    from ppa_dask.stability import bagging_rounds

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for k, q in enumerate(sorted({r["q"] for r in summary if r["sweep"] == "rounds"})):
        pts = sorted(
            [r for r in summary if r["sweep"] == "rounds" and r["q"] == q], key=lambda r: r["B"]
        )
        ax.plot(
            [r["B"] for r in pts],
            [r["FI_closed_form"] for r in pts],
            "o-",
            color=f"C{k}",
            label=f"q = {q}",
        )
        ax.axvline(bagging_rounds(d, q), color=f"C{k}", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bagging rounds B (dotted: d (1 - q) / q)")
    ax.set_ylabel("FI")
    ax.legend()
    save_figure(fig, output, "rounds.png")

    # closed form against brute force
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for name, marker in (("FI", "o"), ("II", "s")):
        pairs = [
            (r[f"{name}_closed_form"], r[f"{name}_refit"])
            for r in summary
            if r.get(f"{name}_refit") is not None and r.get(f"{name}_closed_form")
        ]
        if pairs:
            a, b = np.array(pairs).T
            ax.loglog(b, a, marker, ms=4, label=name, alpha=0.7)
    lims = ax.get_xlim()
    ax.plot(lims, lims, "k-", lw=0.7)
    ax.set_xlabel("brute-force refit")
    ax.set_ylabel("closed form")
    ax.legend()
    save_figure(fig, output, "closed_vs_refit.png")


def checks(summary, n, d):
    """The paper's qualitative claims, measured."""
    from ppa_dask.stability import bagging_rounds

    gamma = d / n
    out = {}
    for p in (1.0, 0.5):
        pts = [r for r in summary if r["sweep"] == "double_descent" and r["p"] == p]
        for name in ("II", "FI"):
            best = max(pts, key=lambda r: r[f"{name}_closed_form"] or -1)
            out[f"peak_q_{name}_p{p}"] = best["q"]
        out[f"threshold_q_p{p}"] = p / gamma
    base = {r["q"]: r for r in summary if r["sweep"] == "double_descent" and r["p"] == 1.0}
    Bmax = max(r["B"] for r in summary if r["sweep"] == "bagging")
    big = {r["q"]: r for r in summary if r["sweep"] == "bagging" and r["B"] == Bmax}
    for name in ("II", "FI"):
        peak1 = max(r[f"{name}_closed_form"] for r in base.values())
        peakB = max(r[f"{name}_closed_form"] for r in big.values())
        out[f"peak_{name}_B1"] = peak1
        out[f"peak_{name}_B{Bmax}"] = peakB
    diffs = []
    for r in summary:
        for name in ("FI", "II"):
            a, b = r.get(f"{name}_closed_form"), r.get(f"{name}_refit")
            if a is not None and b is not None and b > 0:
                diffs.append(abs(a - b) / b)
    out["max_rel_diff_closed_vs_refit"] = max(diffs) if diffs else None
    out["n_compared"] = len(diffs)
    for q in sorted({r["q"] for r in summary if r["sweep"] == "rounds"}):
        pts = sorted(
            [r for r in summary if r["sweep"] == "rounds" and r["q"] == q], key=lambda r: r["B"]
        )
        out[f"rounds_q{q}"] = bagging_rounds(d, q)
        out[f"FI_by_B_q{q}"] = {r["B"]: r["FI_closed_form"] for r in pts}
    return out


def report(summary, checks_, n, d, args, argv, seconds, output):
    gamma = d / n
    lines = [
        f"n = {n}, d = {d} (gamma = {gamma:g}), noise sigma = {args.noise}, seed {args.seed}, "
        f"{summary[0]['replicates']} replicate(s) per setting; shared coupling; instabilities on "
        f"the coefficient scale E||beta - beta^l||^2. Wall time {seconds:.0f} s.",
        "",
        "## Double descent at B = 1 (Figure 2)",
        "",
    ]
    for p in (1.0, 0.5):
        lines.append(
            f"- p = {p}: threshold gamma q = p at q = {p / gamma:.3g}; the II curve peaks at q = "
            f"{checks_[f'peak_q_II_p{p}']}, the FI curve at q = {checks_[f'peak_q_FI_p{p}']}."
        )
    lines += [
        "",
        markdown_table(
            [r for r in summary if r["sweep"] == "double_descent"],
            ["p", "q", "s", "m", "II_closed_form", "II_refit", "FI_closed_form", "FI_refit"],
        ),
        "",
        "![double descent](double_descent.png)",
        "",
        "## Bagging flattens the peak (Figure 3)",
        "",
    ]
    Bmax = max(r["B"] for r in summary if r["sweep"] == "bagging")
    for name in ("II", "FI"):
        lines.append(
            f"- largest {name} over q: {fmt(checks_[f'peak_{name}_B1'])} at B = 1, "
            f"{fmt(checks_[f'peak_{name}_B{Bmax}'])} at B = {Bmax}."
        )
    lines += [
        "",
        markdown_table(
            [r for r in summary if r["sweep"] == "bagging"],
            ["B", "q", "II_closed_form", "II_refit", "FI_closed_form", "FI_refit"],
        ),
        "",
        "![bagging](bagging.png)",
        "",
        "## Rounds: FI against B (section 4.3)",
        "",
    ]
    for key, value in checks_.items():
        if key.startswith("rounds_q"):
            q = key[len("rounds_q") :]
            by_B = checks_[f"FI_by_B_q{q}"]
            lines.append(
                f"- q = {q}: d (1 - q) / q = {value}; FI by B: "
                + ", ".join(f"{B}: {fmt(v)}" for B, v in by_B.items())
            )
    lines += [
        "",
        "![rounds](rounds.png)",
        "",
        "## Closed form against brute force",
        "",
        f"{checks_['n_compared']} (setting, quantity) pairs computed both ways; largest "
        f"relative difference {fmt(checks_['max_rel_diff_closed_vs_refit'])}.",
        "",
        "![closed vs refit](closed_vs_refit.png)",
        "",
    ]
    write_grid_report(
        output,
        "Bagged least squares: II and FI against p, q and B (paper section 3)",
        command_line(__file__, argv),
        lines,
    )


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    n, d, settings, refit_max = grids(args)
    start = time.perf_counter()
    rows = run_settings(
        args,
        run_setting,
        settings,
        (n, d, args.noise, args.seed, refit_max),
        "linear-model settings",
        context=dict(n=n, d=d, noise=args.noise, seed=args.seed, refit_max=refit_max),
    )
    write_csv(rows, os.path.join(args.output, "results.csv"))
    summary = summarise(rows)
    write_csv(summary, os.path.join(args.output, "summary.csv"))
    checks_ = checks(summary, n, d)
    figures(summary, n, d, args.output)
    report(summary, checks_, n, d, args, argv, time.perf_counter() - start, args.output)
    return checks_


if __name__ == "__main__":
    main()
