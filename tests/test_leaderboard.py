"""The leaderboard's tables as their readers load them: `datasets` (the library the Hub's
dataset viewer runs on) loading every config of a repository folder laid out by the bundler
(the Parquet tables and the card from its own functions), and DuckDB querying the tables as a
user's analysis would, for real bundles of four tasks with different metric shapes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from factory import RunSpec, write_tree
from helpers import run_python

from bundler.hub.client.remote import git_blob_id
from bundler.hub.leaderboard.branch import BranchTables
from bundler.hub.leaderboard.card import render_dataset_card
from bundler.hub.leaderboard.columns import arrow_schema
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import METRICS_AFTER, TableRow, TaskRow, build_row, metric_column
from bundler.hub.leaderboard.tables import AllTasksTable, task_table_bytes
from bundler.hub.repo.paths import BUNDLES_DIR, README, table_part, task_table
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import find_archives
from bundler.local.verify import read_bundle

datasets = pytest.importorskip("datasets")

REPO_ID = "org/board"
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
TASKS = ["default", "expert-vqa", "maze", "wires"]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[TableRow]]:
    """A dataset repository folder as the Hub would hold it after the uploads: the bundles,
    the all-tasks table, a table per task and the card."""
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
        assert reading.sidecar_data is not None
        published = PUBLISHED.get(reading.sidecar.model_name, QWEN_PUBLISHED)
        row = build_row(reading.sidecar, reading.metrics_text, published_at=published)
        blob = git_blob_id(reading.sidecar_data)
        rows.append(TableRow(**row.model_dump(), sidecar_blob_id=blob))
    board = AllTasksTable.of(rows)
    boards = [TaskBoard.of(task, board.rows(task)) for task in board.tasks()]
    files = {task_table(b.task): task_table_bytes(b) for b in boards}
    files[README] = render_dataset_card(REPO_ID, boards, len(board)).encode("utf-8")
    # exactly what a commit to a branch holding these bundles writes, and its all-tasks table
    rendered = BranchTables("main", "0" * 40, board).rendered(REPO_ID)
    assert {path: data for path, data in rendered.items() if path != table_part(0)} == files
    files[table_part(0)] = rendered[table_part(0)]
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    return repo, rows


def load(repo: Path, config: str) -> datasets.Dataset:
    return datasets.load_dataset(
        str(repo), config, split="train", cache_dir=str(repo.parent / "cache")
    )


def float_columns(table: datasets.Dataset) -> list[str]:
    return [
        name
        for name, feature in table.features.items()
        if getattr(feature, "dtype", None) == "float64" and name not in TaskRow.model_fields
    ]


def task_columns(metrics: list[str]) -> list[str]:
    """A task table's columns: the fixed ones with the metric columns after METRICS_AFTER."""
    fixed = arrow_schema(TaskRow).names
    cut = fixed.index(METRICS_AFTER) + 1
    return [*fixed[:cut], *metrics, *fixed[cut:]]


def board_of(rows: list[TableRow], task: str) -> TaskBoard:
    return TaskBoard.of(task, [row for row in rows if row.task_name == task])


def test_the_card_declares_a_config_per_table_and_every_config_loads(
    repository: tuple[Path, list[TableRow]],
) -> None:
    repo, rows = repository
    header = yaml.safe_load((repo / README).read_text().split("---\n")[1])
    configs = {c["config_name"]: c["data_files"][0]["path"] for c in header["configs"]}
    assert configs == {
        "default": "leaderboard/bundles/*.parquet",
        "_default": "leaderboard/tasks/default.parquet",
        "expert-vqa": "leaderboard/tasks/expert-vqa.parquet",
        "maze": "leaderboard/tasks/maze.parquet",
        "wires": "leaderboard/tasks/wires.parquet",
    }
    assert "dataset_info" not in header
    assert datasets.get_dataset_config_names(str(repo)) == list(configs)
    counts = {config: load(repo, config).num_rows for config in configs}
    assert counts == {"default": 7, "_default": 1, "expert-vqa": 3, "maze": 2, "wires": 1}
    assert sum(counts.values()) == 2 * len(rows)


def test_the_all_tasks_config_holds_every_bundle_sorted_by_id(
    repository: tuple[Path, list[TableRow]],
) -> None:
    repo, rows = repository
    table = load(repo, "default")
    assert table.num_rows == len(rows) == 7
    assert table.column_names == arrow_schema(TableRow).names
    assert table["bundle_id"] == sorted(row.bundle_id for row in rows)
    # published_at is a UTC timestamp column, so the viewer shows and sorts it as a date
    assert table.features["published_at"].dtype == "timestamp[us, tz=UTC]"
    assert sorted(table["published_at"]) == sorted(row.published for row in rows)
    by_id = {row.bundle_id: row for row in rows}
    for loaded in table:
        row = by_id[loaded["bundle_id"]]
        assert loaded["sidecar_blob_id"] == row.sidecar_blob_id and len(row.sidecar_blob_id) == 40
        assert loaded["metrics_json"] == row.metrics_json
        assert [m["name"] for m in loaded["metrics"]] == [m.name for m in row.metrics]
    assert table.features["metrics"].feature["number"].dtype == "float64"


