"""The bundler's own version, recorded in every manifest so a bundle says what made it.

A constant rather than an importlib.metadata lookup: the lookup scans the installed
distributions, which costs more at start-up than small collects take in all. The package
metadata reads its version from here (pyproject's dynamic version), so there is one source.
"""

from __future__ import annotations

VERSION = "0.1.0"


def bundler_version() -> str:
    return VERSION
