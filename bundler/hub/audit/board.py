"""What the board publishes beside the bundles, read in bounded memory and compared with what
its parts give: every part of the all-tasks table (each checked before it is decoded,
bundler.hub.audit.parts; a row held twice is a finding), every task table, every chart and the
card's boards (each compared with what the bundler would write from the parts' rows, by the
branch's task definitions and allowed signers).

The rows of the parts are compared with the bundles by bundler.hub.audit.findings; what is
compared here is derived from those rows as `card` derives it (`BranchTables.rendered`, the
bundler's own code, so the audit can never judge by other rules than the ones that wrote the
board). A task table, chart or card holding the bytes so derived costs no download: the
listing names their sha256. One that differs is read, within its bounds, to say what differs:
the rows it ranks that no part holds, or the first rank at which it departs from the parts; the
card's board lines that no table gives, or that it lacks.

Every file read is kept (bundler.hub.leaderboard.tablecache): a run that the rate limit stops
leaves what it downloaded for the next, which reads each part again from this machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bundler.core.errors import HubAccessError, HubError, RowError, TemporaryError
from bundler.hub.audit.findings import AuditFinding
from bundler.hub.audit.pace import Pacer
from bundler.hub.audit.parts import MAX_TABLE_DECODED_BYTES, repeated, table_problem
from bundler.hub.client.remote import RemoteFile
from bundler.hub.client.session import MAX_SMALL_FILE_BYTES, HubSession
from bundler.hub.leaderboard.branch import BranchTables
from bundler.hub.leaderboard.chart import charts_available
from bundler.hub.leaderboard.columns import decoded, validated
from bundler.hub.leaderboard.format3 import format_3_table
from bundler.hub.leaderboard.record import DerivedFile
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.leaderboard.tablecache import cached_table, keep_table
from bundler.hub.leaderboard.tables import PART_ROWS, TASK_TABLE_ROWS, AllTasksTable, TablePart
from bundler.hub.repo.paths import (
    CHARTS_DIR,
    README,
    TABLE_PARTS_DIR,
    TASK_TABLES_DIR,
    bundle_of_path,
    part_number,
)
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.allowed_signers import AllowedSigners

BOARD_SECTIONS = ("## Across tasks", "## Leaderboards")
"""The card's headings under which the bundler writes its boards, up to the next heading of
their level."""
MAX_SHOWN_LINE = 200
"""A card line quoted in a finding is cut to this."""


@dataclass
class PublishedBoard:
    """What the board publishes beside the bundles, as the audit read it."""

    rows: dict[str, TableRow] = field(default_factory=dict)
    """Each bundle's row, from the first part that holds it."""
    held_in: dict[str, str] = field(default_factory=dict)
    """The part each row was read from."""
    findings: list[AuditFinding] = field(default_factory=list)
    listed: dict[str, RemoteFile] = field(default_factory=dict)
    """The task tables, charts and card, by path."""
    parts: list[RemoteFile] = field(default_factory=list)
    earlier_format: bool = False
    """Whether a part is in the types of the record's format 3: the board was last written by
    an earlier release, whose task tables, charts and card this one does not draw alike."""


def list_board(session: HubSession, head: str) -> PublishedBoard:
    """The parts, task tables, charts and card the branch lists (nothing downloaded)."""
    board = PublishedBoard()
    top = session.entries([TABLE_PARTS_DIR, TASK_TABLES_DIR, CHARTS_DIR, README], head)
    if isinstance(listed := top.get(README), RemoteFile):
        board.listed[README] = listed
    for folder in (TABLE_PARTS_DIR, TASK_TABLES_DIR, CHARTS_DIR):
        if folder not in top:
            continue
        for path, entry in sorted(session.list_folder(folder, head).items()):
            if not isinstance(entry, RemoteFile):
                continue
            if folder == TABLE_PARTS_DIR:
                if part_number(path) is not None:
                    board.parts.append(entry)
            else:
                board.listed[path] = entry
    return board