def test_a_task_config_has_a_float64_column_per_metric_and_nulls_where_missing(
    repository: tuple[Path, list[TableRow]],
) -> None:
    repo, _ = repository
    table = load(repo, "expert-vqa")
    assert table.num_rows == 3
    metrics = [
        "exact_match.accuracy",
        "exact_match.n",
        "expert-vqa_scorer.score",
        "expert-vqa_scorer.per_module.wires",
        "expert-vqa_scorer.per_module.maze",
        "exact_match.f1",  # the newcomer's name, last
    ]
    assert float_columns(table) == metrics
    assert table.column_names == task_columns(metrics)
    by_model = {row["model_name"]: row for row in table}
    assert by_model["Qwen/Qwen3.5-27B"]["exact_match.f1"] == 0.8
    assert by_model["gpt-5.2"]["exact_match.f1"] is None  # other bundles lack it: null
    assert by_model["claude"]["expert-vqa_scorer.score"] is None
    assert by_model["gpt-5.2"]["exact_match.n"] == 4.0
    assert by_model["claude"]["is_pinned"] is False
    assert by_model["gpt-5.2"]["published_at"].isoformat() == "2026-06-01T09:00:00+00:00"
    assert by_model["gpt-5.2"]["coverage"] == "complete"
    assert table.features["rank"].dtype == "int64"


def test_a_task_table_is_in_the_card_order_and_sorting_by_its_metric_agrees(
    repository: tuple[Path, list[TableRow]],
) -> None:
    repo, rows = repository
    board = board_of(rows, "expert-vqa")
    assert board.sort_column == "exact_match.accuracy"
    table = load(repo, "expert-vqa")
    assert table["bundle_id"] == [row.bundle_id for row in board.rows]  # already ranked
    assert table["rank"] == board.ranks() == [1, 2, 3]
    assert table["exact_match.accuracy"] == [0.75, 0.62, 0.5]
    by_score = table.sort("exact_match.accuracy", reverse=True)
    assert by_score["bundle_id"] == table["bundle_id"]
    by_f1 = table.sort("exact_match.f1", reverse=True)
    assert by_f1["exact_match.f1"][0] == 0.8  # nulls sort after the values


def test_partial_bundles_and_null_metrics_in_a_task_config(
    repository: tuple[Path, list[TableRow]],
) -> None:
    repo, _ = repository
    table = load(repo, "maze")
    assert table.num_rows == 2
    assert float_columns(table) == ["maze_solver.solved", "maze_solver.by_size.small"]
    rows = {row["model_name"]: row for row in table}
    assert (rows["gpt-5.2"]["coverage"], rows["gpt-5.2"]["rows_present"]) == ("partial", 3)
    assert rows["gpt-5.2"]["expected_rows"] == 5
    assert rows["claude"]["maze_solver.by_size.small"] is None
    assert '"big": null' in rows["gpt-5.2"]["metrics_json"]  # no score, kept in the JSON
    assert table["model_name"] == ["claude", "gpt-5.2"] and table["rank"] == [1, 2]


def test_odd_metric_names_and_a_task_named_default_load(
    repository: tuple[Path, list[TableRow]],
) -> None:
    repo, _ = repository
    table = load(repo, "_default")
    (row,) = table
    paths = [("scorer", "acc@0.5"), ("scorer", "a b|c"), ("x__y", "z")]
    mapped = [metric_column(path) for path in paths]
    assert float_columns(table) == mapped
    assert [row[column] for column in mapped] == [0.3, 1.0, 2.0]
    assert row["task_name"] == "default" and row["rank"] == 1
    wires = load(repo, "wires")
    assert wires.num_rows == 1 and float_columns(wires) == []
    assert wires[0]["metrics_json"].startswith("{") and wires[0]["rank"] is None


