"""The leaderboard's tables: a few Parquet files, not a file per bundle.

One table holds every bundle of every task (the viewer's `default` config) with the same
columns for every task, in parts of at most PART_ROWS rows (`AllTasksTable`: a commit rewrites
only the parts its rows touch, so it sends as much at 100,000 bundles as at 300), each row with
its score under its task's definition. One table per task holds that task's best
TASK_TABLE_ROWS, ranked, with a float64 column per numeric metric (capped at
MAX_METRIC_COLUMNS, the ranking metric always kept; every metric stays in `metrics_json`).
Parquet carries its own column types, so the card declares no features and a new metric name
can never break a config; the viewer, `datasets`, DuckDB and Polars read
`hf://datasets/OWNER/NAME/leaderboard/...parquet` directly.

The tables are derived from the bundles' sidecars and metrics, and each row records what it was
derived from (`sidecar_blob_id`, beside `archive_sha256`), so a reader can tell which rows are
stale. The same rows always give byte-identical files: rows sorted by bundle id in each part
(task tables by rank), a fixed writer configuration, and no time or host in the file. pyarrow
is imported only by the modules that write or read the tables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bundler.core.errors import RowError
from bundler.hub.leaderboard.columns import (
    arrow_schema,
    cells_of,
    decoded,
    format_3_schema,
    parquet_bytes,
    same_columns,
    validated,
)
from bundler.hub.leaderboard.partrows import KEPT
from bundler.hub.leaderboard.ranking import (
    RANK_COLUMNS,
    TaskBoard,
    TaskScoring,
    first_metric,
    rank_order,
    rank_table,
)
from bundler.hub.leaderboard.record import TaskTally
from bundler.hub.leaderboard.rows import (
    METRICS_AFTER,
    BoardRow,
    ShownRow,
    TableRow,
    TaskRow,
    utc_timestamp,
)
from bundler.hub.repo.paths import part_number, table_part
from bundler.hub.tasks.definitions import TaskDefinition
from bundler.local.layout import BundleId

LAYOUT_VERSION = 3
"""The repository layout these tables belong to: 1 had a row file per bundle under `rows/` and
`tasks/`; 2 had the all-tasks table in one file; 3 has it in parts, each row with its score.
Recorded in every table's metadata."""
LAYOUT_KEY = b"statics_bundler.layout"
MAX_METRIC_COLUMNS = 100
"""A task table's metric columns at most: well under the viewer's 1,000 columns, whatever a
bundle holds. The ranking metric is always one of them; the rest stay in `metrics_json`."""
PART_ROWS = 1_000
"""Rows of a part of the all-tasks table at most: a commit of a few bundles rewrites about
half of this on average (about 40 KB), however many bundles the table holds."""
COMPACT_BELOW = PART_ROWS // 4
"""A part that removals leave with fewer rows is emptied into the last parts."""
FALLBACK_BATCH = 16
TASK_TABLE_ROWS = 500
"""Rows of a task's table at most: its best bundles, ranked. Every bundle is in the all-tasks
table, with its score; a task's table is what a person reads, and stays small at any size."""


ALL_SCHEMA = arrow_schema(TableRow).with_metadata({LAYOUT_KEY: str(LAYOUT_VERSION).encode()})


@dataclass(frozen=True)
class Indexed:
    """What planning needs of a published bundle, from the all-tasks table alone."""

    archive_sha256: str
    sidecar_blob_id: str
    published_us: int
    """As held (microseconds since 1970, UTC); worded when asked, for a few bundles at most."""

    @property
    def published_at(self) -> str:
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        return utc_timestamp(epoch + timedelta(microseconds=self.published_us))


KEY_COLUMNS = [
    "bundle_id",
    "task_name",
    "coverage",
    "published_at",
    "ranking_metric",
    "stale",
    "score",
    "ci_low",
    "ci_high",
]
"""What ranking reads of every row: the rest of a row is read only for the rows a commit
changes, a board shows or planning asks about (INDEX_COLUMNS)."""
INDEX_COLUMNS = ["bundle_id", "archive_sha256", "sidecar_blob_id", "published_at"]