def read_parts(session: HubSession, head: str, board: PublishedBoard, pacer: Pacer) -> None:
    """Every part's rows into `board`, each part checked before it is decoded; what no part
    gives (refused, unreadable, a row held twice) as findings."""
    counted: list[str] = []
    for listed in board.parts:
        path = listed.path
        try:
            data = _read(session, head, listed, MAX_TABLE_DECODED_BYTES, pacer)
            if (problem := table_problem(data, PART_ROWS)) is not None:
                raise RowError(problem)
            part, earlier = _published_part(path, data)
            board.earlier_format |= earlier
            cells = part.full().to_pylist() if part.rows else []
            rows = [validated(row, TableRow) for row in cells]
        except RowError as error:
            board.findings.append(_unreadable(path, str(error)))
            continue
        for row in rows:
            counted.append(row.bundle_id)
            if row.bundle_id in board.rows:
                continue
            board.rows[row.bundle_id] = row
            board.held_in[row.bundle_id] = path
        for bundle_id in repeated(row.bundle_id for row in rows):
            board.findings.append(_twice(bundle_id, path, "twice in this part"))
    within = {f.bundle_id for f in board.findings if f.kind == "duplicate-row"}
    for bundle_id in repeated(counted):
        if bundle_id not in within:
            where = board.held_in[bundle_id]
            board.findings.append(_twice(bundle_id, where, "in this part and another part"))


def _published_part(path: str, data: bytes) -> tuple[TablePart, bool]:
    """A part as this bundler writes it, or as the record's format 3 did (a board no commit
    has written anew since: then True); RowError for anything else."""
    try:
        return TablePart.read(data), False
    except RowError:
        return next(iter(format_3_table({path: data}).parts.values())), True


def _read(session: HubSession, head: str, listed: RemoteFile, limit: int, pacer: Pacer) -> bytes:
    """A file of the board: refused (RowError) when listed past `limit` bytes, else the local
    copy of the listed bytes, else downloaded (and kept)."""
    if listed.size > limit:
        raise RowError(f"it is {listed.size:,} bytes, over the {limit:,} the audit reads")
    data = cached_table(session, listed.path, listed, limit)
    if data is None:
        pacer.take(1)
        try:
            data = session.read_file(listed.path, head, limit)
        except (TemporaryError, HubAccessError):
            raise
        except HubError as error:
            raise RowError(str(error)) from None
        keep_table(session, listed.path, data)
    return data


def _unreadable(path: str, why: str) -> AuditFinding:
    return AuditFinding(
        kind="unreadable-table", path=path, detail=f"the audit refused to read it: {why}"
    )


def _twice(bundle_id: str, path: str, where: str) -> AuditFinding:
    return AuditFinding(
        kind="duplicate-row",
        bundle_id=bundle_id,
        path=path,
        detail=f"the all-tasks table holds this bundle's row {where}; the bundler writes one",
    )


@dataclass
class Derived:
    """What the bundler would publish from the parts' rows, and what could not be checked."""

    files: dict[str, bytes]
    unchecked: list[str] = field(default_factory=list)


def board_findings(
    session: HubSession,
    head: str,
    board: PublishedBoard,
    rows: list[TableRow],
    pacer: Pacer,
    definitions: TaskDefinitions,
    signers: AllowedSigners | None,
) -> tuple[list[AuditFinding], list[str]]:
    """The task tables, charts and card compared with what `rows` give (the parts' rows as
    their bundles give them: bundler.hub.audit.findings.checked_rows), and the files that
    could not be checked here (charts, without matplotlib), each with why."""
    state = BranchTables("audit", head, AllTasksTable.of(rows), dict(board.listed))
    state.definitions, state.signers = definitions, signers
    rendered = state.rendered(session.repo_id)
    found: list[AuditFinding] = []
    unchecked: list[str] = []
    if board.earlier_format:
        return [], [
            f"{TASK_TABLES_DIR}/, {CHARTS_DIR}/ and {README}: not checked, the board was last"
            " written by an earlier release (record format 3), which drew them otherwise;"
            " the board's next commit writes them anew, and the next audit checks them"
        ]
    tables = {p for p in [*rendered, *board.listed] if p.startswith(f"{TASK_TABLES_DIR}/")}
    given = {row.bundle_id for row in rows}
    for path in sorted(tables):
        derived = rendered.get(path)
        found += _task_table_findings(session, head, board, given, derived, path, pacer)
    charts = {p for p in [*rendered, *board.listed] if p.startswith(f"{CHARTS_DIR}/")}
    for path in sorted(charts):
        if not charts_available():
            unchecked.append(f"{path}: not checked, the charts extra (matplotlib) is missing")
        elif (problem := _differs(rendered.get(path), board.listed.get(path))) is not None:
            found.append(AuditFinding(kind="chart-differs", path=path, detail=problem))
    found += _card_findings(session, head, board, rendered[README], pacer)
    return found, unchecked


