"""The dataset card on main is always true: rendered from every row file the branch holds, on
every commit the bundler makes there, and repaired by `bundler card` when it went stale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import READ_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import RACE, HubServer
from huggingface_hub import CommitOperationAdd, HfApi
from test_upload import make_bundles, upload

from bundler.hub.card import refresh_card
from bundler.hub.layout import README
from bundler.hub.plan import FILES_PER_BUNDLE
from bundler.hub.session import HubSession


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
    HfApi(token=WRITE_TOKEN).create_commit(
        repo_id,
        [CommitOperationAdd(README, b"---\npretty_name: old\n---\n\n**0** bundles\n")],
        commit_message="hand edit",
        repo_type="dataset",
    )


@pytest.fixture
def published(hub: HubServer, repo_id: str, tmp_path: Path) -> Path:
    bundles = make_bundles(
        tmp_path, [RunSpec(task=task, rows=2) for task in ("alpha", "beta", "gamma")]
    )
    assert upload(bundles, "--repo", repo_id)[0] == 0
    return bundles


def test_upload_commits_the_card_with_the_bundles(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    (commit,) = [c for c in hub.commits(repo_id) if README in c.files_changed]
    assert "**3** submission bundle(s)" in card_text(hub, repo_id)
    assert len(commit.files_changed) == 3 * FILES_PER_BUNDLE + 1  # bundles and card, together
    more = make_bundles(tmp_path / "more", [RunSpec(task="delta", rows=2)])
    assert upload(more, "--repo", repo_id)[0] == 0
    assert "**4** submission bundle(s)" in card_text(hub, repo_id)
    assert "\n### delta\n" in card_text(hub, repo_id)  # the new task's leaderboard


def test_card_up_to_date_is_not_committed(hub: HubServer, repo_id: str, published: Path) -> None:
    commits = len(hub.commits(repo_id))
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["changed"] is False and result["commit"] is None
    assert result["bundle_count"] == 3
    assert len(hub.commits(repo_id)) == commits
    assert "up to date" in stderr


def test_stale_card_is_repaired_reading_rows_only(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    make_stale(repo_id)
    head = hub.commits(repo_id)[0].oid

    code, result, stderr = card(repo_id, "--dry-run")
    assert code == 0, stderr
    assert result["changed"] is True and result["commit"] is None
    assert "stale" in stderr and hub.commits(repo_id)[0].oid == head

    log = len(hub.request_log)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["changed"] is True and result["parent_commit"] == head
    latest = hub.commits(repo_id)[0]
    assert latest.oid == result["commit"] and latest.parents == (head,)
    assert latest.files_changed == (README,)
    assert "**3** submission bundle(s)" in card_text(hub, repo_id)
    requests = hub.request_log[log:]
    downloads = [r.path for r in requests if r.method == "GET" and "/resolve/" in r.path]
    assert len(downloads) == 3 and all("/rows/" in path for path in downloads)
    assert sum("/tree/" in r.path for r in requests) == 1
    assert not any(".tar.zst" in r.path for r in requests)

    code, result, _ = card(repo_id)  # now true: nothing to commit
    assert code == 0 and result["changed"] is False


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
    assert latest.oid == result["commit"] and latest.files_changed == (README,)
    assert latest.parents[0] == hub.commits(repo_id)[1].oid  # planned on the racer's head
    assert "**3** submission bundle(s)" in card_text(hub, repo_id)


def test_unreadable_row_is_named_and_left_out(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    HfApi(token=WRITE_TOKEN).create_commit(
        repo_id,
        [CommitOperationAdd("rows/junk_0123abcd/task@unpinned.jsonl", b"not a row\n")],
        commit_message="junk",
        repo_type="dataset",
    )
    code, result, stderr = card(repo_id)
    assert code == 1
    assert result["unreadable_rows"] == ["rows/junk_0123abcd/task@unpinned.jsonl"]
    assert result["bundle_count"] == 3 and "not a readable row" in stderr


def test_card_needs_write_access(hub: HubServer, repo_id: str, published: Path) -> None:
    make_stale(repo_id)
    code, result, stderr = card(repo_id, token=READ_TOKEN)
    assert code == 2
    assert "write access" in stderr and READ_TOKEN not in stderr + json.dumps(result)
    code, result, _ = card(repo_id, "--dry-run", token=READ_TOKEN)
    assert code == 0 and result["changed"] is True


def test_unknown_repository_is_unusable(hub: HubServer, repo_id: str) -> None:
    code, result, stderr = card(repo_id)
    assert code == 2 and "not found" in stderr and result["exit_code"] == 2


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
    """Pull requests never touch README.md, so that they merge cleanly: `bundler card` will not
    put one there either."""
    before = hub.commits(repo_id)[0].oid
    code, _, stderr = card(repo_id, "--revision", "refs/pr/1")
    assert code == 2
    assert "the card lives on a branch, never in a pull request" in stderr
    assert hub.commits(repo_id)[0].oid == before
