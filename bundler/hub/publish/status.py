"""Where a submitter's pull requests stand: `bundler status`.

For each of the caller's open bundler pull requests (those `destination` finds: their author
and the `[bundler]` title marker), or one named pull request: the bundles it proposes (the
description's state, and any archive the Hub's diff of it names beyond those), the latest review
posted on it with each bundle's checks and their verdicts (`bundler.hub.review.posted`), and
what comes next.

A review comment is believed only from an account with write access to the repository: anyone
with a write token may comment on any pull request, the author included, so a comment that
merely looks like a clean review proves nothing. Write access comes from ownership (the
repository's namespace is the account, or an organization the Hub lists the account in, as
`user_orgs` reads its public profile); a maintainer whose membership the profile does not list
is not believed either, never the other way round. The comments not believed are named, so
the author sees that they were set aside.

A review is of the head it judged: after a later upload to the pull request it says nothing of
what is there now, so the next step is to wait for a review again. A pull request the review
merged is closed by it (its files committed to the branch by the review itself): it reads as
merged when the branch holds every bundle's archive exactly as the pull request does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from huggingface_hub.community import DiscussionComment, DiscussionWithDetails
from pydantic import Field

from bundler.core import exitcodes
from bundler.core.checks import CheckResult
from bundler.core.errors import UsageError
from bundler.core.model import Model
from bundler.hub.client.session import HubSession, has_token
from bundler.hub.publish.destination import bundler_pull_requests
from bundler.hub.publish.pr_description import ProposedBundle, Verb, read_pr_state
from bundler.hub.repo.paths import bundle_of_path, repo_archive
from bundler.hub.review.act import report_digest
from bundler.hub.review.changes import parse_diff
from bundler.hub.review.gather import pull_request_facts, read_details
from bundler.hub.review.judge import same_file
from bundler.hub.review.posted import PostedReview, read_posted
from bundler.hub.tasks.signers import Memberships
from bundler.local.layout import BundleId, LayoutError

NextStep = Literal["merged", "closed", "wait-for-review", "wait-for-merge", "decide", "fix"]
"""What comes next for a pull request: nothing (merged; closed without being merged), a
maintainer's review of its present head, a maintainer's merge (reviewed clean), a maintainer's
decision on the warnings that are its only findings, or the author's fix of the failed checks
and a new upload. Named, not worded: the command line words it."""
Verdict = Literal["clean", "warned", "failed", "not-reviewed"]


class BundleStatus(Model):
    bundle_id: str
    verb: Verb | None = None
    """What the pull request does with it (its description's word); None when the description
    does not say."""
    coverage: str | None = None
    predictions: int | None = None
    verdict: Verdict = "not-reviewed"
    """The latest believed review's, when it judged this bundle."""
    checks: list[CheckResult] = Field(default_factory=list)


class ReviewSeen(Model):
    """The latest review comment believed (by an account with write access)."""

    reviewer: str
    """The account that posted it."""
    posted_at: datetime
    """When the Hub says it was posted."""
    head: str
    current: bool
    """Whether it judged the pull request's present head."""
    clean: bool
    """Whether every check it ran passed."""
    reviewed: bool
    """False when the review itself failed (its `review` check says why)."""
    checks: list[CheckResult] = Field(default_factory=list)


class SetAside(Model):
    """A comment shaped like a review, by an account without write access to the repository."""

    author: str
    """The account that posted it."""
    posted_at: datetime
    """When the Hub says it was posted."""


class PullRequestStatus(Model):
    num: int
    title: str
    url: str
    status: str
    author: str
    base_branch: str
    head: str
    bundles: list[BundleStatus] = Field(default_factory=list)
    review: ReviewSeen | None = None
    """The latest review posted by an account with write access; None before any."""
    set_aside: list[SetAside] = Field(default_factory=list)
    """Review-shaped comments by accounts without write access: not the review."""
    next_step: NextStep
    """What comes next: merged or closed (nothing), wait-for-review (none of the present
    head), wait-for-merge (reviewed clean), decide (a maintainer, on warnings), fix (the
    author, then upload again)."""
    to_fix: list[str] = Field(default_factory=list)
    """Each failed check of the present head's review: `<bundle or pull request>: <check>:
    <detail>`."""
    to_decide: list[str] = Field(default_factory=list)
    """Each warning of it, in the same form."""


class StatusReport(Model):
    repo_id: str
    user: str | None
    """Whose pull requests were looked for; None when one was named."""
    pull_requests: list[PullRequestStatus] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when a review failed something the author must fix, else 0 (waiting is fine)."""
        fix = any(pr.next_step == "fix" for pr in self.pull_requests)
        return exitcodes.LOOK if fix else exitcodes.OK


def pull_request_status(session: HubSession, num: int | None = None) -> StatusReport:
    """Where pull request `num` stands, or (None) each open bundler pull request of the
    token's user. UsageError without a token when no pull request is named (whose would they
    be?), or for a number that is no pull request."""
    memberships = Memberships(session)
    if num is not None:
        details = [read_details(session, num)]
        if not details[0].is_pull_request:
            raise UsageError(f"#{num} in {session.repo_id} is a discussion, not a pull request")
        report = StatusReport(repo_id=session.repo_id, user=None)
    else:
        if not has_token(session):
            raise UsageError(
                "no token says whose pull requests to show",
                hint="give a token of the account that opened them, or name one pull request",
            )
        user = session.whoami()
        listed = bundler_pull_requests(session, user)
        details = [read_details(session, discussion.num) for discussion in listed]
        report = StatusReport(repo_id=session.repo_id, user=user)
    for found in details:
        report.pull_requests.append(_status(session, found, memberships))
    return report


def _status(
    session: HubSession, details: DiscussionWithDetails, memberships: Memberships
) -> PullRequestStatus:
    facts = pull_request_facts(details)
    head = session.head(f"refs/pr/{facts.num}")
    proposed = _proposed(details)
    believed, set_aside = _latest_review(session, details, memberships)
    review = believed.review if believed is not None else None
    judged = {bundle.bundle_id: bundle for bundle in review.bundles} if review else {}
    bundles = []
    for bundle_id, described in proposed.items():
        status = BundleStatus(bundle_id=bundle_id)
        if described is not None:
            status.verb, status.coverage = described.verb, described.coverage
            status.predictions = described.predictions
        if (posted := judged.get(bundle_id)) is not None:
            status.checks = posted.checks
            status.verdict = _verdict(posted.checks)
        bundles.append(status)
    seen = None
    if believed is not None:
        seen = ReviewSeen(
            reviewer=believed.reviewer,
            posted_at=believed.posted_at,
            head=believed.review.head,
            current=believed.review.head == head,
            clean=believed.review.clean,
            reviewed=believed.review.reviewed,
            checks=believed.review.checks,
        )
    pr = PullRequestStatus(
        num=facts.num,
        title=facts.title,
        url=facts.url,
        status=facts.status,
        author=facts.author,
        base_branch=facts.base_branch,
        head=head,
        bundles=bundles,
        review=seen,
        set_aside=set_aside,
        next_step="wait-for-review",
    )
    _next_step(session, pr, believed)
    return pr


def _proposed(details: DiscussionWithDetails) -> dict[str, ProposedBundle | None]:
    """The bundles the pull request proposes: its description's, then any other whose archive
    the Hub's diff names (an upload whose description edit failed)."""
    first = next((e for e in details.events if isinstance(e, DiscussionComment)), None)
    state = read_pr_state(first.content or "") if first is not None else []
    proposed: dict[str, ProposedBundle | None] = {b.bundle_id: b for b in state}
    diff = parse_diff(details.diff) if details.diff else None
    for path in sorted(diff.files) if diff is not None else []:
        bundle = bundle_of_path(path)
        if bundle is not None and path == repo_archive(bundle):
            proposed.setdefault(str(bundle), None)
    return proposed


