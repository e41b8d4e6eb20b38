"""The whole rows of the last few parts of the all-tasks table made or decoded, kept decoded.

Computing a commit's tables reads the rows of the parts it changes several times over: to find
a task's scoring, to score the new rows, to rank each board (`AllTasksTable.rows_of`), and to
merge rows into a part (`AllTasksTable.updated`); an upload of several commits computes them
once more for each later commit (bundler.hub.publish.ahead). Decoding a part's Parquet each
time made those decodings a large share of the time the tables took (tests/benchmark_upload.py
measures an upload with and without the rows kept: `kept_rows`). Holding every part's rows
would cost memory in proportion to the board (a part of PART_ROWS rows takes tens of times its
file's size decoded), so only the last KEPT_PARTS parts made or read are kept: what a commit's
computing reads again and again, however large the board.

A part made here (`TablePart.of`) keeps the very table its bytes were written from, when it
has the schema decoding gives: Parquet gives those rows back unchanged (the tables are written
so that reading a part and writing it again gives the same bytes, tests/test_tables.py), so
nothing read from the kept table differs from what decoding would give.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from threading import Lock
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa

KEPT_PARTS = 4
"""Parts whose whole rows stay decoded: a commit's computing changes one part or two (the last,
where new rows go, and one whose row changed), and may read a few more for its boards."""
Part = TypeVar("Part")


class KeptRows:
    """The decoded rows of at most `size` parts, by part (the object itself, whose id is never
    reused while it is kept), the least recently used dropped first. A lock keeps it whole
    when tables are computed on more than one thread."""

    def __init__(self, size: int = KEPT_PARTS) -> None:
        self.size = size
        self._rows: OrderedDict[object, pa.Table] = OrderedDict()
        self._lock = Lock()

    def rows(self, part: object, decode: Callable[[], pa.Table]) -> pa.Table:
        """The part's whole rows: kept, else `decode`d and kept."""
        with self._lock:
            table = self._rows.get(part)
            if table is not None:
                self._rows.move_to_end(part)
                return table
        table = decode()
        self._keep(part, table)
        return table

    def made(self, part: Part, table: pa.Table, schema: pa.Schema) -> Part:
        """`part`, just written from `table`: its rows kept as they are, where they are of
        `schema` (the one decoding gives, metadata and all); else decoded when asked."""
        if table.schema.equals(schema, check_metadata=True):
            self._keep(part, table)
        return part

    def _keep(self, part: object, table: pa.Table) -> None:
        with self._lock:
            self._rows[part] = table
            self._rows.move_to_end(part)
            while len(self._rows) > self.size:
                self._rows.popitem(last=False)


KEPT = KeptRows()
"""The process's kept rows, KEPT_PARTS parts at most."""
