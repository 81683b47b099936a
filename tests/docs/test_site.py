"""The documentation site as a reader sees it: pages rendered in headless Chromium.

``docs/check_site.py`` checks the built HTML as files (every gallery page has its figures, the API
pages carry the live signatures). This test opens the home page, the ``PPA`` API page and a
gallery page in a real browser, saves a screenshot of each under the test's temporary folder and
reads the DOM the browser rendered: the gallery images are loaded (the browser reports their
natural size) and the signature shows the estimator's parameters.

The site is the one CI builds (``docs/_build/html``, built before the tests); without it the test
builds the site itself into its temporary folder (the gallery runs: a few minutes).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import paths
import pytest
from browser import FLAGS, require_browser
from PIL import Image

import ppa_dask

# builds the Sphinx site and looks at it in a headless browser
pytestmark = pytest.mark.slow


ROOT = paths.ROOT
# the built site: CI's, or another folder named by PPA_DASK_SITE
BUILT = Path(os.environ.get("PPA_DASK_SITE", ROOT / "docs" / "_build" / "html"))
# beside the shared flags: pages opened from files, screenshots without scrollbars
PAGE_FLAGS = ("--hide-scrollbars", "--allow-file-access-from-files")
# a script run in the page after load: it writes the facts into the DOM, which --dump-dom prints
PROBE = """
<script>
window.addEventListener('load', () => {
  const facts = [...document.images].map(i => i.getAttribute('src') + ' ' + i.naturalWidth);
  const pre = document.createElement('pre');
  pre.id = 'probe-images';
  pre.textContent = facts.join('\\n');
  document.body.appendChild(pre);
  // every code block: how wide its text is, how wide its box is, and whether the box ends
  // inside its container and inside the window
  const blocks = [...document.querySelectorAll('div.highlight pre')].map(b => {
    const box = b.getBoundingClientRect();
    const column = b.closest('article, [role=main], .body, body').getBoundingClientRect();
    return [b.scrollWidth, b.clientWidth, Math.round(box.right), Math.round(column.right),
            document.documentElement.clientWidth].join(' ');
  });
  const code = document.createElement('pre');
  code.id = 'probe-code';
  code.textContent = blocks.join('\\n');
  document.body.appendChild(code);
});
</script>
"""


def _site_is_current(site):
    index = site / "index.html"
    if not index.exists() or not (site / "auto_examples").is_dir():
        return False
    built = index.stat().st_mtime
    sources = [*ROOT.joinpath("docs").glob("**/*.md"), *ROOT.joinpath("examples").glob("*.py")]
    return all(p.stat().st_mtime <= built for p in sources if "_build" not in p.parts)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if _site_is_current(BUILT):
        return BUILT
    out = tmp_path_factory.mktemp("site") / "html"
    cmd = [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(ROOT / "docs"), str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def browser():
    return require_browser()


def _render(browser, page, tmp_path, name):
    """Screenshot and rendered DOM of ``page`` (a copy with the probe script beside it)."""
    probed = page.with_name(f".probe-{name}-{page.name}")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    try:
        profile = tmp_path / f"profile-{name}"
        common = [
            browser,
            *FLAGS,
            *PAGE_FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1280,1000",
        ]
        shot = tmp_path / f"{name}.png"
        subprocess.run(
            [*common, f"--screenshot={shot}", probed.as_uri()],
            capture_output=True,
            timeout=120,
            check=True,
        )
        dom = subprocess.run(
            [*common, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    finally:
        probed.unlink()
    return shot, dom


def _not_blank(png):
    pixels = np.asarray(Image.open(png).convert("L"), dtype=float)
    assert pixels.shape == (1000, 1280)
    # a page with text and figures has dark and light pixels; a blank or error page does not
    assert pixels.std() > 10, f"{png} looks blank"


def _loaded_images(dom):
    probe = re.search(r'<pre id="probe-images"[^>]*>(.*?)</pre>', dom, re.S)
    assert probe, "the probe script did not run in the page"
    pairs = [line.rsplit(" ", 1) for line in probe.group(1).strip().splitlines() if line]
    return {src: int(width) for src, width in pairs}


def test_home_page_renders(site, browser, tmp_path):
    shot, dom = _render(browser, site / "index.html", tmp_path, "home")
    _not_blank(shot)
    assert "ppa-dask" in dom and "User guide" in dom
    for link in ("api.html", "auto_examples/index.html"):
        assert f'href="{link}' in dom.replace("./", ""), link


def _code_blocks(dom):
    probe = re.search(r'<pre id="probe-code"[^>]*>(.*?)</pre>', dom, re.S)
    assert probe, "the probe script did not run in the page"
    return [tuple(map(int, line.split())) for line in probe.group(1).strip().splitlines()]


def test_home_page_code_blocks_fit_their_column(site, browser, tmp_path):
    # at the default window width (1280 px) no code block scrolls sideways or runs past the
    # page's content column or the window
    _, dom = _render(browser, site / "index.html", tmp_path, "home-code")
    blocks = _code_blocks(dom)
    assert len(blocks) >= 2, blocks  # the set-up and the first fit
    for text, box, right, column, window in blocks:
        assert text <= box, f"a code block's text is {text} px wide in a {box} px box"
        assert right <= column <= window, (right, column, window)


def test_api_page_shows_the_live_signature(site, browser, tmp_path):
    shot, dom = _render(browser, site / "generated" / "ppa_dask.PPA.html", tmp_path, "api")
    _not_blank(shot)
    assert 'id="ppa_dask.PPA"' in dom
    signature = dom[dom.index('id="ppa_dask.PPA"') :]
    signature = re.sub(r"<[^>]+>", "", signature[: signature.index("</dt>")])
    names = list(inspect.signature(ppa_dask.PPA).parameters)
    positions = [signature.find(name) for name in names]
    assert all(p >= 0 for p in positions), (names, signature)
    assert positions == sorted(positions), "parameters out of order"


def test_gallery_page_shows_its_figures(site, browser, tmp_path):
    page = site / "auto_examples" / "plot_helix_curvature.html"
    shot, dom = _render(browser, page, tmp_path, "gallery")
    _not_blank(shot)
    images = _loaded_images(dom)
    figures = {src: w for src, w in images.items() if "sphx_glr_plot_helix_curvature" in src}
    assert figures, images
    # every figure of the example was decoded by the browser (a broken image has width 0)
    assert all(width > 100 for width in figures.values()), figures


def test_the_site_checker_passes(site):
    spec = importlib.util.spec_from_file_location("check_site", ROOT / "docs" / "check_site.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    assert checker.main([os.fspath(site)]) == 0