class TablePart:
    """One file of the all-tasks table: its bytes, and its rows decoded when needed (KEY_COLUMNS
    once; the whole rows while among the last parts used, bundler.hub.leaderboard.partrows).
    A part read from a branch may be fetched when first needed (`later`): a commit that adds
    bundles reads the last part only."""

    def __init__(
        self,
        data: bytes | None,
        rows: int | None,
        keys: pa.Table | None = None,
        fetch: Callable[[], bytes] | None = None,
    ) -> None:
        self._data = data
        self._rows = rows
        self._keys = keys
        self._fetch = fetch

    @classmethod
    def later(cls, fetch: Callable[[], bytes]) -> TablePart:
        """The part whose bytes `fetch` gives, read (and checked, as `read` does) when first
        needed."""
        return cls(None, None, fetch=fetch)

    @property
    def fetched(self) -> bool:
        """Whether its bytes are here: a part never fetched holds what the branch holds."""
        return self._data is not None

    @property
    def data(self) -> bytes:
        return self._fetched()[0]

    @property
    def rows(self) -> int:
        return self._fetched()[1]

    def _fetched(self) -> tuple[bytes, int]:
        if self._data is None or self._rows is None:
            assert self._fetch is not None
            found = TablePart.read(self._fetch())
            self._data, self._rows = found.data, found.rows
        return self._data, self._rows

    @classmethod
    def of(cls, table: pa.Table) -> TablePart:
        """The part holding `table`'s rows, sorted by bundle id so that equal rows give equal
        bytes."""
        ordered = table.take(pc.sort_indices(table, sort_keys=[("bundle_id", "ascending")]))
        part = cls(parquet_bytes(ordered), ordered.num_rows, ordered.select(KEY_COLUMNS))
        return KEPT.made(part, ordered, ALL_SCHEMA)

    @classmethod
    def read(cls, data: bytes) -> TablePart:
        """A part as this bundler writes it; RowError for anything else (another layout, a
        schema that is not this one). Only its footer is read here."""
        try:
            footer = pq.ParquetFile(pa.BufferReader(data))
            schema = footer.schema_arrow
        except (pa.ArrowException, OSError) as error:
            raise RowError(f"not a Parquet table: {error}") from None
        layout = (schema.metadata or {}).get(LAYOUT_KEY)
        if layout != str(LAYOUT_VERSION).encode():
            raise RowError(f"a table of layout {layout!r}, not {LAYOUT_VERSION}")
        if not same_columns(schema, ALL_SCHEMA):
            raise RowError("the table's columns are not the ones this bundler writes")
        return cls(data, footer.metadata.num_rows)

    def keys(self) -> pa.Table:
        if self._keys is None:
            self._keys = decoded(self.data, KEY_COLUMNS).cast(ALL_SCHEMA_KEYS)
        return self._keys

    def full(self) -> pa.Table:
        # Parquet names a list's items `element`: cast back, so that writing it again gives
        # the bytes it was read from. Kept decoded while among the last parts used (KEPT).
        return KEPT.rows(self, lambda: decoded(self.data).cast(ALL_SCHEMA))


ALL_SCHEMA_KEYS = pa.schema([ALL_SCHEMA.field(name) for name in KEY_COLUMNS])
ALL_SCHEMA_INDEX = pa.schema([ALL_SCHEMA.field(name) for name in INDEX_COLUMNS])
LAYOUT_2_SCHEMA = pa.schema(
    [
        pa.field(field.name, pa.string()) if field.name == "run_date" else field
        for field in format_3_schema(ALL_SCHEMA)
        if field.name not in ("signer_fingerprint", "stale", "ci_low", "ci_high")
    ]
)
"""The one-file table of layout 2, read once more to be split into parts (its run dates text,
no signer: a signed bundle's row names its signer once it is derived again)."""


