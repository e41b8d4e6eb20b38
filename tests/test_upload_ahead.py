"""An upload of several commits uploads the later commits' bundle files with the first
(bundler.hub.publish.ahead): each file is sent once, each commit still holds only its own, and
a race, a lost answer or a failed second commit ends as correct as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import OTHER_WRITE_TOKEN, WRITE_TOKEN
from factory import RunSpec
from hubserver import LOST_RESPONSE, RACE, Fault, HubServer
from test_upload import (
    commit_posts,
    hub_bundle_files,
    lfs_puts,
    make_bundles,
    repo_files,
    table_rows,
    upload,
    uploads_at_once,
)

from bundler.hub.publish.upload import UploadOptions
from bundler.hub.publish.upload import upload as upload_library
from bundler.hub.repo.paths import BUNDLES_DIR

FORTY = [RunSpec(task=f"task{i:02d}", model="m", rows=1) for i in range(40)]
"""Forty bundles of one task each: 32 in the first commit (their files and task tables, the
all-tasks table, the record and the card), 8 in the second."""


@pytest.fixture
def forty(tmp_path: Path) -> Path:
    return make_bundles(tmp_path, FORTY)


def asked(hub: HubServer, repo_id: str, action: str) -> int:
    """The requests about `repo_id` whose path names `action` (`preupload`, `objects/batch`)."""
    return sum(f"/{action}" in record.path for record in hub.requests(repo_id))


def bundle_files_by_commit(hub: HubServer, repo_id: str) -> list[set[str]]:
    """The bundle files each commit after the first wrote, oldest first."""
    return [
        {path for path in commit.files_changed if path.startswith(f"{BUNDLES_DIR}/")}
        for commit in reversed(hub.commits(repo_id)[:-1])
    ]


def test_the_second_commits_bundles_go_up_with_the_first_and_are_committed_by_the_second(
    hub: HubServer, repo_id: str, forty: Path
) -> None:
    hub.create_repo(repo_id)
    hub.reset_requests()
    code, report, stderr = upload(forty, "--repo", repo_id)
    assert code == 0, stderr
    assert len(report["commits"]) == 2
    assert asked(hub, repo_id, "objects/batch") == 1  # one LFS batch for all 40 archives
    assert asked(hub, repo_id, "preupload") == 2  # the second asks about its tables alone
    assert lfs_puts(hub) == 40
    first, second = bundle_files_by_commit(hub, repo_id)
    assert (len(first), len(second)) == (64, 16) and not first & second
    assert hub_bundle_files(hub, repo_id) == repo_files(forty)
    assert len(table_rows(hub, repo_id)) == 40


def test_a_race_before_the_second_commit_asks_about_its_files_again(
    hub: HubServer, repo_id: str, forty: Path
) -> None:
    """Someone commits between our two: what the Hub said of the second commit's files was
    said of another head, so the second commit asks again; nothing is sent twice."""
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", RACE, times=1, after=1)
    hub.reset_requests()
    code, report, stderr = upload(forty, "--repo", repo_id)
    assert code == 0, stderr
    assert len(report["commits"]) == 2
    assert asked(hub, repo_id, "preupload") == 3  # first; second; second again, replanned
    assert lfs_puts(hub) == 40  # the blobs uploaded ahead are not sent again
    assert hub_bundle_files(hub, repo_id) == repo_files(forty)
    assert len(table_rows(hub, repo_id)) == 40
    assert any(path.startswith(".race/") for path in hub.list_files(repo_id))


def test_a_lost_answer_to_the_first_commit_commits_nothing_twice(
    hub: HubServer, repo_id: str, forty: Path
) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", LOST_RESPONSE, times=1)
    hub.reset_requests()
    code, report, stderr = upload(forty, "--repo", repo_id)
    assert code == 0, stderr
    assert {b["outcome"] for b in report["bundles"]} == {"published"}
    assert commit_posts(hub, repo_id) == 2
    assert lfs_puts(hub) == 40
    first, second = bundle_files_by_commit(hub, repo_id)
    assert (len(first), len(second)) == (64, 16) and not first & second
    assert hub_bundle_files(hub, repo_id) == repo_files(forty)
    assert len(table_rows(hub, repo_id)) == 40


def test_a_second_commit_that_fails_leaves_a_board_the_next_run_completes(
    hub: HubServer, repo_id: str, forty: Path
) -> None:
    """The second commit never lands: its bundles' blobs are on the Hub, uncommitted, and the
    branch holds the first commit's bundles with tables that list exactly them. The next run
    commits the rest, uploading nothing again."""
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", Fault.status(503), times=50, after=1)
    options = UploadOptions(
        repo_id=repo_id, token=WRITE_TOKEN, commit_attempts=2, retry_wait_seconds=0.05
    )
    hub.reset_requests()
    report = upload_library(forty, options)
    assert report.exit_code == 75
    outcomes = [b.outcome for b in report.bundles]
    assert (outcomes.count("published"), outcomes.count("failed")) == (32, 8)
    published = sorted(b.bundle_id for b in report.bundles if b.outcome == "published")
    assert sorted(str(row["bundle_id"]) for row in table_rows(hub, repo_id)) == published
    assert len(hub_bundle_files(hub, repo_id)) == 64
    assert lfs_puts(hub) == 40
    hub.clear_faults()
    hub.reset_requests()
    code, report_again, stderr = upload(forty, "--repo", repo_id)
    assert code == 0, stderr
    outcomes = [b["outcome"] for b in report_again["bundles"]]
    assert (outcomes.count("already-there"), outcomes.count("published")) == (32, 8)
    assert lfs_puts(hub) == 0
    assert hub_bundle_files(hub, repo_id) == repo_files(forty)
    assert len(table_rows(hub, repo_id)) == 40


def test_two_uploads_of_several_commits_racing_lose_nothing(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Two runs of 40 bundles each, two commits each, at once: whichever commits second finds
    the head moved, plans again and asks again about what it uploaded ahead."""
    hub.create_repo(repo_id)
    first = make_bundles(tmp_path / "a", FORTY)
    second = make_bundles(
        tmp_path / "b", [RunSpec(task=f"other{i:02d}", model="m-b", rows=1) for i in range(40)]
    )
    reports = uploads_at_once(
        repo_id, [(first, WRITE_TOKEN), (second, OTHER_WRITE_TOKEN)], timeout=300
    )
    for report in reports:
        assert {b["outcome"] for b in report["bundles"]} == {"published"}
    assert hub_bundle_files(hub, repo_id) == repo_files(first) | repo_files(second)
    assert len(table_rows(hub, repo_id)) == 80
    card = (hub.file_bytes(repo_id, "README.md") or b"").decode()
    assert "**80** submission bundle(s)" in card
