"""The leaderboard on a branch: its tables as they are, brought up to date at the cost of what
changed, and the files a commit writes to keep them and the card true.

Reading a branch costs the same few requests at any size: its head, the expanded entries of the
table, `bundles/` and the card (one request), and the table itself. The table is current when
`bundles/` has not changed since the commit that wrote the table (its git tree id then is its
tree id now). After merges made in the Hub's web interface it is not: the folders of `bundles/`
whose tree ids differ lead to the sidecars that changed, and only those bundles are downloaded,
verified and derived again (`catch_up`). A repository still in layout 1 (a row file per bundle
under `rows/` and `tasks/`) is read from those rows once, and the commit that writes its tables
removes them.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from bundler.core.errors import HubAccessError, HubError, RowError, TemporaryError
from bundler.core.progress import NoProgress, ProgressSink
from bundler.hub.client.remote import RemoteFile, RemoteFolder, git_blob_id, holds_bytes
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.card import render_dataset_card
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow, build_row, read_row, utc_timestamp
from bundler.hub.leaderboard.tablecache import cached_table, keep_table
from bundler.hub.leaderboard.tables import AllTasksTable, task_table_bytes
from bundler.hub.repo.download import fetch_bundle
from bundler.hub.repo.paths import (
    ALL_TABLE,
    BUNDLES_DIR,
    FILES_PER_BUNDLE,
    LEGACY_DIRS,
    README,
    ROWS_DIR,
    TASK_TABLES_DIR,
    TASKS_FILE,
    repo_archive,
    repo_paths,
    repo_row,
    repo_sidecar,
    row_ids_in,
    task_table,
)
from bundler.hub.tasks.definitions import MAX_TASKS_FILE_BYTES, TaskDefinitions
from bundler.local.layout import SIDECAR_SUFFIX, TEMP_PREFIX, BundleId, LayoutError
from bundler.local.verify import read_bundle

MAX_TABLE_BYTES = 1 << 30
"""The all-tasks table is read whole; a file past this is no table of a leaderboard."""


@dataclass
class BranchTables:
    """The leaderboard of one branch at `head`, and what the branch holds of its files."""

    revision: str
    head: str
    leaderboard: AllTasksTable
    held: dict[str, RemoteFile] = field(default_factory=dict)
    """The branch's table files and card, by path, to write only what changed."""
    legacy: list[str] = field(default_factory=list)
    """Layout-1 folders the next commit removes."""
    problems: list[str] = field(default_factory=list)
    """Bundles left out of the tables: a sidecar, row or bundle that could not be read or
    failed verification, each named."""
    current: bool = True
    """The tables on the branch were already true (nothing caught up, nothing upgraded)."""
    definitions: TaskDefinitions = field(default_factory=TaskDefinitions)
    """The maintainers' task definitions on the branch: the card ranks by them."""
    has_task_tables: bool = False
    """The branch has task tables, listed into `held` only when a commit is about to write
    them (`list_task_tables`): planning an upload needs only the all-tasks table."""

    def list_task_tables(self, session: HubSession) -> None:
        if self.has_task_tables:
            listed = session.list_folder(TASK_TABLES_DIR, self.head)
            self.held.update((p, e) for p, e in listed.items() if isinstance(e, RemoteFile))
            self.has_task_tables = False

    def files(self, repo_id: str, tasks: set[str] | None = None) -> dict[str, bytes]:
        """The tables and card for the leaderboard as it now is, those of them whose bytes
        differ from the branch's: the all-tasks table, the card, and the task tables of
        `tasks` (every task when None)."""
        board = self.leaderboard
        defined = self.definitions
        boards = [TaskBoard.of(task, board.rows(task), defined.get(task)) for task in board.tasks()]
        wanted = {b.task for b in boards} if tasks is None else tasks
        written = {ALL_TABLE: board.bytes()}
        written |= {task_table(b.task): task_table_bytes(b) for b in boards if b.task in wanted}
        written[README] = render_dataset_card(repo_id, boards, len(board)).encode("utf-8")
        return {
            path: data
            for path, data in written.items()
            if not holds_bytes(self.held.get(path), data)
        }

    def remote_files(self, session: HubSession, bundles: list[BundleId]) -> dict[str, RemoteFile]:
        """What the branch holds of these bundles' files: read from the table for the bundles
        it lists (no request), from the Hub for the others (one request per 250 bundles)."""
        index = self.leaderboard.index()
        found: dict[str, RemoteFile] = {}
        unlisted: list[str] = []
        for bundle in bundles:
            row = index.get(str(bundle))
            if row is None:
                unlisted += repo_paths(bundle)
                continue
            archive, sidecar = repo_archive(bundle), repo_sidecar(bundle)
            found[archive] = RemoteFile(archive, 0, "", row.archive_sha256)
            found[sidecar] = RemoteFile(sidecar, 0, row.sidecar_blob_id, None)
        if unlisted:
            found |= session.paths_info(unlisted, self.head)
        return found

    def change(
        self,
        session: HubSession,
        rows: list[TableRow],
        *,
        keep_card: Callable[[bytes], bool],
    ) -> TableChange:
        """What a commit that adds `rows` writes to keep the tables and card true: the
        all-tasks table, the tables of the tasks the rows touch (every task's when upgrading
        a layout-1 repository), and the card if `keep_card` takes it."""
        after = replace(self, leaderboard=self.leaderboard.updated(rows))
        touched = None if self.legacy else {row.task_name for row in rows}
        operations = [
            operation
            for operation in table_operations(session, after, touched)
            if not (operation.path_in_repo == README and not keep_card(_added_bytes(operation)))
        ]
        written = {
            operation.path_in_repo: _added_bytes(operation)
            for operation in operations
            if isinstance(operation, CommitOperationAdd)
        }
        return TableChange(operations, after.leaderboard, written)

    def committed(self, oid: str, leaderboard: AllTasksTable, written: dict[str, bytes]) -> None:
        """This branch after our commit `oid` wrote `leaderboard` and the files `written`."""
        self.head, self.leaderboard, self.legacy = oid, leaderboard, []
        for path, data in written.items():
            self.held[path] = RemoteFile(
                path, len(data), git_blob_id(data), hashlib.sha256(data).hexdigest()
            )

    def file_count(self) -> int:
        """The files the branch holds, as its leaderboard knows them: each bundle's own
        (FILES_PER_BUNDLE), the tables and card held, the task definitions and the Hub's
        `.gitattributes`; a file the bundler neither wrote nor listed is not counted."""
        defined = 1 if self.definitions.tasks else 0
        return FILES_PER_BUNDLE * len(self.leaderboard) + len(self.held) + defined + 1

    def stale_task_tables(self) -> list[str]:
        """Task tables on the branch whose task has no bundle any more."""
        tasks = set(self.leaderboard.tasks())
        prefix = f"{TASK_TABLES_DIR}/"
        return sorted(
            path
            for path in self.held
            if path.startswith(prefix)
            and path.removeprefix(prefix).removesuffix(".parquet") not in tasks
        )


