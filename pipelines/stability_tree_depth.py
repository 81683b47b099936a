#!/usr/bin/env python
"""Depth-T dyadic trees: feature instability with and without feature bagging (section 4.2.2).

    python pipelines/stability_tree_depth.py [--output DIR] [--workers 2] [--small]

The paper's model of a random forest's tree: a dyadic tree splits each cell at the midpoint of
a coordinate, so the cell holding a fixed point ``x`` after ``T`` splits is set by the sequence
of coordinates split along its path. The max-edge rule splits, among the candidate features,
one split least often so far on the path (``argmin_k N_t^k``). The path is encoded as
``w_T`` in ``{0, 1}^{T x d}``: ``w[r, k] = 1`` when feature ``k`` was split more than ``r``
times (the paper's example ``w_3 = ((1, 1), (0, 1), (0, 0))`` for ``d = 2``). Feature bagging
draws the candidates at every split: a fraction ``q`` of the features (``max(1, round(q d))``
of them, random forests' ``max_features``), ties broken in the draw's order. Over ``B`` rounds
the bagged encoding is the mean of the rounds' ``w_T``, and

    FI = (1/d) sum_j ||mean_b w_T - mean_b w_T^{-j}||_F^2,

the run without feature ``j`` using the same draws (shared randomness: the same priority order
of the features per round and split, ``j`` never a candidate, as many candidates drawn). The
non-bagged tree (every feature a candidate, ties to the lowest index) has ``FI = 2T/d`` for
``T < d`` (the paper's Appendix S.3.4): its first ``T`` splits use ``T`` different features,
and removing one of them moves one 1 of ``w_T`` to another column. Theorem 4.2.2 bounds the
bagged FI by ``q A_T^2 / ((d - 1)(1 - q))``; our copy of the paper does not define ``A_T``, and
we show the bound with ``A_T = T`` (the path's ``||w_T||_F^2 = T``, the same ``T^2`` as the
forward-selection bound of section 4.2.1). Each (d, q, seed) is a Dask task; writes
``results.csv``, ``report.md`` and ``tree_depth.png``.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ppa_dask.app.reproductions import make_record, recorded_command, write_record
from ppa_dask.app.scripts.figures import matplotlib_headless, save_figure
from ppa_dask.app.scripts.options import csv_list, stability_parser
from ppa_dask.app.scripts.output import command_line, markdown_table, write_csv, write_grid_report
from ppa_dask.app.scripts.tasks import run_settings

#: Feature-subsampling ratios q of the bagged trees (1.0: the non-bagged tree).
RATIOS = (1.0, 0.1, 0.2, 0.3, 0.5)


def parse_args(argv=None):
    p = stability_parser(__doc__.split("\n\n")[0], "stability-tree-depth")
    p.add_argument(
        "--n-features",
        type=csv_list(int),
        default=None,
        help="comma-separated d (default 10,20; small: 10)",
    )
    p.add_argument("--max-depth", type=int, default=None, help="largest T (default 8)")
    p.add_argument("--rounds", type=int, default=None, help="bagging rounds B (default 1000)")
    p.add_argument(
        "--seeds",
        type=csv_list(int),
        default=None,
        help="comma-separated seeds, one set of B rounds each (default 0,1,2,3,4; small: 0,1)",
    )
    p.add_argument(
        "--ratios",
        type=csv_list(float),
        default=list(RATIOS),
        help="comma-separated q in (0, 1] (1: no bagging); default " + ",".join(map(str, RATIOS)),
    )
    args = p.parse_args(argv)
    bad = [q for q in args.ratios if not 0.0 < q <= 1.0]
    if bad:
        p.error(f"--ratios must lie in (0, 1], got {bad}")
    return args


def dyadic_path(d, T, q, order_of, excluded=None):
    """The split counts of one max-edge dyadic path after each of its ``T`` splits
    (``T x d``; row ``t`` the counts ``N^k`` after split ``t + 1``).

    ``order_of(t)`` is the priority order of the ``d`` features at split ``t`` (None: the
    index order, the non-bagged tree). The candidates are the first ``max(1, round(q d))``
    available features in that order; the split goes to a candidate with the fewest splits so
    far, the earliest in the order among ties.

    Examples
    --------
    >>> dyadic_path(2, 3, 1.0, lambda t: None).tolist()
    [[1, 0], [1, 1], [2, 1]]
    """
    counts = np.zeros(d, dtype=int)
    history = np.zeros((T, d), dtype=int)
    size = max(1, int(np.floor(q * d + 0.5)))
    for t in range(T):
        order = order_of(t)
        order = range(d) if order is None else order
        candidates = [int(k) for k in order if k != excluded][:size]
        k = min(candidates, key=lambda c: counts[c])  # min keeps the first of ties
        counts[k] += 1
        history[t] = counts
    return history


def encoding(counts, T):
    """The path encoding ``w_T`` (``T x d``) of split counts: ``w[r, k] = 1`` when feature
    ``k`` was split more than ``r`` times.

    Examples
    --------
    >>> encoding(np.array([2, 1]), 3).astype(int).tolist()  # the paper's w_3, features swapped
    [[1, 1], [1, 0], [0, 0]]
    """
    return (counts[None, :] > np.arange(T)[:, None]).astype(np.float64)


def run_block(setting):
    """Mean encodings of one (d, q, seed) over its rounds, for every T up to ``T_max``: the
    full run and each leave-one-feature-out run, and their FI."""
    d, q, seed, B, T_max = (setting[k] for k in ("d", "q", "seed", "rounds", "T_max"))
    rounds = 1 if q == 1.0 else B
    full = [np.zeros((T, d)) for T in range(1, T_max + 1)]
    minus = [np.zeros((d, T, d)) for T in range(1, T_max + 1)]
    for b in range(rounds):
        if q == 1.0:
            orders = [None] * T_max
        else:
            orders = [np.random.default_rng([seed, b, t]).permutation(d) for t in range(T_max)]
        path = dyadic_path(d, T_max, q, orders.__getitem__)
        reduced = [dyadic_path(d, T_max, q, orders.__getitem__, excluded=j) for j in range(d)]
        for i, T in enumerate(range(1, T_max + 1)):
            full[i] += encoding(path[T - 1], T)
            for j in range(d):
                minus[i][j] += encoding(reduced[j][T - 1], T)
    out = []
    for i, T in enumerate(range(1, T_max + 1)):
        diff = ((full[i][None] / rounds - minus[i] / rounds) ** 2).sum(axis=(1, 2))
        out.append(dict(d=d, q=q, seed=seed, rounds=rounds, T=T, FI=float(diff.mean())))
    return out


def bound(d, q, T):
    """``q A_T^2 / ((d - 1)(1 - q))`` with ``A_T = T``; ``2T/d`` for ``q = 1`` (no bagging)."""
    from ppa_dask.stability import feature_stability_bound

    return 2.0 * T / d if q == 1.0 else T**2 * feature_stability_bound(d, q)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    ds = args.n_features or ([10] if args.small else [10, 20])
    T_max = args.max_depth or (5 if args.small else 8)
    B = args.rounds or (100 if args.small else 1000)
    seeds = args.seeds or ([0, 1] if args.small else [0, 1, 2, 3, 4])
    settings = [
        dict(d=d, q=q, seed=seed, rounds=B, T_max=T_max)
        for d in ds
        for q in args.ratios
        for seed in (seeds if q < 1.0 else seeds[:1])  # the non-bagged tree is not random
    ]
    start = time.perf_counter()
    rows = run_settings(args, run_block, settings, (), "dyadic trees")
    seconds = time.perf_counter() - start
    for r in rows:
        r["bound"] = bound(r["d"], r["q"], r["T"])
        r["two_T_over_d"] = 2.0 * r["T"] / r["d"]
    columns = ["d", "q", "seed", "rounds", "T", "FI", "bound", "two_T_over_d"]
    write_csv(rows, os.path.join(args.output, "results.csv"), columns)

    plt = matplotlib_headless()
    fig, axes = plt.subplots(1, len(ds), figsize=(5 * len(ds), 4), squeeze=False)
    for ax, d in zip(axes[0], ds):
        for k, q in enumerate(args.ratios):
            Ts = list(range(1, T_max + 1))
            mean = [np.mean([r["FI"] for r in rows if (r["d"], r["q"], r["T"]) == (d, q, T)])
                    for T in Ts]  # fmt: skip
            color = "k" if q == 1.0 else f"C{k}"
            label = "no bagging (q = 1)" if q == 1.0 else f"q = {q}"
            ax.plot(Ts, mean, "o-", color=color, label=label)
            ax.plot(Ts, [bound(d, q, T) for T in Ts], ":", color=color)
        ax.set_yscale("log")
        ax.set_xlabel("depth T")
        ax.set_ylabel("FI of the path encoding")
        ax.set_title(f"d = {d} (dotted: 2T/d and T^2 q/((d-1)(1-q)))", fontsize=9)
        ax.legend(fontsize=7)
    save_figure(fig, args.output, "tree_depth.png", dpi=90)
    lines = [
        f"B = {B} rounds, seeds {seeds}, wall time {seconds:.0f} s.",
        "",
        markdown_table(rows, columns),
        "",
        "![FI of depth-T trees](tree_depth.png)",
        "",
    ]
    write_grid_report(
        args.output,
        "Depth-T dyadic trees: FI against 2T/d and the bagging bound (section 4.2.2)",
        command_line(__file__, argv),
        lines,
    )
    if args.record:
        write_record(args.record, make_depth_record(args, argv, rows, seeds, seconds))
    return dict(rows=rows)


def make_depth_record(args, argv, rows, seeds, seconds):
    """The reproduction record: one cell per (d, T, series, seed), the series being each q's
    FI, ``2T/d`` and the bound with ``A_T = T``."""
    cells = []
    for r in rows:
        name = "no bagging" if r["q"] == 1.0 else f"q={r['q']}"
        cells.append(dict(d=r["d"], T=r["T"], series=name, seed=r["seed"], value=r["FI"]))
        if r["seed"] == seeds[0]:
            theory = "2T/d" if r["q"] == 1.0 else f"bound q={r['q']}"
            cells.append(dict(d=r["d"], T=r["T"], series=theory, seed=r["seed"],
                              value=r["bound"]))  # fmt: skip
    bagged = [f"q={q}" for q in args.ratios if q < 1.0]
    tables = [
        dict(name="fi", title="Section 4.2.2: FI of a depth-T max-edge dyadic tree's path "
             "encoding, without bagging (against 2T/d) and with feature bagging at ratio q "
             "(B rounds, mean over seeds)", value="value", rows=["d", "T"], column="series",
             over="seed", where=dict(series=["no bagging", "2T/d", *bagged]), digits=4,
             row_headers=["d", "T"]),
        dict(name="bound", title="The bagged FI beside its bound T^2 q / ((d - 1)(1 - q)) "
             "(A_T = T)", value="value", rows=["d", "T"], column="series", over="seed",
             where=dict(series=[s for q in args.ratios if q < 1.0
                                for s in (f"q={q}", f"bound q={q}")]),
             digits=4, row_headers=["d", "T"]),
    ]  # fmt: skip
    figures = [
        dict(name="fi", kind="lines", table="fi", x="T", panel="d", xlabel="depth T",
             ylabel="FI of w_T", title="FI of depth-T dyadic trees: no bagging (2T/d) and "
             "feature bagging", panel_labels={str(d): f"d = {d}" for d in {r["d"] for r in rows}}),
    ]  # fmt: skip
    return make_record(
        "bagging_tree_depth",
        "Feature instability of depth-T dyadic trees with and without feature bagging",
        "Sun et al. 2026, Sec. 4.2.2 (Theorem 4.2.2, Appendix S.3.4)",
        recorded_command(__file__, argv),
        seeds=seeds,
        keys=["d", "T", "series", "seed"],
        cells=cells,
        tables=tables,
        figures=figures,
        reduced=["--n-features", "10", "--seeds", str(seeds[0]), "--ratios", "1,0.2"],
        run_seconds=seconds,
    )


if __name__ == "__main__":
    main()
