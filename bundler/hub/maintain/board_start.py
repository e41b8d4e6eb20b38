"""`bundler init`: start a leaderboard in one command.

The dataset repository is created (public unless asked private) and given an empty board in
one commit: the card, the all-tasks table, the maintainers' (empty) task definitions and the
record of what was derived (bundler.hub.leaderboard.record), so that every other command finds
a leaderboard there. Run again, it changes nothing on a repository that already holds one, and
gives an existing empty repository (made with `hf repos create`) its board.

It keeps what it finds. A repository that holds anything but the `.gitattributes` the Hub
gives every new repository (kept as it is: init never writes it) is refused, naming what it
holds, unless the maintainer asks to adopt it: then every file stays, the board's card goes in
a section appended to the card found (bundler.hub.leaderboard.card_section), and a file the
board would write over refuses the start whatever was asked.
"""

from __future__ import annotations

from huggingface_hub import CommitOperationAdd
from pydantic import Field

from bundler.core.errors import RepositoryNotEmpty, WrongRepoType
from bundler.core.model import Model
from bundler.hub.client.access import require_card
from bundler.hub.client.commit import PlannedCommit, commit_replanned
from bundler.hub.client.exists import dataset_exists, other_type_exists
from bundler.hub.client.remote import RemoteFolder
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.client.session import REPO_TYPE, HubSession
from bundler.hub.leaderboard.branch import read_branch, table_operations
from bundler.hub.leaderboard.card_section import with_board_section
from bundler.hub.repo.paths import README, RECORD, TASKS_FILE
from bundler.hub.tasks.definitions import TaskDefinitions

REVISION = "main"
GITATTRIBUTES = ".gitattributes"
"""The one file the Hub puts in every new repository: finding it is finding nothing."""


class StartReport(Model):
    """What `start_leaderboard` found and did."""

    repo_id: str
    private: bool
    created: bool = False
    """The repository did not exist and was created."""
    commit: str | None = None
    """The commit that wrote the empty board; None when the repository already held one."""
    adopted: list[str] = Field(default_factory=list)
    """What the repository held before, kept (`--adopt`): its top-level files and folders
    (a folder with a trailing `/`)."""

    @property
    def exit_code(self) -> int:
        return 0


def start_leaderboard(
    session: HubSession, *, private: bool = False, adopt: bool = False
) -> StartReport:
    """Create the dataset repository (unless it exists) and commit an empty board to `main`
    (unless it holds one). A repository holding anything else is refused (RepositoryNotEmpty)
    unless `adopt`, which keeps it all (see the module docstring). Needs a write token of an
    account that may create repositories in the namespace (checked by the Hub) or, for an
    existing repository, write to it."""
    report = StartReport(repo_id=session.repo_id, private=private)
    if not dataset_exists(session):
        other = other_type_exists(session)
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
        found = found_files(session, state.head)
        if found and not adopt:
            raise RepositoryNotEmpty(session.repo_id, found, adoptable=True)
        if state.card is not None:
            state.card = with_board_section(state.card)
        operations = table_operations(session, state, with_bundles=True)
        if TASKS_FILE not in held:
            operations.append(CommitOperationAdd(TASKS_FILE, TaskDefinitions().to_bytes()))
        written = sorted({op.path_in_repo for op in operations} - {README})
        if found and (overwritten := sorted(session.existing(written, state.head))):
            raise RepositoryNotEmpty(session.repo_id, overwritten, adoptable=False)
        report.adopted = found
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


def found_files(session: HubSession, head: str) -> list[str]:
    """What the repository holds at its top, but the Hub's `.gitattributes`: files, and
    folders with a trailing `/`."""
    return sorted(
        f"{path}/" if isinstance(entry, RemoteFolder) else path
        for path, entry in session.list_folder("", head).items()
        if path != GITATTRIBUTES
    )
