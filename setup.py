"""The package list, found rather than written: every package under bundler/, and the
templates, which live at the top of the repository (templates/) and install as
`bundler.templates`. pyproject.toml holds everything else, the mapping of templates/ included.

Why here and not in pyproject.toml's `[tool.setuptools.packages.find]`: `find` only names
packages whose folders sit where their names say (bundler/templates/ for `bundler.templates`),
so it never names this one, and pyproject.toml takes `packages` either as a list or as `find`,
not both. A hand-written list missed `bundler.hub.audit` and every installed `bundler audit`
crashed; tests/test_installed.py compares the built wheel and sdist with the source tree.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["bundler", "bundler.*"]), "bundler.templates"])
