"""The board says only what verified bundles say, whatever else changed the repository: a table,
task table or card edited by hand or by a merged pull request, a bundle's file deleted or landed
alone, a layout-1 repository's row files. Each case is what a stranger or a hurried maintainer
can do in the Hub's web page (tests/test_card_refresh.py holds the helpers that stand in for it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import HubServer
from huggingface_hub import CommitOperationDelete, HfApi
from test_card_refresh import (
    card,
    card_text,
    commit_by_hand,
    layout_1_files,
)
from test_upload import SECOND_SHA, make_bundles, publish, repo_files, table_rows, upload

from bundler.hub.repo.paths import README, RECORD, TASKS_FILE, table_part, task_table


@pytest.fixture
def published(repo_id: str, tmp_path: Path) -> Path:
    """A board of three tasks, one bundle each, as uploads leave it."""
    specs = [RunSpec(task=task, model=f"m-{task}", rows=2) for task in ("alpha", "beta", "gamma")]
    publish(bundles := make_bundles(tmp_path / "published", specs), repo_id)
    return bundles


def delete_by_hand(repo_id: str, *paths: str) -> None:
    """Files deleted in the Hub's web page."""
    HfApi(token=WRITE_TOKEN).create_commit(
        repo_id,
        [CommitOperationDelete(path) for path in paths],
        commit_message="delete by hand",
        repo_type="dataset",
    )


def scores(hub: HubServer, repo_id: str) -> dict[str, str]:
    """Each bundle's metrics, as the all-tasks table holds them."""
    return {str(r["bundle_id"]): str(r["metrics_json"]) for r in table_rows(hub, repo_id)}


def forged_table(hub: HubServer, repo_id: str) -> bytes:
    """The all-tasks table as a stranger edits it: one row's metrics lowered, and a row for a
    bundle that has no file on the Hub."""
    table = pq.read_table(pa.BufferReader(hub.file_bytes(repo_id, table_part(0)) or b""))
    rows = table.to_pylist()
    rows[0]["metrics_json"] = json.dumps({"exact_match": {"accuracy": 0.01}})
    ghost = dict(rows[1], bundle_id="ghost_00000000/alpha@unpinned", player_name="ghost")
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist([*rows, ghost], schema=table.schema), sink)
    return bytes(sink.getvalue().to_pybytes())


