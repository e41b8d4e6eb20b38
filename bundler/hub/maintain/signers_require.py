"""Whether the leaderboard requires signatures: `require_signature` in the task definitions
(`leaderboard/tasks.json`), set or cleared by a maintainer's commit.

Where it is set, the rule holds everywhere a bundle reaches the board: an upload or sync to the
branch refuses an unsigned bundle (`bundler.hub.publish.signing_rule`), an upload proposing one
in a pull request warns that review will fail it, and review and audit fail it
(`bundler.hub.review.signing`, `bundler.hub.audit.findings`).
"""

from __future__ import annotations

from huggingface_hub import CommitOperationAdd
from pydantic import Field

from bundler.core.errors import UsageError
from bundler.core.model import Model
from bundler.hub.client.access import require_card
from bundler.hub.client.commit import PlannedCommit, commit_replanned
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.branch import read_branch, table_operations
from bundler.hub.repo.paths import ALLOWED_SIGNERS, TASKS_FILE
from bundler.hub.tasks.definitions import TaskDefinitions


class RequireReport(Model):
    """What `require_signatures` found and committed."""

    repo_id: str
    revision: str
    require_signature: bool
    """The rule as the branch now holds it."""
    changed: bool = False
    commit: str | None = None
    warnings: list[str] = Field(default_factory=list)
    """Set while the branch names no allowed signer: no bundle can pass until one is added."""

    @property
    def exit_code(self) -> int:
        return 0


def require_signatures(
    session: HubSession, required: bool, revision: str = "main"
) -> RequireReport:
    """Set (or, with `required` false, clear) `require_signature` in the task definitions on
    `revision`, in one commit naming its parent (planned again on a race); nothing is committed
    when the rule already is so. Needs write access, checked first."""
    if revision.startswith("refs/pr/"):
        raise UsageError("the task definitions live on a branch, never in a pull request")
    require_card(session.rights())
    report = RequireReport(repo_id=session.repo_id, revision=revision, require_signature=required)

    def plan() -> PlannedCommit | None:
        state = read_branch(session, revision)
        report.warnings = []
        if required and (state.signers is None or not state.signers.entries()):
            report.warnings.append(
                f"{ALLOWED_SIGNERS} names no allowed signer: every bundle is refused until "
                "a maintainer allows one"
            )
        current = state.definitions
        report.changed = current.require_signature != required
        if not report.changed:
            return None
        state.definitions = TaskDefinitions(tasks=current.tasks, require_signature=required)
        operation = CommitOperationAdd(TASKS_FILE, state.definitions.to_bytes())
        return PlannedCommit(
            revision=revision,
            parent=state.head,
            operations=[operation, *table_operations(session, state, set())],
            summary="Require signed bundles" if required else "Stop requiring signed bundles",
            description=(
                "An upload to this branch refuses an unsigned bundle; review and audit fail it."
                if required
                else "An unsigned bundle is published again, with a warning in review."
            ),
            doing=f"committing {TASKS_FILE}",
            write_hint="changing the task definitions needs a token with write access",
            files_before=state.file_count(),
        )

    info = commit_replanned(
        session, plan, attempts=COMMIT_ATTEMPTS, retry_wait=COMMIT_RETRY_SECONDS
    )
    report.commit = info.oid if info is not None else None
    return report
