"""`bundler init`: start a leaderboard in one command.

The dataset repository is created (public unless asked private) and given an empty board in
one commit: the card, the all-tasks table, the maintainers' (empty) task definitions and the
record of what was derived (bundler.hub.leaderboard.record), so that every other command finds
a leaderboard there. Run again, it changes nothing on a repository that already holds one, and
gives an existing empty repository (made with `hf repos create`) its board.
"""

from __future__ import annotations

from huggingface_hub import CommitOperationAdd

from bundler.core.errors import WrongRepoType
from bundler.core.model import Model
from bundler.hub.client.access import require_card
from bundler.hub.client.commit import PlannedCommit, commit_replanned
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.client.session import REPO_TYPE, HubSession
from bundler.hub.leaderboard.branch import read_branch, table_operations
from bundler.hub.repo.paths import RECORD, TASKS_FILE
from bundler.hub.tasks.definitions import TaskDefinitions

REVISION = "main"


class StartReport(Model):
    """What `start_leaderboard` found and did."""

    repo_id: str
    private: bool
    created: bool = False
    """The repository did not exist and was created."""
    commit: str | None = None
    """The commit that wrote the empty board; None when the repository already held one."""

    @property
    def exit_code(self) -> int:
        return 0


def start_leaderboard(session: HubSession, *, private: bool = False) -> StartReport:
    """Create the dataset repository (unless it exists) and commit an empty board to `main`
    (unless it holds one). Needs a write token of an account that may create repositories in
    the namespace (checked by the Hub) or, for an existing repository, write to it."""
    report = StartReport(repo_id=session.repo_id, private=private)
    if not session.dataset_exists():
        other = session.other_type_exists()
        if other is not None:
            raise WrongRepoType(session.repo_id, other)
        try:
            session.api.create_repo(
                session.repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True
            )
        except Exception as error:
            raise session.describe(error, doing="creating the dataset repository") from None
        report.created = True
    require_card(session.rights())

    def plan() -> PlannedCommit | None:
        state = read_branch(session, REVISION)
        held = session.paths_info([RECORD, TASKS_FILE], state.head)
        if RECORD in held:
            return None  # a leaderboard already: nothing to start
        operations = table_operations(session, state, with_bundles=True)
        if TASKS_FILE not in held:
            operations.append(CommitOperationAdd(TASKS_FILE, TaskDefinitions().to_bytes()))
        return PlannedCommit(
            revision=REVISION,
            parent=state.head,
            operations=operations,
            summary="Start the leaderboard: card, tables and task definitions",
            description="An empty board: no bundle yet, no task defined.",
            doing="committing the empty leaderboard",
            write_hint="starting a leaderboard needs a token with write access to the repository",
        )

    info = commit_replanned(
        session, plan, attempts=COMMIT_ATTEMPTS, retry_wait=COMMIT_RETRY_SECONDS
    )
    report.commit = info.oid if info is not None else None
    return report