class AllTasksTable:
    """Every bundle's row on one branch, as parts of at most PART_ROWS rows by number.

    A new row goes into the last part, or a new one when it is full; a changed row stays in
    its part; a removed one leaves its part, and a part left empty goes. So a commit rewrites
    the parts its rows touch, and the table's cost in bytes sent stays flat as it grows. Each
    part holds its rows sorted by bundle id.
    """

    def __init__(
        self,
        parts: dict[int, TablePart],
        tallies: dict[str, TaskTally] | None = None,
        best: dict[str, BestRows] | None = None,
    ) -> None:
        self.parts = dict(sorted(parts.items()))
        self._keys: pa.Table | None = None
        self._tallies = tallies
        self.best = best or {}
        """Each task whose board is ranked from its best rows alone (`BestRows`): the others
        are ranked from every row's KEY_COLUMNS."""

    @classmethod
    def empty(cls) -> AllTasksTable:
        return cls({}, {})

    @classmethod
    def of(cls, rows: Iterable[TableRow]) -> AllTasksTable:
        return cls.empty().updated(list(rows))

    @classmethod
    def read(cls, files: dict[str, bytes]) -> AllTasksTable:
        """The table whose parts are these files, by path (other paths left out); RowError
        for a part this bundler did not write."""
        return cls(
            {
                number: TablePart.read(data)
                for path, data in files.items()
                if (number := part_number(path)) is not None
            }
        )

    def __len__(self) -> int:
        return sum(tally.total for tally in self.tallies().values())

    def files(self) -> dict[str, bytes]:
        """Each part's path and bytes, of the parts fetched or written (one never fetched holds
        what the branch holds); a table of no rows is one empty part, so that the viewer's
        config has a file to show."""
        parts = self.parts or {0: TablePart.of(ALL_SCHEMA.empty_table())}
        return {table_part(n): part.data for n, part in parts.items() if part.fetched}

    def unfetched(self) -> int:
        """The parts not read yet: what reading every row would cost in requests, at most."""
        return sum(not part.fetched for part in self.parts.values())

    def part_paths(self) -> set[str]:
        """The path of every part (of the one empty part, for a table of no rows)."""
        return {table_part(number) for number in self.parts or [0]}

    def tallies(self) -> dict[str, TaskTally]:
        """Each task's tally, as read from the record or kept by `appended`, else counted (and
        its metric found) from every row's KEY_COLUMNS."""
        if self._tallies is None:
            self._tallies = _tallied(self.keys())
        return self._tallies

    def counted(self, task: str) -> TaskTally | None:
        """The task's tally where it is known without reading a row; None where it is not."""
        return None if self._tallies is None else self._tallies.get(task)

    def keys(self) -> pa.Table:
        """KEY_COLUMNS of every row."""
        if self._keys is None:
            self._keys = pa.concat_tables(
                [part.keys() for part in self.parts.values()] or [ALL_SCHEMA_KEYS.empty_table()]
            )
        return self._keys

    def indexed(self, bundle_ids: Iterable[str]) -> dict[str, Indexed]:
        """What the rows of these bundles say of their archive, sidecar and first publication
        (bundles without a row left out)."""
        wanted = pa.array(sorted(set(bundle_ids)), pa.string())
        held = [
            part
            for part in self.parts.values()
            if len(wanted) and pc.any(pc.is_in(part.keys()["bundle_id"], value_set=wanted)).as_py()
        ]
        columns = [decoded(part.data, INDEX_COLUMNS) for part in held]
        found = pa.concat_tables([ALL_SCHEMA_INDEX.empty_table(), *columns])
        found = found.filter(pc.is_in(found.column("bundle_id"), value_set=wanted))
        found = found.set_column(3, "published_at", found.column(3).cast(pa.int64()))
        cells = (found.column(name).to_pylist() for name in INDEX_COLUMNS)  # no dict a row
        return {row[0]: Indexed(*row[1:]) for row in zip(*cells, strict=True)}

    def tasks(self) -> list[str]:
        return sorted(self.tallies())

    def task_keys(self, task: str) -> pa.Table:
        """KEY_COLUMNS of the task's rows."""
        keys = self.keys()
        return keys.filter(pc.equal(keys.column("task_name"), task))

    def rows_of(self, bundle_ids: Iterable[str]) -> dict[str, TableRow]:
        """The whole rows of these bundles, validated as rows this bundler writes, read from
        the parts that hold them only."""
        wanted = pa.array(sorted(set(bundle_ids)), pa.string())
        found: dict[str, TableRow] = {}
        if not len(wanted):
            return found
        for part in self.parts.values():
            if not pc.any(pc.is_in(part.keys().column("bundle_id"), value_set=wanted)).as_py():
                continue
            full = part.full()
            held = full.filter(pc.is_in(full.column("bundle_id"), value_set=wanted))
            found |= {row.bundle_id: row for row in map(_table_row, held.to_pylist())}
        return found

    def rows(self, task: str | None = None) -> list[TableRow]:
        """The rows (of one task) by bundle id, validated as rows this bundler writes."""
        keys = self.keys() if task is None else self.task_keys(task)
        found = self.rows_of(keys.column("bundle_id").to_pylist())
        return [found[bundle_id] for bundle_id in sorted(found)]

    def scoring(
        self, task: str, definition: TaskDefinition | None, *, settled: bool
    ) -> TaskScoring:
        """How the task's rows are scored: by its definition; else by the metric its rows
        are scored by, when they are `settled` (none added, changed or removed since); else
        by the first numeric metric of its earliest-published row that has one (read in
        that order, a few rows at a time: it is almost always the first)."""
        if definition is not None:
            return TaskScoring(definition)
        keys = self.task_keys(task)
        if settled:
            metrics = pc.unique(keys.column("ranking_metric").drop_null()).to_pylist()
            if len(metrics) == 1:
                return TaskScoring(None, metrics[0])
        by_date = keys.sort_by([("published_at", "ascending"), ("bundle_id", "ascending")])
        order = by_date.column("bundle_id").to_pylist()
        for start in range(0, len(order), FALLBACK_BATCH):
            batch = order[start : start + FALLBACK_BATCH]
            found = self.rows_of(batch)
            if (metric := first_metric(found[i] for i in batch)) is not None:
                return TaskScoring(None, metric)
        return TaskScoring()

    def rescored(self, task: str, scoring: TaskScoring, *, every: bool) -> AllTasksTable:
        """This table with the task's rows scored by `scoring`: `every` row, or those not
        yet scored by its metric (new rows)."""
        keys = self.task_keys(task)
        if not every:
            metric = keys.column("ranking_metric")
            unscored = pc.invert(pc.fill_null(pc.equal(metric, scoring.metric), False))
            if scoring.metric is None:
                unscored = pc.invert(pc.is_null(metric))
            keys = keys.filter(unscored)
        if not keys.num_rows:
            return self
        found = self.rows_of(keys.column("bundle_id").to_pylist())
        scored = [row.model_copy(update=asdict(scoring.score(row))) for row in found.values()]
        return self.updated(scored)

    def boards(self, wanted: dict[str, tuple[TaskScoring, int]]) -> list[TaskBoard]:
        """Each task's board of its best rows, as many as `wanted` says, ranked by its
        scoring: from each task's `BestRows` when every task has them (unless the parts not
        yet read are fewer than those task tables), else from every row's KEY_COLUMNS, each
        part holding a best row then read once for every board."""
        ranked = {}
        found: dict[str, BoardRow] = {}
        by_best = {task: self.best[task] for task in wanted if task in self.best}
        if len(by_best) < len(wanted) or self.unfetched() < len(by_best):
            by_best = {}  # every part is read anyway, or costs fewer requests than the tables
        for task, (scoring, limit) in wanted.items():
            if (best := by_best.get(task)) is not None:
                ranked[task] = rank_order(best.rank_keys(scoring), scoring, limit)
                found |= best.rows_of(ranked[task][0])
            else:
                ranked[task] = rank_order(self.task_keys(task), scoring, limit)
        unread = [i for ids, _ in ranked.values() for i in ids if i not in found]
        found |= self.rows_of(unread)
        boards = []
        for task, (ids, ranks) in ranked.items():
            rows = [found[bundle_id] for bundle_id in ids]
            tally = self.tallies()[task]
            scoring = wanted[task][0]
            boards.append(TaskBoard.shown(task, rows, ranks, tally.total, tally.complete, scoring))
        return boards

    def appended(self, rows: Sequence[TableRow], unsettled: Iterable[str] = ()) -> AllTasksTable:
        """This table with `rows` of bundles it does not hold, added to the last parts: no
        other part is read. Their tasks' tallies and best rows take them in, but for the
        `unsettled` tasks (whose rows are not scored yet): those keep no best rows, so their
        boards are ranked from every row."""
        unsettled = set(unsettled)
        parts = _filled(dict(self.parts), _table_of(sorted(rows, key=lambda row: row.bundle_id)))
        tallies = None if self._tallies is None else _counted_in(self._tallies, rows, unsettled)
        best = {
            task: kept.plus([row for row in rows if row.task_name == task])
            for task, kept in self.best.items()
            if task not in unsettled
        }
        return AllTasksTable(parts, tallies, best)

    def updated(self, rows: Sequence[TableRow], removed: Iterable[str] = ()) -> AllTasksTable:
        """This table with `rows` in the place of those of the same bundle id (in their
        part), the other `rows` added to the last parts, and the rows of `removed` bundle ids
        gone. A part other than the last that removals leave with fewer than COMPACT_BELOW
        rows is emptied into the last parts too, so removals never leave many small parts."""
        replacing = {row.bundle_id: row for row in rows}
        dropped = pa.array(sorted(replacing.keys() | set(removed)), pa.string())
        parts = dict(self.parts)
        last = max(parts, default=-1)
        placed: set[str] = set()
        moving: list[pa.Table] = []
        for number, part in self.parts.items() if len(dropped) else ():
            ids = part.keys().column("bundle_id")
            hit = pc.is_in(ids, value_set=dropped)
            if not pc.any(hit).as_py():
                continue
            kept = part.full().filter(pc.invert(hit))
            here = [replacing[i] for i in ids.filter(hit).to_pylist() if i in replacing]
            placed |= {row.bundle_id for row in here}
            merged = pa.concat_tables([kept, _table_of(here)])
            del parts[number]
            if number != last and merged.num_rows < min(part.rows, COMPACT_BELOW):
                moving.append(merged)
            elif merged.num_rows:
                parts[number] = TablePart.of(merged)
        added = [row for bundle_id, row in sorted(replacing.items()) if bundle_id not in placed]
        incoming = pa.concat_tables([*moving, _table_of(added)])
        touched = {row.task_name for row in rows} | {BundleId.parse(i).task for i in removed}
        best = {task: kept for task, kept in self.best.items() if task not in touched}
        return AllTasksTable(_filled(parts, incoming), best=best)