def test_a_merged_edit_of_the_table_is_never_believed(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    true_scores = scores(hub, repo_id)
    commit_by_hand(repo_id, {table_part(0): forged_table(hub, repo_id)})
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["changed"] is True and table_part(0) in result["changed_files"]
    assert scores(hub, repo_id) == true_scores  # the bundles' own metrics, no ghost
    assert "ghost" not in card_text(hub, repo_id)
    commit_by_hand(repo_id, {table_part(0): forged_table(hub, repo_id)})  # again, then an upload
    more = make_bundles(tmp_path / "more", [RunSpec(task="delta", rows=2)])
    code, _, stderr = upload(more, "--repo", repo_id)
    assert code == 0, stderr
    after = scores(hub, repo_id)
    assert {k: v for k, v in after.items() if "delta" not in k} == true_scores
    assert len(after) == 4


def test_an_edited_task_table_or_card_is_written_again_by_the_next_upload(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    alpha = task_table("alpha")
    true_alpha = hub.file_bytes(repo_id, alpha)
    commit_by_hand(repo_id, {alpha: b"not a table", README: b"---\n---\nvandalised\n"})
    more = make_bundles(tmp_path / "more", [RunSpec(task="beta", model="other", rows=2)])
    code, _, stderr = upload(more, "--repo", repo_id)  # a bundle of another task
    assert code == 0, stderr
    assert hub.file_bytes(repo_id, alpha) == true_alpha
    assert "vandalised" not in card_text(hub, repo_id)
    assert card(repo_id)[1]["changed"] is False


def test_a_sidecar_landed_without_its_archive_is_named_and_blocks_nothing(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    lone = make_bundles(tmp_path / "lone", [RunSpec(task="delta", model="lone", rows=2)])
    sidecar = next(path for path in repo_files(lone) if path.endswith(".json"))
    commit_by_hand(repo_id, {sidecar: repo_files(lone)[sidecar]})
    code, result, stderr = card(repo_id)
    assert code == 1, stderr
    assert result["unreadable_rows"] == [
        f"{sidecar}: its archive is missing; left out of the tables"
    ]
    assert result["bundle_count"] == 3 and result["commit"] is not None  # the board is written
    assert card(repo_id)[0] == 1  # named again by every run until someone fixes it
    unrelated = make_bundles(tmp_path / "next", [RunSpec(task="gamma", model="next", rows=2)])
    code, report, stderr = upload(unrelated, "--repo", repo_id)
    assert code == 1, stderr  # a person must look ...
    assert [b["outcome"] for b in report["bundles"]] == ["published"]  # ... but nothing waits
    assert report["left_off_board"] == result["unreadable_rows"]
    assert sidecar in stderr
    assert len(table_rows(hub, repo_id)) == 4


def test_an_archive_deleted_by_hand_takes_its_row_off_the_board(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    (archive,) = [p for p in repo_files(published) if "alpha" in p and p.endswith(".tar.zst")]
    delete_by_hand(repo_id, archive)
    code, result, stderr = card(repo_id)
    assert code == 1, stderr
    sidecar = archive.removesuffix(".tar.zst") + ".json"
    assert result["unreadable_rows"] == [
        f"{sidecar}: its archive is missing; left out of the tables"
    ]
    assert "alpha" not in {row["task_name"] for row in table_rows(hub, repo_id)}
    assert "### alpha" not in card_text(hub, repo_id)
    assert hub.file_bytes(repo_id, task_table("alpha")) is None
    delete_by_hand(repo_id, sidecar)  # the maintainer finishes the job: nothing to name
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["unreadable_rows"] == []


def test_a_deleted_or_unreadable_record_has_the_board_derived_from_every_bundle(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    true_scores = scores(hub, repo_id)
    commit_by_hand(repo_id, {table_part(0): forged_table(hub, repo_id), RECORD: b"{}"})
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert scores(hub, repo_id) == true_scores
    delete_by_hand(repo_id, RECORD)
    code, result, stderr = card(repo_id)
    assert code == 0 and result["changed"] is True, stderr  # the record written again
    assert hub.file_bytes(repo_id, RECORD) is not None
    assert card(repo_id)[1]["changed"] is False


def test_a_layout_1_upgrade_takes_nothing_from_the_row_files(hub: HubServer, repo_id: str) -> None:
    pristine, claiming = f"{repo_id}-a", f"{repo_id}-b"
    hub.create_repo(pristine, files=layout_1_files())
    files = layout_1_files()
    for path in [p for p in files if p.startswith("rows/")]:
        row = json.loads(files[path])
        row["metrics_json"] = json.dumps({"exact_match": {"accuracy": 0.99}})
        row["predictions"], row["expected_rows"] = 5, 5
        files[path] = (json.dumps(row) + "\n").encode()
    hub.create_repo(claiming, files=files)
    for repo in (pristine, claiming):
        code, result, stderr = card(repo)
        assert code == 0 and result["upgraded"] is True, stderr

    def claims(repo: str) -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if k != "published_at"} for r in table_rows(hub, repo)]

    assert claims(claiming) == claims(pristine)
    assert "0.99" not in json.dumps(claims(claiming), default=str)  # run_date: a Timestamp


def test_a_result_on_a_revision_the_task_no_longer_accepts_is_stale_and_ranked_after(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Changing a task's accepted revisions updates the board in the same commit: entries on
    another revision are `stale`, ranked after every current one whatever their score, and
    marked on the card."""
    old = RunSpec(task="alpha", model="old", rows=2, metrics={"exact_match": {"accuracy": 0.9}})
    new = RunSpec(task="alpha", model="new", rows=2, metrics={"exact_match": {"accuracy": 0.1}})
    old.resolved_revision = SECOND_SHA
    publish(make_bundles(tmp_path, [old, new]), repo_id)
    define = run_cli(
        "tasks", "define", "alpha", "--repo", repo_id, "--dataset", new.hf_repo_id, "--split",
        "test", "--metric", "exact_match.accuracy", "--revision", new.resolved_revision or "",
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert define.returncode == 0, define.stderr
    (latest,) = hub.commits(repo_id)[:1]
    assert {TASKS_FILE, task_table("alpha"), README} <= set(latest.files_changed)
    rows = table_rows(hub, repo_id, task_table("alpha"))
    assert [(r["player_name"], r["rank"], r["stale"]) for r in rows] == [
        ("new", 1, False),
        ("old", 2, True),
    ]
    assert "⚠ stale 2/2" in card_text(hub, repo_id)


def test_a_changed_definition_scores_every_row_of_its_task_again_in_its_commit(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Each row of the all-tasks table keeps its score under its task's definition: a task
    ranked by its fallback (the first metric of its earliest bundle), then defined by another
    metric, has every row scored by that metric in the definition's own commit, and a later
    upload of another task leaves them so."""
    metrics = [{"em": {"acc": 0.9, "f1": 0.2}}, {"em": {"acc": 0.1, "f1": 0.8}}]
    specs = [
        RunSpec(task="alpha", model=f"m{n}", rows=2, metrics=scores)
        for n, scores in enumerate(metrics)
    ]
    publish(make_bundles(tmp_path / "first", specs), repo_id)
    before = {r["player_name"]: (r["ranking_metric"], r["score"]) for r in table_rows(hub, repo_id)}
    assert before == {"m0": ("em.acc", 0.9), "m1": ("em.acc", 0.1)}  # the fallback
    define = run_cli(
        "tasks", "define", "alpha", "--repo", repo_id, "--dataset", specs[0].hf_repo_id,
        "--split", "test", "--metric", "em.f1", "--direction", "lower",
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert define.returncode == 0, define.stderr
    (latest,) = hub.commits(repo_id)[:1]
    assert table_part(0) in latest.files_changed
    after = {r["player_name"]: (r["ranking_metric"], r["score"]) for r in table_rows(hub, repo_id)}
    assert after == {"m0": ("em.f1", 0.2), "m1": ("em.f1", 0.8)}
    ranked = table_rows(hub, repo_id, task_table("alpha"))
    assert [(r["player_name"], r["rank"]) for r in ranked] == [("m0", 1), ("m1", 2)]
    publish(make_bundles(tmp_path / "other", [RunSpec(task="beta", model="b", rows=2)]), repo_id)
    again = {r["player_name"]: (r["ranking_metric"], r["score"]) for r in table_rows(hub, repo_id)}
    assert {name: again[name] for name in after} == after


def test_the_tables_carry_each_runs_cost_and_the_card_its_tokens_per_row(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Tokens and requests summed over the bundle's predictions, computed here from what the
    tree writer put in each prediction file."""
    publish(make_bundles(tmp_path, [RunSpec(task="alpha", model="m", rows=4)]), repo_id)
    expected_in = sum(1200 + index for index in range(4))
    expected_out = sum(300 + index for index in range(4))
    for table in (table_part(0), task_table("alpha")):
        (row,) = table_rows(hub, repo_id, table)
        assert (row["input_tokens"], row["output_tokens"], row["requests"]) == (
            expected_in,
            expected_out,
            0,
        )
    per_row = (expected_in + expected_out) / 4
    assert f"|{per_row / 1000:.2g}k|" in card_text(hub, repo_id)
    # the score flat beside them, under the task's ranking metric: no list of structs to search
    (row,) = table_rows(hub, repo_id)
    assert (row["ranking_metric"], row["score"]) == ("exact_match.accuracy", 0.62)
