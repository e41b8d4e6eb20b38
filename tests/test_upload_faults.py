"""Uploads under stress: pull requests, racing uploaders, and every fault the Hub can throw at
the commit, each ending in a correct final state and an honest report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import OTHER_WRITE_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import LOST_RESPONSE, RACE, Fault, HubServer
from test_upload import (
    commit_posts,
    hub_bundle_files,
    make_bundles,
    repo_files,
    upload,
    uploads_at_once,
)

from bundler.hub.publish.upload import UploadOptions
from bundler.hub.publish.upload import upload as upload_library


@pytest.fixture
def three(tmp_path: Path) -> Path:
    return make_bundles(
        tmp_path,
        [RunSpec(task=t, model="gpt-5.2", rows=2) for t in ("expert-vqa", "maze", "wires")],
    )


def test_create_pr_opens_one_pull_request_and_rerun_reuses_it(
    hub: HubServer, repo_id: str, three: Path
) -> None:
    hub.create_repo(repo_id)
    code, report, stderr = upload(three, "--repo", repo_id, "--create-pr")
    assert code == 0, stderr
    url = report["pull_request_url"]
    assert url and url.endswith("/discussions/1")
    assert url in stderr
    (pr,) = hub.pull_requests(repo_id)
    assert pr.status == "open" and pr.title.endswith("from leaderboard-bot [bundler]")
    assert "expert-vqa" in pr.description and "bundler download" in pr.description
    assert hub_bundle_files(hub, repo_id, "refs/pr/1") == repo_files(three)
    assert hub_bundle_files(hub, repo_id) == {}  # main untouched until a maintainer merges

    # Re-run with nothing new: same PR, no commit.
    posts = commit_posts(hub, repo_id)
    code, report, _ = upload(three, "--repo", repo_id, "--create-pr")
    assert code == 0
    assert report["pull_request_url"] == url
    assert commit_posts(hub, repo_id) == posts
    assert len(hub.pull_requests(repo_id)) == 1

    # A fixed bundle re-submitted goes onto the same PR, not a new one.
    victim = sorted(three.rglob("*.tar.zst"))[0]
    fixed = make_bundles(
        three.parent / "fixed",
        [RunSpec(task="expert-vqa", model="gpt-5.2", rows=2, metrics={"s": {"x": 1}})],
    )
    fixed_archive = next(fixed.rglob("*.tar.zst"))
    for name in (fixed_archive.name, fixed_archive.name.replace(".tar.zst", ".json")):
        (victim.parent / name).write_bytes((fixed_archive.parent / name).read_bytes())
    code, report, _ = upload(three, "--repo", repo_id, "--create-pr", "--replace")
    assert code == 0
    assert report["pull_request_url"] == url
    assert len(hub.pull_requests(repo_id)) == 1
    assert hub_bundle_files(hub, repo_id, "refs/pr/1") == repo_files(three)


def test_two_uploads_racing_lose_nothing(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    hub.create_repo(repo_id)
    first = make_bundles(
        tmp_path / "a", [RunSpec(task=f"alpha{i}", model="m-a", rows=2) for i in range(4)]
    )
    second = make_bundles(
        tmp_path / "b", [RunSpec(task=f"beta{i}", model="m-b", rows=2) for i in range(4)]
    )
    reports = uploads_at_once(
        repo_id, [(first, WRITE_TOKEN), (second, OTHER_WRITE_TOKEN)], timeout=120
    )
    for report in reports:
        assert all(b["outcome"] == "published" for b in report["bundles"])
    expected = repo_files(first) | repo_files(second)
    assert hub_bundle_files(hub, repo_id) == expected
    card = (hub.file_bytes(repo_id, "README.md") or b"").decode()
    assert "**8** submission bundle(s)" in card  # the last writer saw the other's bundles


def test_race_on_commit_is_replanned(hub: HubServer, repo_id: str, three: Path) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", RACE, times=2)
    code, report, stderr = upload(three, "--repo", repo_id)
    assert code == 0, stderr
    assert len(report["commits"]) == 1
    assert hub_bundle_files(hub, repo_id) == repo_files(three)
    # the other commit survived too (the server numbers races across the whole session)
    assert any(path.startswith(".race/") for path in hub.list_files(repo_id))


@pytest.mark.parametrize("fault", [Fault.status(503), Fault.status(500)])
def test_server_error_on_commit_is_retried_once_it_is_known_not_landed(
    hub: HubServer, repo_id: str, three: Path, fault: Fault
) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", fault, times=1)
    code, _report, stderr = upload(three, "--repo", repo_id)
    assert code == 0, stderr
    assert commit_posts(hub, repo_id) == 2
    assert len(hub.commits(repo_id)) == 2  # the initial commit and ours, once
    assert hub_bundle_files(hub, repo_id) == repo_files(three)


def test_rate_limit_on_commit_waits_and_retries(hub: HubServer, repo_id: str, three: Path) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", Fault.status(429, retry_after=1), times=1)
    code, _, stderr = upload(three, "--repo", repo_id)
    assert code == 0, stderr
    assert hub_bundle_files(hub, repo_id) == repo_files(three)


def test_lost_commit_response_is_not_committed_twice(
    hub: HubServer, repo_id: str, three: Path
) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", LOST_RESPONSE, times=1)
    code, report, stderr = upload(three, "--repo", repo_id)
    assert code == 0, stderr
    assert all(b["outcome"] == "published" for b in report["bundles"])
    # No commit of this run is known to hold them: the report says where they were found.
    head = hub.commits(repo_id)[0].oid
    assert report["commits"] == []
    assert {b["detail"] for b in report["bundles"]} == {
        f"found on the Hub at {head[:12]} when the commit was planned again "
        "(a commit whose answer was lost, or an identical upload)"
    }
    assert commit_posts(hub, repo_id) == 1
    assert len(hub.commits(repo_id)) == 2  # initial + exactly one bundle commit
    assert hub_bundle_files(hub, repo_id) == repo_files(three)


def test_lost_response_when_opening_a_pull_request_opens_only_one(
    hub: HubServer, repo_id: str, three: Path
) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", LOST_RESPONSE, times=1)
    code, report, stderr = upload(three, "--repo", repo_id, "--create-pr")
    assert code == 0, stderr
    assert len(hub.pull_requests(repo_id)) == 1
    assert report["pull_request_url"].endswith("/discussions/1")
    assert hub_bundle_files(hub, repo_id, "refs/pr/1") == repo_files(three)


def test_persistent_outage_reports_what_was_not_published(
    hub: HubServer, repo_id: str, three: Path
) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", Fault.status(503), times=50)
    options = UploadOptions(
        repo_id=repo_id, token=WRITE_TOKEN, commit_attempts=3, retry_wait_seconds=0.05
    )
    report = upload_library(three, options)
    assert report.exit_code == 75  # temporary: the scheduler retries later
    assert [b.outcome for b in report.bundles] == ["failed"] * 3
    assert all(b.temporary for b in report.bundles)
    assert all("after 3 attempts" in (b.detail or "") for b in report.bundles)
    assert all("503" in (b.detail or "") for b in report.bundles)
    assert hub_bundle_files(hub, repo_id) == {}
    hub.clear_faults()
    # The next run (e.g. tomorrow's nightly) resumes and publishes everything.
    assert upload(three, "--repo", repo_id)[0] == 0
    assert hub_bundle_files(hub, repo_id) == repo_files(three)


def test_rate_limited_on_everything_says_when_to_retry(
    hub: HubServer, repo_id: str, three: Path
) -> None:
    hub.create_repo(repo_id)
    hub.inject("GET", rf"/api/datasets/{repo_id}", Fault.status(429, retry_after=1), times=20)
    result = run_cli("upload", three, "--repo", repo_id, env={"HF_TOKEN": WRITE_TOKEN})
    assert result.returncode == 75  # temporary: retry later
    assert "rate limit" in result.stderr and "try again in 1 s" in result.stderr
    assert WRITE_TOKEN not in result.stderr


@pytest.mark.parametrize("retry_after", ["inf", "1e12"])
def test_a_hostile_retry_after_ends_with_one_line_and_exit_75(
    hub: HubServer, repo_id: str, three: Path, retry_after: str
) -> None:
    """The real client, answered `Retry-After: inf` (or 1e12) by a server: a wait no command
    makes, said in one line, exit 75; never an internal error."""
    hub.create_repo(repo_id)
    fault = Fault.status(429, retry_after=retry_after)
    hub.inject("GET", rf"/api/datasets/{repo_id}", fault, times=20)
    result = run_cli("upload", three, "--repo", repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert result.returncode == 75, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "announced no reset this command can wait for" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 75


def test_a_hub_outage_while_planning_keeps_the_refused_bundles_in_the_report(
    hub: HubServer, repo_id: str, three: Path
) -> None:
    """A corrupt bundle is refused before the Hub is asked anything; the Hub then fails for
    good while the upload reads what it holds. The refusal is what a person must see (exit 1
    wins over 75), and the report still lists it beside the outage."""
    hub.create_repo(repo_id)
    victim = sorted(three.rglob("*.tar.zst"))[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    hub.inject("GET", rf"{repo_id}/tree/", Fault.status(503), times=50)
    code, report, stderr = upload(three, "--repo", repo_id)
    assert code == 1, stderr
    assert [(b["outcome"], b["detail"].split(":")[0]) for b in report["bundles"]] == [
        ("refused", str(victim))
    ]
    assert "listing the top folder" in report["error"] and "503" in report["error"]
    assert report["error_temporary"] is True and report["hint"]
    assert "refused" in stderr and "503" in stderr and "hint:" in stderr
    assert hub_bundle_files(hub, repo_id) == {}


def test_a_lost_response_then_an_unreadable_hub_costs_attempts_not_the_upload(
    hub: HubServer, repo_id: str, three: Path
) -> None:
    """The commit lands but its answer is lost; reading the branch to re-plan then fails
    for a while. That must cost commit attempts, not end the upload with every bundle said
    to have failed while they are all on the Hub."""
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", LOST_RESPONSE, times=1)
    revision = rf"/api/datasets/{repo_id}/revision/main$"
    hub.inject("GET", revision, Fault.status(503), times=6, after=1)  # after the first plan
    options = UploadOptions(
        repo_id=repo_id, token=WRITE_TOKEN, commit_attempts=4, retry_wait_seconds=0.01
    )
    report = upload_library(three, options)
    assert report.exit_code == 0, report
    assert [b.outcome for b in report.bundles] == ["published"] * 3
    assert commit_posts(hub, repo_id) == 1
    assert hub_bundle_files(hub, repo_id) == repo_files(three)
