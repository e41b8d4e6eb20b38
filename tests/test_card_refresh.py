"""The tables and card on main are always true: written with the bundles on every commit the
bundler makes there, caught up by `bundler card` after merges in the web interface at the cost
of what changed, and a layout-1 repository upgraded in one commit."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import READ_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import RACE, HubServer
from huggingface_hub import CommitOperationAdd, HfApi
from test_upload import make_bundles, publish, repo_files, table_rows, upload

from bundler.hub.client.session import HubSession
from bundler.hub.maintain.card_refresh import refresh_card
from bundler.hub.repo.paths import README, RECORD, bundle_of_path, table_part, task_table

LAYOUT_1 = Path(__file__).parent / "fixtures" / "layout-v1"
"""A repository exactly as the previous release wrote it: rows/, tasks/, features in the card."""


def card(
    repo_id: str, *args: str, token: str | None = WRITE_TOKEN
) -> tuple[int, dict[str, object], str]:
    result = run_cli("card", "--repo", repo_id, *args, "--json", env={"HF_TOKEN": token or ""})
    assert "Traceback" not in result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


def card_text(hub: HubServer, repo_id: str) -> str:
    return (hub.file_bytes(repo_id, README) or b"").decode()


def make_stale(repo_id: str) -> None:
    """Overwrite the card as a web-interface edit (or an old bundler version) would."""
    commit_by_hand(repo_id, {README: b"---\npretty_name: old\n---\n\n**0** bundles\n"})


def commit_by_hand(repo_id: str, files: dict[str, bytes]) -> None:
    """A commit made in the Hub's web interface: a merged pull request, a hand edit."""
    HfApi(token=WRITE_TOKEN).create_commit(
        repo_id,
        [CommitOperationAdd(path, data) for path, data in files.items()],
        commit_message="hand edit",
        repo_type="dataset",
    )


@pytest.fixture
def published(hub: HubServer, repo_id: str, tmp_path: Path) -> Path:
    bundles = make_bundles(
        tmp_path, [RunSpec(task=task, rows=2) for task in ("alpha", "beta", "gamma")]
    )
    publish(bundles, repo_id)
    return bundles


