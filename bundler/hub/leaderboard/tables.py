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
(task tables by rank), a fixed writer configuration, and no time or host in the file.

pyarrow is imported only here and by the ranking (`bundler.hub.leaderboard.ranking`), by the
code that writes or reads the tables.
"""

from __future__ import annotations

import io
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, get_args, get_origin

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from bundler.core.errors import RowError
from bundler.hub.leaderboard.ranking import TaskBoard, TaskScoring, first_metric, rank_order
from bundler.hub.leaderboard.rows import (
    METRICS_AFTER,
    BundleRow,
    Dtype,
    TableRow,
    TaskRow,
    utc_timestamp,
)
from bundler.hub.repo.paths import part_number, table_part
from bundler.hub.tasks.definitions import TaskDefinition
from bundler.local.layout import BundleId
from bundler.local.schema import instant_nanoseconds, nanosecond_instant

LAYOUT_VERSION = 3
"""The repository layout these tables belong to: 1 had a row file per bundle under `rows/` and
`tasks/`; 2 had the all-tasks table in one file; 3 has it in parts, each row with its score.
Recorded in every table's metadata."""
LAYOUT_KEY = b"statics_bundler.layout"
MAX_METRIC_COLUMNS = 100
"""A task table's metric columns at most: well under the viewer's 1,000 columns, whatever a
bundle holds. The ranking metric is always one of them; the rest stay in `metrics_json`."""
ROW_GROUP_SIZE = 10_000
PART_ROWS = 1_000
"""Rows of a part of the all-tasks table at most: a commit of a few bundles rewrites about
half of this on average (about 40 KB), however many bundles the table holds."""
COMPACT_BELOW = PART_ROWS // 4
"""A part that removals leave with fewer rows is emptied into the last parts."""
FALLBACK_BATCH = 16
TASK_TABLE_ROWS = 500
"""Rows of a task's table at most: its best bundles, ranked. Every bundle is in the all-tasks
table, with its score; a task's table is what a person reads, and stays small at any size."""


_ARROW_TYPES: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
}
_TIMESTAMPS = {
    "timestamp[s, tz=UTC]": pa.timestamp("ms", tz="UTC"),
    "timestamp[ns, tz=UTC]": pa.timestamp("ns", tz="UTC"),
}
"""The Arrow type of each `Dtype`. Parquet holds no seconds unit: whole seconds in milliseconds
read back the same. Nanoseconds (Parquet's NANOS, format 2.6) reach 2262, past any run date."""
_NANOSECONDS = "run_date"
"""The column written from, and read back into, `RunDate` text through nanoseconds."""


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The table's schema, derived from the row model itself so that the declared columns can
    never drift from the rows actually written."""
    return pa.schema(
        [_field(name, f.annotation, f.metadata) for name, f in model.model_fields.items()]
    )


def _field(name: str, annotation: Any, metadata: list[Any]) -> pa.Field:
    return pa.field(name, _arrow_type(annotation, metadata), nullable=True)


def _arrow_type(annotation: Any, metadata: Sequence[Any] = ()) -> pa.DataType:
    annotation = _strip_optional(annotation)
    if get_origin(annotation) is Annotated:
        metadata = [*metadata, *get_args(annotation)[1:]]
        annotation = get_args(annotation)[0]
    dtypes = [item for item in metadata if isinstance(item, Dtype)]
    if dtypes:
        return _TIMESTAMPS[dtypes[0].name]
    if annotation in _ARROW_TYPES:
        return _ARROW_TYPES[annotation]
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return pa.list_(pa.struct(list(arrow_schema(item))))
        return pa.list_(_arrow_type(item))
    raise TypeError(f"no Arrow type for {annotation!r}")


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (typing.Union, types.UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


ALL_SCHEMA = arrow_schema(TableRow).with_metadata({LAYOUT_KEY: str(LAYOUT_VERSION).encode()})


def parquet_bytes(table: pa.Table) -> bytes:
    """The file of `table`, written the same way every time, so equal rows give equal bytes."""
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        row_group_size=ROW_GROUP_SIZE,
        compression="zstd",
        compression_level=3,
        use_dictionary=True,
        write_statistics=True,
        store_schema=True,
    )
    return sink.getvalue()


def _cells(row: BaseModel) -> dict[str, Any]:
    cells = row.model_dump()
    cells["published_at"] = datetime.fromisoformat(cells["published_at"].replace("Z", "+00:00"))
    cells[_NANOSECONDS] = instant_nanoseconds(cells[_NANOSECONDS])
    return cells


def _pylist(table: pa.Table) -> list[dict[str, Any]]:
    """The table's rows as `_cells` wrote them: nanosecond timestamps as integers, which
    Python's datetime cannot hold (and pyarrow gives as pandas objects, or refuses)."""
    where = table.schema.get_field_index(_NANOSECONDS)
    nanoseconds = pc.cast(table.column(where), pa.int64())
    rows: list[dict[str, Any]] = table.set_column(where, _NANOSECONDS, nanoseconds).to_pylist()
    return rows