def layout_2_table(data: bytes) -> AllTasksTable:
    """The one-file table of layout 2 as parts, its rows to be scored again (RowError for
    anything but such a table)."""
    table = decoded(data)
    if (table.schema.metadata or {}).get(LAYOUT_KEY) != b"2" or not same_columns(
        table.schema, LAYOUT_2_SCHEMA
    ):
        raise RowError("not a one-file table of layout 2")
    table = table.cast(LAYOUT_2_SCHEMA).sort_by("bundle_id")
    parts = {}
    for number, start in enumerate(range(0, table.num_rows, PART_ROWS)):
        cells = table.slice(start, PART_ROWS).to_pylist()
        rows = [_table_row(row | {"signer_fingerprint": None}) for row in cells]
        parts[number] = TablePart.of(_table_of(rows))
    return AllTasksTable(parts)


def _tallied(keys: pa.Table) -> dict[str, TaskTally]:
    """Each task's tally, from KEY_COLUMNS of every row: its metric is the one all its rows
    are scored by (None where they are not all scored by one)."""
    tallies = {}
    for task in sorted(pc.unique(keys.column("task_name")).to_pylist()):
        held = keys.filter(pc.equal(keys.column("task_name"), task))
        complete = pc.sum(pc.equal(held.column("coverage"), "complete")).as_py() or 0
        metrics = pc.unique(held.column("ranking_metric")).to_pylist()
        metric = metrics[0] if len(metrics) == 1 else None
        tallies[task] = TaskTally(total=held.num_rows, complete=complete, metric=metric)
    return tallies