def test_duckdb_queries_the_tables_where_they_are(
    repository: tuple[Path, list[TableRow]],
) -> None:
    """What a user's analysis runs against `hf://datasets/.../leaderboard/...parquet`."""
    duckdb = pytest.importorskip("duckdb")
    repo, rows = repository
    bundles = repo / table_part(0)
    tasks = repo / "leaderboard" / "tasks"
    with duckdb.connect() as con:
        per_task = con.sql(
            f"SELECT task_name, count(*) AS bundles, count(*) FILTER (coverage = 'complete') "
            f"FROM '{bundles}' GROUP BY task_name ORDER BY task_name"
        ).fetchall()
        assert per_task == [
            ("default", 1, 1),
            ("expert-vqa", 3, 3),
            ("maze", 2, 1),
            ("wires", 1, 1),
        ]
        vqa = tasks / "expert-vqa.parquet"
        (best,) = con.sql(
            f"SELECT model_name, \"exact_match.accuracy\", rank FROM '{vqa}' "
            f'ORDER BY "exact_match.accuracy" DESC NULLS LAST LIMIT 1'
        ).fetchall()
        assert best == ("Qwen/Qwen3.5-27B", 0.75, 1)
        # every task's leader at once: the task tables have different metric columns
        leaders = con.sql(
            f"SELECT task_name, model_name FROM read_parquet('{tasks}/*.parquet', "
            f"union_by_name = true) WHERE rank = 1 ORDER BY task_name"
        ).fetchall()
        assert leaders == [
            ("default", "gpt-5.2"),
            ("expert-vqa", "Qwen/Qwen3.5-27B"),
            ("maze", "claude"),
        ]
        # the all-tasks table's metrics list, unnested: one name for every task
        accuracy = con.sql(
            f"SELECT model_name, m.number FROM (SELECT model_name, unnest(metrics) AS m "
            f"FROM '{bundles}' WHERE task_name = 'expert-vqa') "
            f"WHERE m.name = 'exact_match.accuracy' ORDER BY m.number DESC"
        ).fetchall()
        assert accuracy == [("Qwen/Qwen3.5-27B", 0.75), ("gpt-5.2", 0.62), ("claude", 0.5)]
        (kinds,) = con.sql(
            f"SELECT typeof(published_at), typeof(expected_rows), typeof(is_pinned) "
            f"FROM '{bundles}' LIMIT 1"
        ).fetchall()
        assert kinds == ("TIMESTAMP WITH TIME ZONE", "BIGINT", "BOOLEAN")
        (latest,) = con.sql(
            f"SELECT strftime(max(published_at) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ') "
            f"FROM '{bundles}'"
        ).fetchall()
        assert latest == (max(row.published_at for row in rows),)


TABLE_COPY = """
import hashlib, json, os, sys
from pathlib import Path
from bundler.hub.client.remote import RemoteFile, git_blob_id
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.tablecache import cached_table, keep_table

where = (HubSession("org/board", token=False), "leaderboard/bundles/part-00000.parquet")
table, other = b"PAR1 the table PAR1", b"PAR1 another table PAR1"
as_lfs = RemoteFile(where[1], len(table), "", hashlib.sha256(table).hexdigest())
as_regular = RemoteFile(where[1], len(table), git_blob_id(table), None)
seen = {"before": cached_table(*where, as_lfs, 1 << 20)}
keep_table(*where, table)
seen["kept"] = [cached_table(*where, listed, 1 << 20) for listed in (as_lfs, as_regular)]
other_repository = HubSession("org/other", token=False)
seen["other repository"] = cached_table(other_repository, where[1], as_lfs, 1 << 20)
seen["over the limit"] = cached_table(*where, as_lfs, 4)
keep_table(*where, other)  # a dry run, or a commit that may fail, about to write another
seen["beside another"] = cached_table(*where, as_lfs, 1 << 20)
home = Path(os.environ["HF_HOME"])
copies = sorted(home.rglob("*.parquet")) if home.is_dir() else []
for copy in copies:  # the oldest goes first, whatever the clock's grain
    if copy.read_bytes() == table:
        os.utime(copy, (0, 0))
for n in range(2):
    keep_table(*where, b"PAR1 table %d PAR1" % n)
seen["pushed out"] = cached_table(*where, as_lfs, 1 << 20)
copies = sorted(home.rglob("*.parquet")) if home.is_dir() else []
if copies:
    planted = Path(sys.argv[1])
    planted.write_bytes(table)
    copies[0].unlink()
    copies[0].symlink_to(planted)  # the right bytes, behind a link: never followed
    seen["linked"] = cached_table(*where, as_lfs, 1 << 20)
seen["copies"] = len(copies)
shown = {key: value.decode() if isinstance(value, bytes) else value for key, value in seen.items()}
shown["kept"] = [value and value.decode() for value in seen["kept"]]
print(json.dumps(shown))
"""


@pytest.mark.parametrize("home", ["writable", "unwritable"])
def test_a_kept_table_stands_in_only_for_the_very_bytes_listed(tmp_path: Path, home: str) -> None:
    """bundler.hub.leaderboard.tablecache: the newest three copies per repository and file under
    HF_HOME, each used only when it holds the bytes the branch lists (by sha256 or git blob id),
    never through a link; a home that cannot be written keeps nothing and breaks nothing."""
    hf_home = tmp_path / "home"
    if home == "unwritable":
        (tmp_path / "a-file").write_bytes(b"")
        hf_home = tmp_path / "a-file" / "home"  # no folder can be made below a file
    result = run_python(TABLE_COPY, tmp_path / "planted", env={"HF_HOME": str(hf_home)})
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["before"] is None and seen["other repository"] is None
    assert seen["over the limit"] is None and seen["pushed out"] is None
    if home == "writable":
        assert seen["kept"] == ["PAR1 the table PAR1"] * 2
        assert seen["beside another"] == "PAR1 the table PAR1"
        assert seen["copies"] == 3 and seen["linked"] is None
    else:
        assert seen["kept"] == [None, None] and seen["beside another"] is None
        assert seen["copies"] == 0
