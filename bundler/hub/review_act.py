"""Stage 7, acted on: what a review changes on the Hub, and only when asked.

The report is posted on the PR as a comment that carries its digest, and not again while this
account's latest report there is the same one. Only a clean PR is merged, and submitters can
push to their PR at any time, so its head is read again right before merging and a PR that
moved is not merged. The dataset card is regenerated on each target branch a PR was merged
into afterwards (PRs never carry it).
"""

from __future__ import annotations

import re
from functools import partial

from huggingface_hub import get_token
from huggingface_hub.community import DiscussionComment

from bundler.core.errors import BundlerError, HubAccessError, WriteTokenRequired
from bundler.hub.access import require_review
from bundler.hub.refresh import CardRefresh, refresh_card
from bundler.hub.review_gather import read_details
from bundler.hub.review_judge import PullRequestReview
from bundler.hub.session import REPO_TYPE, HubSession, status_of

MARKER = re.compile(r"<!-- bundler-review sha256:([0-9a-f]{64}) -->")


def writer(session: HubSession, token: str | None, *, comment: bool, merge: bool) -> str:
    """The account a write token belongs to; WriteTokenRequired for none or a read token."""
    asked = tuple(flag for flag, on in (("--comment", comment), ("--merge", merge)) if on)
    if (token or get_token()) is None:
        raise WriteTokenRequired("missing", asked)
    rights = session.rights()
    if rights.role == "read":
        raise WriteTokenRequired("read-only", asked)
    require_review(rights, comment=comment, merge=merge)  # hub.access
    return rights.user


def post_report(session: HubSession, pr: PullRequestReview, reviewer: str) -> None:
    """Post the report, unless this account's latest report on the PR is the same one."""
    details = read_details(session, pr.num)
    latest = None
    for event in details.events:
        if isinstance(event, DiscussionComment) and event.author == reviewer:
            found = MARKER.search(event.content or "")
            if found:
                latest = found.group(1)
    if latest == pr.digest:
        pr.comment = "already-posted"
        return
    body = f"{pr.markdown.rstrip()}\n\n<!-- bundler-review sha256:{pr.digest} -->\n"
    post = partial(
        session.api.comment_discussion, session.repo_id, pr.num, body, repo_type=REPO_TYPE
    )
    try:
        post()
    except Exception as error:
        raise session.describe(error, doing=f"commenting on PR #{pr.num}") from None
    pr.comment = "posted"


def merge(session: HubSession, pr: PullRequestReview) -> None:
    """Merge a clean PR whose head is still the one reviewed; `pr.merge` says what came of it."""
    if not pr.clean:
        pr.merge, pr.merge_detail = "refused", "not every check passed"
        return
    if session.head(f"refs/pr/{pr.num}") != pr.head:
        pr.merge, pr.merge_detail = "refused", "the PR changed while it was reviewed"
        return
    merging = partial(session.api.merge_pull_request, session.repo_id, pr.num, repo_type=REPO_TYPE)
    try:
        merging()
    except Exception as error:
        described = session.describe(error, doing=f"merging PR #{pr.num}")
        if isinstance(described, HubAccessError):
            raise described from None
        pr.merge = "refused" if status_of(error) in (400, 409) else "failed"
        pr.merge_detail, pr.error_code = described.message, described.exit_code
        return
    pr.merge = "merged"


def refresh_cards(
    session: HubSession, branches: list[str]
) -> tuple[CardRefresh | None, BundlerError | None]:
    """Regenerate the dataset card on each branch: the last card regenerated, and the last
    failure (each branch is tried, whatever the one before gave)."""
    card: CardRefresh | None = None
    failure: BundlerError | None = None
    for branch in branches:
        try:
            card = refresh_card(session, branch)
        except BundlerError as error:
            failure = error
    return card, failure
