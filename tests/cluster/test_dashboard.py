"""The cluster as a person watching it sees the algorithm: fan-out tasks named by what they
compute, and the PPA fits page served by the scheduler's own web server (fetched over HTTP and
rendered in headless Chromium)."""

import html
import json
import re
import subprocess
import time
import urllib.request
from html.parser import HTMLParser

import numpy as np
import pytest
from browser import FLAGS, require_browser
from sklearn.tree import DecisionTreeRegressor

from ppa_dask import PPA
from ppa_dask.cluster.dashboard import fits_from_events, open_page, render_page
from ppa_dask.ensemble import FeatureBaggingRegressor
from ppa_dask.stability import feature_instability, instance_instability
from ppa_dask.utils.events import FIT_TOPIC, step_record

# starts a cluster and opens its dashboard page in a headless browser
pytestmark = [pytest.mark.cluster, pytest.mark.slow]


#: Bound of every HTTP request and browser run (a hung server or browser fails the test).
TIMEOUT_S = 60
RECORD_WAIT_S = 10  # a step record reaching the scheduler


@pytest.fixture
def client():
    """A small cluster in this process, with a dashboard on the loopback interface."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def test_fanout_tasks_are_named_by_what_they_compute(client):
    from distributed import get_task_stream
    from distributed.utils import key_split

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    model = FeatureBaggingRegressor(
        DecisionTreeRegressor(max_depth=2), n_estimators=3, max_features=0.5, random_state=0
    )
    # the keys of the tasks the scheduler ran, as its dashboard's task stream shows them
    with get_task_stream(client) as stream:
        model.fit(X, y)
        feature_instability(model, X, y, features=[3])
        instance_instability(model, X, y, instances=[5], random_state=0)
    keys = [str(entry["key"]) for entry in stream.data]
    members = sorted(k for k in keys if k.startswith("bag-member-"))
    # the member's number, then one token per fit: unique per run, grouped by kind
    assert [re.fullmatch(r"bag-member-(\d{4})-[0-9a-f]{32}", k).group(1) for k in members] == [
        "0000",
        "0001",
        "0002",
    ]
    assert {key_split(k) for k in members} == {"bag-member"}
    fi = [k for k in keys if k.startswith("fi-refit-")]
    ii = [k for k in keys if k.startswith("ii-refit-")]
    assert fi and all(re.fullmatch(r"fi-refit-feature-3-[0-9a-f]{32}", k) for k in fi)
    assert ii and all(re.fullmatch(r"ii-refit-instance-5-[0-9a-f]{32}", k) for k in ii)
    assert {key_split(k) for k in fi} == {"fi-refit-feature"}
    assert {key_split(k) for k in ii} == {"ii-refit-instance"}


class _StepTable(HTMLParser):
    """The cells of each fit's step table, by class: [[{class: text}, ...], ...] per fit."""

    def __init__(self):
        super().__init__()
        self.fits, self._cell, self._text = [], None, ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "section" and "ppa-fit" in classes:
            self.fits.append([])
        elif tag == "tr" and "ppa-step" in classes:
            self.fits[-1].append({})
        elif tag == "td":
            self._cell, self._text = classes[0], ""

    def handle_data(self, data):
        if self._cell is not None:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            row = self.fits[-1][-1]
            row.setdefault(self._cell, []).append(self._text.strip())
            self._cell = None


def _tables(page):
    parser = _StepTable()
    parser.feed(page)
    return parser.fits


def _get(url):
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        assert response.status == 200
        return response.read().decode("utf-8")


def _check_table(rows, model):
    """The page's step table is the fitted model's: a row per step, its degree and explained
    variance, and the chosen degree's score the smallest of the step's CV scores."""
    assert len(rows) == len(model.degrees_)
    assert [int(r["degree"][0]) for r in rows] == [int(g) for g in model.degrees_]
    shown = [float(r["explained-variance"][0]) for r in rows]
    np.testing.assert_allclose(shown, model.explained_variance_[: len(rows)], rtol=1e-5)
    for row, scores in zip(rows, model.cv_scores_):
        np.testing.assert_allclose([float(s) for s in row["cv-score"]], scores, rtol=1e-5)


def test_fits_page_over_http_and_in_chromium(client, tmp_path):
    link, note = open_page(client, client.dashboard_link)
    assert note is None and link.endswith("/ppa")
    rng = np.random.default_rng(1)
    t = rng.uniform(-1, 1, size=400)
    X = np.column_stack([t, t**2, 0.3 * t**3]) + 0.02 * rng.normal(size=(400, 3))
    model = PPA(degree=[1, 2, 3], cv=2, random_state=0).fit(X)

    page = _get(link)
    (rows,) = _tables(page)
    _check_table(rows, model)
    assert "complete: 2 steps" in page
    fits = json.loads(_get(link + "/fits.json"))
    assert [s["degree"] for s in fits[0]["steps"]] == [int(g) for g in model.degrees_]

    chromium = require_browser()
    flags = [chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "page.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,800", link],
        check=True,
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = subprocess.run(
        [*flags, "--dump-dom", link], check=True, capture_output=True, timeout=TIMEOUT_S
    ).stdout.decode("utf-8")
    (rendered,) = _tables(dom)
    _check_table(rendered, model)


def test_a_fit_in_progress_shows_its_steps_so_far(client):
    link, _ = open_page(client, client.dashboard_link)
    X = np.random.default_rng(2).normal(size=(300, 5)) * [3.0, 2.0, 1.5, 1.0, 0.5]
    seen = []

    def progress(k, n_steps):
        # the page between two steps: the steps fitted so far, the fit not complete. A step's
        # record goes out while the fit goes on (it does not wait for the scheduler), so the
        # page may lag a moment behind: wait, boundedly, for step k's row
        deadline = time.monotonic() + RECORD_WAIT_S
        while True:
            page = _get(link)
            (rows,) = _tables(page) or ([],)
            if len(rows) >= k or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        seen.append((k, len(rows), "in progress" in page))

    model = PPA(degree=[1, 2], cv=2).fit(X, progress=progress)
    n = len(model.degrees_)
    assert [k for k, _, _ in seen] == list(range(1, n + 1))
    assert [rows for _, rows, _ in seen] == list(range(1, n + 1))
    assert [running for _, _, running in seen] == [True] * (n - 1) + [False]


def test_no_client_publishes_nothing():
    # a cluster whose Client is not the default one: a fit computes in this process and logs
    # nothing on that scheduler; the same fit with the Client as default logs its steps
    from distributed import Client, LocalCluster

    X = np.random.default_rng(3).normal(size=(100, 3))
    with (
        LocalCluster(
            n_workers=0,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        PPA(degree=[1, 2], cv=2).fit(X)
        assert len(c.get_events(FIT_TOPIC)) == 0
        with c.as_current():
            model = PPA(degree=[1, 2], cv=2).fit(X)
        assert len(c.get_events(FIT_TOPIC)) == len(model.degrees_)


def test_page_escapes_what_it_shows():
    nasty = '<script>alert("x")</script>'
    record = step_record(
        nasty, nasty, step=0, n_steps=1, n_samples=10, n_features=2, degree=2,
        candidates=[1, 2], cv_scores=[0.5, 0.25], variance=1.0, residual=0.0,
    )  # fmt: skip
    page = render_page(fits_from_events([(0.0, record)]), prefix='/"><i>')
    assert "<script>" not in page and '"><i>' not in page and "<i>" not in page
    assert html.escape(nasty) in page and html.escape('/"><i>') in page