def _counted_in(
    tallies: dict[str, TaskTally], rows: Sequence[TableRow], unsettled: set[str]
) -> dict[str, TaskTally]:
    """`tallies` once `rows` of new bundles are added; an `unsettled` task's rows are not all
    scored by one metric yet."""
    counted = dict(tallies)
    for row in rows:
        was = counted.get(row.task_name) or TaskTally(total=0, complete=0)
        counted[row.task_name] = TaskTally(
            total=was.total + 1,
            complete=was.complete + (row.coverage == "complete"),
            metric=None if row.task_name in unsettled else was.metric,
        )
    return counted


def _filled(parts: dict[int, TablePart], incoming: pa.Table) -> dict[int, TablePart]:
    """`parts` with the rows of `incoming` in the last part, up to PART_ROWS, then in new
    ones."""
    last = max(parts, default=-1)
    if incoming.num_rows and last >= 0 and parts[last].rows < PART_ROWS:
        room = PART_ROWS - parts[last].rows
        merged = pa.concat_tables([parts[last].full(), incoming.slice(0, room)])
        parts[last], incoming = TablePart.of(merged), incoming.slice(room)
    for number, start in enumerate(range(0, incoming.num_rows, PART_ROWS), start=last + 1):
        parts[number] = TablePart.of(incoming.slice(start, PART_ROWS))
    return parts


def _table_of(rows: Sequence[TableRow]) -> pa.Table:
    return pa.Table.from_pylist([cells_of(row) for row in rows], schema=ALL_SCHEMA)


