"""Reading a table the board publishes in bounded memory: its listed size, then its Parquet
footer (rows, row groups, the bytes its pages decompress to), then the bytes its columns decode
to, each checked against the bounds the bundler writes within, before a row is decoded.

Why every step: a Parquet file is small on the wire and can be huge in memory. zstd shrinks a
run of equal bytes a thousandfold, and a dictionary-encoded column repeats one value for every
row at the cost of an index: a 212 KB part holding one row 1,000,000 times decodes to
gigabytes. The footer says how many rows there are and what the pages decompress to; reading
the string columns as dictionaries (the dictionary once, an index a row) says what they decode
to, exactly, at the cost of what the pages hold. A part of the all-tasks table holds at most
PART_ROWS rows in one row group (ROW_GROUP_SIZE is larger), a task's table TASK_TABLE_ROWS, and
a row decodes to at most MAX_ROW_BYTES: its metrics twice over (the text and the flattened
metrics) and its run's claims. A table past a bound was not written by the bundler, and is
refused with what it holds, never decoded.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bundler.core.errors import RowError
from bundler.core.limits import MAX_CLAIM_BYTES, MAX_METRICS_BYTES

MAX_ROW_BYTES = 2 * MAX_METRICS_BYTES + MAX_CLAIM_BYTES
"""What one row of a table decodes to at most: `metrics_json`, the flattened `metrics` (no
larger than the text they are read from) and the run's other fields (the sidecar's claims)."""
MAX_TABLE_DECODED_BYTES = 256 << 20
"""What a table the audit reads may decode to, whatever its rows: a part of 1,000 rows of
metrics 100 KB each fits; one past this cannot be judged in bounded memory, and is a finding."""
MAX_ROW_GROUPS = 1
"""The bundler writes a table in one row group (ROW_GROUP_SIZE is above any table's rows)."""


def table_problem(data: bytes, max_rows: int) -> str | None:
    """Why these bytes are no table of at most `max_rows` rows that the audit may decode (None:
    they may be decoded). Nothing but the footer and the dictionaries is read."""
    try:
        footer = pq.ParquetFile(pa.BufferReader(data))
        meta = footer.metadata
    except (pa.ArrowException, OSError) as error:
        return f"not a Parquet table: {error}"
    if meta.num_rows > max_rows:
        return f"it holds {meta.num_rows:,} rows; the bundler writes at most {max_rows:,}"
    if meta.num_row_groups > MAX_ROW_GROUPS:
        return f"it holds {meta.num_row_groups:,} row groups; the bundler writes {MAX_ROW_GROUPS}"
    bound = min(MAX_TABLE_DECODED_BYTES, max(meta.num_rows, 1) * MAX_ROW_BYTES)
    pages = sum(
        meta.row_group(group).column(column).total_uncompressed_size
        for group in range(meta.num_row_groups)
        for column in range(meta.num_columns)
    )
    if pages > bound:
        return f"its pages decompress to {pages:,} bytes, over the {bound:,} of its rows"
    decoded = 0 if meta.num_rows == 0 else _decoded_bytes(data, footer.schema)
    if isinstance(decoded, str):
        return decoded
    if decoded > bound:
        return f"its rows decode to {decoded:,} bytes, over the {bound:,} of its rows"
    return None


def _decoded_bytes(data: bytes, schema: pq.ParquetSchema) -> int | str:
    """What the file's columns decode to, its strings counted without being decoded (read as
    dictionaries); the reason why not, for a file that cannot be read so."""
    strings = [
        schema.column(index).path
        for index in range(len(schema))
        if schema.column(index).physical_type == "BYTE_ARRAY"
    ]
    try:
        reader = pq.ParquetFile(pa.BufferReader(data), read_dictionary=strings)
        table = reader.read(use_threads=False)
    except (pa.ArrowException, OSError) as error:
        return f"not a Parquet table: {error}"
    return sum(_size(chunk) for column in table.columns for chunk in column.chunks)


def _size(array: pa.Array) -> int:
    """The bytes `array` takes once its dictionaries are decoded."""
    if isinstance(array, pa.DictionaryArray):
        lengths = pc.take(pc.binary_length(array.dictionary), array.indices)
        return int(pc.sum(lengths).as_py() or 0) + 4 * len(array)
    if isinstance(array, pa.ListArray | pa.LargeListArray):
        return int(array.offsets.nbytes) + _size(array.flatten())
    if isinstance(array, pa.StructArray):
        return sum(_size(array.field(index)) for index in range(array.type.num_fields))
    return int(array.nbytes)


def checked_rows(data: bytes, max_rows: int) -> pa.Table:
    """The table these bytes hold, once `table_problem` finds none (RowError naming it)."""
    if (problem := table_problem(data, max_rows)) is not None:
        raise RowError(problem)
    try:
        return pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except (pa.ArrowException, OSError) as error:
        raise RowError(f"not a Parquet table: {error}") from None


def repeated(ids: Iterable[str]) -> list[str]:
    """The ids that occur more than once, sorted."""
    seen: set[str] = set()
    twice: set[str] = set()
    for bundle_id in ids:
        (twice if bundle_id in seen else seen).add(bundle_id)
    return sorted(twice)
