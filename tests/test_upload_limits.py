"""The Hub's limits planned for (issue 28): a commit past the entries a folder may hold or the
files a repository should hold is not sent, and the person is told which limit stops it; a
commit the Hub refuses says the Hub's reason; a refused batch never fails the batches after it.

The test server holds each repository to the Hub's limits (hubserver.RepoLimits), which a test
makes small for its own repository; the bundler's own limits are an upload option
(UploadOptions.limits, the Hub's numbers unless a caller says otherwise)."""

from __future__ import annotations

import posixpath
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import one_line_error
from hubserver import HubServer, RepoLimits
from test_upload import commit_posts, make_bundles, publish, table_rows, upload

from bundler.core.errors import UsageError
from bundler.hub.client.limits import HubLimitReached, HubLimits, check_commit
from bundler.hub.leaderboard.record import BoardRecord, DerivedFile
from bundler.hub.leaderboard.tables import AllTasksTable
from bundler.hub.publish.upload import UploadOptions, UploadReport
from bundler.hub.publish.upload import upload as upload_library
from bundler.hub.repo.paths import RECORD, repo_folder, table_part
from bundler.local.layout import id_of_local_archive

FORTY = [RunSpec(task=f"task{i:02d}", model="m", rows=1) for i in range(40)]
"""Forty bundles of one player: 32 a commit (its two files and its task's table each, beside
the all-tasks table and the card), so two batches, of 32 and 8; the first adds 64 entries to the
player's folder, the second 16."""


@pytest.fixture
def forty(tmp_path: Path) -> Path:
    return make_bundles(tmp_path, FORTY)


def outcomes(report: UploadReport | dict) -> dict[str, list[str]]:
    """Bundle ids by outcome."""
    bundles = report["bundles"] if isinstance(report, dict) else report.model_dump()["bundles"]
    found: dict[str, list[str]] = {}
    for bundle in bundles:
        found.setdefault(bundle["outcome"], []).append(bundle["bundle_id"])
    return found


def folder_of(bundles: Path) -> str:
    """The one repository folder the archives of `bundles` go to (their player's)."""
    (folder,) = {
        repo_folder(id_of_local_archive(archive)) for archive in bundles.rglob("*.tar.zst")
    }
    return folder


def with_strays(hub: HubServer, repo_id: str, folder: str, count: int) -> None:
    """A repository whose `folder` holds `count` stray folders, and an (empty) table and its
    record written in the same commit, so that the table is vouched for and current: nothing
    is read to catch up."""
    files = {f"{folder}/stray{number:05d}/x": b"" for number in range(count)}
    files |= AllTasksTable.empty().files()
    derived = {table_part(0): DerivedFile.of(files[table_part(0)])}
    files[RECORD] = BoardRecord(parent="0" * 40, files=derived).to_bytes()
    hub.create_repo(repo_id, files=files)


