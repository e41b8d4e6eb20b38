"""The tables' rows: the all-tasks row, the task row with one column per numeric metric, the
metric-name-to-column mapping, and the one form of `published_at`."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from factory import make_row
from hypothesis import given
from hypothesis import strategies as st

from bundler.hub.leaderboard.rows import (
    BundleRow,
    TaskRow,
    metric_column,
    metric_columns,
    utc_timestamp,
)
from bundler.local.metrics import flatten_metrics

COLUMN = re.compile(r"[A-Za-z0-9_.-]{1,74}")
DIGEST = re.compile(r"__[0-9a-f]{32}$")


def as_bundle_row(row: BundleRow) -> BundleRow:
    """The BundleRow of a TableRow."""
    return BundleRow(**row.model_dump(exclude={"sidecar_blob_id"}))


@pytest.mark.parametrize(
    "path",
    [("exact_match", "accuracy"), ("maze-solver", "by_size", "small"), ("acc",), ("coverage", "x")],
)
def test_a_plain_metric_name_is_its_own_column(path: tuple[str, ...]) -> None:
    assert metric_column(path) == ".".join(path)


@pytest.mark.parametrize(
    ("path", "stem"),
    [
        (("acc@0.5",), "acc_0.5"),
        (("F1 (macro) <b>|x</b>",), "F1_macro_b_x_b"),
        (("coverage",), "coverage"),  # a fixed column of the task table
        (("Bundle_ID",), "Bundle_ID"),  # in any letter case
        (("a__b", "c"), "a_b.c"),  # `__` is what marks a mapped column
        ((), "metric"),  # metrics.json that is not an object
        (("",), "metric"),
        (("überscore",), "berscore"),
        (("x" * 65,), "x" * 40),
    ],
)
def test_a_name_that_is_no_valid_column_is_mapped(path: tuple[str, ...], stem: str) -> None:
    column = metric_column(path)
    assert column.startswith(stem + "__") and DIGEST.search(column)
    assert COLUMN.fullmatch(column)
    assert metric_column(path) == column  # deterministic


def test_names_that_flatten_alike_never_share_a_column() -> None:
    # Three different metrics.json shapes flatten to the one name "acc.0.5".
    paths = [("acc", "0", "5"), ("acc.0", "5"), ("acc", "0.5"), ("acc.0.5",)]
    columns = [metric_column(path) for path in paths]
    assert columns[0] == "acc.0.5"
    assert len(set(columns)) == 4
    assert metric_column(("x" * 64,)) == "x" * 64
    assert metric_column(("",)) != metric_column(())


@given(
    st.lists(
        st.lists(st.text(max_size=12), max_size=4).map(tuple), min_size=2, max_size=8, unique=True
    )
)
def test_the_mapping_is_one_to_one_and_always_a_valid_column(paths: list[tuple[str, ...]]) -> None:
    columns = [metric_column(path) for path in paths]
    assert all(COLUMN.fullmatch(column) for column in columns)
    assert len({column for column in columns}) == len(paths)
    fixed = {name.lower() for name in TaskRow.model_fields}
    assert not any(column.lower() in fixed for column in columns)


def test_metric_columns_keep_finite_numbers_in_file_order() -> None:
    metrics = {
        "s": {
            "score": 41.5,
            "n": 4,
            "label": "ok",
            "passed": True,
            "missing": None,
            "list": [1, 2],
            "nan": float("nan"),
            "huge": 10**400,
            "tiny": -1e-9,
        }
    }
    row = make_row(metrics=metrics)
    assert [(m.column, m.value) for m in metric_columns(row)] == [
        ("s.score", 41.5),
        ("s.n", 4.0),
        ("s.tiny", -1e-9),
    ]
    by_name = {m.name: m.number for m in flatten_metrics(metrics)}
    assert by_name["s.huge"] is None and by_name["s.nan"] is None  # no crash, no score


def test_a_task_row_takes_its_fields_from_the_bundle_row_and_no_rank_yet() -> None:
    row = make_row(label="unpinned", metrics={"em": {"acc": 0.5}})
    task_row = TaskRow.of(row)
    judged = {"rank", "ranking_score", "stale", "ci_low", "ci_high"}  # the board's to say
    assert task_row.rank is None and task_row.stale is False and task_row.ci_low is None
    assert task_row.model_dump(exclude=judged) == row.model_dump(
        include=set(TaskRow.model_fields) - judged
    )
    assert "sidecar_blob_id" not in TaskRow.model_fields and "metrics" not in TaskRow.model_fields


def test_published_at_is_written_in_one_utc_form() -> None:
    moment = datetime(2026, 6, 16, 10, 0, 5, 123456, tzinfo=UTC)
    assert utc_timestamp(moment) == "2026-06-16T10:00:05Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_timestamp())
    for text in ("2026-06-16T10:00:05+00:00", "2026-06-16T10:00:05.123456Z"):
        row = make_row(published_at=text)  # any UTC form is kept in the one written form
        assert row.published_at == "2026-06-16T10:00:05Z"
        assert row.published == moment.replace(microsecond=0)
    assert TaskRow.of(make_row(published_at="2026-06-16T10:00:05+00:00")).published_at == (
        "2026-06-16T10:00:05Z"
    )
    with pytest.raises(ValueError, match="not in UTC"):
        make_row(published_at="2026-06-16T10:00:05+02:00")


def test_a_publication_before_the_year_1000_reads_back() -> None:
    """`strftime("%Y")` writes the year 999 as `999`, which no parser reads back: a row so
    dated stopped the card and every upload to its branch with an internal error."""
    row = make_row(published_at="0999-01-01T00:00:00Z")
    assert row.published_at == "0999-01-01T00:00:00Z"
    written = as_bundle_row(row).model_dump_json()
    assert BundleRow.model_validate_json(written, strict=True) == as_bundle_row(row)
    assert utc_timestamp(row.published) == "0999-01-01T00:00:00Z"


def test_a_run_date_is_kept_to_the_nanosecond_in_one_utc_form() -> None:
    """Real run dates carry nanoseconds, which datetime cannot hold; the bundle keeps the
    harness's string, the row the instant in GPTNT's one form."""
    for text, kept in [
        ("2026-06-15T10:42:22.045588909Z", "2026-06-15T10:42:22.045588909Z"),
        ("2026-06-15T12:42:22.045588909+02:00", "2026-06-15T10:42:22.045588909Z"),
        ("2026-06-15T10:42:22.500Z", "2026-06-15T10:42:22.5Z"),
        ("2026-06-15T10:42:22.0000000001Z", "2026-06-15T10:42:22Z"),  # past the nanosecond
        ("1970-01-01T00:00:00-00:30", "1970-01-01T00:30:00Z"),
    ]:
        assert make_row(run_date=text).run_date == kept, text
    with pytest.raises(ValueError, match="no UTC offset"):
        make_row(run_date="2026-06-15T10:42:22")
    with pytest.raises(ValueError, match="1970 and 2242"):
        make_row(run_date="2243-01-01T00:00:00Z")