@dataclass(frozen=True)
class TableChange:
    """The operations that keep a branch's tables and card true, and what they write."""

    operations: list[CommitOperationAdd | CommitOperationDelete]
    leaderboard: AllTasksTable
    written: dict[str, bytes]


def _added_bytes(operation: CommitOperationAdd | CommitOperationDelete) -> bytes:
    data = getattr(operation, "path_or_fileobj", b"")
    return data if isinstance(data, bytes) else b""


def table_operations(
    session: HubSession, state: BranchTables, tasks: set[str] | None = None
) -> list[CommitOperationAdd | CommitOperationDelete]:
    """What a commit to the branch writes to keep its tables and card true: the files whose
    bytes changed (the task tables of `tasks`, or of every task), the task tables of tasks
    left without bundles removed, and layout 1's folders removed."""
    state.list_task_tables(session)
    written = state.files(session.repo_id, tasks)
    if ALL_TABLE in written:  # the next read of the branch then downloads no table
        keep_table(session, ALL_TABLE, written[ALL_TABLE])
    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path, data) for path, data in written.items()
    ]
    operations += [CommitOperationDelete(path) for path in state.stale_task_tables()]
    operations += [CommitOperationDelete(folder, is_folder=True) for folder in state.legacy]
    return operations


def read_branch(
    session: HubSession, revision: str, progress: ProgressSink | None = None
) -> BranchTables:
    """The branch's leaderboard, caught up with its bundles (see the module docstring)."""
    progress = progress or NoProgress()
    head = session.head(revision)
    wanted = [ALL_TABLE, BUNDLES_DIR, README, *LEGACY_DIRS, TASK_TABLES_DIR, TASKS_FILE]
    top = session.entries(wanted, head)
    held = {
        path: entry
        for path, entry in top.items()
        if isinstance(entry, RemoteFile) and path != TASKS_FILE
    }
    bundles = top.get(BUNDLES_DIR)
    table = top.get(ALL_TABLE)
    state = BranchTables(revision, head, AllTasksTable.empty(), held)
    if isinstance(top.get(TASKS_FILE), RemoteFile):
        data = session.read_file(TASKS_FILE, head, MAX_TASKS_FILE_BYTES)
        state.definitions = TaskDefinitions.parse(data)
    state.has_task_tables = TASK_TABLES_DIR in top
    if isinstance(table, RemoteFile):
        state.leaderboard = _read_table(session, head, table)
        since = table.last_commit.oid if table.last_commit else None
        if isinstance(bundles, RemoteFolder) and not _unchanged_since(session, bundles, since):
            state.current = False
            catch_up(session, state, since, progress)
        elif bundles is None and len(state.leaderboard):
            state.current = False
            state.leaderboard = AllTasksTable.empty()
        return state
    if ROWS_DIR in top:
        state.current = False
        state.legacy = [f"{folder}/" for folder in LEGACY_DIRS if folder in top]
        _upgrade(session, state)
    elif isinstance(bundles, RemoteFolder):
        state.current = False
        catch_up(session, state, None, progress)
    return state