@dataclass(frozen=True)
class Indexed:
    """What planning needs of a published bundle, from the all-tasks table alone."""

    archive_sha256: str
    sidecar_blob_id: str
    published_at: str


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
    """One file of the all-tasks table: its bytes, and its rows decoded when needed (the
    columns of KEY_COLUMNS, once; the whole rows, each time, for a part being changed)."""

    def __init__(self, data: bytes, rows: int, keys: pa.Table | None = None) -> None:
        self.data = data
        self.rows = rows
        self._keys = keys

    @classmethod
    def of(cls, table: pa.Table) -> TablePart:
        """The part holding `table`'s rows, sorted by bundle id so that equal rows give equal
        bytes."""
        ordered = table.take(pc.sort_indices(table, sort_keys=[("bundle_id", "ascending")]))
        return cls(parquet_bytes(ordered), ordered.num_rows, ordered.select(KEY_COLUMNS))

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
        if not _same_columns(schema, ALL_SCHEMA):
            raise RowError("the table's columns are not the ones this bundler writes")
        return cls(data, footer.metadata.num_rows)

    def keys(self) -> pa.Table:
        if self._keys is None:
            self._keys = _decoded(self.data, KEY_COLUMNS).cast(ALL_SCHEMA_KEYS)
        return self._keys

    def full(self) -> pa.Table:
        # Parquet names a list's items `element`: cast back, so that writing it again gives
        # the bytes it was read from.
        return _decoded(self.data).cast(ALL_SCHEMA)


