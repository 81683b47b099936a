"""The library's version (one place: pyproject reads it from here)."""

VERSION = "0.1.0"