def _differs(derived: bytes | None, listed: RemoteFile | None) -> str | None:
    """Why the branch's file is not the derived one (None: it holds those bytes)."""
    if derived is None:
        return "the board's rows give no such file: the bundler would remove it"
    if listed is None:
        return "missing: the board's rows give this file"
    if not DerivedFile.of(derived).matches(listed):
        return "its bytes are not what the board's rows give"
    return None


def _task_table_findings(
    session: HubSession,
    head: str,
    board: PublishedBoard,
    given: set[str],
    derived: bytes | None,
    path: str,
    pacer: Pacer,
) -> list[AuditFinding]:
    """A task table that is not what the board's rows give: each row it ranks that no part
    holds or no bundle supports, else where its ranking departs from theirs."""
    listed = board.listed.get(path)
    problem = _differs(derived, listed)
    if problem is None or listed is None:
        return [] if problem is None else [_table_differs(path, problem)]
    try:
        data = _read(session, head, listed, MAX_TABLE_DECODED_BYTES, pacer)
        if (refused := table_problem(data, TASK_TABLE_ROWS)) is not None:
            raise RowError(refused)
        ranked = [str(i) for i in decoded(data, ["bundle_id"]).column("bundle_id").to_pylist()]
    except RowError as error:
        return [_unreadable(path, str(error))]
    ghosts = [i for i in ranked if i not in given]
    if ghosts:
        return [
            AuditFinding(
                kind="task-table-differs",
                bundle_id=ghost,
                path=path,
                detail="the task table ranks this bundle; "
                + (
                    "no verified bundle supports its row"
                    if ghost in board.rows
                    else "no part of the all-tasks table holds it"
                ),
            )
            for ghost in ghosts
        ]
    if derived is None:
        return [_table_differs(path, problem)]
    wanted = [str(i) for i in decoded(derived, ["bundle_id"]).column("bundle_id").to_pylist()]
    return [_table_differs(path, _departure(ranked, wanted))]


def _departure(ranked: list[str], given: list[str]) -> str:
    """Where a task table's ranking departs from the parts' (or that its rows' values do)."""
    for place, (held, wanted) in enumerate(zip(ranked, given, strict=False), start=1):
        if held != wanted:
            return f"at place {place} it has {held}; the parts give {wanted}"
    if len(ranked) != len(given):
        return f"it ranks {len(ranked)} bundles; the parts give {len(given)}"
    return "its rows' values are not what the parts give (the same bundles, in the same order)"


def _table_differs(path: str, detail: str) -> AuditFinding:
    return AuditFinding(kind="task-table-differs", path=path, detail=detail)


def _card_findings(
    session: HubSession, head: str, board: PublishedBoard, derived: bytes, pacer: Pacer
) -> list[AuditFinding]:
    """The card's board lines that the tables do not give, and those it lacks."""
    listed = board.listed.get(README)
    if listed is not None and DerivedFile.of(derived).matches(listed):
        return []
    held: list[str] = []
    if listed is not None:
        try:
            data = _read(session, head, listed, MAX_SMALL_FILE_BYTES, pacer)
            held = board_lines(data.decode("utf-8", errors="replace"))
        except RowError as error:
            return [_unreadable(README, str(error))]
    given = board_lines(derived.decode("utf-8"))
    extra = [line for line in held if line not in set(given)]
    lacking = [line for line in given if line not in set(held)]
    return [
        *(_card_line(line, "the card shows this line; no table gives it") for line in extra),
        *(_card_line(line, "the card lacks this line, which the tables give") for line in lacking),
    ]


def board_lines(card: str) -> list[str]:
    """The lines of the card's boards: each task's heading and table lines, and the overview's
    (the prose around them is the template's, and may be another version's)."""
    lines: list[str] = []
    inside = False
    for line in card.splitlines():
        if line.startswith("## "):
            inside = line.rstrip() in BOARD_SECTIONS
        elif inside and (line.startswith("|") or line.startswith("### ")):
            lines.append(line)
    return lines


def _card_line(line: str, detail: str) -> AuditFinding:
    shown = line if len(line) <= MAX_SHOWN_LINE else line[: MAX_SHOWN_LINE - 3] + "..."
    return AuditFinding(
        kind="card-differs",
        bundle_id=_linked_bundle(line),
        path=README,
        published=shown,
        detail=detail,
    )


def _linked_bundle(line: str) -> str | None:
    """The bundle a board line links to, if it links one."""
    for word in line.replace("(", " ").replace(")", " ").split():
        if "/blob/main/" in word:
            bundle = bundle_of_path(word.split("/blob/main/", 1)[1])
            if bundle is not None:
                return str(bundle)
    return None
