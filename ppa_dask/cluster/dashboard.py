"""A page of the PPA fits on the scheduler's own web server, next to the Dask dashboard.

A PPA fit under a distributed Client publishes one record per fitted step on the scheduler
(event topic ``ppa-fits``, :mod:`ppa_dask.utils.events`). :func:`register_page` adds two routes
to the web server that already serves the scheduler's dashboard (no other server, no other
port):

* ``/ppa``: an HTML page listing the fits running or finished on that scheduler, newest first,
  with a table per fit: for each step the chosen degree, the cross-validation score of every
  candidate degree and the explained variance. It reloads itself every few seconds while it is
  open, so a running fit fills its table step by step.
* ``/ppa/fits.json``: the same as JSON (a list of fits, each with its list of steps).

:func:`open_page` registers them from the client (``Client.run_on_scheduler``) and returns the
page's link; the commands print it beside the dashboard's link. The scheduler must be able to
import ``ppa_dask`` (a remote scheduler in another environment may not): then there is no page
and a one-line note says why.
"""

from __future__ import annotations

import datetime
import html
import json
import urllib.parse
import weakref

from ppa_dask.utils.events import FIT_TOPIC

__all__ = [
    "PAGE_ROUTE",
    "JSON_ROUTE",
    "fits_from_events",
    "render_page",
    "register_page",
    "open_page",
]

#: Path of the page, and of its JSON, below the dashboard's prefix.
PAGE_ROUTE = "ppa"
JSON_ROUTE = "ppa/fits.json"
#: Seconds between the page's reloads.
REFRESH_SECONDS = 2

# the schedulers (in this process) that already serve the page
_registered = weakref.WeakSet()


def fits_from_events(events):
    """The fits described by the step records of a scheduler's ``ppa-fits`` events.

    Parameters
    ----------
    events : iterable of (float, dict)
        ``(timestamp, record)`` pairs, as ``Scheduler.get_events("ppa-fits")`` returns them.

    Returns
    -------
    list of dict
        One per fit, newest first: ``fit``, ``estimator``, ``n_samples``, ``n_features``,
        ``n_steps``, ``candidates``, ``started`` and ``updated`` (timestamps), ``complete``
        (all its steps published) and ``steps`` (the records, in step order; a step published
        twice keeps its last record).

    Examples
    --------
    >>> from ppa_dask.utils.events import step_record
    >>> r = step_record("f1", "PPA()", step=0, n_steps=2, n_samples=5, n_features=3, degree=2,
    ...                 candidates=[1, 2], cv_scores=[0.5, 0.25], variance=0.8, residual=0.4)
    >>> [(f["fit"], len(f["steps"]), f["complete"]) for f in fits_from_events([(1.0, r)])]
    [('f1', 1, False)]
    """
    fits = {}
    for stamp, record in events:
        if not isinstance(record, dict) or "fit" not in record or "step" not in record:
            continue  # not a step record
        fit = fits.get(record["fit"])
        if fit is None:
            fit = fits[record["fit"]] = {
                "fit": str(record["fit"]),
                "started": float(stamp),
                "steps": {},
            }
        for name in ("estimator", "n_samples", "n_features", "n_steps", "candidates"):
            fit[name] = record.get(name)
        fit["updated"] = float(stamp)
        fit["steps"][int(record["step"])] = record
    out = []
    for fit in fits.values():
        fit["steps"] = [fit["steps"][k] for k in sorted(fit["steps"])]
        fit["complete"] = len(fit["steps"]) == fit["n_steps"]
        out.append(fit)
    return sorted(out, key=lambda fit: fit["started"], reverse=True)


