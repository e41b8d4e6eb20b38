"""Task definitions are checked when they are made: `bundler tasks define` refuses a metric
none of the task's bundles on the branch has (naming the ones they have), warns and commits
when the task has no bundle yet, and `tasks list` shows each task's metric kind and accepted
dataset revisions. End to end, against the test Hub server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import READ_TOKEN, WRITE_TOKEN
from factory import make_row
from helpers import run_cli
from hubserver import HubServer
from test_review import TASK, World, make_world

from bundler.core.rule_errors import UnknownMetric
from bundler.hub.leaderboard.tables import AllTasksTable
from bundler.hub.leaderboard.task_metrics import checked_metric, numeric_metrics
from bundler.hub.repo.paths import TASKS_FILE


@pytest.fixture
def world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    return make_world(hub, repo_id, tmp_path)


def define(world: World, task: str, metric: str, *more: str) -> subprocess.CompletedProcess[str]:
    result = run_cli(
        "tasks", "define", task, "--repo", world.repo_id, "--dataset", world.dataset,
        "--split", "test", "--metric", metric, *more, "--json", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_a_typo_d_metric_is_refused_naming_the_metrics_the_bundles_have(world: World) -> None:
    commits = len(world.hub.commits(world.repo_id))
    tasks_before = world.hub.file_bytes(world.repo_id, TASKS_FILE)
    refused = define(world, TASK, "exact_match.acuracy")
    assert refused.returncode == 1, refused.stderr
    error = json.loads(refused.stdout)
    assert error["exit_code"] == 1 and error["error_kind"] == "unknown-metric"
    assert "exact_match.acuracy" in error["error"]
    # the metrics the bundle has, by name: exact_match.n too, a number; not the typo
    for real in ("exact_match.accuracy", "exact_match.n", f"{TASK}_scorer.score"):
        assert real in error["error"], error
    assert "did you mean exact_match.accuracy?" in error["hint"]
    assert refused.stderr.count("error:") == 1 and "exact_match.accuracy" in refused.stderr
    assert len(world.hub.commits(world.repo_id)) == commits  # nothing committed
    assert world.hub.file_bytes(world.repo_id, TASKS_FILE) == tasks_before
    # a metric a bundle has is accepted, with no warning
    accepted = define(world, TASK, f"{TASK}_scorer.per_module.wires")
    assert accepted.returncode == 0, accepted.stderr
    report = json.loads(accepted.stdout)
    assert report["commit"] == world.hub.commits(world.repo_id)[0].oid
    assert report["warnings"] == [] and "warning" not in accepted.stderr


def test_a_task_with_no_bundle_yet_is_defined_with_a_warning(world: World) -> None:
    defined = define(world, "expert-ocr", "module.totl")
    assert defined.returncode == 0, defined.stderr
    report = json.loads(defined.stdout)
    (warning,) = report["warnings"]
    assert "expert-ocr has no bundle on main yet" in warning and "module.totl" in warning
    assert report["commit"] == world.hub.commits(world.repo_id)[0].oid
    assert "warning" in defined.stderr and "module.totl" in defined.stderr
    written = json.loads(world.hub.file_bytes(world.repo_id, TASKS_FILE) or b"{}")
    assert written["tasks"]["expert-ocr"]["metric"] == "module.totl"


def test_tasks_list_shows_each_task_s_metric_kind_and_accepted_revisions(world: World) -> None:
    revision = world.sha
    kinds = ("--metric-kind", "proportion", "--revision", revision)
    assert define(world, TASK, "exact_match.accuracy", *kinds).returncode == 0
    assert define(world, "expert-ocr", "module.total").returncode == 0
    listed = run_cli(
        "tasks", "list", "--repo", world.repo_id, "--json", env={"HF_TOKEN": READ_TOKEN}
    )
    assert listed.returncode == 0, listed.stderr
    tasks = json.loads(listed.stdout)["tasks"]
    assert tasks[TASK]["metric_kind"] == "proportion" and tasks[TASK]["revisions"] == [revision]
    assert tasks["expert-ocr"]["metric_kind"] == "score" and tasks["expert-ocr"]["revisions"] == []
    table = run_cli(
        "tasks", "list", "--repo", world.repo_id, env={"HF_TOKEN": READ_TOKEN, "COLUMNS": "200"}
    ).stderr
    assert "kind" in table and "proportion" in table and "score" in table
    assert revision[:12] in table and "any" in table


def test_only_a_number_under_the_name_counts_and_other_tasks_rows_do_not() -> None:
    rows = [
        make_row("a", metrics={"judge": {"verdict": "pass", "score": 0.5}}),
        make_row("b", task="maze", metrics={"maze": {"total": 3}}),
    ]
    table = AllTasksTable.of(rows)
    assert numeric_metrics(table, "expert-vqa") == {"judge.score"}
    assert checked_metric(table, "expert-vqa", "judge.score", "main") is None
    with pytest.raises(UnknownMetric) as refused:
        checked_metric(table, "expert-vqa", "judge.verdict", "main")  # a string: no score
    assert refused.value.known == ["judge.score"] and refused.value.exit_code == 1
    with pytest.raises(UnknownMetric):
        checked_metric(table, "expert-vqa", "maze.total", "main")  # another task's metric
    assert "no bundle on main yet" in (checked_metric(table, "wires", "x.y", "main") or "")