@dataclass(frozen=True)
class _Believed:
    review: PostedReview
    reviewer: str
    posted_at: datetime


def _latest_review(
    session: HubSession, details: DiscussionWithDetails, memberships: Memberships
) -> tuple[_Believed | None, list[SetAside]]:
    """The latest review comment by an account with write access to the repository, and the
    review-shaped comments of every other account. A hidden comment is no one's review."""
    namespace = session.repo_id.split("/")[0]
    latest: _Believed | None = None
    set_aside: list[SetAside] = []
    for event in details.events:
        if not isinstance(event, DiscussionComment) or event.hidden:
            continue
        content = event.content or ""
        review = read_posted(content) if report_digest(content) is not None else None
        if review is None or review.num != details.num:
            continue
        author = event.author
        if author == namespace or namespace in memberships.orgs(author):
            latest = _Believed(review, author, event.created_at)
        else:
            set_aside.append(SetAside(author=author, posted_at=event.created_at))
    return latest, set_aside


def _verdict(checks: list[CheckResult]) -> Verdict:
    statuses = {check.status for check in checks}
    if "failed" in statuses:
        return "failed"
    return "warned" if "warned" in statuses else "clean"


def _findings(review: PostedReview, status: str) -> list[str]:
    """The review's checks of `status`, each as `<where>: <check>: <detail>`."""
    found = [f"pull request: {c.name}: {c.detail}" for c in review.checks if c.status == status]
    for bundle in review.bundles:
        found += [
            f"{bundle.bundle_id}: {c.name}: {c.detail}" for c in bundle.checks if c.status == status
        ]
    return found


def _next_step(session: HubSession, pr: PullRequestStatus, believed: _Believed | None) -> None:
    """What comes next, from the pull request's state and its present head's review."""
    if pr.status == "merged":
        pr.next_step = "merged"
        return
    if pr.status not in ("open", "draft"):
        pr.next_step = "merged" if _on_branch(session, pr) else "closed"
        return
    review = believed.review if believed is not None else None
    if review is None or review.head != pr.head or not review.reviewed:
        pr.next_step = "wait-for-review"
        return
    pr.to_fix, pr.to_decide = _findings(review, "failed"), _findings(review, "warned")
    if pr.to_fix:
        pr.next_step = "fix"
    elif pr.to_decide:
        pr.next_step = "decide"
    else:
        pr.next_step = "wait-for-merge"


def _on_branch(session: HubSession, pr: PullRequestStatus) -> bool:
    """Whether the target branch holds every bundle's archive as the pull request's head
    does: what a merge by review leaves (it closes the pull request itself)."""
    paths = []
    for bundle in pr.bundles:
        try:
            paths.append(repo_archive(BundleId.parse(bundle.bundle_id)))
        except LayoutError:
            return False
    if not paths:
        return False
    at_head = session.paths_info(paths, pr.head)
    on_branch = session.paths_info(paths, pr.base_branch)
    return all(p in at_head and same_file(at_head[p], on_branch.get(p)) for p in paths)
