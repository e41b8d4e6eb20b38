"""The leaderboard on a branch: derived from its verified bundles, never taken on trust, and
the files a commit writes to keep its tables and card true.

Every commit of the bundler that writes the tables writes beside them the record of what it
derived (`bundler.hub.leaderboard.record`); the record believed is the last one written by a
commit that is not a pull request merged on the Hub (`bundler.hub.leaderboard.provenance`).
Reading a branch costs the same few requests at any size: its head, the expanded entries of the
tables, `bundles/`, the card and the record (one request; on a branch without a card, after a
listing of the top folder: `firstlisting`), and one listing of the tables' folder (parts, task
tables, charts). The all-tasks table is taken as the record's commit wrote it,
checked byte for byte (a local copy of those bytes is used when there is one), each part when
first needed (a part the branch no longer holds as recorded is read at once, to be written
again): a commit that only adds bundles reads the last part and the task tables as that commit
wrote them, and ranks each task from its table's best rows and those added
(`AllTasksTable.best`), at the same cost at any size; `bundles/` is compared with that commit's
tree, and what changed since is caught up (`bundler.hub.leaderboard.catchup`) at the cost of
what changed. A table, task table, chart or card that no longer holds the bytes recorded was
edited outside the bundler and is derived again by the next commit. A branch whose tables no
record vouches for (one written by an older version, or by hand), and a repository still in
layout 1 (a row file per bundle under `rows/` and `tasks/`, removed by the commit that writes
its tables), have their board derived from every bundle. So has one in layout 2, whose record is
of an older format: its bundles, kept with no shard, are verified and moved into their shards
by the next commit (`moves`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete

from bundler.core.errors import HubAccessError, HubError, RowError, TemporaryError
from bundler.core.limits import MAX_SIGNERS_FILE_BYTES, MAX_TASKS_FILE_BYTES
from bundler.core.progress import NoProgress, ProgressSink
from bundler.hub.client.commit import Operation
from bundler.hub.client.remote import RemoteFile, RemoteFolder
from bundler.hub.client.session import PATHS_PER_REQUEST, HubSession
from bundler.hub.leaderboard.card import BOARD_ROWS, render_dataset_card
from bundler.hub.leaderboard.card_section import has_section, placed, with_board_section
from bundler.hub.leaderboard.catchup import catch_up
from bundler.hub.leaderboard.chart import charted_tasks, drawn_charts, shown_charts, stale_charts
from bundler.hub.leaderboard.firstlisting import top_entries
from bundler.hub.leaderboard.format3 import format_3_table
from bundler.hub.leaderboard.provenance import read_kept, vouched_record
from bundler.hub.leaderboard.ranking import TaskScoring
from bundler.hub.leaderboard.record import (
    LAST_NANOSECOND_FORMAT,
    LAST_ONE_FILE_FORMAT,
    BoardRecord,
    DerivedFile,
)
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.leaderboard.tablecache import cached_table, keep_table
from bundler.hub.leaderboard.tables import (
    TASK_TABLE_ROWS,
    AllTasksTable,
    BestRows,
    TablePart,
    layout_2_table,
    task_table_bytes,
)
from bundler.hub.repo.paths import (
    ALL_TABLE,
    ALLOWED_SIGNERS,
    BUNDLES_DIR,
    CHARTS_DIR,
    FILES_PER_BUNDLE,
    LEGACY_DIRS,
    README,
    RECORD,
    TABLE_PARTS_DIR,
    TABLE_SUFFIX,
    TABLES_DIR,
    TASK_TABLES_DIR,
    TASKS_FILE,
    part_number,
    repo_archive,
    repo_paths,
    repo_sidecar,
    task_table,
    unsharded_paths,
)
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.layout import BundleId

if TYPE_CHECKING:
    from bundler.local.allowed_signers import AllowedSigners

MAX_TABLE_BYTES = 1 << 30
"""The all-tasks table is read whole; a file past this is no table of a leaderboard."""


@dataclass
class BranchTables:
    """The leaderboard of one branch at `head`, and what the branch holds of its files."""

    revision: str
    head: str
    leaderboard: AllTasksTable
    held: dict[str, RemoteFile] = field(default_factory=dict)
    """The branch's tables, charts and card, by path, to write only what changed."""
    legacy: list[str] = field(default_factory=list)
    """Layout-1 folders the next commit removes."""
    record: BoardRecord | None = None
    """What the bundler's last commit to the branch derived; None: nothing vouches for them."""
    left_off: dict[str, str] = field(default_factory=dict)
    """Bundles left off the board, by the path of the file that names them, with why: a file
    missing, a bundle that could not be read or failed verification."""
    moves: dict[BundleId, bytes] = field(default_factory=dict)
    """Verified bundles found where layout 2 kept them, with their sidecar's bytes: the next
    commit moves them into their shards (bundler.hub.repo.paths)."""
    retired: set[BundleId] = field(default_factory=set)
    """Bundles of `moves` that the next commit writes anew in their shards: their files where
    layout 2 kept them are removed, never copied over the new ones."""
    changed_tasks: set[str] = field(default_factory=set)
    """Tasks whose bundles changed since the record's commit (caught up), or every task of a
    format-3 record (tables in nanoseconds): the next commit writes their tables again."""
    scores: dict[str, str] = field(default_factory=dict)
    """What each task's rows are scored by (`TaskScoring.digest`), as the record says: a task
    whose definition has changed since is scored again."""
    definitions: TaskDefinitions = field(default_factory=TaskDefinitions)
    """The maintainers' task definitions on the branch: the card ranks by them."""
    signers: AllowedSigners | None = None
    """Who may sign the branch's bundles (None: nobody named): the card names each principal."""
    card: str | None = None
    """The card on the branch where its owner shares it (bundler.hub.leaderboard.card_section,
    `init --adopt`): the next card keeps all but the board's section. None: the board's own."""
    absent: set[str] = field(default_factory=set)
    """Bundles the branch holds no file of (`remote_files`): their rows go to the last part."""
    undrawn: dict[str, str] = field(default_factory=dict)
    """The charts the last `rendered` could not draw, with why (`drawn_charts`)."""
    passed_over: bool = False
    """A merged pull request wrote (or deleted) the branch's record, which is not believed
    (bundler.hub.leaderboard.provenance): the next commit writes the record again."""
    no_bundles: bool = False
    """The branch has no `bundles/`: no bundle's file is asked of the Hub (`remote_files`)."""

    @property
    def problems(self) -> list[str]:
        """Each bundle left off the board, in one line."""
        return [
            f"{path}: {why}; left out of the tables" for path, why in sorted(self.left_off.items())
        ]

    def edited(self) -> set[str]:
        """The tables and card on the branch that do not hold the bytes the record names:
        changed outside the bundler (or never written by it)."""
        if self.record is None:
            return set(self.held)
        found = {path for path, held in self.held.items() if not self.record.holds(path, held)}
        return found | {path for path in self.record.files if path not in self.held}

    def rendered(self, repo_id: str, tasks: set[str] | None = None) -> dict[str, bytes]:
        """The tables and card for the leaderboard as it now is: the all-tasks table's parts,
        the card, and the task tables of `tasks` (every task when None, or when no record
        of tallies vouches for the tables: an older version's), of every task whose bundles
        changed since the record's commit or whose table was edited outside the bundler, and
        of every task scored anew. The rows are scored first (`settle`)."""
        touched = None  # every task's table, where no record (of tallies) vouches for them
        if tasks is not None and self.record is not None and self.record.tasks is not None:
            touched = tasks | self.changed_tasks | _tasks_of(self.edited())
        scored_by = dict(self.scores)
        scorings = self.settle(touched)
        if touched is not None:  # a task scored anew is ranked anew
            touched |= {task for task, s in scorings.items() if scored_by.get(task) != s.digest}
        limits = {
            task: (scoring, TASK_TABLE_ROWS if touched is None or task in touched else BOARD_ROWS)
            for task, scoring in scorings.items()
        }
        boards = self.leaderboard.boards(limits)
        wanted = set(limits) if touched is None else touched
        written = self.leaderboard.files()
        written |= {task_table(b.task): task_table_bytes(b) for b in boards if b.task in wanted}
        drawing = drawn_charts(boards, wanted, self.held, self.edited(), self.record)
        written |= drawing.drawn
        self.undrawn = drawing.failed
        charts = shown_charts(boards, self.held, self.record, written)
        count = len(self.leaderboard)
        card = render_dataset_card(repo_id, boards, count, self.signers, charts=charts)
        written[README] = placed(card, self.card).encode("utf-8", "surrogateescape")
        return written

    def settle(self, touched: set[str] | None) -> dict[str, TaskScoring]:
        """Each task's scoring, its rows scored by it: every row of a task whose scoring is
        not the one its rows were scored by (a definition changed, or nothing says), the new
        rows of the others. A task not `touched` (every task is, when None) keeps the metric
        its rows are scored by, unless its definition says another. A task whose scoring is
        known without reading its rows (`known_scoring`) has every row scored by it already.
        The scores are a new mapping: a copy of this branch (`with_rows`) never changes what
        the original says."""
        scorings: dict[str, TaskScoring] = {}
        for task in self.leaderboard.tasks():
            if (known := self.known_scoring(task)) is not None:
                scorings[task] = known
                continue
            settled = touched is not None and task not in touched and task in self.scores
            scoring = self.leaderboard.scoring(task, self.definitions.get(task), settled=settled)
            every = self.scores.get(task) != scoring.digest
            if every or not settled:
                self.leaderboard = self.leaderboard.rescored(task, scoring, every=every)
            scorings[task] = scoring
        self.scores = {task: scoring.digest for task, scoring in scorings.items()}
        return scorings

    def known_scoring(self, task: str) -> TaskScoring | None:
        """How the task's rows are scored, where that is known without reading them: the task
        has its best rows (`AllTasksTable.best`), and a definition or the record's metric
        gives the scoring the record says its rows are scored by. None otherwise."""
        tally = self.leaderboard.counted(task)
        if tally is None or task not in self.leaderboard.best:
            return None
        definition = self.definitions.get(task)
        if definition is None and tally.metric is None:
            return None  # the first bundle with a numeric metric would set it
        scoring = TaskScoring(definition, None if definition else tally.metric)
        return scoring if self.scores.get(task) == scoring.digest else None

    def appended(self, rows: Sequence[TableRow]) -> AllTasksTable:
        """The leaderboard with the rows of bundles it does not hold, each scored where its
        task's scoring is known without reading the task's rows (the others are scored by
        `settle`, which then reads them)."""
        scored, unsettled = [], set()
        for row in rows:
            scoring = self.known_scoring(row.task_name)
            if scoring is None:
                unsettled.add(row.task_name)
                scored.append(row)
            else:
                scored.append(row.model_copy(update=asdict(scoring.score(row))))
        return self.leaderboard.appended(scored, unsettled)

    def remote_files(self, session: HubSession, bundles: list[BundleId]) -> dict[str, RemoteFile]:
        """What the branch holds of these bundles' files: asked of the Hub (one request per
        PATHS_PER_REQUEST paths), unless the parts of the table not yet read are fewer than
        those requests: then read from the table for the bundles it lists, and asked of the
        Hub for the others. So a commit of a few new bundles reads no part but the last.
        Bundles the branch holds no file of are `absent`."""
        owned = {str(bundle): repo_paths(bundle) for bundle in bundles}  # derived once each
        paths = [path for pair in owned.values() for path in pair]
        found: dict[str, RemoteFile] = {}
        if self.leaderboard.unfetched() < -(-len(paths) // PATHS_PER_REQUEST):
            index = self.leaderboard.indexed(owned)
            for name, (archive, sidecar) in owned.items():
                if (row := index.get(name)) is not None:
                    found[archive] = RemoteFile(archive, 0, "", row.archive_sha256)
                    found[sidecar] = RemoteFile(sidecar, 0, row.sidecar_blob_id, None)
            paths = [path for path in paths if path not in found]
        if paths and not self.no_bundles:
            found |= session.paths_info(paths, self.head)
        self.absent |= {name for name, pair in owned.items() if not found.keys() & set(pair)}
        return found

    def with_rows(self, rows: list[TableRow]) -> BranchTables:
        """This branch once a commit adds the bundles of `rows`: their rows in the place of
        any old ones (added to the last part, for `absent` bundles alone), and whatever was
        left off of those bundles no longer so."""
        bundles = {BundleId.parse(row.bundle_id) for row in rows}
        committed = {path for bundle in bundles for path in repo_paths(bundle)}
        left_off = {path: why for path, why in self.left_off.items() if path not in committed}
        moves = {bundle: data for bundle, data in self.moves.items() if bundle not in bundles}
        new = all(row.bundle_id in self.absent for row in rows)
        return replace(
            self,
            leaderboard=self.appended(rows) if new else self.leaderboard.updated(rows),
            left_off=left_off,
            moves=moves,
            retired=self.retired | (self.moves.keys() & bundles),
        )

    def change(
        self,
        session: HubSession,
        rows: list[TableRow],
        *,
        keep_card: Callable[[bytes], bool],
    ) -> TableChange:
        """What a commit that adds `rows` writes to keep the tables and card true: the
        all-tasks table, the tables of the tasks the rows touch (every task's when upgrading
        a layout-1 repository), the card if `keep_card` takes it, and the record."""
        after = self.with_rows(rows)
        touched = None if self.legacy else {row.task_name for row in rows}
        operations = [
            operation
            for operation in table_operations(session, after, touched, with_bundles=True)
            if not (operation.path_in_repo == README and not keep_card(_added_bytes(operation)))
        ]
        written = {
            operation.path_in_repo: _added_bytes(operation)
            for operation in operations
            if isinstance(operation, CommitOperationAdd)
        }
        bundles = {row.bundle_id for row in rows}
        return TableChange(operations, after.leaderboard, written, bundles, after.undrawn)

    def committed(self, oid: str, change: TableChange) -> None:
        """This branch after our commit `oid` made `change` (its card left out of `written`
        when the Hub refused it)."""
        self.head, self.leaderboard, self.legacy = oid, change.leaderboard, []
        self.held = {path: file for path, file in self.held.items() if path not in change.removed}
        self.moves, self.retired, self.changed_tasks = {}, set(), set()
        self.absent -= change.bundles
        self.undrawn = dict(change.undrawn)
        self.passed_over = self.no_bundles = False
        for path, data in change.written.items():
            derived = DerivedFile.of(data)
            if path == RECORD:
                self.record = BoardRecord.parse(data)
                self.left_off = dict(self.record.left_off) if self.record else {}
                self.scores = dict(self.record.scoring) if self.record else {}
            else:
                self.held[path] = RemoteFile(path, len(data), derived.blob_id, derived.sha256)

    def record_of(self, files: dict[str, DerivedFile]) -> BoardRecord:
        """The record of a commit on this branch's head that derived `files`."""
        return BoardRecord(
            parent=self.head,
            files=files,
            left_off=self.left_off,
            scoring=self.scores,
            tasks=self.leaderboard.tallies(),
            card_shared=self.card is not None and has_section(self.card),
        )

    def file_count(self) -> int:
        """The files the branch holds, as its leaderboard knows them: each bundle's own
        (FILES_PER_BUNDLE), the tables and card held, the record, the task definitions and the
        Hub's `.gitattributes`; a file the bundler neither wrote nor listed is not counted."""
        kept = int(bool(self.definitions.tasks)) + int(self.record is not None)
        return FILES_PER_BUNDLE * len(self.leaderboard) + len(self.held) + kept + 1

    def gone(self) -> list[str]:
        """Files on the branch that the leaderboard no longer has: task tables whose task has
        no bundle any more, parts of the all-tasks table left empty, and the all-tasks table
        in one file (layout 2)."""
        tasks = set(self.leaderboard.tasks())
        parts = self.leaderboard.part_paths()
        return sorted(
            path
            for path in self.held
            if (path in _task_tables([path]) and _tasks_of({path}) - tasks)
            or (part_number(path) is not None and path not in parts)
            or path == ALL_TABLE
        )


def _task_tables(paths: Iterable[str]) -> list[str]:
    return [path for path in paths if path.startswith(f"{TASK_TABLES_DIR}/")]


def _tasks_of(paths: Iterable[str]) -> set[str]:
    """The tasks whose tables these are (other paths left out)."""
    prefix = f"{TASK_TABLES_DIR}/"
    return {p.removeprefix(prefix).removesuffix(TABLE_SUFFIX) for p in _task_tables(paths)}


@dataclass(frozen=True)
class TableChange:
    """The operations that keep a branch's tables and card true, and what they write."""

    operations: list[Operation]
    leaderboard: AllTasksTable
    written: dict[str, bytes]
    bundles: set[str] = field(default_factory=set)
    """The bundles whose rows the change adds or replaces."""
    undrawn: dict[str, str] = field(default_factory=dict)
    """The charts it goes without, with why (`BranchTables.undrawn`)."""

    @property
    def removed(self) -> set[str]:
        """The files the operations remove."""
        return {
            operation.path_in_repo
            for operation in self.operations
            if isinstance(operation, CommitOperationDelete) and not operation.is_folder
        }


def _added_bytes(operation: Operation) -> bytes:
    data = getattr(operation, "path_or_fileobj", b"")
    return data if isinstance(data, bytes) else b""


def table_operations(
    session: HubSession,
    state: BranchTables,
    tasks: set[str] | None = None,
    *,
    with_bundles: bool = False,
) -> list[Operation]:
    """What a commit to the branch writes to keep its tables and card true: the files whose
    bytes changed (the parts of the all-tasks table whose rows changed, the task tables of
    `tasks`, or of every task, and of any edited outside the bundler), what the leaderboard no
    longer has removed (`BranchTables.gone`), layout 1's folders removed, and the record of
    it all. Nothing when all is already true, unless the commit
    changes bundles (`with_bundles`): its record then marks `bundles/` as the bundler left it,
    and the next read compares no tree."""
    rendered = state.rendered(session.repo_id, tasks)
    charted = charted_tasks(state.leaderboard.tasks(), state.definitions)
    stale = state.gone() + stale_charts(state.held, state.record, rendered, charted)
    written = {
        p: data
        for p, data in rendered.items()
        if not DerivedFile.of(data).matches(state.held.get(p))
    }
    kept = {} if state.record is None else state.record.files
    files = {p: kept[p] for p in state.held if p in kept and p not in rendered and p not in stale}
    files |= {path: DerivedFile.of(data, path) for path, data in rendered.items()}
    record = state.record_of(files)
    unchanged = state.record is not None and (files, state.left_off, state.scores) == (
        state.record.files,
        state.record.left_off,
        state.record.scoring,
    )  # a record of no tallies (an older version's) is written again by the next commit
    upgrade = state.legacy or state.moves or state.retired
    if unchanged and not (written or stale or upgrade or with_bundles or state.passed_over):
        return []
    written[RECORD] = record.to_bytes()
    for kept_path, data in written.items():  # the next read of the branch downloads none
        if kept_path in (RECORD, README) or part_number(kept_path) is not None:
            keep_table(session, kept_path, data)
    operations: list[Operation] = [CommitOperationAdd(path, data) for path, data in written.items()]
    operations += _moves(state.moves, state.retired)
    operations += [CommitOperationDelete(path) for path in stale]
    operations += [CommitOperationDelete(folder, is_folder=True) for folder in state.legacy]
    return operations


def _moves(moves: dict[BundleId, bytes], retired: set[BundleId]) -> list[Operation]:
    """Each layout-2 bundle into its shard: the archive copied on the Hub (nothing uploaded),
    the sidecar written again from its verified bytes, the old files removed; of a `retired`
    bundle (written anew by the commit), the old files removed only."""
    operations: list[Operation] = []
    for bundle, sidecar in sorted(moves.items()):
        operations += [
            CommitOperationCopy(unsharded_paths(bundle)[0], repo_archive(bundle)),
            CommitOperationAdd(repo_sidecar(bundle), sidecar),
        ]
    for bundle in sorted(moves.keys() | retired):
        operations += [CommitOperationDelete(path) for path in unsharded_paths(bundle)]
    return operations


def read_branch(
    session: HubSession, revision: str, progress: ProgressSink | None = None
) -> BranchTables:
    """The branch's leaderboard as its bundles make it (see the module docstring)."""
    progress = progress or NoProgress()
    head = session.head(revision)
    wanted = [ALL_TABLE, TABLES_DIR, TABLE_PARTS_DIR, BUNDLES_DIR, README, RECORD, *LEGACY_DIRS]
    rules = [TASKS_FILE, ALLOWED_SIGNERS]
    top = top_entries(session, [*wanted, TASK_TABLES_DIR, CHARTS_DIR, *rules], head)
    folders = [folder for folder in (TABLE_PARTS_DIR, TASK_TABLES_DIR, CHARTS_DIR) if folder in top]
    listed = session.list_files(TABLES_DIR, head) if folders else {}  # one listing for all
    held = {p: e for p, e in top.items() if p in (ALL_TABLE, README) and isinstance(e, RemoteFile)}
    held.update((p, e) for p, e in listed.items() if p.rpartition("/")[0] in folders)
    state = BranchTables(revision, head, AllTasksTable.empty(), held)
    state.no_bundles = BUNDLES_DIR not in top
    if isinstance(top.get(TASKS_FILE), RemoteFile):
        data = session.read_file(TASKS_FILE, head, MAX_TASKS_FILE_BYTES)
        state.definitions = TaskDefinitions.parse(data)
    if isinstance(top.get(ALLOWED_SIGNERS), RemoteFile):
        from bundler.local.allowed_signers import AllowedSigners  # and cryptography: here only

        data = session.read_file(ALLOWED_SIGNERS, head, MAX_SIGNERS_FILE_BYTES)
        state.signers = AllowedSigners.parse(data)
    state.legacy = [f"{folder}/" for folder in LEGACY_DIRS if folder in top]
    entry = top.get(RECORD)
    listed_record = entry if isinstance(entry, RemoteFile) else None
    found = None
    if not state.legacy:
        found = vouched_record(session, listed_record, top.get(TABLES_DIR))
        last = listed_record.last_commit if listed_record is not None else None
        state.passed_over = found is not None and (last is None or found.commit != last.oid)
    since = found.commit if found is not None else None
    state.record = found.record if found is not None else None
    state.card = _shared_card(session, state.record, held.get(README), head)
    vouched = None
    if since is not None and state.record is not None:
        vouched = _vouched_table(session, state.record, since, held)
    bundles = top.get(BUNDLES_DIR)
    if vouched is None or since is None or state.record is None:
        if isinstance(bundles, RemoteFolder):  # nothing vouches for the tables: derive them
            catch_up(session, state, None, progress)
        return state
    state.leaderboard, state.left_off = vouched, dict(state.record.left_off)
    state.scores = dict(state.record.scoring)
    if state.record.format == LAST_NANOSECOND_FORMAT:  # its task tables are written again too
        state.changed_tasks |= set(vouched.tasks())
    if bundles is None:
        state.leaderboard = AllTasksTable.empty()
    elif isinstance(bundles, RemoteFolder) and not _unchanged_since(session, bundles, since):
        catch_up(session, state, since, progress)
    return state


def _shared_card(
    session: HubSession, record: BoardRecord | None, listed: RemoteFile | None, head: str
) -> str | None:
    """The branch's card where it may hold its owner's text beside the board's section: where
    the record says so, or where there is no record yet (`init --adopt` marks the card it
    found). A card the board owns whole is not read, even when edited since: a merged pull
    request that wrote markers into it must not make its text the owner's. A shared card whose
    section's markers were taken out gets a new section: the text in it is the owner's."""
    if listed is None:
        return None
    if record is not None and not record.card_shared:
        return None  # the board's own card: written again whole
    card = read_kept(session, README, listed, head).decode("utf-8", "surrogateescape")
    if record is not None and record.card_shared and not has_section(card):
        return with_board_section(card)
    return card


def _vouched_table(
    session: HubSession, record: BoardRecord, commit: str, held: dict[str, RemoteFile]
) -> AllTasksTable | None:
    """The all-tasks table as the record's commit wrote it: each part from the local copy of
    its bytes (bundler.hub.leaderboard.tablecache), else as it was at that commit, if it holds
    them; a record of format 2 names the table in one file, split into parts here, and one of
    format 3 names parts in nanoseconds, each read and written again in today's types. None
    when no such table is there (the record was edited, or names none).

    Where the record tallies the tasks, no part is read here but those the branch no longer
    holds as recorded (edited since, to be written again): each other is read when first
    needed (`TablePart.later`), and each task is ranked from its table as the record's commit
    wrote it and the rows added since (`BestRows`). So a commit adding bundles reads the last
    part and the task tables, and one after a merge that edited the tables reads what it
    edited besides, whatever the size of the table."""
    parts = [path for path in record.files if part_number(path) is not None]
    current = record.format > LAST_NANOSECOND_FORMAT
    if current and record.tasks is not None:

        def vouched(path: str) -> Callable[[], bytes]:
            return lambda: _vouched_bytes(session, record, path, commit)

        best = {
            task: BestRows.of_table(vouched(task_table(task)))
            for task in record.tasks
            if task_table(task) in record.files
        }
        lazy = {part_number(path) or 0: TablePart.later(vouched(path)) for path in parts}
        for path in parts:
            if not record.holds(path, held.get(path)):
                _ = lazy[part_number(path) or 0].data  # fetched: `files` writes it again
        return AllTasksTable(lazy, dict(record.tasks), best)
    if record.format == LAST_ONE_FILE_FORMAT:
        data = _vouched_file(session, record, ALL_TABLE, commit)
        try:
            return layout_2_table(data) if data is not None else None
        except RowError:
            return None
    files: dict[str, bytes] = {}
    for path in parts:
        if (data := _vouched_file(session, record, path, commit)) is None:
            return None
        files[path] = data
    try:
        return AllTasksTable.read(files) if current else format_3_table(files)
    except RowError:
        return None


def _vouched_file(session: HubSession, record: BoardRecord, path: str, commit: str) -> bytes | None:
    """The bytes the record names at `path`: the local copy of them, else the file at
    `commit`, if it holds them (and kept); None when neither does."""
    derived = record.files.get(path)
    if derived is None:
        return None
    data = cached_table(session, path, derived.listed_as(path), MAX_TABLE_BYTES)
    if data is None:
        try:
            data = session.read_file(path, commit, MAX_TABLE_BYTES)
        except (TemporaryError, HubAccessError):
            raise
        except HubError:  # not there, or too large: no table of ours
            return None
        if DerivedFile.of(data) != derived:
            return None
        keep_table(session, path, data)
    return data


def _vouched_bytes(session: HubSession, record: BoardRecord, path: str, commit: str) -> bytes:
    """The bytes the record names at `path`, read when a lazy part or task table is needed:
    the record's commit held them (the bundler's commit wrote or found them so), so anything
    else is the Hub's fault, and ends the command (RowError)."""
    data = _vouched_file(session, record, path, commit)
    if data is None:
        raise RowError(f"{path} no longer holds the bytes {RECORD} names")
    return data


def _unchanged_since(session: HubSession, bundles: RemoteFolder, since: str) -> bool:
    """Whether `bundles/` is what it was at `since`, the commit that wrote the record."""
    if bundles.last_commit is not None and bundles.last_commit.oid == since:
        return True
    then = session.entries([BUNDLES_DIR], since).get(BUNDLES_DIR)
    return isinstance(then, RemoteFolder) and then.tree_id == bundles.tree_id
