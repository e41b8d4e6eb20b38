"""Accepting warnings, never failures: the verdict `review --merge --accept CHECK` merges by.

A pull request whose only findings are warnings of the accepted checks may be merged; a failed
check can never be accepted. Pure functions of the review's checks (no network, no models of
their own), so `bundler.hub.review.judge` exposes them as they are and the act stage can word
the report from them: which warnings were accepted, by whom, and, when a warning stands in the
way, how to accept it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Literal, NamedTuple, Protocol

from bundler.core.checks import CheckResult


class _Reviewed(Protocol):
    @property
    def checks(self) -> Sequence[CheckResult]: ...


class ReviewedPullRequest(_Reviewed, Protocol):
    """What the verdict reads of a PR's review (bundler.hub.review.judge.PullRequestReview)."""

    @property
    def bundles(self) -> Sequence[_Reviewed]: ...


def every_check(pr: ReviewedPullRequest) -> list[CheckResult]:
    """The PR's own checks, then each bundle's."""
    return [*pr.checks, *(check for bundle in pr.bundles for check in bundle.checks)]


def standing_in_the_way(
    checks: Iterable[CheckResult], accepted: Collection[str]
) -> list[CheckResult]:
    """The checks that keep a PR from being merged: every failed one, and every warning of a
    check not accepted. A failure is never accepted, whatever `accepted` names."""
    return [
        check
        for check in checks
        if check.status == "failed" or (check.status == "warned" and check.name not in accepted)
    ]


def clean_with(pr: ReviewedPullRequest, accepted: Collection[str]) -> bool:
    """Whether the PR may be merged when the warnings of the `accepted` checks are accepted:
    nothing failed, and every warning is of an accepted check."""
    return not standing_in_the_way(every_check(pr), accepted)


def accepted_warnings(pr: ReviewedPullRequest, accepted: Collection[str]) -> list[CheckResult]:
    """The warnings that were accepted (for the posted report)."""
    return [c for c in every_check(pr) if c.status == "warned" and c.name in accepted]


class AcceptanceNote(NamedTuple):
    """One thing the report says about acceptance: a warning `accepted` (by `by`), a warning
    still `in-the-way`, or a check that `failed` (never accepted). Data, because how a warning
    is accepted is the command line's to word (and the posted report's template's)."""

    status: Literal["accepted", "in-the-way", "failed"]
    check: str
    detail: str
    by: str

    @property
    def line(self) -> str:
        """The note in the library's words."""
        if self.status == "accepted":
            return f"accepted by {self.by}: warning {self.check}: {self.detail}"
        if self.status == "in-the-way":
            return f"warning {self.check} stands in the way: a maintainer may accept it"
        return f"failed {self.check}: a failed check cannot be accepted"


def acceptance_notes(
    pr: ReviewedPullRequest, accepted: Collection[str], by: str
) -> list[AcceptanceNote]:
    """What the posted report says about acceptance: each accepted warning and who accepted
    it; each warning still in the way (and so how to accept it); that a failure cannot be."""
    notes = [
        AcceptanceNote("accepted", check.name, check.detail, by)
        for check in accepted_warnings(pr, accepted)
    ]
    for check in standing_in_the_way(every_check(pr), accepted):
        status: Literal["in-the-way", "failed"] = (
            "in-the-way" if check.status == "warned" else "failed"
        )
        notes.append(AcceptanceNote(status, check.name, check.detail, by))
    return notes


def acceptance_lines(pr: ReviewedPullRequest, accepted: Collection[str], by: str) -> list[str]:
    """The notes in the library's words."""
    return [note.line for note in acceptance_notes(pr, accepted, by)]
