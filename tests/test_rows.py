"""The viewer's rows: the all-tasks row, the task row with one column per numeric metric, the
metric-name-to-column mapping, and reading a row file back."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from factory import make_row
from hypothesis import given
from hypothesis import strategies as st

from bundler.core.errors import RowError
from bundler.hub.layout import repo_paths, repo_row, repo_task_row
from bundler.hub.rows import (
    METRICS_AFTER,
    TaskRow,
    dataset_features,
    metric_column,
    metric_columns,
    read_row,
    row_bytes,
    row_files,
    task_features,
    task_row_bytes,
    utc_timestamp,
)
from bundler.local.layout import BundleId
from bundler.local.metrics import flatten_metrics

COLUMN = re.compile(r"[A-Za-z0-9_.-]{1,74}")
DIGEST = re.compile(r"__[0-9a-f]{32}$")


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


def test_row_files_are_the_bundle_own_paths_with_deterministic_bytes() -> None:
    row = make_row(metrics={"exact_match": {"accuracy": 0.62, "n": 4}, "acc@0.5": 1})
    files = row_files(row)
    key = BundleId.parse(row.bundle_id)
    assert list(files) == [repo_row(key), repo_task_row(key)]
    assert set(files) <= set(repo_paths(key))
    assert files[repo_row(key)] == row_bytes(row)
    assert row_files(make_row(metrics=json.loads(row.metrics_json))) == files
    assert all(data.endswith(b"\n") and data.count(b"\n") == 1 for data in files.values())
    task_row = json.loads(files[repo_task_row(key)])
    names = list(task_row)
    start = names.index(METRICS_AFTER) + 1
    mapped = metric_column(("acc@0.5",))
    assert names[start : start + 3] == ["exact_match.accuracy", "exact_match.n", mapped]
    assert task_row["exact_match.n"] == 4.0 and task_row[mapped] == 1.0
    assert task_row["published_at"] == row.published_at
    assert task_row["bundle_id"] == row.bundle_id and task_row["is_pinned"] is True


def test_task_features_insert_float64_metric_columns() -> None:
    features = task_features(["b.x", "a.y"])
    names = [feature["name"] for feature in features]
    start = names.index(METRICS_AFTER) + 1
    assert features[start : start + 2] == [
        {"name": "b.x", "dtype": "float64"},
        {"name": "a.y", "dtype": "float64"},
    ]
    assert [f for f in features if f["name"] not in ("b.x", "a.y")] == dataset_features(TaskRow)
    assert {"name": "published_at", "dtype": "timestamp[s, tz=UTC]"} in dataset_features()


def test_a_row_file_reads_back_as_the_same_row() -> None:
    row = make_row(label="unpinned", model_name="evil | <script>", metrics={"": {"": 1}, "a": {}})
    assert read_row(row_bytes(row)) == row


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: "not json", "json"),
        (lambda d: {k: v for k, v in d.items() if k != "published_at"}, "published_at"),
        (lambda d: {**d, "published_at": "2026-06-16T08:00:00+02:00"}, "not in UTC"),
        (lambda d: {**d, "published_at": "2026-06-16T08:00:00"}, "not in UTC"),
        (lambda d: {**d, "published_at": "yesterday"}, "not an ISO-8601"),
        (lambda d: {**d, "predictions": "5"}, "predictions"),
        (lambda d: {**d, "bundle_id": "../x_1054f537/a@unpinned"}, "not <player-slug>_<fp8>"),
        (lambda d: {**d, "task_name": "maze"}, "disagree"),
        (lambda d: {**d, "is_pinned": False}, "disagree"),
        # What a stranger's row (a pull request merged in the web interface) could also say:
        (lambda d: {**d, "player_name": "claude-9"}, "player_name or capability_fingerprint"),
        (lambda d: {**d, "capability_fingerprint": "f" * 32}, "capability_fingerprint"),
        (lambda d: {**d, "resolved_revision": "ffffffff" + "0" * 32}, "resolved_revision"),
        (lambda d: {**d, "predictions": -5}, "predictions"),
        (lambda d: {**d, "archive_size": -1}, "archive_size"),
        (lambda d: {**d, "expected_rows": 10**20}, "expected_rows"),
        (lambda d: {**d, "usage": [{"key": "input_tokens", "count": -1}]}, "usage"),
        (lambda d: {**d, "metrics_json": "not json"}, "metrics_json"),
        (lambda d: {**d, "metrics_json": "[" * 100000}, "metrics_json"),
        (lambda d: {**d, "metrics_json": '{"s": {"x": 0.25}}'}, "metrics disagree"),
    ],
)
def test_a_row_file_that_the_bundler_would_not_write_is_refused(
    change: Callable[[dict[str, Any]], object], problem: str
) -> None:
    changed = change(json.loads(row_bytes(make_row())))
    data = changed.encode() if isinstance(changed, str) else json.dumps(changed).encode()
    with pytest.raises(RowError, match=re.escape(problem) if problem != "json" else "(?i)json"):
        read_row(data)


def test_published_at_is_written_in_one_utc_form() -> None:
    moment = datetime(2026, 6, 16, 10, 0, 5, 123456, tzinfo=UTC)
    assert utc_timestamp(moment) == "2026-06-16T10:00:05Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_timestamp())
    for text in ("2026-06-16T10:00:05+00:00", "2026-06-16T10:00:05.123456Z"):
        row = make_row(published_at=text)  # any UTC form is kept in the one written form
        assert row.published_at == "2026-06-16T10:00:05Z"
        assert row.published == moment.replace(microsecond=0)
    assert task_row_bytes(make_row()) == task_row_bytes(make_row())


def test_a_publication_before_the_year_1000_reads_back() -> None:
    """`strftime("%Y")` writes the year 999 as `999`, which no parser reads back: a row so
    dated stopped the card and every upload to its branch with an internal error."""
    row = make_row(published_at="0999-01-01T00:00:00Z")
    assert row.published_at == "0999-01-01T00:00:00Z"
    assert read_row(row_bytes(row)) == row
    assert utc_timestamp(row.published) == "0999-01-01T00:00:00Z"