def _decoded(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """The file's rows (their `columns`), read by ParquetFile, not read_table: a part is one
    file, and the dataset machinery read_table goes through cost twice the time (1.9 against
    1.0 ms a part of 1,000 rows; an upload into 30,000 bundles, 1.96 against 1.89 s, 5 rounds
    alternating, every one faster)."""
    try:
        return pq.ParquetFile(pa.BufferReader(data)).read(columns=columns)
    except (pa.ArrowException, OSError) as error:
        raise RowError(f"not a Parquet table: {error}") from None


def _same_columns(schema: pa.Schema, expected: pa.Schema) -> bool:
    """Whether `schema` has `expected`'s columns and types, as Parquet gives them back (a
    list's items named `element`)."""
    return schema.names == expected.names and all(
        _unnamed(found.type) == _unnamed(wanted.type)
        for found, wanted in zip(schema, expected, strict=True)
    )


def _unnamed(kind: pa.DataType) -> pa.DataType:
    if isinstance(kind, pa.ListType):
        return pa.list_(_unnamed(kind.value_type))
    if isinstance(kind, pa.StructType):
        return pa.struct([pa.field(f.name, _unnamed(f.type)) for f in kind])
    return kind


ALL_SCHEMA_KEYS = pa.schema([ALL_SCHEMA.field(name) for name in KEY_COLUMNS])
ALL_SCHEMA_INDEX = pa.schema([ALL_SCHEMA.field(name) for name in INDEX_COLUMNS])
LAYOUT_2_SCHEMA = pa.schema(
    [
        pa.field(field.name, pa.string()) if field.name == "run_date" else field
        for field in ALL_SCHEMA
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

    def __init__(self, parts: dict[int, TablePart]) -> None:
        self.parts = dict(sorted(parts.items()))
        self._keys: pa.Table | None = None

    @classmethod
    def empty(cls) -> AllTasksTable:
        return cls({})

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

    @classmethod
    def split(cls, data: bytes) -> AllTasksTable:
        """The one-file table of layout 2 as parts, its rows to be scored again (RowError for
        anything but such a table)."""
        table = _decoded(data)
        if (table.schema.metadata or {}).get(LAYOUT_KEY) != b"2" or not _same_columns(
            table.schema, LAYOUT_2_SCHEMA
        ):
            raise RowError("not a one-file table of layout 2")
        table = table.cast(LAYOUT_2_SCHEMA).sort_by("bundle_id")
        parts = {}
        for number, start in enumerate(range(0, table.num_rows, PART_ROWS)):
            cells = table.slice(start, PART_ROWS).to_pylist()
            rows = [_table_row(row | {"signer_fingerprint": None}) for row in cells]
            parts[number] = TablePart.of(_table_of(rows))
        return cls(parts)

    def __len__(self) -> int:
        return sum(part.rows for part in self.parts.values())

    def files(self) -> dict[str, bytes]:
        """Each part's path and bytes; a table of no rows is one empty part, so that the
        viewer's config has a file to show."""
        parts = self.parts or {0: TablePart.of(ALL_SCHEMA.empty_table())}
        return {table_part(number): part.data for number, part in parts.items()}

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
        columns = [_decoded(part.data, INDEX_COLUMNS) for part in held]
        found = pa.concat_tables([ALL_SCHEMA_INDEX.empty_table(), *columns])
        found = found.filter(pc.is_in(found.column("bundle_id"), value_set=wanted))
        return {
            cells["bundle_id"]: Indexed(
                cells["archive_sha256"],
                cells["sidecar_blob_id"],
                utc_timestamp(cells["published_at"].astimezone(UTC)),
            )
            for cells in found.to_pylist()
        }

    def tasks(self) -> list[str]:
        return sorted(pc.unique(self.keys().column("task_name")).to_pylist())

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
            found |= {row.bundle_id: row for row in map(_table_row, _pylist(held))}
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
        scoring: only KEY_COLUMNS are read of the other rows, and each part holding a best
        row is read once for every board."""
        ranked = {}
        for task, (scoring, limit) in wanted.items():
            keys = self.task_keys(task)
            complete = pc.sum(pc.equal(keys.column("coverage"), "complete")).as_py() or 0
            ranked[task] = (*rank_order(keys, scoring, limit), keys.num_rows, complete)
        found = self.rows_of(bundle_id for ids, *_ in ranked.values() for bundle_id in ids)
        boards = []
        for task, (ids, ranks, total, complete) in ranked.items():
            rows: list[BundleRow] = [found[bundle_id] for bundle_id in ids]
            boards.append(TaskBoard.shown(task, rows, ranks, total, complete, wanted[task][0]))
        return boards

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
        last = max(parts, default=-1)
        if incoming.num_rows and last >= 0 and parts[last].rows < PART_ROWS:
            room = PART_ROWS - parts[last].rows
            merged = pa.concat_tables([parts[last].full(), incoming.slice(0, room)])
            parts[last], incoming = TablePart.of(merged), incoming.slice(room)
        for number, start in enumerate(range(0, incoming.num_rows, PART_ROWS), start=last + 1):
            parts[number] = TablePart.of(incoming.slice(start, PART_ROWS))
        return AllTasksTable(parts)


def _table_of(rows: Sequence[TableRow]) -> pa.Table:
    return pa.Table.from_pylist([_cells(row) for row in rows], schema=ALL_SCHEMA)


def _table_row(cells: dict[str, Any]) -> TableRow:
    published = cells.get("published_at")
    if isinstance(published, datetime):
        cells["published_at"] = utc_timestamp(published.astimezone(UTC))
    if isinstance(cells.get(_NANOSECONDS), int):
        cells[_NANOSECONDS] = nanosecond_instant(cells[_NANOSECONDS])
    try:
        row = TableRow.model_validate(cells)
        BundleId.parse(row.bundle_id)
    except (ValidationError, ValueError) as error:
        raise RowError(f"a table row is not one this bundler writes: {error}") from None
    return row


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
        judged = {"rank": rank, "stale": board.stale(row), "ci_low": low, "ci_high": high}
        cells = _cells(TaskRow.of(row).model_copy(update=judged))
        cells.update((column, board.value(row, column)) for column in kept)
        records.append(cells)
    return parquet_bytes(pa.Table.from_pylist(records, schema=schema))
