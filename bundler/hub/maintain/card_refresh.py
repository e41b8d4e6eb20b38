"""`bundler card`: make a branch's tables and card true again, in one commit, or none.

After pull requests merged in the Hub's web interface, or on a repository still in layout 1,
the tables are stale; `read_branch` catches up at the cost of what changed (or upgrades), and
the tables and card whose bytes differ are committed together, naming the head they were
derived from (a concurrent commit makes the Hub answer 412, and all is read again on the new
head). Nothing differs: no commit.
"""

from __future__ import annotations

from pydantic import Field

from bundler.core.errors import HubError, PullRequestRevision
from bundler.core.model import Model
from bundler.core.progress import ProgressSink
from bundler.hub.client.access import require_card
from bundler.hub.client.commit import PlannedCommit, commit_replanned
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.branch import read_branch, table_operations
from bundler.hub.leaderboard.card import check_card
from bundler.hub.leaderboard.chart import not_drawn
from bundler.hub.leaderboard.tables import LAYOUT_VERSION
from bundler.hub.repo.paths import README


class CardRefresh(Model):
    """What `refresh_card` found and did."""

    repo_id: str
    revision: str
    dry_run: bool
    check: bool = False
    """A check (`card --check`): a dry run whose stale tables or card are a finding, as a
    formatter's check is, so that CI can require the board to be up to date."""
    parent_commit: str | None = None
    """The head the tables and card were derived from."""
    changed: bool = False
    """The tables or card differed from what the branch holds (and, unless dry_run, were
    committed)."""
    upgraded: bool = False
    """The repository was in an older layout: layout 1's row files are (or, in a dry run, would
    be) removed, layout 2's bundles moved into their shards."""
    commit: str | None = None
    bundle_count: int = 0
    changed_files: list[str] = Field(default_factory=list)
    unreadable_rows: list[str] = Field(default_factory=list)
    """Bundles left out of the tables, each with why: a sidecar or row that could not be read,
    or a bundle that failed verification."""
    charts_not_drawn: list[str] = Field(default_factory=list)
    """Charts the tables and card go without, each with why (matplotlib failed to draw it)."""

    @property
    def exit_code(self) -> int:
        return 1 if self.unreadable_rows or (self.check and self.changed) else 0


def refresh_card(
    session: HubSession,
    revision: str = "main",
    *,
    dry_run: bool = False,
    check: bool = False,
    progress: ProgressSink | None = None,
) -> CardRefresh:
    """Bring `revision`'s tables and card up to date with its bundles; see the module
    docstring. Needs write access (not for a dry run; `check` is a dry run whose stale result
    exits 1). A pull request's ref is refused: pull
    requests never touch the tables or the card, so they merge without conflicts."""
    if revision.startswith("refs/pr/"):
        raise PullRequestRevision(revision, target="card")
    dry_run = dry_run or check
    result = CardRefresh(repo_id=session.repo_id, revision=revision, dry_run=dry_run, check=check)
    if not dry_run:
        require_card(session.rights())  # before anything is read: exit 2 without write access

    def plan() -> PlannedCommit | None:
        state = read_branch(session, revision, progress)
        # only what is not true any more: what changed since the record, or was edited
        operations = table_operations(session, state, set())
        result.parent_commit = state.head
        result.bundle_count = len(state.leaderboard)
        result.unreadable_rows = state.problems
        result.charts_not_drawn = not_drawn(state.undrawn)
        result.upgraded = bool(state.legacy or state.moves)
        result.changed_files = sorted(operation.path_in_repo for operation in operations)
        result.changed = bool(operations)
        if not result.changed:
            return None
        for operation in operations:
            data = getattr(operation, "path_or_fileobj", None)
            if operation.path_in_repo == README and isinstance(data, bytes):
                problem = check_card(data.decode("utf-8"))
                if problem is not None:
                    raise HubError(f"the dataset card was not committed: {problem}")
        if dry_run:
            return None
        what = (
            f"Upgrade the repository to layout {LAYOUT_VERSION}"
            if result.upgraded
            else "Regenerate"
        )
        return PlannedCommit(
            revision=revision,
            parent=state.head,
            operations=operations,
            summary=f"{what}: the leaderboard tables and card ({result.bundle_count} bundle(s))",
            description="The tables and the card are derived from every bundle's sidecar at "
            "the parent commit.",
            doing="committing the leaderboard tables and card",
            write_hint="regenerating the card needs a token with write access to the repository",
            files_before=state.file_count(),
        )

    info = commit_replanned(
        session, plan, attempts=COMMIT_ATTEMPTS, retry_wait=COMMIT_RETRY_SECONDS
    )
    if info is not None:
        result.commit = info.oid
    return result
