"""Accepting warnings, never failures: the verdict `review --merge --accept CHECK` merges by.

A pull request whose only findings are warnings of the accepted checks may be merged; a failed
check can never be accepted. Pure functions of the review's checks (no network, no models of
their own), so `bundler.hub.review.judge` exposes them as they are and the act stage can word
the report from them: which warnings were accepted, by whom, and, when a warning stands in the
way, how to accept it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Protocol

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


def acceptance_lines(pr: ReviewedPullRequest, accepted: Collection[str], by: str) -> list[str]:
    """What the posted report says about acceptance: each accepted warning and who accepted
    it; each warning still in the way and how to accept it; that a failure cannot be."""
    lines = [
        f"accepted by {by}: warning {check.name}: {check.detail}"
        for check in accepted_warnings(pr, accepted)
    ]
    for check in standing_in_the_way(every_check(pr), accepted):
        if check.status == "warned":
            lines.append(
                f"warning {check.name} stands in the way: a maintainer who accepts it merges "
                f"with `bundler review --merge --accept {check.name}`"
            )
        else:
            lines.append(f"failed {check.name}: a failed check cannot be accepted")
    return lines
