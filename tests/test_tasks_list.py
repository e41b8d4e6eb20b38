"""`bundler tasks list`: the definitions a leaderboard holds, for anyone who can read it."""

from __future__ import annotations

import json

from conftest import READ_TOKEN, WRITE_TOKEN
from helpers import run_cli
from hubserver import HubServer

VQA = ("--dataset", "GPTNT/expert-VQA", "--split", "test", "--metric", "exact_match.accuracy")


def test_the_defined_tasks_are_listed_to_a_reader(hub: HubServer, repo_id: str) -> None:
    hub.create_repo(repo_id)
    empty = run_cli("tasks", "list", "--repo", repo_id, "--json", env={"HF_TOKEN": READ_TOKEN})
    assert empty.returncode == 0, empty.stderr
    assert json.loads(empty.stdout)["tasks"] == {}
    assert f"no task is defined on {repo_id}@main" in empty.stderr
    for task, extra in (
        ("expert-vqa", ()),
        ("maze", ("--direction", "lower", "--revision", "a" * 40)),
    ):
        defined = run_cli(
            "tasks", "define", task, "--repo", repo_id, *VQA, *extra, env={"HF_TOKEN": WRITE_TOKEN}
        )
        assert defined.returncode == 0, defined.stderr
    listed = run_cli("tasks", "list", "--repo", repo_id, "--json", env={"HF_TOKEN": READ_TOKEN})
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert report["exit_code"] == 0 and sorted(report["tasks"]) == ["expert-vqa", "maze"]
    assert report["tasks"]["maze"] == {
        "hf_repo_id": "GPTNT/expert-VQA",
        "split": "test",
        "metric": "exact_match.accuracy",
        "direction": "lower",
        "revisions": ["a" * 40],
        "metric_kind": "score",
    }
    table = run_cli("tasks", "list", "--repo", repo_id, env={"HF_TOKEN": READ_TOKEN}).stderr
    assert "expert-vqa" in table and "lower" in table and "any" in table


def test_a_missing_repository_is_one_line_and_exit_2(hub: HubServer, repo_id: str) -> None:
    missing = f"{repo_id}-missing"
    result = run_cli("tasks", "list", "--repo", missing, env={"HF_TOKEN": READ_TOKEN})
    assert result.returncode == 2
    assert result.stderr.count("error:") == 1 and "not found" in result.stderr
