"""Where things are, for tests in any folder of tests/: the checkout, the tests, their data."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
PIPELINES = ROOT / "pipelines"
ERRORS_PAGE = ROOT / "docs" / "guide" / "errors.md"
