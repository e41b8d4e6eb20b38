"""The whole rows of the last parts of the all-tasks table stay decoded (bundler.hub.leaderboard.
partrows): a commit's computing reads the same part several times, and decodes it once; a part
made from rows gives back the very rows its bytes hold; and no more than KEPT_PARTS parts are
held, however many are read."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
from factory import make_row
from test_tables import some_rows

from bundler.hub.leaderboard import columns, tables
from bundler.hub.leaderboard.partrows import KEPT_PARTS, KeptRows
from bundler.hub.leaderboard.tables import ALL_SCHEMA, AllTasksTable, TablePart


def decoded_from_bytes(part: TablePart) -> pa.Table:
    return columns.decoded(part.data).cast(ALL_SCHEMA)


def test_a_part_made_from_rows_gives_the_rows_its_bytes_hold_without_decoding_them() -> None:
    with mock.patch.object(tables, "decoded", wraps=columns.decoded) as decoding:
        table = AllTasksTable.of(some_rows())
        (part,) = table.parts.values()
        whole = part.full()
    assert decoding.call_count == 0
    assert whole.equals(decoded_from_bytes(part), check_metadata=True)
    assert whole.schema == ALL_SCHEMA


def test_a_commits_computing_decodes_each_part_it_reads_once() -> None:
    """Scoring, rescoring, ranking and merging read the part of a table read from a branch
    again and again: it is decoded once, and the rows read are those decoding gives."""
    data = AllTasksTable.of(some_rows()).files()
    with mock.patch.object(tables, "decoded", wraps=columns.decoded) as decoding:
        board = AllTasksTable.read(data)
        (part,) = board.parts.values()
        first = part.full()
        assert part.full() is first and part.full() is first
        board.rows_of([row.bundle_id for row in some_rows()])
        board.updated([make_row("mistral")])
    whole = [call for call in decoding.call_args_list if len(call.args) == 1 and not call.kwargs]
    assert len(whole) == 1, decoding.call_args_list
    assert first.equals(decoded_from_bytes(part), check_metadata=True)


def test_no_more_than_kept_parts_stay_decoded() -> None:
    kept = KeptRows()
    parts = [object() for _ in range(KEPT_PARTS + 3)]
    decodings: list[object] = []

    def decode(part: object) -> pa.Table:
        decodings.append(part)
        return pa.table({"n": [id(part)]})

    for part in parts:
        kept.rows(part, lambda part=part: decode(part))
    assert len(kept._rows) == KEPT_PARTS  # the oldest went
    kept.rows(parts[-1], lambda: decode(parts[-1]))  # still kept: not decoded again
    kept.rows(parts[0], lambda: decode(parts[0]))  # dropped: decoded again
    assert decodings == [*parts, parts[0]]


def test_the_least_recently_used_part_goes_first() -> None:
    kept = KeptRows(size=2)
    a, b, c = object(), object(), object()
    table = pa.table({"n": [1]})
    kept.made(a, table, table.schema)
    kept.made(b, table, table.schema)
    kept.rows(a, lambda: table)  # a used again: b is now the oldest
    kept.made(c, table, table.schema)
    assert set(kept._rows) == {a, c}


def test_a_part_made_of_other_columns_is_decoded_when_asked() -> None:
    """Only rows of the schema decoding gives are kept as made: any other table (another
    column order or type, no layout mark) is decoded, and cast, as ever."""
    kept = KeptRows()
    part, table = object(), pa.table({"n": [1]})
    kept.made(part, table, ALL_SCHEMA)
    assert kept._rows == {}
    kept.made(part, table.replace_schema_metadata({b"k": b"v"}), table.schema)
    assert kept._rows == {}