def _table_row(cells: dict[str, Any]) -> TableRow:
    return validated(cells, TableRow)


class BestRows:
    """A task's best rows as its table holds them (read when first needed), and the rows of
    bundles added to the task since. As long as no row of the task was changed or removed and
    its scoring is the one its table was ranked by, its best TASK_TABLE_ROWS are among these:
    an entry's rank depends only on the entries ranked before it (`rank_order`). They are
    ranked from the table's own columns, and only the rows shown are read whole."""

    def __init__(self, held: Callable[[], pa.Table], added: Sequence[TableRow] = ()) -> None:
        self._held = held
        self.added = tuple(added)

    @classmethod
    def of_table(cls, fetch: Callable[[], bytes]) -> BestRows:
        """The rows of the task table whose bytes `fetch` gives, read once, when needed."""
        return cls(functools.cache(lambda: task_table_rows(fetch())))

    def plus(self, rows: Sequence[TableRow]) -> BestRows:
        return BestRows(self._held, (*self.added, *rows))

    def rank_keys(self, scoring: TaskScoring) -> pa.Table:
        """RANK_COLUMNS of every row here: the table's as it holds them, the added rows'
        scored by `scoring`."""
        held = self._held()
        whole_seconds = pc.cast(held.column("published_at"), pa.timestamp("s", tz="UTC"))
        published = pc.strftime(whole_seconds, format=PUBLISHED_FORMAT)
        where = held.schema.get_field_index("published_at")
        keys = held.set_column(where, "published_at", published)
        keys = keys.rename_columns(
            ["score" if n == "ranking_score" else n for n in keys.column_names]
        )
        added = rank_table(self.added, scoring)
        return pa.concat_tables([keys.select(RANK_COLUMNS).cast(added.schema), added])

    def rows_of(self, bundle_ids: Iterable[str]) -> dict[str, BoardRow]:
        """The whole rows of these bundles (those here)."""
        wanted = set(bundle_ids)
        found: dict[str, BoardRow] = {r.bundle_id: r for r in self.added if r.bundle_id in wanted}
        held = self._held()
        held = held.filter(
            pc.is_in(held.column("bundle_id"), pa.array(sorted(wanted), pa.string()))
        )
        found |= {row.bundle_id: row for row in (validated(c, ShownRow) for c in held.to_pylist())}
        return found


SHOWN_SCHEMA = arrow_schema(ShownRow)
"""The columns of a task table that a board shows and ranks by, in their types."""
PUBLISHED_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""`published_at` as the rows hold it, from a task table's timestamp column."""


def task_table_rows(data: bytes) -> pa.Table:
    """The columns of ShownRow of a task's table as this bundler writes it (RowError for
    anything else)."""
    table = decoded(data)
    if (table.schema.metadata or {}).get(LAYOUT_KEY) != str(LAYOUT_VERSION).encode():
        raise RowError("not a task table of this layout")
    if not set(SHOWN_SCHEMA.names) <= set(table.column_names) or not same_columns(
        table.select(SHOWN_SCHEMA.names).schema, SHOWN_SCHEMA
    ):
        raise RowError("the task table's columns are not the ones this bundler writes")
    return table.select(SHOWN_SCHEMA.names)


def task_table_bytes(board: TaskBoard) -> bytes:
    """A task's table: its bundles in rank order, the fixed columns, the rank, then one float64
    column per metric column of the board, at most MAX_METRIC_COLUMNS of them (the ranking
    one is the first)."""
    kept = board.columns[:MAX_METRIC_COLUMNS]
    fields = list(arrow_schema(TaskRow))
    cut = [field.name for field in fields].index(METRICS_AFTER) + 1
    schema = pa.schema(
        [*fields[:cut], *(pa.field(column, pa.float64()) for column in kept), *fields[cut:]],
        metadata={LAYOUT_KEY: str(LAYOUT_VERSION).encode()},
    )
    records = []
    for row, rank in zip(board.rows, board.ranks(), strict=True):
        low, high = board.interval(row) or (None, None)
        judged = {
            "rank": rank,
            "ranking_score": board.scoring.value(row),
            "stale": board.stale(row),
            "ci_low": low,
            "ci_high": high,
        }
        cells = cells_of(TaskRow.of(row).model_copy(update=judged))
        cells.update((column, board.value(row, column)) for column in kept)
        records.append(cells)
    return parquet_bytes(pa.Table.from_pylist(records, schema=schema))
