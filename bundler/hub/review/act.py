"""Stage 7, acted on: what a review changes on the Hub, and only when asked.

The report is posted on the PR as a comment that carries its verdicts as data (a hidden line,
`bundler.hub.review.posted`) and its digest, and not again while this account's latest report
there is the same one (only this account's own, last marker counts).

Only a clean PR is merged, and not through the Hub's merge call: that call merges whatever the
PR's head is when the Hub gets to it, and names no head, so a push between the review and the
merge would slip in unreviewed. Instead the merge is a commit this account makes to the target
branch itself: exactly the archives and sidecars that were verified (uploaded from the staging
copies, whose sha256 and blob ids are checked against the reviewed listing; the Hub already
holds the archives, so nothing is transferred again), plus the leaderboard's tables and card as
they are with those bundles (their rows stamped `published_at` now), naming the branch head it
was planned on, so a concurrent commit gives 412 and it is planned again. The PR is then closed
with a comment linking the commit.
"""

from __future__ import annotations

import hashlib
import re
from functools import partial
from pathlib import Path

from huggingface_hub import CommitOperationAdd
from huggingface_hub.community import DiscussionComment

from bundler.core import exitcodes
from bundler.core.errors import (
    BundlerError,
    HubError,
    Remedy,
    ReviewAction,
    TemporaryError,
    WriteTokenRequired,
)
from bundler.hub.client.access import require_review
from bundler.hub.client.commit import Operation, PlannedCommit, commit_replanned
from bundler.hub.client.remote import git_blob_id
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.client.session import REPO_TYPE, HubSession, has_token
from bundler.hub.leaderboard.branch import read_branch, table_operations
from bundler.hub.leaderboard.rows import TableRow, build_row, utc_timestamp
from bundler.hub.repo.paths import README, repo_archive, repo_paths, repo_sidecar
from bundler.hub.review.acceptance import every_check
from bundler.hub.review.gather import read_details
from bundler.hub.review.judge import GatheredPullRequest, PullRequestReview, same_file
from bundler.hub.review.posted import posted_line

MARKER = re.compile(r"<!-- bundler-review sha256:([0-9a-f]{64}) -->")
"""The digest line a posted report ends with."""


def report_digest(comment: str) -> str | None:
    """The digest of the report a comment is, from its LAST line alone: a stranger's text in
    the report (a metric name in a code span) may hold a marker too, but never on a line of its
    own at the end (code spans are one line, and the digest line follows them)."""
    lines = comment.rstrip().splitlines()
    found = MARKER.fullmatch(lines[-1].strip()) if lines else None
    return found.group(1) if found else None


def writer(session: HubSession, token: str | None, *, comment: bool, merge: bool) -> str:
    """The account a write token belongs to; WriteTokenRequired for none or a read token."""
    wanted: tuple[tuple[ReviewAction, bool], ...] = (("comment", comment), ("merge", merge))
    asked = tuple(action for action, on in wanted if on)
    if not (token or has_token(session)):
        raise WriteTokenRequired("missing", asked)
    rights = session.rights()
    if rights.role == "read":
        raise WriteTokenRequired("read-only", asked)
    require_review(rights, comment=comment, merge=merge)  # client.access
    return rights.user


def post_report(session: HubSession, pr: PullRequestReview, reviewer: str) -> None:
    """Post the report, unless this account's latest report on the PR is the same one."""
    details = read_details(session, pr.num)
    latest = None
    for event in details.events:
        if isinstance(event, DiscussionComment) and event.author == reviewer:
            latest = report_digest(event.content or "")  # this account's last comment counts
    if latest == pr.digest:
        pr.comment = "already-posted"
        return
    state = posted_line(pr)  # its verdicts as data, for the author to read (review.posted)
    body = f"{pr.markdown.rstrip()}\n\n{state}\n<!-- bundler-review sha256:{pr.digest} -->\n"
    post = partial(
        session.api.comment_discussion, session.repo_id, pr.num, body, repo_type=REPO_TYPE
    )
    try:
        post()
    except Exception as error:
        raise session.describe(error, doing=f"commenting on PR #{pr.num}") from None
    pr.comment = "posted"


class _Refused(Exception):
    """The merge is refused: what was reviewed is not what would be merged."""

    def __init__(self, message: str, remedy: Remedy | None = None) -> None:
        super().__init__(message)
        self.remedy = remedy


