"""The tasks of the paper scripts under ``pipelines/``: the cluster, the fan-out, resumable grids.

:func:`cluster` gives a script its Dask client (a given client, a running scheduler, a local
cluster or none), :func:`run_fanout` and :func:`fan_out` run independent tasks in order
through :func:`ppa_dask.utils.fanout.run_tasks` (which does the submitting, scattering,
retries and progress), and :func:`run_grid` runs a grid of settings resumably: one part file
per finished setting under ``<output>/parts``, keyed by :func:`setting_key` (or rows finished
in an earlier run, passed in as ``known``);
:func:`run_settings` is that grid on the cluster and folder of a stability script's options.
Independent repetitions get their seed from the base seed and their own keys
(:func:`ppa_dask.utils.seeds.task_seed`) and come back in task order, so results do not depend
on the number of workers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys

import numpy as np

from ppa_dask.cluster import dashboard_link, local_client, open_client
from ppa_dask.utils.fanout import run_tasks

__all__ = [
    "cluster",
    "fan_out",
    "run_fanout",
    "run_grid",
    "run_settings",
    "setting_key",
]


@contextlib.contextmanager
def cluster(workers=2, scheduler=None, client=None):
    """The run's Dask client: ``client`` itself, one connected to ``scheduler``, a local
    cluster of ``workers`` one-thread processes (closed on exit), or None (``workers=0``: in
    process).

    The scheduler and the local cluster are :func:`ppa_dask.cluster.open_client`'s (the
    command's opener): a scheduler is probed within its connect timeout before a Client is
    made, so a wrong address fails in seconds with one line naming it.

    Examples
    --------
    >>> with cluster(workers=0) as client:
    ...     client is None
    True
    """
    if client is not None:
        yield client
    elif not scheduler and workers == 0:
        # in process, Dask's configuration untouched: the tasks fan out through run_tasks,
        # which gives them one BLAS thread itself
        yield None
    else:
        with open_client(scheduler=scheduler or None, n_workers=workers) as opened:
            yield opened


def _ship_by_value(func):
    """Workers may not be able to import a pipeline script: send its code with the task."""
    import cloudpickle

    for name in {func.__module__, __name__}:
        module = sys.modules.get(name)
        if module is not None and not name.startswith(("ppa_dask", "sklearn", "__main__")):
            with contextlib.suppress(ValueError):  # already registered
                cloudpickle.register_pickle_by_value(module)


def _in_order(func, items, shared, client, label, verbose):
    if client is not None:
        _ship_by_value(func)
    results = [None] * len(items)
    for position, result in run_tasks(
        func, items, shared, client=client, label=label, verbose=int(verbose)
    ):
        results[position] = result
    return results


def run_fanout(func, specs, workers, label="tasks", verbose=True):
    """Run ``func(spec)`` for every spec on a local cluster of ``workers`` processes (0: in
    process); results in spec order.

    Examples
    --------
    >>> run_fanout(abs, [-1, 2, -3], workers=0, verbose=False)
    [1, 2, 3]
    """
    specs = list(specs)
    if workers == 0:
        return _in_order(func, specs, (), None, label, verbose)
    with local_client(n_workers=workers) as client:
        if verbose:
            print(
                f"{label}: {len(specs)} tasks on {workers} workers, dashboard "
                f"{dashboard_link(client)}",
                flush=True,
            )
        return _in_order(func, specs, (), client, label, verbose)


def _call_with_kwargs(item):
    func, kwargs = item
    return func(**kwargs)


def fan_out(client, func, tasks):
    """Run ``func(**kwargs)`` for each kwargs dict in ``tasks`` on ``client`` (None: in
    process); results in task order.

    Examples
    --------
    >>> fan_out(None, pow, [{"base": 2, "exp": 3}, {"base": 3, "exp": 2}])
    [8, 9]
    """
    if client is not None:
        _ship_by_value(func)
    return _in_order(_call_with_kwargs, [(func, kw) for kw in tasks], (), client, "tasks", 0)


def setting_key(setting, context=None):
    """Key of a setting's part file: the setting and the run-wide ``context`` (data sizes,
    seed, ...), so parts of a run with other arguments are never mistaken for this one's.

    Examples
    --------
    >>> setting_key({"q": 1}) == setting_key({"q": 1}) != setting_key({"q": 2})
    True
    """
    text = json.dumps([setting, context or {}], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def run_grid(func, settings, shared, output, client, label, quiet=False, context=None, known=None):
    """Rows of ``func(setting, *shared)`` for every setting: earlier parts reused, the rest run
    as tasks and each written to ``<output>/parts/<key>.json`` as it finishes. ``context``
    holds whatever else determines the results (the arguments behind ``shared``). ``known``
    maps keys (:func:`setting_key`) to rows finished in an earlier run whose parts are gone
    (read back from its saved record): a setting without a part takes those rows as if read
    from a part, and they are not written to ``parts/``.

    Examples
    --------
    >>> import tempfile
    >>> rows = run_grid(lambda s: {"x": 2 * s}, [1, 2], (), tempfile.mkdtemp(), None, "grid", True)
    >>> [row["x"] for row in rows]
    [2, 4]
    >>> known = {setting_key(2): [{"x": -1}]}
    >>> [r["x"] for r in run_grid(lambda s: {"x": 2 * s}, [1, 2], (), tempfile.mkdtemp(), None,
    ...                           "grid", True, known=known)]
    [2, -1]
    """
    parts = os.path.join(output, "parts")
    os.makedirs(parts, exist_ok=True)
    rows, todo = {}, []
    for setting in settings:
        key = setting_key(setting, context)
        path = os.path.join(parts, f"{key}.json")
        if os.path.exists(path):
            with open(path) as f:
                rows[key] = json.load(f)
        elif known and key in known:
            rows[key] = [dict(r, _key=key) for r in known[key]]
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


def run_settings(args, func, settings, shared, label, context=None, known=None):
    """:func:`run_grid` as the stability scripts run it: on the cluster of their options
    (``args.workers``, ``args.scheduler``), parts under ``args.output``, progress unless
    ``args.quiet``; ``known`` as :func:`run_grid`'s.

    Examples
    --------
    >>> import argparse, tempfile
    >>> args = argparse.Namespace(workers=0, scheduler=None, output=tempfile.mkdtemp(), quiet=True)
    >>> [row["x"] for row in run_settings(args, lambda s, k: {"x": k * s}, [1, 2], (3,), "grid")]
    [3, 6]
    """
    with cluster(workers=args.workers, scheduler=args.scheduler) as client:
        return run_grid(
            func,
            settings,
            shared,
            args.output,
            client,
            label,
            args.quiet,
            context=context,
            known=known,
        )


def _plain(value):
    """JSON-ready values of a task's result: numpy scalars unwrapped, NaN as null."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    return value
