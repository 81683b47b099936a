"""Shared pieces of the VSK experiment pipelines (vsk_toy, vsk_breast_cancer, vsk_covid_icu).

Data loading (the bundled loaders of :mod:`ppa_dask.datasets`), the paper's SVM grids, seeds
per task, fanning tasks out on a Dask cluster, and writing CSV + markdown tables.
"""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:  # run from a checkout without installing
    sys.path.insert(1, ROOT)

#: The paper's SVM grids (section 6.1): C = 2^-6 .. 2^5, gamma = 10^-6 .. 10^1.
C_GRID = tuple(2.0**k for k in range(-6, 6))
GAMMA_GRID = tuple(10.0**k for k in range(-6, 2))


# -------------------------------------------------------------------------------------------
# data
# -------------------------------------------------------------------------------------------


def load_breast_cancer():
    """The original Wisconsin breast cancer data: ``X`` (683, 9) float, ``y`` labels 2/4."""
    from ppa_dask.datasets import load_breast_cancer_wisconsin

    X, y = load_breast_cancer_wisconsin()
    return np.asarray(X, dtype=np.float64), np.asarray(y)


#: The series of the ICU experiment: the target and the auxiliary series of psi.
COVID_COLUMNS = ("terapia_intensiva", "totale_casi", "nuovi_positivi", "totale_positivi")


def load_covid(start="2020-02-24", end="2020-04-26"):
    """The Italian national series between two dates (inclusive) as a dict of numpy arrays.

    Keys: ``date`` (``datetime64[D]``) and :data:`COVID_COLUMNS` (float): ICU patients
    (``terapia_intensiva``), total cases, daily new cases, current positives.
    """
    from ppa_dask.datasets import load_covid_italy

    data = load_covid_italy(start=start, end=end)
    return {k: data[k] for k in ("date",) + COVID_COLUMNS}


# -------------------------------------------------------------------------------------------
# seeds, Dask fan-out
# -------------------------------------------------------------------------------------------


def task_seed(seed, *keys):
    """A 32-bit seed for one task, from the run's seed and the task's keys (not its worker)."""
    ss = np.random.SeedSequence([int(seed)] + [int(k) for k in keys])
    return int(ss.generate_state(1)[0])


@contextlib.contextmanager
def cluster(client=None, n_workers=2):
    """Yield ``client``, or a LocalCluster client started (and closed) here."""
    if client is not None:
        yield client
        return
    from ppa_dask.app.cluster import local_client

    with local_client(n_workers=n_workers, dashboard_address="127.0.0.1:0") as started:
        yield started


def fan_out(client, func, tasks):
    """Run ``func(**kwargs)`` for each kwargs dict in ``tasks`` as Dask tasks; results in order.

    The pipeline scripts are not importable on the workers, so their functions travel by value.
    """
    import cloudpickle

    for module_name in {func.__module__, __name__}:
        module = sys.modules.get(module_name)
        if module is not None and not module_name.startswith("ppa_dask"):
            with contextlib.suppress(ValueError):
                cloudpickle.register_pickle_by_value(module)
    futures = [client.submit(func, pure=False, **kw) for kw in tasks]
    return client.gather(futures)


# -------------------------------------------------------------------------------------------
# model selection and tables
# -------------------------------------------------------------------------------------------


def svm_grid(kernel, prefix="", C_grid=C_GRID, gamma_grid=GAMMA_GRID):
    """The paper's parameter grid for an SVC (``prefix`` e.g. ``"svc__"`` inside a Pipeline)."""
    grid = {prefix + "C": list(C_grid)}
    if kernel == "rbf":
        grid[prefix + "gamma"] = list(gamma_grid)
    return grid


def tuned(estimator, grid, cv=5):
    """GridSearchCV by weighted F1 (the paper's score), no refit warnings on one-class folds."""
    from sklearn.model_selection import GridSearchCV

    return GridSearchCV(
        estimator, grid, cv=cv, scoring="f1_weighted", n_jobs=1, error_score="raise"
    )


def markdown_table(df, floatfmt="{:.3f}"):
    """A pipe table of a DataFrame (no third-party formatter needed)."""
    cols = [str(c) for c in df.columns]

    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return "nan" if np.isnan(v) else floatfmt.format(v)
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_table(df, output, name, title=None, floatfmt="{:.3f}", note=None):
    """Write ``name.csv`` and ``name.md`` into ``output``; return the markdown text."""
    os.makedirs(output, exist_ok=True)
    df.to_csv(os.path.join(output, name + ".csv"), index=False)
    text = (f"## {title}\n\n" if title else "") + markdown_table(df, floatfmt)
    if note:
        text += "\n" + note.strip() + "\n"
    with open(os.path.join(output, name + ".md"), "w") as fh:
        fh.write(text)
    return text


def mean_std(values):
    """``"mean ± std"`` of a sequence (std 0 for a single value)."""
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.3f} ± {values.std(ddof=1) if values.size > 1 else 0.0:.3f}"
