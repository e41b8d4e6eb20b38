"""The all-tasks table as the record's format 3 wrote it (`bundler.hub.leaderboard.record`):
run dates in nanoseconds, publication in milliseconds, no `run_date_text`. A commit reads its
parts once more and writes them in today's types (`bundler.hub.leaderboard.columns`); a reader
of what a branch publishes, such as `audit`, takes either until then.
"""

from __future__ import annotations

from bundler.core.errors import RowError
from bundler.hub.leaderboard.columns import (
    decoded,
    format_3_schema,
    microsecond_table,
    same_columns,
)
from bundler.hub.leaderboard.tables import (
    ALL_SCHEMA,
    LAYOUT_KEY,
    LAYOUT_VERSION,
    AllTasksTable,
    TablePart,
)
from bundler.hub.repo.paths import part_number

FORMAT_3_SCHEMA = format_3_schema(ALL_SCHEMA)
"""A part as the record's format 3 wrote it."""


def format_3_table(files: dict[str, bytes]) -> AllTasksTable:
    """The table whose parts, by path, the record's format 3 wrote (other paths left out), its
    parts in today's types, each at its number (RowError for anything but such parts)."""
    parts = {}
    for path, data in files.items():
        if (number := part_number(path)) is None:
            continue
        table = decoded(data)
        layout = (table.schema.metadata or {}).get(LAYOUT_KEY)
        if layout != str(LAYOUT_VERSION).encode() or not same_columns(
            table.schema, FORMAT_3_SCHEMA
        ):
            raise RowError("not a part of the all-tasks table of the record's format 3")
        parts[number] = TablePart.of(microsecond_table(table.cast(FORMAT_3_SCHEMA), ALL_SCHEMA))
    return AllTasksTable(parts)


def published_table(files: dict[str, bytes]) -> AllTasksTable:
    """The table whose parts, by path, a branch publishes, as this bundler writes them or as
    the record's format 3 did (a board no commit has written anew yet): a reader of what is
    published takes both. RowError, saying what is wrong for today's format, for anything
    else."""
    try:
        return AllTasksTable.read(files)
    except RowError as error:
        try:
            return format_3_table(files)
        except RowError:
            raise error from None
