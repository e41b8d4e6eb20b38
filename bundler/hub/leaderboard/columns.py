"""How the tables' rows become Parquet and back: the Arrow schema of a row model, a row's
cells, and files written the same way every time, so that equal rows give equal bytes.

Parquet holds no seconds unit and Python's datetime no nanoseconds: `published_at` is written
in milliseconds, `run_date` in nanoseconds and read back as integers, into the text the rows
hold. pyarrow is imported only by the modules that write or read the tables.
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
    cells = row.model_dump()
    cells["published_at"] = datetime.fromisoformat(cells["published_at"].replace("Z", "+00:00"))
    cells[_NANOSECONDS] = instant_nanoseconds(cells[_NANOSECONDS])
    return cells


def pylist(table: pa.Table) -> list[dict[str, Any]]:
    """The table's rows as `cells_of` wrote them: nanosecond timestamps as integers, which
    Python's datetime cannot hold (and pyarrow gives as pandas objects, or refuses)."""
    where = table.schema.get_field_index(_NANOSECONDS)
    nanoseconds = pc.cast(table.column(where), pa.int64())
    rows: list[dict[str, Any]] = table.set_column(where, _NANOSECONDS, nanoseconds).to_pylist()
    return rows


def decoded(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """The file's rows (their `columns`), read by ParquetFile, not read_table: a part is one
    file, and the dataset machinery read_table goes through cost twice the time (1.9 against
    1.0 ms a part of 1,000 rows; an upload into 30,000 bundles, 1.96 against 1.89 s, 5 rounds
    alternating, every one faster)."""
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
    """The row of these cells as `pylist` gives them, validated as a row this bundler
    writes."""
    published = cells.get("published_at")
    if isinstance(published, datetime):
        cells["published_at"] = utc_timestamp(published.astimezone(UTC))
    if isinstance(cells.get(_NANOSECONDS), int):
        cells[_NANOSECONDS] = nanosecond_instant(cells[_NANOSECONDS])
    try:
        row = model.model_validate(cells)
        BundleId.parse(row.bundle_id)
    except (ValidationError, ValueError) as error:
        raise RowError(f"a table row is not one this bundler writes: {error}") from None
    return row
