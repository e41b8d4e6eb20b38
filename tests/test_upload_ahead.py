"""An upload of several commits uploads the later commits' bundle files with the first
(bundler.hub.publish.ahead): each file is sent once, each commit still holds only its own, and
a race, a lost answer or a failed second commit ends as correct as before."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import OTHER_WRITE_TOKEN, WRITE_TOKEN
from factory import RunSpec
from hubserver import LOST_RESPONSE, RACE, Fault, HubServer
from test_upload import (
    commit_posts,
    hub_bundle_files,
    make_bundles,
    repo_files,
    table_rows,
    upload,
    uploads_at_once,
)

from bundler.core.progress import NoProgress
from bundler.hub.publish.upload import UploadOptions
from bundler.hub.publish.upload import upload as upload_library
from bundler.hub.repo.paths import BUNDLES_DIR, task_table

FORTY = [RunSpec(task=f"task{i:02d}", model="m", rows=1) for i in range(40)]
"""Forty bundles of one task each: 32 in the first commit (their files and task tables, the
all-tasks table, the record and the card), 8 in the second."""


@pytest.fixture
def forty(tmp_path: Path) -> Path:
    return make_bundles(tmp_path, FORTY)


def asked(hub: HubServer, repo_id: str, action: str) -> int:
    """The requests about `repo_id` whose path names `action` (`preupload`, `objects/batch`)."""
    return sum(f"/{action}" in record.path for record in hub.requests(repo_id))


def archives_sent(hub: HubServer, repo_id: str, bundles: Path) -> int:
    """How many of the archives in `bundles` went up to LFS storage; no object (archive or
    table: the Hub keeps both in LFS) goes up twice."""
    sent = hub.lfs_uploads(repo_id)
    assert len(sent) == len(set(sent)), "an LFS object was uploaded twice"
    archives = {hashlib.sha256(p.read_bytes()).hexdigest() for p in bundles.rglob("*.tar.zst")}
    return len(archives.intersection(sent))


def committed_blobs(hub: HubServer, repo_id: str) -> set[str]:
    """The sha256 of each table, chart and archive a commit after the first wrote, as it
    wrote it: the LFS objects the repository's history holds."""
    blobs = set()
    for commit in hub.commits(repo_id)[:-1]:
        for path in commit.added + commit.modified:
            if path.endswith((".parquet", ".png", ".tar.zst")):
                data = hub.file_bytes(repo_id, path, revision=commit.oid) or b""
                blobs.add(hashlib.sha256(data).hexdigest())
    return blobs


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
    # one LFS batch for all 40 archives and both commits' tables (the Hub keeps them in LFS)
    assert asked(hub, repo_id, "objects/batch") == 1
    assert asked(hub, repo_id, "preupload") == 2  # the second asks about its record and card
    assert set(hub.lfs_uploads(repo_id)) == committed_blobs(hub, repo_id)  # and nothing else
    assert_forty_in_two_commits(hub, repo_id, forty)


def assert_forty_in_two_commits(hub: HubServer, repo_id: str, forty: Path) -> None:
    """The 40 bundles are on the branch, each archive sent once, 32 in the first commit and 8
    in the second (none in both), and the tables list all 40."""
    assert archives_sent(hub, repo_id, forty) == 40
    first, second = bundle_files_by_commit(hub, repo_id)
    assert (len(first), len(second)) == (64, 16) and not first & second
    assert hub_bundle_files(hub, repo_id) == repo_files(forty)
    assert len(table_rows(hub, repo_id)) == 40


def test_three_commits_ask_for_two_lfs_batches_and_send_each_file_once(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """70 bundles, three commits (32, 32, 6): the first uploads every later bundle's files
    with its own; the second its own tables with the last commit's, which then uploads
    nothing. Only the last commit's tables are computed ahead: the second's would join an
    LFS batch request the second makes anyway."""
    seventy = make_bundles(
        tmp_path, [RunSpec(task=f"task{i:02d}", model="m", rows=1) for i in range(70)]
    )
    hub.create_repo(repo_id)
    hub.reset_requests()
    code, report, stderr = upload(seventy, "--repo", repo_id)
    assert code == 0, stderr
    assert len(report["commits"]) == 3
    assert asked(hub, repo_id, "objects/batch") == 2
    assert asked(hub, repo_id, "preupload") == 3
    assert archives_sent(hub, repo_id, seventy) == 70
    assert set(hub.lfs_uploads(repo_id)) == committed_blobs(hub, repo_id)
    assert [len(files) for files in bundle_files_by_commit(hub, repo_id)] == [64, 64, 12]
    assert len(table_rows(hub, repo_id)) == 70


class CommitsBetween(NoProgress):
    """A progress sink that runs `between` once our first commit has landed (at the first
    bundle reported after it), before the second is planned."""

    def __init__(self, hub: HubServer, repo_id: str, between: Callable[[], None]) -> None:
        self.hub, self.repo_id, self.between = hub, repo_id, between
        self.ran = False

    def advance(self, steps: int = 1) -> None:
        if not self.ran and len(self.hub.commits(self.repo_id)) == 2:  # the Hub's and our first
            self.ran = True
            self.between()


def test_tables_uploaded_ahead_that_came_out_different_are_not_committed(
    hub: HubServer, repo_id: str, forty: Path, tmp_path: Path
) -> None:
    """Another run commits a bundle between our two commits: the second commit's tables,
    uploaded with the first, no longer hold every row. The second commit is planned again on
    the other run's head, writes tables with all 41 rows, and uploads them as any commit
    does; the tables uploaded ahead stay unused."""
    hub.create_repo(repo_id)
    other = make_bundles(tmp_path / "other", [RunSpec(task="task39", model="m-b", rows=1)])

    def another_run() -> None:
        uploads_at_once(repo_id, [(other, OTHER_WRITE_TOKEN)], timeout=120)

    sink = CommitsBetween(hub, repo_id, another_run)
    hub.reset_requests()
    report = upload_library(forty, UploadOptions(repo_id=repo_id, token=WRITE_TOKEN), sink)
    assert sink.ran and report.exit_code == 0, report.error
    assert {b.outcome for b in report.bundles} == {"published"} and len(report.commits) == 2
    assert len(hub.commits(repo_id)) == 4  # the Hub's, our first, the other run's, our second
    rows = table_rows(hub, repo_id)
    assert len(rows) == 41 and len(table_rows(hub, repo_id, task_table("task39"))) == 2
    card = (hub.file_bytes(repo_id, "README.md") or b"").decode()
    assert "**41** submission bundle(s)" in card
    unused = set(hub.lfs_uploads(repo_id)) - committed_blobs(hub, repo_id)
    assert unused  # the tables uploaded ahead, which the second commit did not write
    assert archives_sent(hub, repo_id, forty) == 40
    assert hub_bundle_files(hub, repo_id) == repo_files(forty) | repo_files(other)


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
    assert archives_sent(hub, repo_id, forty) == 40  # those uploaded ahead are not sent again
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
    assert_forty_in_two_commits(hub, repo_id, forty)


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
    assert archives_sent(hub, repo_id, forty) == 40
    hub.clear_faults()
    hub.reset_requests()
    code, report_again, stderr = upload(forty, "--repo", repo_id)
    assert code == 0, stderr
    outcomes = [b["outcome"] for b in report_again["bundles"]]
    assert (outcomes.count("already-there"), outcomes.count("published")) == (32, 8)
    assert archives_sent(hub, repo_id, forty) == 0
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
