"""Every table the bundler writes loads in every common reader: plain pyarrow in a process that
cannot import pandas (`to_pylist`, which refuses nanoseconds without it), DuckDB and polars;
every timestamp is Parquet's TIMESTAMP(MICROS) adjusted to UTC, which Spark's default reader
takes too; and the card's example query runs as written, on local copies of the tables.

A board written by the release before (the record's format 3: run dates in nanoseconds,
publication in milliseconds, no `run_date_text`) is written again in these types by the next
commit, of `card` or of `upload`, from its vouched tables: no bundle is downloaded."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from factory import RunSpec, make_row
from helpers import published_leaderboard, run_python
from hubserver import HubServer
from test_audit import audit
from test_card_refresh import card
from test_upload import make_bundles, publish

from bundler.core.errors import RowError
from bundler.hub.leaderboard.columns import FORMAT_3_TYPES, parquet_bytes
from bundler.hub.leaderboard.format3 import format_3_table
from bundler.hub.leaderboard.ranking import TaskBoard, TaskScoring
from bundler.hub.leaderboard.record import DerivedFile
from bundler.hub.leaderboard.tables import AllTasksTable, task_table_bytes
from bundler.hub.repo.paths import README, RECORD, TABLE_SUFFIX
from bundler.local.schema import instant_nanoseconds

SPECS = [
    RunSpec(task=task, model=f"m{n}", rows=2, run_date=f"2026-06-15T10:42:2{n}.04558890{n + 1}Z")
    for n in range(3)
    for task in ("a", "b")
]

NO_PANDAS = """
import json, sys
import importlib.abc

class NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not installed here")
        return None

sys.meta_path.insert(0, NoPandas())
import pyarrow.parquet as pq

counts = {}
for path in sys.argv[1:]:
    try:
        counts[path] = len(pq.read_table(path).to_pylist())
    except Exception as error:
        counts[path] = f"{type(error).__name__}: {error}"
assert "pandas" not in sys.modules
print(json.dumps(counts))
"""
"""Reads each table with pyarrow alone, in a process where pandas cannot be imported, as on a
machine without it: each path's row count, or the error it raised."""


def tables_of(hub: HubServer, repo_id: str, root: Path) -> list[Path]:
    """Local copies of every table the branch holds, at their paths in the repository."""
    copies = []
    for path in hub.list_files(repo_id):
        if path.endswith(TABLE_SUFFIX):
            copy = root / path
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(hub.file_bytes(repo_id, path) or b"")
            copies.append(copy)
    return sorted(copies)


def pyarrow_alone(paths: list[Path]) -> dict[str, int | str]:
    result = run_python(NO_PANDAS, *paths)
    assert result.returncode == 0, result.stderr
    counts: dict[str, int | str] = json.loads(result.stdout)
    return counts


def assert_every_reader_loads(paths: list[Path]) -> None:
    """Each table loads whole in pyarrow without pandas, DuckDB and polars, with the same rows,
    every timestamp in microseconds, UTC, in its Parquet metadata as in each reader."""
    counts = pyarrow_alone(paths)
    for path in paths:
        rows = pq.ParquetFile(path).metadata.num_rows
        assert counts[str(path)] == rows, (path, counts[str(path)])
        assert len(duckdb.sql(f"SELECT * FROM '{path}'").fetchall()) == rows
        frame = pl.read_parquet(path)
        assert len(frame.to_dicts()) == rows
        schema = pq.ParquetFile(path).schema
        stamps = [
            schema.column(i)
            for i in range(len(schema))
            if schema.column(i).logical_type.type == "TIMESTAMP"
        ]
        assert {column.name for column in stamps} == {"published_at", "run_date"}
        for column in stamps:
            logical = json.loads(column.logical_type.to_json())
            assert column.physical_type == "INT64"
            assert (logical["timeUnit"], logical["isAdjustedToUTC"]) == ("microseconds", True)
            assert frame.schema[column.name] == pl.Datetime("us", "UTC")
        described = {c[0]: c[1] for c in duckdb.sql(f"DESCRIBE SELECT * FROM '{path}'").fetchall()}
        assert described["run_date"] == "TIMESTAMP WITH TIME ZONE"
        assert frame["run_date_text"].dtype == pl.String


def test_every_table_loads_in_every_reader_and_the_card_query_runs(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    publish(make_bundles(tmp_path / "bundles", SPECS), repo_id)
    code, _, stderr = card(repo_id)
    assert code == 0, stderr
    root = tmp_path / "copy"
    paths = tables_of(hub, repo_id, root)
    assert len(paths) == 3  # the all-tasks table's one part, and each task's table
    assert_every_reader_loads(paths)
    texts = set(pl.read_parquet(paths[0])["run_date_text"].to_list())
    assert texts == {spec.run_date for spec in SPECS}
    text = (hub.file_bytes(repo_id, README) or b"").decode()
    (query,) = re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)
    local = query.replace(f"hf://datasets/{repo_id}/", f"{root}/")
    assert local != query
    found = duckdb.sql(local).fetchall()
    assert len(found) == len(SPECS)
    dates = [row[-1] for row in found]
    assert dates == sorted(dates, reverse=True)


def format_3(data: bytes) -> bytes:
    """A table as the release before wrote it: run dates in nanoseconds (from their text),
    publication in milliseconds, no text column."""
    table = pq.read_table(pa.BufferReader(data))
    texts = table.column("run_date_text").to_pylist()
    nanoseconds = pa.array([instant_nanoseconds(t) for t in texts], FORMAT_3_TYPES["run_date"])
    table = table.drop_columns("run_date_text")
    table = table.set_column(table.schema.get_field_index("run_date"), "run_date", nanoseconds)
    where = table.schema.get_field_index("published_at")
    published = table.column(where).cast(FORMAT_3_TYPES["published_at"])
    return parquet_bytes(table.set_column(where, "published_at", published))


