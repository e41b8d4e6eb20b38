"""Who submits a bundle: given to collect (options, environment) and written into its claim.

A module of its own so that collect's options can name it without loading the manifest's models,
which a collect with nothing to bundle never uses (start-up, tests/benchmark_collect.py).
"""

from __future__ import annotations

from pydantic import ConfigDict

from bundler.model import Model


class Submitter(Model):
    """Who submits the bundle; optional, but a leaderboard needs someone to ask."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    contact: str | None = None
    affiliation: str | None = None
