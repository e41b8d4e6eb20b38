"""What a posted review says, as data: a hidden JSON line in the comment `review --comment`
posts, so that the pull request's author can read its verdicts without a web page.

The line is an HTML comment (the Hub does not show it) just above the digest line that ends the
report (`act.MARKER`), and only there: the report quotes strangers' text (titles, metric names,
details), which may hold such a comment too, but never as a whole line of its own right above
the digest. It is written as the pull request's description state is: "<", ">" and "@" escaped
inside the JSON, so that no value can close the HTML comment or hide a mention in it.

Whoever reads it back must not trust it for its shape alone: anyone who may comment on a pull
request (any write token) can post a comment that looks like a review. `read_posted` only
parses and validates; deciding whose comments count is the reader's (a review counts only when
its author has write access to the repository).
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import Field, ValidationError

from bundler.core.checks import CheckResult
from bundler.core.model import Model
from bundler.hub.review.judge import Classification, PullRequestReview

POSTED_MARKER = "bundler-review-state"
_POSTED_LINE = re.compile(rf"<!-- {POSTED_MARKER} (\{{.*\}}) -->")


class PostedBundle(Model):
    bundle_id: str
    classification: Classification
    clean: bool
    checks: list[CheckResult] = Field(default_factory=list)


class PostedReview(Model):
    """A review as its comment carries it: the head it judged, the PR's own checks and each
    bundle's."""

    version: Literal[1] = 1
    num: int
    head: str
    clean: bool
    reviewed: bool = True
    """False when the review itself failed (its `review` check says why)."""
    checks: list[CheckResult] = Field(default_factory=list)
    bundles: list[PostedBundle] = Field(default_factory=list)


def posted_review(pr: PullRequestReview) -> PostedReview:
    return PostedReview(
        num=pr.num,
        head=pr.head,
        clean=pr.clean,
        reviewed=pr.reviewed,
        checks=pr.checks,
        bundles=[
            PostedBundle(
                bundle_id=bundle.bundle_id,
                classification=bundle.classification,
                clean=bundle.clean,
                checks=bundle.checks,
            )
            for bundle in pr.bundles
        ],
    )


def posted_line(pr: PullRequestReview) -> str:
    """The hidden line that carries the review's verdicts."""
    state = json.dumps(posted_review(pr).model_dump(mode="json"), sort_keys=True)
    state = state.replace("<", "\\u003c").replace(">", "\\u003e").replace("@", "\\u0040")
    return f"<!-- {POSTED_MARKER} {state} -->"


def read_posted(comment: str) -> PostedReview | None:
    """The review a comment carries, from the line right above its last (the digest line);
    None when there is none or it does not validate (another tool's comment, an older
    bundler's report, a forgery of the wrong shape)."""
    lines = [line.strip() for line in comment.rstrip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    found = _POSTED_LINE.fullmatch(lines[-2])
    if found is None:
        return None
    try:
        return PostedReview.model_validate_json(found.group(1))
    except ValidationError:
        return None