def old_board(hub: HubServer, repo_id: str, tmp_path: Path) -> str:
    """A copy of the branch as the release before left it: every table in nanoseconds, and a
    record of format 3 vouching for them."""
    files = {path: hub.file_bytes(repo_id, path) or b"" for path in hub.list_files(repo_id)}
    files = {p: format_3(d) if p.endswith(TABLE_SUFFIX) else d for p, d in files.items()}
    record = json.loads(files[RECORD])
    record["format"] = 3
    for path in record["files"]:
        record["files"][path] = DerivedFile.of(files[path]).model_dump()
    files[RECORD] = json.dumps(record).encode()
    old = f"{repo_id}-old"
    hub.create_repo(old, files=files)
    counts = pyarrow_alone(tables_of(hub, old, tmp_path / "old"))
    assert all("Nanosecond resolution" in str(count) for count in counts.values()), counts
    return old


def assert_written_anew(hub: HubServer, old: str, root: Path) -> None:
    """Every table of the branch is in today's types, and its record of today's format."""
    paths = tables_of(hub, old, root)
    assert_every_reader_loads(paths)
    assert json.loads(hub.file_bytes(old, RECORD) or b"")["format"] == 4


def test_a_board_of_nanoseconds_is_written_anew_by_card_with_no_bundle_read(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    publish(make_bundles(tmp_path / "bundles", SPECS), repo_id)
    before = published_leaderboard(hub, repo_id).rows()
    old = old_board(hub, repo_id, tmp_path)
    hub.reset_requests()
    code, result, stderr = card(old)
    assert code == 0, stderr
    assert result["changed"] is True
    assert [r for r in hub.requests(old) if r.path.endswith(".tar.zst")] == []
    tables = [p for p in hub.list_files(old) if p.endswith(TABLE_SUFFIX)]
    (commit, *_) = hub.commits(old)
    assert set(tables) <= set(commit.modified)
    assert_written_anew(hub, old, tmp_path / "new")
    assert published_leaderboard(hub, old).rows() == before
    again, report, _ = card(old)
    assert again == 0 and report["changed"] is False  # and now it is true


def test_a_board_of_nanoseconds_is_written_anew_by_the_next_upload(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    publish(make_bundles(tmp_path / "bundles", SPECS), repo_id)
    old = old_board(hub, repo_id, tmp_path)
    newcomer = [RunSpec(task="a", model="m9", rows=2)]
    publish(make_bundles(tmp_path / "more", newcomer), old)
    assert_written_anew(hub, old, tmp_path / "new")
    rows = published_leaderboard(hub, old).rows()
    assert len(rows) == len(SPECS) + 1
    assert {row.run_date for row in rows} == {spec.run_date for spec in [*SPECS, *newcomer]}


def test_a_part_of_nanoseconds_is_written_with_the_bytes_its_rows_give_today() -> None:
    """The rewrite loses nothing: a part of format 3, read once more, gives the bytes today's
    writer gives its rows (the run date's text from the nanoseconds, to the last digit); a
    part of today's format is no part of format 3."""
    dates = [
        "2026-06-15T10:42:22.045588909Z",
        "2242-03-16T12:56:31.999999999Z",
        "1970-01-01T00:00:00Z",
    ]
    rows = [make_row(f"p{n}", run_date=date) for n, date in enumerate(dates)]
    today = AllTasksTable.of(rows).files()
    old = {path: format_3(data) for path, data in today.items()}
    assert format_3_table(old).files() == today
    assert format_3_table(old).rows() == sorted(rows, key=lambda row: row.bundle_id)
    with pytest.raises(RowError):
        format_3_table(today)


def test_a_board_of_nanoseconds_audits_clean_before_it_is_written_anew(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A stranger's audit reads what the board publishes, in either format."""
    publish(make_bundles(tmp_path / "bundles", SPECS[:2]), repo_id)
    old = old_board(hub, repo_id, tmp_path)
    code, report, stderr = audit(old)
    assert code == 0, stderr
    assert report["findings"] == [] and report["rows_published"] == 2
    # what the earlier release drew beside the parts is said to be unchecked, not called clean
    assert any("not checked" in note and "format 3" in note for note in report["unchecked"])


def test_every_writer_of_a_table_gives_one_every_reader_loads(tmp_path: Path) -> None:
    """The all-tasks table's parts, its one empty part (a board of no rows) and a task's
    table, with run dates at both ends of what a bundle carries."""
    dates = ["1970-01-01T00:00:00.000000001Z", "2242-03-16T12:56:31.999999999Z"]
    rows = [make_row(f"p{n}", run_date=date) for n, date in enumerate(dates)]
    scoring = TaskScoring(None, "exact_match.accuracy")
    scored = [row.model_copy(update=asdict(scoring.score(row))) for row in rows]
    written = {
        "part.parquet": AllTasksTable.of(scored).files(),
        "empty.parquet": AllTasksTable.empty().files(),
    }
    tables = {name: data for name, files in written.items() for data in files.values()}
    tables["task.parquet"] = task_table_bytes(TaskBoard.of("expert-vqa", scored))
    for name, data in tables.items():
        (tmp_path / name).write_bytes(data)
    assert_every_reader_loads(sorted(tmp_path / name for name in tables))
    frame = pl.read_parquet(tmp_path / "task.parquet")
    assert sorted(frame["run_date_text"].to_list()) == dates
