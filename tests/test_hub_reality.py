"""The bundler on the Hub as it behaves (issue 17): permissions checked before anything is
transferred, rate limits waited out within --max-wait or reported with when they reset, a
card the Hub refuses never blocking the bundles, and an endpoint without Xet named as such.

The test Hub's 429s carry the Hub's own headers (`RateLimit: "api";r=0;t=N` and
`RateLimit-Policy`, no Retry-After: `Fault.rate_limited`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import READ_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import BUNDLER, run_cli
from hubserver import Fault, HubServer, client_env
from test_upload import make_bundles, upload

from bundler.hub.repo.paths import README


@pytest.fixture
def bundles(tmp_path: Path) -> Path:
    return make_bundles(tmp_path, [RunSpec(task="alpha", rows=2)])


def posts(hub: HubServer, repo_id: str, what: str) -> int:
    return sum(1 for r in hub.request_log if f"{repo_id}/{what}/" in r.path)


# ----------------------------------------------------------------------------- permissions


def test_no_write_access_without_create_pr_is_one_line_before_any_transfer(
    hub: HubServer, bundles: Path
) -> None:
    repo_id = f"someone-else/board-{uuid.uuid4().hex[:8]}"
    hub.create_repo(repo_id)
    expected = f"no write access to {repo_id}, add --create-pr to propose the bundles"
    for dry_run in ([], ["--dry-run"]):
        before = len(hub.request_log)
        code, report, stderr = upload(bundles, "--repo", repo_id, *dry_run)
        assert code == 2 and report["error"] == expected, stderr
        assert expected in stderr and WRITE_TOKEN not in stderr
        sent = hub.request_log[before:]
        assert not [r for r in sent if "/preupload/" in r.path or "/paths-info/" in r.path]
    code, report, stderr = upload(bundles, "--repo", repo_id, "--create-pr")
    assert code == 0, stderr
    assert [b["outcome"] for b in report["bundles"]] == ["proposed"]


def test_an_upload_never_creates_the_leaderboards_repository(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    """Neither a submitter's pull request nor a maintainer's upload creates a repository (only
    `bundler init` does), dry run or not: one line naming init, exit 2, nothing created."""
    missing = f"{repo_id}-missing"
    for token, flags in ((SUBMITTER_TOKEN, ["--create-pr"]), (WRITE_TOKEN, [])):
        for dry_run in ([], ["--dry-run"]):
            code, _, stderr = upload(bundles, "--repo", missing, *flags, *dry_run, token=token)
            assert code == 2 and f"bundler init --repo {missing}" in stderr
    assert not [r for r in hub.request_log if r.path == "/api/repos/create" and missing in r.query]
    with pytest.raises(LookupError):
        hub.commits(missing)


def test_merge_and_card_need_write_access_checked_first(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    assert upload(bundles, "--repo", repo_id)[0] == 0
    before = len(hub.request_log)
    merge = run_cli("review", "--repo", repo_id, "--merge", env={"HF_TOKEN": SUBMITTER_TOKEN})
    assert merge.returncode == 2 and "--merge needs write access" in merge.stderr
    assert not [r for r in hub.request_log[before:] if "/discussions" in r.path]
    comment = run_cli("review", "--repo", repo_id, "--comment", env={"HF_TOKEN": READ_TOKEN})
    assert comment.returncode == 2 and READ_TOKEN not in comment.stderr
    card = run_cli("card", "--repo", repo_id, env={"HF_TOKEN": SUBMITTER_TOKEN})
    assert card.returncode == 2 and "dataset card needs write access" in card.stderr
    assert not [r for r in hub.request_log[before:] if "/paths-info/" in r.path]


# ----------------------------------------------------------------------------- rate limits


def test_a_short_rate_limit_is_waited_out_and_said(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    hub.create_repo(repo_id)
    hub.inject("GET", r"/tree/", Fault.rate_limited(reset=1))
    hub.inject("POST", r"/commit/", Fault.rate_limited(reset=1, resource="api"))
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 0, stderr
    assert [b["outcome"] for b in report["bundles"]] == ["published"]
    waits = [w for w in report["warnings"] if "rate limit to reset" in w]
    assert len(waits) == 2 and all("waited 1 s for the Hub's api rate limit" in w for w in waits)


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", r"/tree/"), ("POST", r"/preupload/"), ("POST", r"/commit/")],
    ids=["api-call", "client-retried-preupload", "commit-quota"],
)
def test_a_long_rate_limit_ends_the_upload_with_75_without_waiting(
    hub: HubServer, repo_id: str, bundles: Path, method: str, path: str
) -> None:
    hub.create_repo(repo_id)
    hub.inject(method, path, Fault.rate_limited(reset=840), times=10)
    started = time.monotonic()
    code, _, stderr = upload(bundles, "--repo", repo_id)
    assert time.monotonic() - started < 60  # not the client's 5 x 841 s
    assert code == 75, stderr
    assert "rate limit resets in 840 s (at " in stderr and " UTC)" in stderr
    assert sum(1 for r in hub.request_log if r.fault and repo_id in r.path) == 1
    assert len(hub.commits(repo_id)) == 1  # only the repository's first commit: nothing landed


def test_max_wait_bounds_the_wait(hub: HubServer, repo_id: str, bundles: Path) -> None:
    hub.create_repo(repo_id)
    hub.inject("GET", r"/tree/", Fault.rate_limited(reset=5))
    code, _, stderr = upload(bundles, "--repo", repo_id, "--max-wait", "1")
    assert code == 75 and "resets in 5 s" in stderr and "--max-wait" in stderr


def test_a_long_rate_limit_on_file_reads_ends_a_download_with_75(
    hub: HubServer, repo_id: str, bundles: Path, tmp_path: Path
) -> None:
    assert upload(bundles, "--repo", repo_id)[0] == 0
    hub.inject("*", r"/resolve/", Fault.rate_limited(reset=900, resource="resolvers"), times=10)
    started = time.monotonic()
    result = run_cli("download", "--repo", repo_id, "-o", tmp_path / "dl")
    assert time.monotonic() - started < 60
    assert result.returncode == 75, result.stderr
    assert "the Hub's resolvers rate limit resets in 900 s" in result.stderr
    assert sum(1 for r in hub.request_log if r.fault and repo_id in r.path) == 1


# ----------------------------------------------------------------------------- the card


@pytest.mark.parametrize("status", [400, 413])
def test_a_refused_card_never_blocks_the_bundles(
    hub: HubServer, repo_id: str, bundles: Path, status: int
) -> None:
    hub.create_repo(repo_id)
    hub.inject("POST", r"/api/validate-yaml", Fault.status(status))
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 1, stderr
    assert [b["outcome"] for b in report["bundles"]] == ["published"]
    assert report["card_refused"] and "bundler card" in report["card_refused"]
    assert report["error"].startswith("the dataset card was left out: ")  # said at the top
    assert report["error_kind"] == "card-refused" and "bundler card" in report["hint"]
    assert README not in hub.list_files(repo_id)
    assert (
        len(report["commits"]) == 1 and posts(hub, repo_id, "commit") == 1
    )  # validate-yaml refused it first
    retried = run_cli("card", "--repo", repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["changed"] is True and README in hub.list_files(repo_id)


# ----------------------------------------------------------------------------- Xet


def test_an_endpoint_without_xet_is_one_line_naming_the_switch(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    """huggingface_hub with hf-xet installed asks for a Xet write token, which this server (as
    any Hub-compatible server without Xet) answers 404: one line, exit 2, not retried."""
    env = {**os.environ, **client_env(hub, WRITE_TOKEN)}
    del env["HF_HUB_DISABLE_XET"]
    result = subprocess.run(
        [str(BUNDLER), "upload", str(bundles), "--repo", repo_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    (line, *hint) = result.stderr.strip().splitlines()
    assert "offers no Xet storage" in line and "HF_HUB_DISABLE_XET=1" in " ".join(hint)
    assert "Traceback" not in result.stderr and WRITE_TOKEN not in result.stderr
    assert sum(1 for r in hub.request_log if f"{repo_id}/xet-write-token/" in r.path) == 1
