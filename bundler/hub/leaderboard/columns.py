"""How the tables' rows become Parquet and back: the Arrow schema of a row model, a row's
cells, and files written the same way every time, so that equal rows give equal bytes.

Every timestamp is written in microseconds, UTC (Parquet's TIMESTAMP(MICROS), adjusted to UTC),
the one unit every common reader takes: pyarrow's `to_pylist` without pandas and Spark's
default Parquet reader both refuse nanoseconds. `run_date` is cut to the microsecond, and its
text to the nanosecond is written beside it (`run_date_text`), which the rows are read back
from. Tables of the record's format 3 (run dates in nanoseconds, publication in milliseconds)
are read once more, to be written in these types (`microsecond_table`). pyarrow is imported
only by the modules that write or read the tables.
"""

from __future__ import annotations

import io
import types
import typing
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar, get_args, get_origin

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from bundler.core.errors import RowError
from bundler.hub.leaderboard.rows import Dtype, ShownRow, TableRow, utc_timestamp
from bundler.local.layout import BundleId
from bundler.local.schema import instant_nanoseconds, nanosecond_instant

ROW_GROUP_SIZE = 10_000

_ARROW_TYPES: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
}
_TIMESTAMPS = {"timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC")}
"""The Arrow type of each `Dtype`."""
TEXT_SUFFIX = "_text"
"""Names the text column written beside a timestamp column whose `Dtype` says `text`."""
_PUBLISHED = "published_at"
_RUN_DATE = "run_date"
_RUN_DATE_TEXT = _RUN_DATE + TEXT_SUFFIX
NANOSECONDS_PER_MICROSECOND = 1_000
FORMAT_3_TYPES = {
    _PUBLISHED: pa.timestamp("ms", tz="UTC"),
    _RUN_DATE: pa.timestamp("ns", tz="UTC"),
}
"""The timestamps' types in the tables of the record's format 3, which had no text column."""


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The table's schema, derived from the row model itself so that the declared columns can
    never drift from the rows actually written."""
    return pa.schema(
        [
            field
            for name, f in model.model_fields.items()
            for field in _fields(name, f.annotation, f.metadata)
        ]
    )


def _fields(name: str, annotation: Any, metadata: list[Any]) -> list[pa.Field]:
    """The field's column, and its text column where its `Dtype` asks for one."""
    column = pa.field(name, _arrow_type(annotation, metadata), nullable=True)
    if any(isinstance(item, Dtype) and item.text for item in metadata):
        return [column, pa.field(name + TEXT_SUFFIX, pa.string(), nullable=True)]
    return [column]


def format_3_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` as the record's format 3 wrote it: its timestamps in FORMAT_3_TYPES, and no
    text column beside the run date."""
    return pa.schema(
        [
            pa.field(field.name, FORMAT_3_TYPES.get(field.name, field.type))
            for field in schema
            if field.name != _RUN_DATE_TEXT
        ],
        metadata=schema.metadata,
    )


def microsecond_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A table of the record's format 3 (`format_3_schema(schema)`) in `schema`'s types: the
    run date's text, to the nanosecond, beside it, and the run date cut to the microsecond."""
    where = table.schema.get_field_index(_RUN_DATE)
    nanoseconds = pc.cast(table.column(where), pa.int64()).to_pylist()
    text = [None if n is None else nanosecond_instant(n) for n in nanoseconds]
    microseconds = pc.cast(table.column(where), schema.field(_RUN_DATE).type, safe=False)
    table = table.set_column(where, _RUN_DATE, microseconds)
    return table.add_column(where + 1, _RUN_DATE_TEXT, pa.array(text, pa.string())).cast(schema)


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


Row = TypeVar("Row", TableRow, ShownRow)


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


def cells_of(row: BaseModel) -> dict[str, Any]:
    """The row's cells as the tables hold them: the run date in microseconds (floored), and
    its text beside it."""
    cells = row.model_dump()
    cells[_PUBLISHED] = datetime.fromisoformat(cells[_PUBLISHED].replace("Z", "+00:00"))
    text = cells[_RUN_DATE]
    cells[_RUN_DATE] = instant_nanoseconds(text) // NANOSECONDS_PER_MICROSECOND
    cells[_RUN_DATE_TEXT] = text
    return cells


def decoded(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """The file's rows (their `columns`), read by ParquetFile, not read_table: a part is one
    file, and the dataset machinery read_table goes through took about twice the time a
    part, and an upload into a large repository was faster this way in every round."""
    try:
        return pq.ParquetFile(pa.BufferReader(data)).read(columns=columns)
    except (pa.ArrowException, OSError) as error:
        raise RowError(f"not a Parquet table: {error}") from None


def same_columns(schema: pa.Schema, expected: pa.Schema) -> bool:
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


def validated(cells: dict[str, Any], model: type[Row]) -> Row:
    """The row of these cells as `to_pylist` gives them, validated as a row this bundler
    writes: the run date read from its text (a table of layout 2 held only the text)."""
    published = cells.get(_PUBLISHED)
    if isinstance(published, datetime):
        cells[_PUBLISHED] = utc_timestamp(published.astimezone(UTC))
    if _RUN_DATE_TEXT in cells:
        cells[_RUN_DATE] = cells.pop(_RUN_DATE_TEXT)
    try:
        row = model.model_validate(cells)
        BundleId.parse(row.bundle_id)
    except (ValidationError, ValueError) as error:
        raise RowError(f"a table row is not one this bundler writes: {error}") from None
    return row
