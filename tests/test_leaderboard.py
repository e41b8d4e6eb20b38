"""The leaderboard configs as `datasets` (the library the Hub's dataset viewer runs on) loads
them: a repository folder laid out by the bundler, with row files and a card from its own
functions, for real bundles of four tasks with different metric shapes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from factory import RunSpec, write_tree

from bundler.hub.card import render_dataset_card, task_boards
from bundler.hub.layout import BUNDLES_DIR, README
from bundler.hub.rows import BundleRow, build_row, metric_column, row_files
from bundler.local.collect import CollectOptions, collect
from bundler.local.verify import find_archives, read_bundle

datasets = pytest.importorskip("datasets")

ODD = {"scorer": {"acc@0.5": 0.3, "a b|c": 1}, "x__y": {"z": 2}, "label": {"t": "x"}}
"""Metric names that are no valid column name, or could pass for a mapped one."""

SPECS = [
    # expert-vqa: the earliest bundle (gpt) has the default metrics, so its first numeric
    # metric, exact_match.accuracy, ranks the task; qwen, published later, brings a new name.
    RunSpec(task="expert-vqa", model="gpt-5.2", rows=4),
    RunSpec(
        task="expert-vqa",
        model="Qwen/Qwen3.5-27B",
        rows=4,
        metrics={"exact_match": {"f1": 0.8, "accuracy": 0.75}},
    ),
    RunSpec(
        task="expert-vqa",
        model="claude",
        rows=4,
        resolved_revision=None,
        metrics={"exact_match": {"accuracy": 0.5}},
    ),
    # maze: one partial run (3 of 5 rows) and a null metric, which is no score
    RunSpec(
        task="maze",
        model="gpt-5.2",
        rows=3,
        metrics={"maze_solver": {"solved": 2, "by_size": {"small": 1.0, "big": None}}},
    ),
    RunSpec(task="maze", model="claude", rows=5, metrics={"maze_solver": {"solved": 4}}),
    RunSpec(task="default", model="gpt-5.2", rows=2, metrics=ODD),
    RunSpec(task="wires", model="claude", rows=2, metrics={"wires": {"label": "ok"}}),
]
EXPECTED = {"expert-vqa": 4, "maze": 5, "default": 2, "wires": 2}
PUBLISHED = {"gpt-5.2": "2026-06-01T09:00:00Z", "claude": "2026-06-02T09:00:00Z"}
QWEN_PUBLISHED = "2026-06-03T09:00:00Z"


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[BundleRow]]:
    """A dataset repository folder as the Hub would hold it after the uploads."""
    work = tmp_path_factory.mktemp("leaderboard")
    write_tree(work / "output", SPECS)
    report = collect(
        work / "output",
        work / "bundles",
        CollectOptions(expected_rows=EXPECTED, allow_partial=True),
    )
    assert not report.refused, report.refused
    repo = work / "repo"
    shutil.copytree(work / "bundles", repo / BUNDLES_DIR)
    rows = []
    for archive in find_archives([work / "bundles"]):
        reading = read_bundle(archive)
        assert reading.sidecar is not None and reading.metrics_text is not None
        published = PUBLISHED.get(reading.sidecar.model_name, QWEN_PUBLISHED)
        row = build_row(reading.sidecar, reading.metrics_text, published_at=published)
        rows.append(row)
        for path, data in row_files(row).items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_bytes(data)
    (repo / README).write_text(render_dataset_card("org/board", rows), encoding="utf-8")
    return repo, rows


def load(repo: Path, config: str) -> datasets.Dataset:
    return datasets.load_dataset(
        str(repo), config, split="train", cache_dir=str(repo.parent / "cache")
    )


def declared(repo: Path, config: str) -> list[str]:
    header = yaml.safe_load((repo / README).read_text().split("---\n")[1])
    (info,) = [i for i in header["dataset_info"] if i["config_name"] == config]
    return [feature["name"] for feature in info["features"]]


def float_columns(table: datasets.Dataset) -> list[str]:
    return [
        name
        for name, feature in table.features.items()
        if getattr(feature, "dtype", None) == "float64"
    ]


def test_the_all_tasks_config_still_holds_every_bundle(
    repository: tuple[Path, list[BundleRow]],
) -> None:
    repo, rows = repository
    table = load(repo, "default")
    assert table.num_rows == len(rows) == 7
    assert table.column_names == declared(repo, "default")
    # published_at is a UTC timestamp column, so the viewer shows and sorts it as a date
    assert table.features["published_at"].dtype == "timestamp[s, tz=UTC]"
    assert sorted(table["published_at"]) == sorted(row.published for row in rows)


def test_a_task_config_has_a_float64_column_per_metric_and_nulls_where_missing(
    repository: tuple[Path, list[BundleRow]],
) -> None:
    repo, _ = repository
    table = load(repo, "expert-vqa")
    assert table.num_rows == 3
    assert table.column_names == declared(repo, "expert-vqa")
    assert float_columns(table) == [
        "exact_match.accuracy",
        "exact_match.n",
        "expert-vqa_scorer.score",
        "expert-vqa_scorer.per_module.wires",
        "expert-vqa_scorer.per_module.maze",
        "exact_match.f1",  # the newcomer's name, last
    ]
    by_model = {row["model_name"]: row for row in table}
    assert by_model["Qwen/Qwen3.5-27B"]["exact_match.f1"] == 0.8
    assert by_model["gpt-5.2"]["exact_match.f1"] is None  # older rows lack the column: null
    assert by_model["claude"]["expert-vqa_scorer.score"] is None
    assert by_model["gpt-5.2"]["exact_match.n"] == 4.0
    assert by_model["claude"]["is_pinned"] is False
    assert by_model["gpt-5.2"]["published_at"].isoformat() == "2026-06-01T09:00:00+00:00"
    assert by_model["gpt-5.2"]["coverage"] == "complete"


def test_sorting_by_a_metric_column_gives_the_card_order(
    repository: tuple[Path, list[BundleRow]],
) -> None:
    repo, rows = repository
    table = load(repo, "expert-vqa").sort("exact_match.accuracy", reverse=True)
    assert table["exact_match.accuracy"] == [0.75, 0.62, 0.5]
    (board,) = [board for board in task_boards(rows) if board.task == "expert-vqa"]
    assert board.sort_column == "exact_match.accuracy"
    assert table["bundle_id"] == [row.bundle_id for row in board.rows]
    by_f1 = load(repo, "expert-vqa").sort("exact_match.f1", reverse=True)
    assert by_f1["exact_match.f1"][0] == 0.8  # nulls sort after the values


def test_partial_bundles_and_null_metrics_in_a_task_config(
    repository: tuple[Path, list[BundleRow]],
) -> None:
    repo, _ = repository
    table = load(repo, "maze")
    assert table.num_rows == 2
    assert float_columns(table) == ["maze_solver.solved", "maze_solver.by_size.small"]
    rows = {row["model_name"]: row for row in table}
    assert (rows["gpt-5.2"]["coverage"], rows["gpt-5.2"]["rows_present"]) == ("partial", 3)
    assert rows["gpt-5.2"]["expected_rows"] == 5
    assert rows["claude"]["maze_solver.by_size.small"] is None


def test_odd_metric_names_and_a_task_named_default_load(
    repository: tuple[Path, list[BundleRow]],
) -> None:
    repo, _ = repository
    table = load(repo, "_default")
    (row,) = table
    paths = [("scorer", "acc@0.5"), ("scorer", "a b|c"), ("x__y", "z")]
    mapped = [metric_column(path) for path in paths]
    assert float_columns(table) == mapped
    assert [row[column] for column in mapped] == [0.3, 1.0, 2.0]
    assert row["task_name"] == "default"
    wires = load(repo, "wires")
    assert wires.num_rows == 1 and float_columns(wires) == []
    assert wires[0]["metrics_json"].startswith("{")
