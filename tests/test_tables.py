"""The leaderboard's Parquet tables: the same rows give the same bytes, a table reads back as
the rows written, a file of another layout or other columns is refused, updates replace and
remove rows, and a task table's metric columns are capped with the ranking metric first."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from dataclasses import asdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from factory import make_row

from bundler.core.errors import RowError
from bundler.hub.leaderboard.branch import BranchTables
from bundler.hub.leaderboard.ranking import TaskBoard, TaskScoring
from bundler.hub.leaderboard.rows import METRICS_AFTER, TableRow, TaskRow
from bundler.hub.leaderboard.tables import (
    ALL_SCHEMA,
    COMPACT_BELOW,
    LAYOUT_KEY,
    MAX_METRIC_COLUMNS,
    PART_ROWS,
    AllTasksTable,
    arrow_schema,
    parquet_bytes,
    task_table_bytes,
)
from bundler.hub.repo.paths import table_part


def some_rows() -> list[TableRow]:
    return [
        make_row("gpt", metrics={"em": {"acc": 0.5, "n": 4}}, published_at="2026-06-01T00:00:00Z"),
        make_row(
            "qwen",
            metrics={"em": {"f1": 0.9, "acc": 0.7}, "acc@0.5": 1},
            published_at="2026-06-03T00:00:00Z",
            coverage="partial",
            rows_present=3,
            usage=[{"key": "input_tokens", "count": 12}, {"key": "output_tokens", "count": 3}],
        ),
        make_row(
            "claude",
            label="unpinned",
            metrics={"em": {"acc": 0.7}, "label": "x", "none": None},
            published_at="2026-06-02T00:00:00Z",
            coverage="unknown",
            expected_rows=None,
            submitter_name=None,
            warnings=["a warning"],
        ),
        make_row("llama", metrics={"em": {"acc": "n/a"}}, published_at="0999-01-01T00:00:00Z"),
        make_row("gpt", task="maze", metrics={"maze": {"solved": 2}}, sidecar_blob_id="a" * 40),
    ]


def single(table: AllTasksTable) -> bytes:
    """The bytes of a table of one part (every table here is)."""
    (data,) = table.files().values()
    return data


def back(data: bytes) -> AllTasksTable:
    return AllTasksTable.read({table_part(0): data})


def read(data: bytes) -> pa.Table:
    return pq.read_table(pa.BufferReader(data))


def vqa_board(rows: list[TableRow]) -> TaskBoard:
    return TaskBoard.of("expert-vqa", [row for row in rows if row.task_name == "expert-vqa"])


def test_the_same_rows_give_byte_identical_tables_whatever_their_order() -> None:
    rows = some_rows()
    table = single(AllTasksTable.of(rows))
    task = task_table_bytes(vqa_board(rows))
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert single(AllTasksTable.of(shuffled)) == table
        assert single(AllTasksTable.of(shuffled + shuffled[:2])) == table  # a row twice: once
        assert task_table_bytes(vqa_board(shuffled)) == task
    # rebuilt from scratch, not the same objects: equal values, equal bytes
    assert single(AllTasksTable.of(some_rows())) == table


def test_a_table_reads_back_as_the_rows_written() -> None:
    rows = some_rows()
    board = back(single(AllTasksTable.of(rows)))
    assert len(board) == 5
    assert board.rows() == sorted(rows, key=lambda row: row.bundle_id)
    assert board.tasks() == ["expert-vqa", "maze"]
    assert board.rows("maze") == [rows[-1]]
    index = board.indexed(row.bundle_id for row in rows)
    assert index["gpt_1054f537/maze@a1b2c3d4"].sidecar_blob_id == "a" * 40
    assert index["llama_1054f537/expert-vqa@a1b2c3d4"].published_at == "0999-01-01T00:00:00Z"
    assert {entry.archive_sha256 for entry in index.values()} == {"0" * 64}
    assert AllTasksTable.empty().rows() == [] and back(single(AllTasksTable.empty())).rows() == []


def test_a_table_read_back_is_written_with_the_same_bytes() -> None:
    """A branch whose tables are current gets no commit: the table read from it must give the
    bytes it was read from. Parquet reads a list's items back as `element`, not Arrow's `item`,
    and the table was written again with those names, so every branch's first refresh after
    an upload committed an all-tasks table that had not changed."""
    rows = some_rows()
    data = single(AllTasksTable.of(rows))
    board = back(data)
    assert single(board) == data
    assert board.parts[0].full().schema == ALL_SCHEMA
    extra = make_row("mistral")
    assert single(board.updated([extra])) == single(AllTasksTable.of([*rows, extra]))
    assert single(board.updated([], removed=[extra.bundle_id])) == data


def test_the_all_tasks_table_has_the_table_row_columns_and_utc_timestamps() -> None:
    table = read(single(AllTasksTable.of(some_rows())))
    assert table.column_names == arrow_schema(TableRow).names
    assert table.column_names[12:14] == ["run_date", "run_date_text"]
    assert table.schema.field("published_at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("run_date").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("metrics").type == pa.list_(
        pa.struct([("name", pa.string()), ("number", pa.float64()), ("json_value", pa.string())])
    )
    assert table.schema.metadata[LAYOUT_KEY] == b"3"
    assert table.column("bundle_id").to_pylist() == sorted(r.bundle_id for r in some_rows())


def other_layout(data: bytes, metadata: dict[bytes, bytes] | None) -> bytes:
    table = read(data)
    return parquet_bytes(table.replace_schema_metadata(metadata))


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda data: b"not parquet", "not a Parquet table"),
        (lambda data: data[: len(data) // 2], "not a Parquet table"),
        (lambda data: other_layout(data, None), "a table of layout None"),
        (lambda data: other_layout(data, {LAYOUT_KEY: b"1"}), "layout b'1'"),
        (lambda data: other_layout(data, {LAYOUT_KEY: b"4"}), "layout b'4'"),
        # a task table is of layout 2, but its columns are not the all-tasks table's
        (lambda data: task_table_bytes(vqa_board(some_rows())), "columns"),
        (lambda data: parquet_bytes(read(data).drop_columns(["sidecar_blob_id"])), "columns"),
        (
            lambda data: parquet_bytes(
                read(data).append_column("extra", pa.array([1] * 5, pa.int64()))
            ),
            "columns",
        ),
        (
            lambda data: parquet_bytes(
                read(data).select([*reversed(ALL_SCHEMA.names)])  # same columns, other order
            ),
            "columns",
        ),
        (
            lambda data: parquet_bytes(
                read(data).set_column(
                    ALL_SCHEMA.get_field_index("archive_size"),
                    pa.field("archive_size", pa.string()),
                    pa.array(["1000"] * 5),
                )
            ),
            "columns",
        ),
    ],
    ids=[
        "not parquet",
        "truncated",
        "no layout",
        "layout 1",
        "layout 4",
        "task table",
        "a column less",
        "a column more",
        "columns reordered",
        "a column retyped",
    ],
)
def test_a_file_of_another_layout_or_other_columns_is_refused(
    make: Callable[[bytes], bytes], problem: str
) -> None:
    data = make(single(AllTasksTable.of(some_rows())))
    with pytest.raises(RowError, match=problem.replace("(", r"\(")):
        back(data)


def test_the_layout_mark_alone_does_not_make_a_table() -> None:
    """Rows of the right columns that this bundler would not write are refused when read."""
    table = read(single(AllTasksTable.of(some_rows())))
    bad = table.set_column(0, ALL_SCHEMA.field("bundle_id"), pa.array(["../x"] * 5))
    board = back(parquet_bytes(bad.replace_schema_metadata(ALL_SCHEMA.metadata)))
    with pytest.raises(RowError, match="not one this bundler writes"):
        board.rows()


def test_updated_replaces_and_removes_rows_as_if_written_anew() -> None:
    rows = some_rows()
    board = AllTasksTable.of(rows)
    changed = rows[0].model_copy(update={"sidecar_blob_id": "b" * 40, "rows_present": 4})
    new = make_row("mistral", metrics={"em": {"acc": 0.1}})
    gone = rows[2].bundle_id
    updated = board.updated([new, changed], removed=[gone])
    expected = [changed, new, *(row for row in rows[1:] if row.bundle_id != gone)]
    assert updated.rows() == sorted(expected, key=lambda row: row.bundle_id)
    assert single(updated) == single(AllTasksTable.of(expected))
    assert updated.indexed([changed.bundle_id])[changed.bundle_id].sidecar_blob_id == "b" * 40
    assert updated.indexed([gone]) == {} and len(board) == 5  # the original is unchanged
    # a row both updated and removed is updated; removing an unknown id is nothing
    assert single(board.updated([], removed=["nobody_00000000/x@unpinned"])) == single(board)
    assert board.updated([rows[1]], removed=[rows[1].bundle_id]).rows() == board.rows()
    emptied = board.updated([], removed=[row.bundle_id for row in rows])
    assert len(emptied) == 0 and single(emptied) == single(AllTasksTable.empty())
    assert single(AllTasksTable.empty().updated(rows)) == single(board)


def test_a_task_table_is_ranked_with_its_metric_columns_after_the_player() -> None:
    rows = some_rows()
    board = vqa_board(rows)
    table = read(task_table_bytes(board))
    metrics = ["em.acc", "em.n", "em.f1", board.columns[3]]
    assert board.columns == metrics and board.names[metrics[3]] == "acc@0.5"
    fixed = arrow_schema(TaskRow)
    cut = fixed.names.index(METRICS_AFTER) + 1
    assert table.column_names == [*fixed.names[:cut], *metrics, *fixed.names[cut:]]
    assert all(table.schema.field(name).type == pa.float64() for name in metrics)
    assert [table.schema.field(name) for name in fixed.names] == list(fixed)
    assert table.schema.field("published_at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("rank").type == pa.int64()
    assert table.schema.metadata[LAYOUT_KEY] == b"3"
    cells = table.to_pydict()
    assert cells["player_name"] == ["claude", "qwen", "gpt", "llama"]
    assert cells["rank"] == [1, 1, 3, None] == board.ranks()
    assert cells["em.acc"] == [0.7, 0.7, 0.5, None]
    assert cells[metrics[3]] == [None, 1.0, None, None]
    assert [json.loads(text) for text in cells["metrics_json"]][2] == {"em": {"acc": 0.5, "n": 4}}


def test_a_task_table_keeps_at_most_max_metric_columns_with_the_ranking_one_first() -> None:
    many = {f"scorer_{i:04d}": {"value": i / 10} for i in range(3000)}
    first = make_row("first", metrics={"score": 0.5}, published_at="2026-06-01T00:00:00Z")
    flood = make_row("flood", metrics={**many, "score": 0.9}, published_at="2026-06-02T00:00:00Z")
    board = TaskBoard.of("expert-vqa", [flood, first])
    assert len(board.columns) == 3001 and board.sort_column == "score"
    table = read(task_table_bytes(board))
    floats = [
        f.name
        for f in table.schema
        if f.type == pa.float64() and f.name not in TaskRow.model_fields  # not ci_low, ci_high
    ]
    assert len(floats) == MAX_METRIC_COLUMNS
    assert floats == ["score", *(f"scorer_{i:04d}.value" for i in range(MAX_METRIC_COLUMNS - 1))]
    assert table.column("player_name").to_pylist() == ["flood", "first"]
    assert table.column("score").to_pylist() == [0.9, 0.5]
    # the rest only in metrics_json, nothing lost
    (flood_json, _) = table.column("metrics_json").to_pylist()
    assert json.loads(flood_json)["scorer_2999"] == {"value": 299.9}
    assert "scorer_2999.value" not in table.column_names


def test_a_task_table_is_capped_when_the_earliest_bundle_floods_it_too() -> None:
    many = {"score": 1.0, **{f"m{i}": float(i) for i in range(2500)}}
    rows = [
        make_row("flood", metrics=many, published_at="2026-06-01T00:00:00Z"),
        make_row("late", metrics={"other": {"x": 3}, "score": 2.0}),
    ]
    board = TaskBoard.of("expert-vqa", rows)
    table = read(task_table_bytes(board))
    floats = [
        f.name
        for f in table.schema
        if f.type == pa.float64() and f.name not in TaskRow.model_fields  # not ci_low, ci_high
    ]
    assert len(floats) == MAX_METRIC_COLUMNS and floats[0] == "score"
    assert "other.x" not in floats  # the newcomer's name comes after the earliest's 2,501
    assert table.column("rank").to_pylist() == [1, 2]
    assert table.num_columns == len(arrow_schema(TaskRow)) + MAX_METRIC_COLUMNS


def test_an_empty_leaderboard_is_a_table_of_the_same_columns() -> None:
    data = single(AllTasksTable.empty())
    table = read(data)
    assert table.num_rows == 0 and table.schema.equals(ALL_SCHEMA)
    assert table.schema.metadata == ALL_SCHEMA.metadata
    assert len(back(data)) == 0
    with io.BytesIO(data) as stream:
        assert pq.ParquetFile(stream).metadata.num_row_groups <= 1


def many_rows(count: int, task: str = "expert-vqa") -> list[TableRow]:
    return [
        make_row(f"model-{number:05d}", task=task, metrics={"em": {"acc": (number % 97) / 97}})
        for number in range(count)
    ]


def test_a_table_grows_in_parts_and_a_change_rewrites_only_the_parts_it_touches() -> None:
    rows = many_rows(PART_ROWS * 2 + 10)
    board = AllTasksTable.of(rows)
    files = board.files()
    assert list(files) == [table_part(0), table_part(1), table_part(2)]
    assert [part.rows for part in board.parts.values()] == [PART_ROWS, PART_ROWS, 10]
    again = AllTasksTable.read(files)
    assert len(again) == len(rows) and again.rows() == sorted(rows, key=lambda r: r.bundle_id)
    # a new row goes into the last part; a changed row stays in its own part
    changed = board.rows_of([rows[5].bundle_id])[rows[5].bundle_id]
    changed = changed.model_copy(update={"rows_present": 2})
    after = again.updated([changed, make_row("newcomer")]).files()
    differ = sorted(path for path in after if after[path] != files.get(path))
    (first_part,) = [
        n for n, p in board.parts.items() if rows[5].bundle_id in p.keys()["bundle_id"].to_pylist()
    ]
    assert differ == sorted({table_part(first_part), table_part(2)})
    # a part left empty goes; the numbers of the others stay
    emptied = again.updated([], removed=[row.bundle_id for row in rows[-10:]])
    assert list(emptied.files()) == [table_part(0), table_part(1)]


def test_a_board_read_from_the_table_ranks_as_a_board_of_every_row() -> None:
    """The table keeps each row's score; the best rows are found from those columns alone,
    and rank as TaskBoard.of ranks every row."""
    rows = many_rows(300)
    scoring = TaskScoring(None, "em.acc")
    scored = [row.model_copy(update=asdict(scoring.score(row))) for row in rows]
    table = AllTasksTable.of(scored)
    (best,) = table.boards({"expert-vqa": (scoring, 20)})
    whole = TaskBoard.of("expert-vqa", rows)
    assert [row.bundle_id for row in best.rows] == [row.bundle_id for row in whole.rows[:20]]
    assert best.ranks() == whole.ranks()[:20] and best.total == 300 == whole.total


def test_run_dates_read_back_to_the_nanosecond_in_every_table() -> None:
    """A run date is a UTC timestamp in microseconds, which every reader takes, cut from the
    instant, with its text to the nanosecond beside it: the rows read back are the rows
    written."""
    dates = {
        "a": "2026-06-15T10:42:22.045588909Z",
        "b": "2242-03-16T12:56:31.999999999+00:00",  # the last second a tar header holds
        "c": "1970-01-01T01:00:00.000000001+01:00",
    }
    rows = [make_row(player, run_date=date) for player, date in dates.items()]
    data = single(AllTasksTable.of(rows))
    microseconds = [1781520142045588, 8589934591999999, 0]
    texts = [row.run_date for row in rows]
    assert read(data).column("run_date").cast(pa.int64()).to_pylist() == microseconds
    assert read(data).column("run_date_text").to_pylist() == texts
    assert back(data).rows() == sorted(rows, key=lambda row: row.bundle_id)
    assert [row.run_date for row in rows][2] == "1970-01-01T00:00:00.000000001Z"
    task = read(task_table_bytes(vqa_board(rows)))
    assert task.schema.field("run_date").type == pa.timestamp("us", tz="UTC")
    task_dates = task.column("run_date").cast(pa.int64()).to_pylist()
    task_texts = task.column("run_date_text").to_pylist()
    by_id = dict(zip(task.column("bundle_id").to_pylist(), task_dates, strict=True))
    by_text = dict(zip(task.column("bundle_id").to_pylist(), task_texts, strict=True))
    assert [by_id[row.bundle_id] for row in rows] == microseconds
    assert [by_text[row.bundle_id] for row in rows] == texts


def test_a_branch_once_settled_leaves_the_branch_it_was_copied_from_as_it_was() -> None:
    """A commit plans on a copy of the branch; when it is planned again (a concurrent commit),
    the original must still say what its rows are scored by, or a changed definition would
    never score them again."""
    rows = many_rows(3)
    original = BranchTables("main", "0" * 40, AllTasksTable.of(rows), scores={"expert-vqa": "x"})
    after = original.with_rows([make_row("newcomer", metrics={"em": {"acc": 0.5}})])
    after.settle(None)
    assert original.scores == {"expert-vqa": "x"} and after.scores != original.scores
    assert all(row.score is None for row in original.leaderboard.rows())
    assert all(row.score is not None for row in after.leaderboard.rows())


def test_a_part_that_removals_leave_small_is_emptied_into_the_last_part() -> None:
    rows = many_rows(PART_ROWS * 2 + 10)
    board = AllTasksTable.of(rows)
    first = board.parts[0].keys()["bundle_id"].to_pylist()
    keep = COMPACT_BELOW - 1
    after = board.updated([], removed=first[keep:])
    assert sorted(after.parts) == [1, 2]  # part 0 went, its rows into the last part
    assert after.parts[1].data == board.parts[1].data  # untouched
    assert after.parts[2].rows == 10 + keep and len(after) == PART_ROWS + 10 + keep
    assert sorted(r.bundle_id for r in after.rows()) == sorted(
        [*first[:keep], *(r.bundle_id for r in rows if r.bundle_id not in first)]
    )
    # a part left with more rows stays where it is
    fewer = board.updated([], removed=first[: PART_ROWS - COMPACT_BELOW])
    assert sorted(fewer.parts) == [0, 1, 2] and fewer.parts[0].rows == COMPACT_BELOW
