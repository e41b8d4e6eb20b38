"""Changing who may sign a leaderboard's bundles: one commit of `leaderboard/allowed_signers`,
with the card written again in the same commit, since the card names who signed each bundle by
the principal the file gives the key (`bundler.hub.leaderboard.card`)."""

from __future__ import annotations

from collections.abc import Callable

from huggingface_hub import CommitOperationAdd

from bundler.core.errors import UsageError
from bundler.hub.client.access import require_card
from bundler.hub.client.commit import PlannedCommit, commit_replanned
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.branch import read_branch, table_operations
from bundler.hub.repo.paths import ALLOWED_SIGNERS
from bundler.hub.tasks.signers import SignersReport
from bundler.local.allowed_signers import AllowedSigners


def change_signers(
    session: HubSession,
    change: Callable[[AllowedSigners], AllowedSigners],
    summary: str,
    revision: str = "main",
) -> SignersReport:
    """Apply `change` to the allowed signers on `revision` in one commit naming its parent
    (planned again on a race); nothing is committed when it changes nothing. Needs write
    access, checked first."""
    if revision.startswith("refs/pr/"):
        raise UsageError("the allowed signers live on a branch, never in a pull request")
    require_card(session.rights())
    report = SignersReport(repo_id=session.repo_id, revision=revision, signers=[])

    def plan() -> PlannedCommit | None:
        state = read_branch(session, revision)
        before = state.signers or AllowedSigners()
        after = change(before)
        report.signers = after.entries()
        report.changed = after != before
        if not report.changed:
            return None
        state.signers = after
        operations = [CommitOperationAdd(ALLOWED_SIGNERS, after.to_bytes())]
        return PlannedCommit(
            revision=revision,
            parent=state.head,
            operations=[*operations, *table_operations(session, state, set())],
            summary=summary,
            description="Who may sign this leaderboard's bundles (OpenSSH allowed signers).",
            doing=f"committing {ALLOWED_SIGNERS}",
            write_hint="changing the allowed signers needs a token with write access",
        )

    info = commit_replanned(
        session, plan, attempts=COMMIT_ATTEMPTS, retry_wait=COMMIT_RETRY_SECONDS
    )
    report.commit = info.oid if info is not None else None
    return report
