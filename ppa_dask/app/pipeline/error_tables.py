"""Reconstruction-error tables of the evaluate stage: PCA's and PPA's mean squared error for
each number of components, and their ratio (the PCA baseline is :mod:`ppa_dask.app.baseline`).

Rows are ``(k, pca, ppa, percent)`` (:func:`error_rows`), written as plain text
(:func:`format_error_table`, the log's and the demo's), CSV and Markdown.
"""

from __future__ import annotations

import csv

from ppa_dask.utils.tables import pipe_table

__all__ = ["error_rows", "format_error_table", "write_error_csv", "write_error_markdown"]


def _percent_cell(pct):
    """A ratio cell: ``-`` where there is none (k at or past the rank: rounding over rounding)."""
    return "-" if pct is None else f"{pct:.1f}"


def format_error_table(rows):
    """Plain-text table of (k, pca, ppa, percent) rows (``-``: no ratio, see :func:`error_rows`)."""
    header = ("k", "PCA MSE", "PPA MSE", "PPA/PCA %")
    body = [(str(k), f"{pca:.6g}", f"{ppa:.6g}", _percent_cell(pct)) for k, pca, ppa, pct in rows]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(4)]

    def line(cells):
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def write_error_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["k", "pca_mse", "ppa_mse", "ppa_over_pca_percent"])
        for k, pca, ppa, pct in rows:
            # no ratio past the rank: an empty cell (a missing value to CSV readers)
            cell = "" if pct is None else repr(float(pct))
            w.writerow([k, repr(float(pca)), repr(float(ppa)), cell])


def write_error_markdown(path, rows, total_variance, caption):
    table = pipe_table(
        ["k", "PCA MSE", "PPA MSE", "PPA/PCA %"],
        [[str(k), f"{pca:.6g}", f"{ppa:.6g}", _percent_cell(pct)] for k, pca, ppa, pct in rows],
        align="right",
    )
    lines = [
        table,
        "",
        f"Total variance (k = 0): {total_variance:.6g}. {caption}",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def error_rows(pca_errors, ppa_errors, ks, rank=None):
    """``(k, pca, ppa, percent)`` rows of a reconstruction-error table.

    ``percent`` is ``100 * ppa / pca``, or None (shown ``-``) from ``k = rank`` on, where both
    errors are rounding (the data are reconstructed by ``rank`` components: the fitted model's
    ``rank_``), and where PCA's error is zero.

    Examples
    --------
    >>> error_rows([4.0, 2.0, 1e-30], [4.0, 1.0, 2e-31], [1, 2], rank=2)
    [(1, 2.0, 1.0, 50.0), (2, 1e-30, 2e-31, None)]
    """
    rows = []
    for k in ks:
        pca, ppa = float(pca_errors[k]), float(ppa_errors[k])
        past = rank is not None and k >= rank
        rows.append((k, pca, ppa, 100.0 * ppa / pca if pca > 0 and not past else None))
    return rows