def _read_table(session: HubSession, head: str, listed: RemoteFile) -> AllTasksTable:
    """The all-tasks table at `head`, listed as `listed`: the local copy when it holds those
    very bytes (bundler.hub.leaderboard.tablecache), else downloaded (and kept)."""
    data = cached_table(session, ALL_TABLE, listed, MAX_TABLE_BYTES)
    if data is None:
        data = session.read_file(ALL_TABLE, head, MAX_TABLE_BYTES)
        keep_table(session, ALL_TABLE, data)
    try:
        return AllTasksTable.read(data)
    except RowError as error:
        raise HubError(
            f"{ALL_TABLE}: {error}",
            hint="regenerate the card in full with a write token to derive the tables again",
            remedy="derive-tables",
        ) from None


def _unchanged_since(session: HubSession, bundles: RemoteFolder, since: str | None) -> bool:
    """Whether `bundles/` is what it was at `since`, the commit that wrote the tables."""
    if since is None:
        return False
    if bundles.last_commit is not None and bundles.last_commit.oid == since:
        return True
    then = session.entries([BUNDLES_DIR], since).get(BUNDLES_DIR)
    return isinstance(then, RemoteFolder) and then.tree_id == bundles.tree_id


def catch_up(
    session: HubSession, state: BranchTables, since: str | None, progress: ProgressSink
) -> None:
    """Derive again the rows of the bundles whose sidecar changed between `since` and the
    head (every bundle when `since` is None), reading only the folders that changed."""
    now = session.list_folder(BUNDLES_DIR, state.head)
    then = session.list_folder(BUNDLES_DIR, since) if since is not None else {}
    index = state.leaderboard.index()
    changed: dict[str, RemoteFile] = {}
    removed: set[str] = set()
    for folder in sorted(set(now) | set(then)):
        a, b = then.get(folder), now.get(folder)
        if isinstance(a, RemoteFolder) and isinstance(b, RemoteFolder) and a.tree_id == b.tree_id:
            continue
        sidecars = _sidecars(session, folder, state.head) if b is not None else {}
        for path, sidecar in sidecars.items():
            bundle = _bundle_of(path)
            row = index.get(str(bundle)) if bundle is not None else None
            if bundle is not None and (row is None or row.sidecar_blob_id != sidecar.blob_id):
                changed[str(bundle)] = sidecar
        known = {str(b) for b in map(_bundle_of, sidecars) if b is not None}
        removed |= {i for i in index if i.startswith(f"{Path(folder).name}/") and i not in known}
    rows = _derive(session, state, changed, progress)
    removed |= set(changed) - {row.bundle_id for row in rows}
    state.leaderboard = state.leaderboard.updated(rows, removed)