def _time(stamp):
    when = datetime.datetime.fromtimestamp(stamp, tz=datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def _number(value):
    return "" if value is None else f"{value:.6g}"


def _fit_section(fit):
    e = html.escape
    steps = fit["steps"]
    candidates = fit.get("candidates") or []
    scored = any(step.get("cv_scores") is not None for step in steps)
    status = (
        f"complete: {len(steps)} steps"
        if fit["complete"]
        else f"in progress: step {len(steps)} of {fit['n_steps']}"
    )
    head = [
        "<th>step</th>",
        "<th>degree</th>",
        *(f"<th>CV score, degree {e(str(g))}</th>" for g in candidates if scored),
        "<th>explained variance</th>",
        "<th>residual variance</th>",
    ]
    rows = []
    for step in steps:
        scores = step.get("cv_scores") if scored else None
        cells = [
            f'<td class="step">{e(str(step["step"]))}</td>',
            f'<td class="degree">{e(str(step["degree"]))}</td>',
        ]
        if scored:
            for g, score in zip(candidates, scores or [None] * len(candidates)):
                text = e(_number(score))
                if g == step["degree"]:  # the chosen degree's score, marked
                    cells.append(f'<td class="cv-score chosen"><b>{text}</b></td>')
                else:
                    cells.append(f'<td class="cv-score">{text}</td>')
        cells.append(
            f'<td class="explained-variance">{e(_number(step["explained_variance"]))}</td>'
        )
        cells.append(f'<td class="residual-variance">{e(_number(step["residual_variance"]))}</td>')
        rows.append('<tr class="ppa-step">' + "".join(cells) + "</tr>")
    return "\n".join(
        [
            f'<section class="ppa-fit" data-fit="{e(fit["fit"])}" '
            f'data-complete="{str(fit["complete"]).lower()}">',
            f"<h2>{e(str(fit['estimator']))}</h2>",
            f'<p class="status">{e(status)}; {e(str(fit["n_samples"]))} samples x '
            f"{e(str(fit['n_features']))} features; started {e(_time(fit['started']))}, "
            f"last step {e(_time(fit['updated']))}; fit id {e(fit['fit'])}</p>",
            '<table class="ppa-steps">',
            "<thead><tr>" + "".join(head) + "</tr></thead>",
            "<tbody>",
            *rows,
            "</tbody></table>",
            "</section>",
        ]
    )


def render_page(fits, prefix="/", refresh=REFRESH_SECONDS):
    """The HTML page of ``fits`` (:func:`fits_from_events`); every value shown is escaped.

    Parameters
    ----------
    fits : list of dict
    prefix : str
        The dashboard's path prefix: the page links to ``<prefix>status`` (the dashboard) and
        to ``<prefix>ppa/fits.json``.
    refresh : int or None
        Seconds between reloads of the page; None: no reloads.

    Returns
    -------
    str

    Examples
    --------
    >>> page = render_page([])
    >>> "No PPA fit has run" in page and "<table" not in page
    True
    """
    e = html.escape
    reload = "" if refresh is None else f'<meta http-equiv="refresh" content="{int(refresh)}">'
    body = (
        [_fit_section(fit) for fit in fits]
        if fits
        else ['<p class="empty">No PPA fit has run on this scheduler yet.</p>']
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            reload,
            "<title>PPA fits</title>",
            "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
            "td,th{border:1px solid #bbb;padding:0.2em 0.6em;text-align:right}"
            "th{background:#eee}td.chosen{background:#dfd}.status{color:#444}</style>",
            "</head><body>",
            f'<h1>PPA fits on this scheduler</h1><p><a href="{e(prefix)}status">Dask dashboard'
            f'</a> · <a href="{e(prefix + JSON_ROUTE)}">JSON</a> · newest first; '
            "per step: the chosen degree, the cross-validation score (mean squared residual of "
            "the held-out folds) of each candidate degree, the explained variance</p>",
            *body,
            "</body></html>",
        ]
    )


def _handlers():
    """The two tornado handlers (imported on the scheduler only)."""
    from distributed.http.utils import RequestHandler

    class FitsPage(RequestHandler):
        def get(self):
            fits = fits_from_events(self.server.get_events(FIT_TOPIC))
            self.set_header("Content-Type", "text/html; charset=UTF-8")
            self.set_header("Cache-Control", "no-store")
            self.write(render_page(fits, prefix=self.extra["prefix"]))

    class FitsJSON(RequestHandler):
        def get(self):
            fits = fits_from_events(self.server.get_events(FIT_TOPIC))
            self.set_header("Content-Type", "application/json")
            self.set_header("Cache-Control", "no-store")
            self.write(json.dumps(fits))

    return FitsPage, FitsJSON


def register_page(dask_scheduler, prefix="/"):
    """Serve :data:`PAGE_ROUTE` and :data:`JSON_ROUTE` from ``dask_scheduler``'s web server.

    Run on the scheduler (``client.run_on_scheduler(register_page, prefix)``); registering twice
    is harmless. Returns the page's path.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    prefix : str
        The dashboard's path prefix (``/`` unless the scheduler was started with one).

    Returns
    -------
    str
        The page's path, ``/ppa`` by default.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as c:
    ...     with Client(c) as client:
    ...         client.run_on_scheduler(register_page)
    '/ppa'
    """
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    if dask_scheduler not in _registered:
        page, fits_json = _handlers()
        server = {"dask_server": dask_scheduler, "extra": {"prefix": prefix}}
        dask_scheduler.http_application.add_handlers(
            r".*",
            [
                (prefix + JSON_ROUTE, fits_json, server),
                (prefix + PAGE_ROUTE + "/?", page, server),
            ],
        )
        _registered.add(dask_scheduler)
    return prefix + PAGE_ROUTE


def open_page(client, dashboard):
    """Register the page on ``client``'s scheduler; returns ``(link, note)``.

    Parameters
    ----------
    client : distributed.Client
    dashboard : str or None
        The scheduler's dashboard link (``.../status``); None when it runs no dashboard.

    Returns
    -------
    (str or None, str or None)
        The page's URL, or None with a one-line note saying why there is none (no dashboard,
        or a scheduler that cannot import ``ppa_dask``).

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as c:
    ...     with Client(c) as client:
    ...         link, note = open_page(client, client.dashboard_link)
    >>> link.endswith("/ppa"), note
    (True, None)
    """
    if not dashboard:
        return None, "no PPA fits page: the scheduler runs no dashboard"
    parts = urllib.parse.urlsplit(dashboard)
    prefix = parts.path[: -len("status")] if parts.path.endswith("status") else parts.path
    try:
        path = client.run_on_scheduler(register_page, prefix=prefix or "/")
    except Exception as exc:  # noqa: BLE001 - the page is optional: say why, go on
        # most often a scheduler whose environment has no ppa_dask
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return None, (
            "no PPA fits page: registering it on the scheduler failed "
            f"({type(exc).__name__}{': ' + why if why else ''}); is ppa_dask installed there?"
        )
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", "")), None
