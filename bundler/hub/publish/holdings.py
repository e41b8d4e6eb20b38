"""What the commits' target holds of the bundles an upload publishes: read once for the plan,
and again whenever a commit is planned on a head that moved.

On the branch itself, the holdings come from its leaderboard (`BranchTables`, brought up to date
first: every commit to the branch rewrites its tables and card), which is kept as each commit
leaves it, so the next commit of the upload reads nothing more. A pull request's holdings, and
its base branch's, are asked of the Hub for these bundles' files alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from huggingface_hub import CommitOperationAdd

from bundler.core.limits import MAX_TASKS_FILE_BYTES
from bundler.core.progress import ProgressSink
from bundler.hub.client.commit import Operation
from bundler.hub.client.remote import RemoteFile
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.branch import BranchTables, TableChange, read_branch
from bundler.hub.leaderboard.record import BoardRecord, DerivedFile
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.leaderboard.tablecache import keep_table
from bundler.hub.publish.destination import Destination
from bundler.hub.publish.plan import LocalBundle, RepositoryView, companions_present, holds
from bundler.hub.repo.paths import README, RECORD, TASKS_FILE, repo_archive, repo_paths
from bundler.hub.tasks.definitions import TaskDefinitions


class Holdings:
    """What the target (`Destination`) holds of the bundles being published, and the base
    branch's leaderboard when the commits go to the branch itself."""

    def __init__(
        self, session: HubSession, destination: Destination, progress: ProgressSink
    ) -> None:
        self.session = session
        self.destination = destination
        self.progress = progress
        self.tables: BranchTables | None = None
        """The base branch's leaderboard, when the commits go to the branch itself."""
        self._written: TableChange | None = None
        """The leaderboard and files the commit being made writes, kept once it lands."""
        self._planned: tuple[str, str, dict[str, RemoteFile]] | None = None
        """(ref, head, remote files) from planning, reused by the first commit's plan."""
        self._last: tuple[str, str, dict[str, RemoteFile]] | None = None
        """What the last commit was planned on, when that was what planning read (which holds
        every bundle's files): the next commit is planned on it, or on our commit made on it
        (which touched only its own bundles' files). None: the next commit reads again."""
        self._ahead: tuple[str, list[TableRow], TableChange] | None = None
        """The next commit's change, computed ahead (`tables_ahead`) on the head the commit
        being made was planned on, for these rows."""
        self._next: tuple[str, list[TableRow], TableChange] | None = None
        """That change once our commit landed on that head: for the next commit, if it is
        planned on our commit (`oid`) for the same rows (`table_operations`)."""

    def view(self, local: list[LocalBundle], left_off: list[str]) -> RepositoryView:
        """What the base branch and the pull request hold of these bundles. A branch's holdings
        come from its leaderboard table (brought up to date first: its next commit rewrites
        it; the bundles it leaves off are named in `left_off`); a pull request's base is asked
        about these bundles' files and its task definitions alone (review judges the bundles
        against them: a bundle contradicting them is refused here already)."""
        destination = self.destination
        session = self.session
        keys = [bundle.key for bundle in local]
        if not destination.create_pr:
            self.tables = read_branch(session, destination.base, self.progress)
            left_off += self.tables.problems
            view = self._branch_view(self.tables, local)
            self._planned = (destination.base, view.base_head, view.base_files)
            return view
        base_head = session.head(destination.base)
        base_files = session.paths_info(
            [TASKS_FILE, *(path for key in keys for path in repo_paths(key))], base_head
        )
        defined = TaskDefinitions()  # what review will judge the bundles against
        if base_files.pop(TASKS_FILE, None) is not None:
            defined = TaskDefinitions.parse(
                session.read_file(TASKS_FILE, base_head, MAX_TASKS_FILE_BYTES)
            )
        self._planned = (destination.base, base_head, base_files)
        if destination.pr_num is None:
            return RepositoryView(destination.base, base_head, base_files, definitions=defined)
        pr_head = session.head(destination.ref)
        pr_files = session.paths_info([repo_archive(key) for key in keys], pr_head)
        self._planned = (destination.ref, pr_head, pr_files)
        return RepositoryView(
            destination.base,
            base_head,
            base_files,
            destination.pr_num,
            pr_files,
            definitions=defined,
        )

    def _branch_view(self, tables: BranchTables, local: list[LocalBundle]) -> RepositoryView:
        """What the branch holds of these local bundles, for the plan: their files (asked of
        the Hub) and, for a bundle whose archive is there without its sidecar as published,
        when its row says that very archive was first published."""
        files = tables.remote_files(self.session, [bundle.key for bundle in local])
        repairs = [  # only these are planned from their row (`triage`): no other is read
            bundle
            for bundle in local
            if holds(files.get(bundle.repo_archive), bundle)
            and not companions_present(bundle, files)
        ]
        index = tables.leaderboard.indexed(b.bundle_id for b in repairs) if repairs else {}
        published = {
            bundle.bundle_id: row.published_at
            for bundle in repairs
            if (row := index.get(bundle.bundle_id)) is not None
            and row.archive_sha256 == bundle.archive_sha256
        }
        return RepositoryView(
            tables.revision,
            tables.head,
            files,
            published=published,
            definitions=tables.definitions,
            unsharded=frozenset(tables.moves),
        )

    def at_head(self, batch: list[LocalBundle]) -> tuple[str, dict[str, RemoteFile]]:
        """The head a commit of `batch` is planned on, and what the target holds there of its
        bundles' files: as planning read them, for the first commit; else read again (the
        branch's leaderboard too, when the commits go to the branch)."""
        ref = self.destination.ref
        planned, self._planned, self._last = self._planned, None, None
        if planned is not None and planned[0] == ref:
            _, head, remote = planned
            self._last = planned
        elif self.tables is not None:  # the branch moved: read its leaderboard again
            self.tables = read_branch(self.session, ref, self.progress)
            head = self.tables.head
            remote = self.tables.remote_files(self.session, [b.key for b in batch])
        else:
            head = self.session.head(ref)
            paths = [path for bundle in batch for path in bundle.repo_paths]
            remote = self.session.paths_info(paths, head)
        return head, remote

    def refused(self) -> None:
        """The last commit planned was refused, so nothing changed: the next one is planned
        on what it was planned on (a commit made meanwhile makes the Hub answer 412)."""
        self._planned = self._last

    def file_count(self) -> int | None:
        """The files the branch holds, as its leaderboard knows them; None for a pull
        request, whose base's leaderboard is not read."""
        return self.tables.file_count() if self.tables is not None else None

    def table_operations(
        self, todo: list[LocalBundle], *, keep_card: Callable[[bytes], bool]
    ) -> list[Operation]:
        """The tables and card as the branch will be with `todo`, those of them that change
        (none for a pull request, which never touches them); the card only if `keep_card`
        takes it."""
        if self.tables is None:
            return []
        rows = [bundle.row for bundle in todo if bundle.row is not None]
        ahead, self._next, self._ahead = self._next, None, None  # this plan computes its own
        if ahead is not None and ahead[:2] == (self.tables.head, rows):
            change = self._reparented(ahead[2], keep_card)
        else:
            change = self.tables.change(self.session, rows, keep_card=keep_card)
        self._written = change
        return change.operations

    def _reparented(self, change: TableChange, keep_card: Callable[[bytes], bool]) -> TableChange:
        """The change computed ahead for a commit now planned on our commit made on the head it
        was computed on: the branch is then what the change was computed from (that head, and
        what our commit wrote), but for its head, which only the record names (its parent).
        So its tables, charts and card stand, the card where `keep_card` takes it, and the
        record is written again naming the branch's head."""
        assert self.tables is not None
        record = BoardRecord.parse(change.written[RECORD])  # every commit of bundles writes one
        assert record is not None, "a record this bundler just wrote"
        data = record.model_copy(update={"parent": self.tables.head}).to_bytes()
        keep_table(self.session, RECORD, data)  # as table_operations keeps every record
        written = change.written | {RECORD: data}
        if README in written and not keep_card(written[README]):
            del written[README]
        operations: list[Operation] = [
            CommitOperationAdd(RECORD, data) if operation.path_in_repo == RECORD else operation
            for operation in change.operations
            if operation.path_in_repo in written or not isinstance(operation, CommitOperationAdd)
        ]
        return replace(change, operations=operations, written=written)

    def tables_ahead(self, later: list[LocalBundle]) -> list[CommitOperationAdd]:
        """The tables and charts the commit of `later` will write after the commit being
        planned (`table_operations`), computed now from a copy of the branch as that commit
        leaves it, to be uploaded with it (bundler.hub.publish.ahead): all but the record
        (which names its parent, unknown until that commit lands) and the card, and none whose
        bytes the branch holds now. The whole change, card and record too, is kept for that
        commit (`table_operations`). None on a pull request, which writes no tables."""
        if self.tables is None or self._written is None:
            return []
        after = replace(self.tables, absent=set(self.tables.absent))  # `committed` changes it
        after.committed(after.head, self._written)
        rows = [bundle.row for bundle in later if bundle.row is not None]
        change = after.change(self.session, rows, keep_card=lambda _: True)
        self._ahead = (after.head, rows, change)
        held = self.tables.held
        return [
            operation
            for operation in change.operations
            if isinstance(operation, CommitOperationAdd)
            and operation.path_in_repo not in (RECORD, README)
            and not DerivedFile.of(change.written[operation.path_in_repo]).matches(
                held.get(operation.path_in_repo)
            )
        ]

    def committed(self, oid: str, *, card_refused: bool) -> None:
        """Our commit `oid` landed: on the branch, its leaderboard is now what the commit wrote
        (without the card when the Hub refused it), and the next commit is planned on `oid`,
        where the other bundles' files are what they were (`_last`): a later batch's resumed
        run still extends the Hub's copy, never a conflict with itself."""
        ahead, self._ahead = self._ahead, None
        if self.tables is not None and self._written is not None:
            if card_refused:  # the Hub took the commit without it
                self._written.written.pop(README, None)
            elif ahead is not None and ahead[0] == self.tables.head:
                self._next = (oid, ahead[1], ahead[2])  # the branch is what it was computed on
            self.tables.committed(oid, self._written)
            if self._last is not None:
                self._planned = (self.destination.ref, oid, self._last[2])