def _sidecars(session: HubSession, folder: str, head: str) -> dict[str, RemoteFile]:
    listed = session.list_folder(folder, head, expand=True)
    return {
        path: entry
        for path, entry in listed.items()
        if isinstance(entry, RemoteFile) and path.endswith(SIDECAR_SUFFIX)
    }


def _bundle_of(sidecar_path: str) -> BundleId | None:
    relative = sidecar_path.removeprefix(f"{BUNDLES_DIR}/").removesuffix(SIDECAR_SUFFIX)
    try:
        return BundleId.parse(relative)
    except LayoutError:
        return None


def _derive(
    session: HubSession,
    state: BranchTables,
    changed: dict[str, RemoteFile],
    progress: ProgressSink,
) -> list[TableRow]:
    """Download, verify and derive the row of each changed bundle; a bundle that fails is
    left out of the tables and named in `state.problems`."""
    rows: list[TableRow] = []
    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    try:
        for bundle_id, sidecar in sorted(changed.items()):
            bundle = BundleId.parse(bundle_id)
            listed = {sidecar.path, sidecar.path.removesuffix(SIDECAR_SUFFIX) + ".tar.zst"}
            archive = fetch_bundle(session, bundle, state.head, listed, staging)
            reading = read_bundle(archive, progress)
            verification = reading.verification()
            if not verification.ok or reading.sidecar is None or reading.metrics_text is None:
                state.problems.append(
                    f"{sidecar.path}: failed verification ({verification.describe_failures()}); "
                    "left out of the tables"
                )
                continue
            date = sidecar.last_commit.date if sidecar.last_commit else None
            published = utc_timestamp(date) if date else utc_timestamp()
            row = build_row(reading.sidecar, reading.metrics_text, published)
            rows.append(TableRow(**row.model_dump(), sidecar_blob_id=sidecar.blob_id))
            archive.unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return rows


def _upgrade(session: HubSession, state: BranchTables) -> None:
    """A layout-1 repository: its tables from the rows it holds (which keep each bundle's
    first publication), matched with the sidecars beside the archives."""
    rows_listed = session.list_files(ROWS_DIR, state.head)
    sidecars = session.list_files(BUNDLES_DIR, state.head)
    rows: list[TableRow] = []
    for bundle in row_ids_in(rows_listed):
        path = repo_row(bundle)
        sidecar = sidecars.get(f"{BUNDLES_DIR}/{bundle}{SIDECAR_SUFFIX}")
        try:
            row = read_row(session.read_small_file(path, state.head))
        except (TemporaryError, HubAccessError):
            raise
        except (HubError, RowError) as error:
            state.problems.append(f"{path}: not a readable row ({error}); left out of the tables")
            continue
        if sidecar is None:
            state.problems.append(f"{path}: its bundle has no sidecar; left out of the tables")
            continue
        rows.append(TableRow(**row.model_dump(), sidecar_blob_id=sidecar.blob_id))
    state.leaderboard = AllTasksTable.of(rows)
