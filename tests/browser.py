"""Headless Chromium for the tests that look at pages as a person would (the docs site, the
dashboard's PPA fits page): where the browser is, and the flags it runs with here."""

import shutil

from system_programs import skip_missing

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# a closed network: no background connections, no first-run pages, no sandbox as root
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# why a test skips without one (the wording tests/system_programs.py reads)
SKIP_HINT = "no Chromium or Chrome binary on PATH (Debian: apt-get install chromium)"


def find_browser():
    """Path of the first browser of :data:`BROWSERS` on the PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def require_browser():
    """Path of the browser, or skip the calling test (the one skip the suite allows)."""
    path = find_browser()
    if path is None:
        skip_missing("chromium", SKIP_HINT)
    return path
