"""The leaderboard's tables: a few Parquet files, not a file per bundle.

One table holds every bundle of every task (the viewer's `default` config) with the same
columns for every task; one table per task holds that task's bundles, ranked, with a float64
column per numeric metric (capped at MAX_METRIC_COLUMNS, the ranking metric always kept; every
metric stays in `metrics_json`). Parquet carries its own column types, so the card declares no
features and a new metric name can never break a config; the viewer, `datasets`, DuckDB and
Polars read `hf://datasets/OWNER/NAME/leaderboard/...parquet` directly.

The tables are derived from the bundles' sidecars and metrics, and each row records what it was
derived from (`sidecar_blob_id`, beside `archive_sha256`), so a reader can tell which rows are
stale. The same rows always give byte-identical files: rows sorted by bundle id (task tables by
rank), a fixed writer configuration, and no time or host in the file.

pyarrow is imported only here, by the code that writes or reads the tables.
"""

from __future__ import annotations

import io
import types
import typing
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, get_args, get_origin

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from bundler.core.errors import RowError
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import METRICS_AFTER, Dtype, TableRow, TaskRow, utc_timestamp
from bundler.local.layout import BundleId
from bundler.local.schema import instant_nanoseconds, nanosecond_instant

LAYOUT_VERSION = 2
"""The repository layout these tables belong to: 1 had a row file per bundle under `rows/` and
`tasks/`; 2 has these tables. Recorded in every table's metadata."""
LAYOUT_KEY = b"statics_bundler.layout"
MAX_METRIC_COLUMNS = 100
"""A task table's metric columns at most: well under the viewer's 1,000 columns, whatever a
bundle holds. The ranking metric is always one of them; the rest stay in `metrics_json`."""
ROW_GROUP_SIZE = 10_000


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


class AllTasksTable:
    """Every bundle's row on one branch, as one Arrow table sorted by bundle id."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self._index: dict[str, Indexed] | None = None

    @classmethod
    def empty(cls) -> AllTasksTable:
        return cls(ALL_SCHEMA.empty_table())

    @classmethod
    def of(cls, rows: Iterable[TableRow]) -> AllTasksTable:
        ordered = sorted({row.bundle_id: row for row in rows}.values(), key=lambda r: r.bundle_id)
        return cls(pa.Table.from_pylist([_cells(row) for row in ordered], schema=ALL_SCHEMA))

    @classmethod
    def read(cls, data: bytes) -> AllTasksTable:
        """A table as this bundler writes it; RowError for anything else (another layout, a
        schema that is not this one)."""
        try:
            table = pq.read_table(pa.BufferReader(data))
        except (pa.ArrowException, OSError) as error:
            raise RowError(f"not a Parquet table: {error}") from None
        layout = (table.schema.metadata or {}).get(LAYOUT_KEY)
        if layout != str(LAYOUT_VERSION).encode():
            raise RowError(f"a table of layout {layout!r}, not {LAYOUT_VERSION}")
        if not table.schema.equals(ALL_SCHEMA, check_metadata=False):
            raise RowError("the table's columns are not the ones this bundler writes")
        # Parquet names a list's items `element`: cast back, so that writing it again gives
        # the bytes it was read from.
        return cls(table.cast(ALL_SCHEMA))

    def __len__(self) -> int:
        count: int = self.table.num_rows
        return count

    def bytes(
        self,
        scores: dict[str, tuple[str, float | None]] | None = None,
        stale: Collection[str] | None = None,
    ) -> bytes:
        """The table's file, each row's `ranking_metric` and `score` those `scores` give it
        by bundle id (the boards'; none for a row they do not name), and `stale` true for the
        bundle ids in `stale`, false for the others (null for all when not given)."""
        table = self.table
        scores = scores or {}
        ids = table.column("bundle_id").to_pylist()
        judged = {
            "ranking_metric": [scores[i][0] if i in scores else None for i in ids],
            "score": [scores[i][1] if i in scores else None for i in ids],
            "stale": [None if stale is None else i in stale for i in ids],
        }
        for name, cells in judged.items():
            where = table.schema.get_field_index(name)
            table = table.set_column(
                where, table.schema.field(name), pa.array(cells, table.schema.field(name).type)
            )
        return parquet_bytes(table)

    def index(self) -> dict[str, Indexed]:
        """Bundle id to what its row says of its archive, sidecar and first publication (made
        once: a table is never changed in place, `updated` makes a new one)."""
        if self._index is None:
            self._index = self._indexed()
        return self._index

    def _indexed(self) -> dict[str, Indexed]:
        columns = self.table.select(
            ["bundle_id", "archive_sha256", "sidecar_blob_id", "published_at"]
        ).to_pydict()
        return {
            bundle_id: Indexed(sha, blob, utc_timestamp(published))
            for bundle_id, sha, blob, published in zip(
                columns["bundle_id"],
                columns["archive_sha256"],
                columns["sidecar_blob_id"],
                columns["published_at"],
                strict=True,
            )
        }

    def tasks(self) -> list[str]:
        return sorted(set(self.table.column("task_name").to_pylist()))

    def rows(self, task: str | None = None) -> list[TableRow]:
        """The rows (of one task), validated as rows this bundler writes."""
        table = self.table
        if task is not None:
            table = table.filter(pc.equal(table.column("task_name"), task))
        return [_table_row(cells) for cells in _pylist(table)]

    def updated(self, rows: Sequence[TableRow], removed: Iterable[str] = ()) -> AllTasksTable:
        """This table with `rows` in the place of those of the same bundle id, and the rows
        of `removed` bundle ids gone."""
        dropped = {row.bundle_id for row in rows} | set(removed)
        kept = self.table
        if dropped:
            mask = pc.is_in(kept.column("bundle_id"), value_set=pa.array(sorted(dropped)))
            kept = kept.filter(pc.invert(mask))
        added = AllTasksTable.of(rows).table
        merged = pa.concat_tables([kept, added])
        order = pc.sort_indices(merged, sort_keys=[("bundle_id", "ascending")])
        return AllTasksTable(merged.take(order))


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
