"""Accepting warnings, never failures: the verdict of `review --merge --accept CHECK`."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers import run_cli

from bundler.cli.error_words import acceptance_words
from bundler.core.checks import CheckResult, failed, passed, warned
from bundler.hub.review.acceptance import (
    acceptance_lines,
    acceptance_notes,
    accepted_warnings,
    clean_with,
)


@dataclass
class Bundle:
    checks: list[CheckResult] = field(default_factory=list)


@dataclass
class PullRequest:
    checks: list[CheckResult] = field(default_factory=list)
    bundles: list[Bundle] = field(default_factory=list)


WINDOW = warned("publication-window", "published_at is before the PR's base commit")
COVERAGE = warned("coverage", "partial")


def test_only_accepted_warnings_make_a_pr_clean() -> None:
    pr = PullRequest([passed("conflicts", "merges cleanly"), WINDOW], [Bundle([COVERAGE])])
    assert not clean_with(pr, [])
    assert not clean_with(pr, ["publication-window"])
    assert clean_with(pr, ["publication-window", "coverage"])
    assert accepted_warnings(pr, ["coverage"]) == [COVERAGE]


def test_a_failed_check_can_never_be_accepted() -> None:
    pr = PullRequest([WINDOW], [Bundle([failed("coverage", "partial")])])
    assert not clean_with(pr, ["publication-window", "coverage"])
    lines = acceptance_lines(pr, ["publication-window", "coverage"], by="@maintainer")
    assert lines == [
        "accepted by @maintainer: warning publication-window: "
        "published_at is before the PR's base commit",
        "failed coverage: a failed check cannot be accepted",
    ]


def test_a_warning_in_the_way_says_how_to_accept_it() -> None:
    (note,) = acceptance_notes(PullRequest([WINDOW]), [], by="@maintainer")
    assert (note.status, note.check) == ("in-the-way", "publication-window")  # data; the
    line = acceptance_words(note)  # command line (and the posted report) say how
    assert "bundler review --merge --accept publication-window" in line


def test_accept_is_an_option_of_review_merge() -> None:
    usage = run_cli("review", "--help", env={"COLUMNS": "100"})
    assert "--accept" in usage.stdout and "CHECK" in usage.stdout
    alone = run_cli("review", "--repo", "o/n", "--accept", "coverage")
    assert alone.returncode == 2 and "give --merge too" in alone.stderr