def test_upload_commits_the_tables_and_card_with_the_bundles(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    (commit,) = [c for c in hub.commits(repo_id) if README in c.files_changed]
    assert "**3** submission bundle(s)" in card_text(hub, repo_id)
    tables = [table_part(0), *(task_table(task) for task in ("alpha", "beta", "gamma"))]
    assert set(commit.files_changed) == {*repo_files(published), *tables, README, RECORD}
    more = make_bundles(tmp_path / "more", [RunSpec(task="delta", rows=2)])
    assert upload(more, "--repo", repo_id)[0] == 0
    latest = hub.commits(repo_id)[0]
    # the new bundle, the all-tasks table, its task's new table and the card: nothing else
    assert set(latest.files_changed) == {
        *repo_files(more),
        table_part(0),
        task_table("delta"),
        README,
        RECORD,  # what the commit derived: bundler.hub.leaderboard.record
    }
    assert "**4** submission bundle(s)" in card_text(hub, repo_id)
    assert "\n### delta\n" in card_text(hub, repo_id)  # the new task's board
    assert len(table_rows(hub, repo_id)) == 4


def test_tables_up_to_date_are_not_committed(hub: HubServer, repo_id: str, published: Path) -> None:
    commits = len(hub.commits(repo_id))
    log = len(hub.request_log)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["changed"] is False and result["commit"] is None
    assert result["bundle_count"] == 3
    assert len(hub.commits(repo_id)) == commits
    assert "up to date" in stderr
    requests = [r for r in hub.request_log[log:] if repo_id in r.path]
    assert len(requests) <= 6, [f"{r.method} {r.path}" for r in requests]
    checked, result, _ = card(repo_id, "--check")
    assert checked == 0 and result["changed"] is False  # up to date: the check passes


def test_a_stale_card_is_repaired_from_the_tables_alone(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    make_stale(repo_id)
    head = hub.commits(repo_id)[0].oid

    code, result, stderr = card(repo_id, "--dry-run")
    assert code == 0, stderr
    assert result["changed"] is True and result["commit"] is None
    assert "stale" in stderr and hub.commits(repo_id)[0].oid == head
    code, result, stderr = card(repo_id, "--check", token=READ_TOKEN)  # CI needs no write token
    assert code == 1, stderr
    assert result["changed"] is True and result["exit_code"] == 1 and result["commit"] is None
    assert hub.commits(repo_id)[0].oid == head

    log = len(hub.request_log)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["changed"] is True and result["parent_commit"] == head
    latest = hub.commits(repo_id)[0]
    assert latest.oid == result["commit"] and latest.parents == (head,)
    assert set(latest.files_changed) == {README, RECORD}
    assert "**3** submission bundle(s)" in card_text(hub, repo_id)
    # no bundle read: the table alone (the copy the upload that wrote it kept, so not even it)
    assert [r.path for r in hub.request_log[log:] if "/resolve/" in r.path] == []

    code, result, _ = card(repo_id)  # now true: nothing to commit
    assert code == 0 and result["changed"] is False


def test_a_merge_in_the_web_interface_is_caught_up_reading_only_what_changed(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    merged = make_bundles(tmp_path / "merged", [RunSpec(task="delta", model="claude", rows=2)])
    commit_by_hand(repo_id, repo_files(merged))
    log = len(hub.request_log)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["bundle_count"] == 4
    downloads = {
        unquote(r.path).rsplit("/", 1)[-1] for r in hub.request_log[log:] if "/resolve/" in r.path
    }
    # the one bundle that came in, no other; nor the table, which the merge left as it was (the
    # upload that wrote it kept a copy, bundler.hub.leaderboard.tablecache)
    assert downloads == {Path(p).name for p in repo_files(merged)}
    latest = hub.commits(repo_id)[0]
    assert set(latest.files_changed) == {table_part(0), task_table("delta"), README, RECORD}
    assert "delta" in {row["task_name"] for row in table_rows(hub, repo_id)}
    assert card(repo_id)[1]["changed"] is False


def test_a_merged_bundle_that_fails_verification_is_named_and_left_out(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    merged = make_bundles(tmp_path / "merged", [RunSpec(task="delta", rows=2)])
    files = repo_files(merged)
    archive = next(path for path in files if path.endswith(".tar.zst"))
    forged = bytearray(files[archive])
    forged[len(forged) // 2] ^= 0xFF
    commit_by_hand(repo_id, {**files, archive: bytes(forged)})
    code, result, stderr = card(repo_id)
    assert code == 1
    (problem,) = result["unreadable_rows"]
    assert problem.startswith(archive.removesuffix(".tar.zst")) and "failed verification" in problem
    assert result["bundle_count"] == 3 and "left out of the tables" in stderr
    assert "delta" not in {row["task_name"] for row in table_rows(hub, repo_id)}


def test_race_on_the_card_commit_is_replanned(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    make_stale(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", RACE, times=1)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    # the other commit survived too (the server numbers races across the whole session)
    assert any(path.startswith(".race/") for path in hub.list_files(repo_id))
    latest = hub.commits(repo_id)[0]
    assert latest.oid == result["commit"] and set(latest.files_changed) == {README, RECORD}
    assert latest.parents[0] == hub.commits(repo_id)[1].oid  # planned on the racer's head
    assert "**3** submission bundle(s)" in card_text(hub, repo_id)


def test_card_needs_write_access(hub: HubServer, repo_id: str, published: Path) -> None:
    make_stale(repo_id)
    code, result, stderr = card(repo_id, token=READ_TOKEN)
    assert code == 2
    assert "write access" in stderr and READ_TOKEN not in stderr + json.dumps(result)
    code, result, _ = card(repo_id, "--dry-run", token=READ_TOKEN)
    assert code == 0 and result["changed"] is True


def test_unknown_repository_is_unusable(hub: HubServer, repo_id: str) -> None:
    code, result, stderr = card(f"{repo_id}-typo")
    assert code == 2 and "not found" in stderr and result["exit_code"] == 2
    assert "bundler init --repo" in stderr


def test_refresh_card_library(hub: HubServer, repo_id: str, published: Path) -> None:
    make_stale(repo_id)
    session = HubSession(repo_id, token=WRITE_TOKEN)
    refresh = refresh_card(session, "main", dry_run=True)
    assert refresh.changed and refresh.commit is None and refresh.bundle_count == 3
    refresh = refresh_card(session)
    assert refresh.changed and refresh.commit == hub.commits(repo_id)[0].oid
    assert not refresh_card(session).changed


def test_the_card_of_a_pull_request_is_refused(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    """Pull requests never touch the tables or README.md, so that they merge cleanly: `bundler
    card` will not put them there either."""
    before = hub.commits(repo_id)[0].oid
    code, _, stderr = card(repo_id, "--revision", "refs/pr/1")
    assert code == 2
    assert "the card lives on a branch, never in a pull request" in stderr
    assert hub.commits(repo_id)[0].oid == before


def layout_1_files() -> dict[str, bytes]:
    return {
        path.relative_to(LAYOUT_1).as_posix(): path.read_bytes()
        for path in sorted(LAYOUT_1.rglob("*"))
        if path.is_file()
    }


def test_a_layout_1_repository_is_upgraded_in_one_commit(hub: HubServer, repo_id: str) -> None:
    hub.create_repo(repo_id, files=layout_1_files())
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["upgraded"] is True and result["bundle_count"] == 3
    (upgrade,) = [c for c in hub.commits(repo_id) if c.oid == result["commit"]]
    files = hub.list_files(repo_id)
    assert not [path for path in files if path.startswith(("rows/", "tasks/"))]
    assert {table_part(0), task_table("expert-vqa"), task_table("maze")} <= set(files)
    bundles = [path for path in files if path.startswith("bundles/")]
    assert len(bundles) == 6 and all(bundle_of_path(path) for path in bundles)  # in shards
    assert {path for path in upgrade.deleted if path.startswith("rows/")} == {
        path for path in layout_1_files() if path.startswith("rows/")
    }
    rows = table_rows(hub, repo_id)
    # derived from the verified bundles alone, never from the row files' claims: each bundle
    # is dated by the commit that added its sidecar
    before = {c.created_at[:10] for c in hub.commits(repo_id) if c.oid != upgrade.oid}
    assert len(rows) == 3 and {str(row["published_at"])[:10] for row in rows} <= before
    header = card_text(hub, repo_id).split("---\n", 2)[1]
    assert "dataset_info" not in header and "leaderboard/bundles/*.parquet" in header
    assert card(repo_id)[1]["changed"] is False


def test_an_upload_into_a_layout_1_repository_upgrades_it_with_its_commit(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    hub.create_repo(repo_id, files=layout_1_files())
    bundles = make_bundles(tmp_path, [RunSpec(task="wires", rows=2)])
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 0, stderr
    assert len(report["commits"]) == 1
    assert not [p for p in hub.list_files(repo_id) if p.startswith(("rows/", "tasks/"))]
    assert len(table_rows(hub, repo_id)) == 4


def test_the_task_tables_are_ranked_and_typed_for_any_parquet_reader(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    bundles = make_bundles(
        tmp_path,
        [
            RunSpec(task="maze", model=model, rows=2, metrics={"m": {"solved": score}})
            for model, score in (("a", 0.2), ("b", 0.9), ("c", 0.5))
        ],
    )
    assert upload(bundles, "--repo", repo_id)[0] == 0
    data = hub.file_bytes(repo_id, task_table("maze"))
    assert data is not None
    table = pq.read_table(pa.BufferReader(data))
    assert table.schema.field("m.solved").type == pa.float64()
    assert table.column("m.solved").to_pylist() == [0.9, 0.5, 0.2]
    assert table.column("rank").to_pylist() == [1, 2, 3]