def test_the_hubs_reason_reaches_the_person(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    """The client's own first line is the request's id alone ("(Request ID: ...)"), and the
    Hub's reason below it: the one-line error carries the reason."""
    hub.create_repo(repo_id, limits=RepoLimits(folder_entries=4))
    bundles = make_bundles(tmp_path, [RunSpec(task=t, model="m", rows=1) for t in "abc"])
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 1, stderr
    reason = (
        "Your push was rejected because it contains too many files per directory. Each "
        "directory in your git repo can only contain up to 4 files. Offending reference: "
        f"refs/heads/main Offending directories: /{folder_of(bundles)}/"
    )
    error = f"error: committing: the Hub refused the request (HTTP 400: {reason})"
    assert one_line_error(stderr) == error
    assert "Request ID" not in stderr
    assert report["error_kind"] == "refused-by-hub"
    assert {b["detail"] for b in report["bundles"]} == {error.removeprefix("error: ")}
    assert len(outcomes(report)["refused"]) == 3
    assert [c.summary for c in hub.commits(repo_id)] == ["initial commit"]


def test_a_batch_the_hub_refuses_never_fails_the_batches_after_it(
    hub: HubServer, repo_id: str, forty: Path
) -> None:
    hub.create_repo(repo_id, limits=RepoLimits(folder_entries=20))
    code, report, stderr = upload(forty, "--repo", repo_id)
    assert code == 1, stderr
    found = outcomes(report)
    assert (len(found["refused"]), len(found["published"])) == (32, 8)
    refused = {b["detail"] for b in report["bundles"] if b["outcome"] == "refused"}
    assert len(refused) == 1 and f"Offending directories: /{folder_of(forty)}/" in refused.pop()
    assert "up to 20 files" in one_line_error(stderr)
    assert len(report["commits"]) == 1
    assert sorted(row["bundle_id"] for row in table_rows(hub, repo_id)) == found["published"]
    published = [p for p in hub.list_files(repo_id) if p.startswith("bundles/")]
    assert len(published) == 16
    # The refused bundles are published once there is room: the next upload sends them alone.
    hub.set_limits(repo_id, RepoLimits())
    code, report, stderr = upload(forty, "--repo", repo_id)
    assert code == 0, stderr
    assert (len(outcomes(report)["published"]), len(table_rows(hub, repo_id))) == (32, 40)


def test_a_commit_past_a_folders_limit_is_refused_before_it_is_sent(
    hub: HubServer, repo_id: str, forty: Path
) -> None:
    hub.create_repo(repo_id)
    options = UploadOptions(repo_id=repo_id, token=WRITE_TOKEN, limits=HubLimits(20, 100_000))
    report = upload_library(forty, options)
    assert report.exit_code == 1
    found = outcomes(report)
    assert (len(found["refused"]), len(found["published"])) == (32, 8)
    assert commit_posts(hub, repo_id) == 1  # the first batch was never sent
    folder = folder_of(forty)
    assert report.error == (
        f"{folder}/: this commit would leave 64 entries in the folder, more than the 20 the Hub "
        "allows a folder; it would refuse the commit"
    )
    assert report.hint == "make room in that folder, or publish these bundles to another repository"
    assert report.error_kind == "hub-limit-reached" and not report.error_temporary
    details = {b.detail for b in report.bundles if b.outcome == "refused"}
    assert details == {f"{report.error} ({report.hint})"}
    assert len(table_rows(hub, repo_id)) == 8


def test_a_pull_requests_commit_past_a_folders_limit_is_not_sent_and_the_next_opens_it(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A pull request's commits hold 50 bundles (their own files alone): the first, of one
    player's 50, would leave 100 entries in its folder; the second, another player's 5, opens
    the pull request. Its files are not counted: the base's leaderboard is not read for it."""
    specs = [RunSpec(task=f"task{i:02d}", model="a", rows=1) for i in range(50)]
    bundles = make_bundles(
        tmp_path, [*specs, *(RunSpec(task=t, model="b", rows=1) for t in "vwxyz")]
    )
    hub.create_repo(repo_id)
    options = UploadOptions(
        repo_id=repo_id, token=SUBMITTER_TOKEN, create_pr=True, limits=HubLimits(60, 1)
    )
    report = upload_library(bundles, options)
    assert report.exit_code == 1
    found = outcomes(report)
    assert (len(found["refused"]), len(found["proposed"])) == (50, 5)
    assert all(bundle.startswith("b_") for bundle in found["proposed"])
    folders = {
        archive.parent.name.partition("_")[0]: repo_folder(id_of_local_archive(archive))
        for archive in bundles.rglob("*.tar.zst")
    }
    assert report.error is not None and report.error.startswith(f"{folders['a']}/:")
    assert "100 entries in the folder, more than the 60" in report.error
    assert report.pull_request_num == 1 and commit_posts(hub, repo_id) == 1
    proposed = [
        p for p in hub.list_files(repo_id, revision="refs/pr/1") if p.startswith("bundles/")
    ]
    assert len(proposed) == 10 and all(p.startswith(f"{folders['b']}/") for p in proposed)


def test_the_file_count_comes_from_the_leaderboard_and_stops_a_commit_past_it(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    publish(make_bundles(tmp_path / "a", [RunSpec(task=t, rows=1) for t in "abc"]), repo_id)
    assert len(hub.list_files(repo_id)) == 13  # 3 x 2, .gitattributes, card, 4 tables, record
    more = make_bundles(tmp_path / "b", [RunSpec(task=t, rows=1) for t in "de"])
    refused = upload_library(
        more, UploadOptions(repo_id=repo_id, token=WRITE_TOKEN, limits=HubLimits(10_000, 18))
    )
    assert refused.exit_code == 1 and len(outcomes(refused)["refused"]) == 2
    assert refused.error == (  # 2 x 2 files and 2 task tables more
        "this commit would bring the repository to 19 files, more than the 18 allowed here "
        "(BUNDLER_MAX_REPO_FILES)"
    )
    assert refused.hint is not None and "BUNDLER_MAX_REPO_FILES" in refused.hint
    published = upload_library(
        more, UploadOptions(repo_id=repo_id, token=WRITE_TOKEN, limits=HubLimits(10_000, 19))
    )
    assert published.exit_code == 0, published
    assert len(hub.list_files(repo_id)) == 19  # what the leaderboard said, exactly


def test_the_bundler_stops_at_the_hubs_own_folder_limit(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """At the Hub's numbers, end to end: the folder a new player's folder goes in holds 9,999
    entries and takes it; holding 10,000, it refuses it with one line naming the folder, and
    nothing is sent."""
    bundles = make_bundles(tmp_path, [RunSpec(model="new-player", rows=1)])
    parent = posixpath.dirname(folder_of(bundles))
    with_strays(hub, f"{repo_id}-roomy", parent, 9_999)
    code, _, stderr = upload(bundles, "--repo", f"{repo_id}-roomy")
    assert code == 0, stderr
    with_strays(hub, repo_id, parent, 10_000)
    hub.reset_requests()
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 1, stderr
    assert one_line_error(stderr) == (
        f"error: {parent}/: this commit would leave 10,001 entries in the folder, more than "
        "the 10,000 the Hub allows a folder; it would refuse the commit"
    )
    assert "  hint: make room in that folder, or publish these bundles to another repository" in (
        stderr.splitlines()
    )
    assert report["error_kind"] == "hub-limit-reached"
    assert commit_posts(hub, repo_id) == 0
    # that folder, which gains an entry, listed in 10 pages of 1,000 as the Hub pages it;
    # the new player's folder is not listed (it does not exist), nor any folder twice
    tree = [r.path.split("/tree/")[1] for r in hub.requests(repo_id) if "/tree/" in r.path]
    listed = Counter(unquote(path.partition("/")[2]) for path in tree)
    assert listed[parent] == 10 and folder_of(bundles) not in listed, listed
    assert all(pages == 1 for folder, pages in listed.items() if folder != parent), listed


def test_the_check_lists_only_the_folders_a_commit_adds_entries_to() -> None:
    held = {"README.md", "bundles", "bundles/p", "bundles/p/old.json", "leaderboard"}
    held |= {"leaderboard/bundles", "leaderboard/bundles/part-00000.parquet"}
    listed: list[str] = []

    def entries_in(folder: str) -> int:
        listed.append(folder)
        return {"": 3, "bundles": 9_998, "bundles/p": 7}[folder]

    def check(added: list[str], *, files_before: int | None = None, **limits: int) -> None:
        check_commit(
            added,
            existing=lambda paths: held & set(paths),
            entries_in=entries_in,
            files_before=files_before,
            limits=HubLimits(**limits),
        )

    rewrite = ["README.md", "leaderboard/bundles/part-00000.parquet", "bundles/p/old.json"]
    check(rewrite, files_before=100_000)  # nothing new: nothing listed, no file added
    assert listed == []
    check([*rewrite, "bundles/p/new.tar.zst", "bundles/p/new.json"], folder_entries=9)
    assert listed == ["bundles/p"]
    with pytest.raises(HubLimitReached) as refused:
        check(["bundles/p/a", "bundles/p/b", "bundles/p/c"], folder_entries=9)
    assert (refused.value.limit, refused.value.folder, refused.value.count) == (
        "folder-entries",
        "bundles/p",
        10,
    )
    listed.clear()
    check(["bundles/q/a", "bundles/q/b", "bundles/r/c"], folder_entries=10_000)
    assert listed == ["bundles"]  # q and r are new: bundles/ gains two, 10,000 in all
    with pytest.raises(HubLimitReached) as refused:
        check(["bundles/q/a", "bundles/r/b", "bundles/s/c"])
    assert (refused.value.folder, refused.value.count, refused.value.maximum) == (
        "bundles",
        10_001,
        10_000,
    )
    listed.clear()
    with pytest.raises(HubLimitReached) as refused:
        check(["new/a", "new/b", "README.md"], files_before=99_999)
    assert (refused.value.limit, refused.value.count, listed) == ("repository-files", 100_001, [])
    check(["new/a", "README.md"], files_before=99_999)
    assert listed == [""]  # the top folder gains `new`


def test_the_files_limit_is_the_environments_and_a_commit_adding_none_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two files a bundle: about 50,000 bundles reach the 100,000 files the Hub recommends.
    Where the Hub agreed more with the owners, BUNDLER_MAX_REPO_FILES says so; a commit that
    adds no file (a card, a table part rewritten) never stands in the way."""
    assert HubLimits().repository_files == 100_000
    monkeypatch.setenv("BUNDLER_MAX_REPO_FILES", "250000")
    assert HubLimits().repository_files == 250_000
    monkeypatch.setenv("BUNDLER_MAX_REPO_FILES", "many")
    with pytest.raises(UsageError, match="BUNDLER_MAX_REPO_FILES='many'"):
        HubLimits()
    monkeypatch.delenv("BUNDLER_MAX_REPO_FILES")

    def check(added: list[str], files_before: int) -> None:
        check_commit(
            added,
            existing=lambda paths: {"README.md"} & set(paths),
            entries_in=lambda folder: 1,
            files_before=files_before,
        )

    check(["README.md"], files_before=200_000)  # rewrites only: nothing added
    with pytest.raises(HubLimitReached, match="BUNDLER_MAX_REPO_FILES") as refused:
        check(["bundles/p/new.json"], files_before=200_000)
    assert refused.value.count == 200_001