def merge(session: HubSession, pr: PullRequestReview, gathered: GatheredPullRequest) -> None:
    """Merge a clean PR whose head is still the one reviewed, by committing its reviewed
    files with the tables and card (see the module docstring); `pr.merge` says what came of
    it. Must run while the staging copies of `gathered` are still on disk."""
    if not pr.mergeable:
        pr.merge, pr.merge_detail = "refused", "not every check passed"
        if all(check.status != "failed" for check in every_check(pr)):
            pr.merge_remedy = "accept-warnings"  # only warnings stand in the way
        return
    try:
        files, rows = _reviewed_files(gathered)
    except _Refused as refusal:
        pr.merge, pr.merge_detail = "refused", str(refusal)
        return
    card_refused: list[HubError] = []
    tasks = {bundle.bundle.task for bundle in gathered.bundles}
    bundles = [bundle.bundle for bundle in gathered.bundles]

    def plan() -> PlannedCommit | None:
        if session.head(f"refs/pr/{pr.num}") != pr.head:
            raise _Refused("the PR changed while it was reviewed")
        state = read_branch(session, pr.base_branch)
        paths = [path for bundle in bundles for path in repo_paths(bundle)]
        now = session.paths_info(paths, state.head)
        moved = sorted(p for p in paths if not same_file(now.get(p), gathered.main_files.get(p)))
        if moved:
            raise _Refused(f"{pr.base_branch} changed since the review: {', '.join(moved)}")
        if unsharded := sorted(str(bundle) for bundle in bundles if bundle in state.moves):
            raise _Refused(  # review compared the PR with the branch's shards
                f"{pr.base_branch} still keeps {', '.join(unsharded)} where layout 2 kept it, "
                "which the review did not compare with",
                "upgrade-layout",
            )
        index = state.leaderboard.indexed(row.bundle_id for row in rows)
        fresh = [  # a bundle already listed with this archive keeps its publication date
            row
            for row in rows
            if (held := index.get(row.bundle_id)) is None
            or held.archive_sha256 != row.archive_sha256
        ]
        after = state.with_rows(fresh)
        operations: list[Operation] = [
            CommitOperationAdd(path, data) for path, data in files.items()
        ]
        operations += table_operations(session, after, tasks, with_bundles=True)
        return PlannedCommit(
            revision=pr.base_branch,
            parent=state.head,
            operations=operations,
            summary=f"Merge PR #{pr.num}: {len(bundles)} reviewed bundle(s)",
            description=f"The files of PR #{pr.num} as reviewed at {pr.head} (review digest "
            f"sha256:{pr.digest}), with the leaderboard tables and card.",
            doing=f"merging PR #{pr.num}",
            card=README,
            on_card_refused=card_refused.append,
            files_before=state.file_count(),
        )

    try:
        info = commit_replanned(
            session, plan, attempts=COMMIT_ATTEMPTS, retry_wait=COMMIT_RETRY_SECONDS
        )
    except _Refused as refusal:
        pr.merge, pr.merge_detail = "refused", str(refusal)
        pr.merge_remedy = refusal.remedy
        return
    except BundlerError as error:  # this PR's alone: 75 when temporary, else 1
        temporary = isinstance(error, TemporaryError)
        pr.merge, pr.merge_detail = "failed", error.message
        pr.error_code = exitcodes.TEMPORARY if temporary else exitcodes.LOOK
        return
    if info is None:  # nothing differs: the branch already holds every file
        pr.merge_detail = f"{pr.base_branch} already holds these files"
    else:
        pr.merge_commit = info.oid
        pr.merge_detail = f"committed as {info.oid}"
        if card_refused:
            pr.merge_detail += f"; the card was left out: {card_refused[0]}"
    pr.merge = "merged"
    link = info.commit_url if info is not None else pr.base_branch
    close = partial(
        session.api.change_discussion_status,
        session.repo_id,
        pr.num,
        "closed",
        comment=f"Merged the reviewed files of {pr.head[:12]} into `{pr.base_branch}`: {link}",
        repo_type=REPO_TYPE,
    )
    session.call(f"closing PR #{pr.num}", close)


def _reviewed_files(
    gathered: GatheredPullRequest,
) -> tuple[dict[str, Path | bytes], list[TableRow]]:
    """The staged, verified files of each bundle (checked again against the reviewed listing)
    and the rows they give, stamped now."""
    files: dict[str, Path | bytes] = {}
    rows: list[TableRow] = []
    stamp = utc_timestamp()
    for bundle in gathered.bundles:
        key = bundle.bundle
        archive, sidecar = (
            gathered.head_files[repo_archive(key)],
            gathered.head_files.get(repo_sidecar(key)),
        )
        staged = bundle.staged
        reading = bundle.reading
        if (
            staged is None
            or sidecar is None
            or reading.sidecar is None
            or reading.metrics_text is None
        ):
            raise _Refused(f"{key}: no verified copy to merge")
        sidecar_data = staged.with_name(key.sidecar_name).read_bytes()
        same_archive = (
            _sha256(staged) == archive.lfs_sha256
            if archive.lfs_sha256 is not None
            else git_blob_id(staged.read_bytes()) == archive.blob_id
        )
        if not same_archive or git_blob_id(sidecar_data) != sidecar.blob_id:
            raise _Refused(f"{key}: the verified copy is not what the PR lists")
        files[repo_archive(key)] = staged
        files[repo_sidecar(key)] = sidecar_data
        row = build_row(reading.sidecar, reading.metrics_text, stamp)
        rows.append(TableRow(**row.model_dump(), sidecar_blob_id=sidecar.blob_id))
    return files, rows


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
