"""Shared plumbing of the feature-bagging stability pipelines (pipelines/stability_*.py).

Every pipeline is one command writing ``results.csv``, ``report.md`` and PNG figures to its
output folder. Its grid of settings is fanned out as Dask tasks on a local cluster
(``--workers N``, default 2; ``--workers 0`` runs in process, ``--scheduler ADDRESS`` joins a
running cluster), and every finished setting is written at once to ``<output>/parts/`` as one
JSON file, so an interrupted run picks up where it stopped when started again with the same
arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, ROOT)

from ppa_dask.utils.fanout import run_tasks  # noqa: E402

DATASETS = ("diabetes", "abalone", "cpu_act", "house_8l")


def base_parser(description, default_output):
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--output", default=default_output, help=f"output folder (default: {default_output})"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="local Dask workers, one thread each (0: run in this process)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        help="address of a running Dask scheduler to use instead of a local cluster",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument(
        "--small", action="store_true", help="a small grid that finishes in a minute or two"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


@contextlib.contextmanager
def cluster(args):
    """The run's Dask client (local cluster, a given scheduler) or None (in process)."""
    if args.scheduler:
        from distributed import Client

        with Client(args.scheduler) as client:
            yield client
    elif args.workers > 0:
        from ppa_dask.app.cluster import local_client

        with local_client(n_workers=args.workers) as client:
            yield client
    else:
        yield None


def _ship_by_value(func):
    """Workers may not be able to import a pipeline module: send its code with the task."""
    import cloudpickle

    for name in {func.__module__, __name__}:
        module = sys.modules.get(name)
        if module is not None and not name.startswith(("ppa_dask", "sklearn", "__main__")):
            cloudpickle.register_pickle_by_value(module)


def setting_key(setting, context=None):
    """Key of a setting's part file: the setting and the run-wide ``context`` (data sizes,
    seed, ...), so parts of a run with other arguments are never mistaken for this one's."""
    text = json.dumps([setting, context or {}], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def run_grid(func, settings, shared, output, client, label, quiet=False, context=None):
    """Rows of ``func(setting, *shared)`` for every setting: earlier parts reused, the rest run
    as tasks and each written to ``<output>/parts/<key>.json`` as it finishes. ``context``
    holds whatever else determines the results (the arguments behind ``shared``)."""
    parts = os.path.join(output, "parts")
    os.makedirs(parts, exist_ok=True)
    rows, todo = {}, []
    for setting in settings:
        key = setting_key(setting, context)
        path = os.path.join(parts, f"{key}.json")
        if os.path.exists(path):
            with open(path) as f:
                rows[key] = json.load(f)
        else:
            todo.append(setting)
    if todo and client is not None:
        _ship_by_value(func)
    for k, result in run_tasks(
        func, todo, shared, client=client, label=label, verbose=0 if quiet else 1
    ):
        key = setting_key(todo[k], context)
        result = result if isinstance(result, list) else [result]
        result = [dict(r, _key=key) for r in result]
        tmp = os.path.join(parts, f"{key}.json.tmp")
        with open(tmp, "w") as f:
            json.dump(_plain(result), f)
        os.replace(tmp, os.path.join(parts, f"{key}.json"))
        rows[key] = result
    out = []
    for setting in settings:
        out.extend(rows[setting_key(setting, context)])
    return out


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    return value


def write_csv(rows, path, columns=None):
    columns = columns or sorted({k for r in rows for k in r if not k.startswith("_")})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    return columns


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def fmt(value, digits=4):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}"
    return str(value)


def markdown_table(rows, columns, headers=None):
    headers = headers or columns
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def command_line(argv):
    import shlex

    script = (
        os.path.relpath(sys.modules["__main__"].__file__)
        if hasattr(sys.modules.get("__main__"), "__file__")
        else "pipelines/..."
    )
    return "python " + " ".join(shlex.quote(a) for a in [script, *argv])


def load_dataset(name, n_samples=None, seed=0, standardize=False):
    """``(X, y)`` of a regression data set of the paper, optionally row-subsampled."""
    from ppa_dask import datasets

    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
    elif name == "abalone":
        X, y = datasets.load_abalone(sex="codes")
    elif name == "cpu_act":
        X, y = datasets.load_cpu_act()
    elif name == "house_8l":
        X, y = datasets.load_house_8l()
    else:
        raise ValueError(f"unknown data set {name!r}; choose from {DATASETS}")
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if n_samples is not None and n_samples < X.shape[0]:
        rows = np.sort(
            np.random.default_rng([seed, 17]).choice(X.shape[0], n_samples, replace=False)
        )
        X, y = X[rows], y[rows]
    if standardize:
        sd = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return X, y


def save_figure(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)


def matplotlib_headless():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
