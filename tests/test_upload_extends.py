"""Resumed runs, exit codes a scheduler can act on, and upload progress in bytes.

A run that was partial last night and is complete tonight has the same bundle id and more rows:
it EXTENDS its bundle on the Hub without --replace, as long as nothing else changed. Anything
else under the same id is still a conflict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, write_tree
from hubserver import Fault, HubServer
from test_upload import make_bundles, publish, repo_files, upload

from bundler.hub.publish.upload import UploadOptions
from bundler.hub.publish.upload import upload as upload_library
from bundler.hub.repo.paths import repo_archive
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import BundleId, id_of_local_archive

LAST_NIGHT = RunSpec(rows=3)


def partial_bundles(root: Path, spec: RunSpec, expected: int = 5) -> Path:
    write_tree(root / "output", [spec])
    bundles = root / "bundles"
    options = CollectOptions(expected_rows={spec.task: expected}, allow_partial=True)
    assert not collect(root / "output", bundles, options).refused
    return bundles


def remote_archive(hub: HubServer, repo_id: str, bundles: Path) -> tuple[bytes | None, bytes]:
    archive = next(bundles.rglob("*.tar.zst"))
    return hub.file_bytes(repo_id, repo_archive(id_of_local_archive(archive))), archive.read_bytes()


@pytest.fixture
def last_night(repo_id: str, tmp_path: Path) -> Path:
    bundles = partial_bundles(tmp_path / "night1", LAST_NIGHT)
    publish(bundles, repo_id, allow_partial=True)
    return bundles


def test_a_resumed_run_in_a_later_batch_still_extends_its_bundle(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The commits after the first are planned on our own commit, which touched only its own
    bundles: what the Hub held of the others is what planning read, so a resumed run in the
    second batch extends its bundle (it was once refused as changed "meanwhile")."""
    last_night = partial_bundles(tmp_path / "night1", RunSpec(model="zz", task="tz", rows=3))
    publish(last_night, repo_id, allow_partial=True)
    new = [RunSpec(task=f"task{i:02d}", model="m", rows=1) for i in range(40)]
    tonight = make_bundles(tmp_path / "night2", [*new, RunSpec(model="zz", task="tz", rows=5)])
    code, report, stderr = upload(tonight, "--repo", repo_id)
    assert code == 0, stderr
    assert len(report["commits"]) == 2
    (resumed,) = [b for b in report["bundles"] if b["bundle_id"].startswith("zz_")]
    assert (resumed["action"], resumed["outcome"]) == ("extends", "published")
    (archive,) = tonight.glob("zz_*/*.tar.zst")
    path = repo_archive(BundleId.parse(resumed["bundle_id"]))
    assert hub.file_bytes(repo_id, path) == archive.read_bytes()


def test_resumed_run_extends_its_bundle_without_replace(
    hub: HubServer, repo_id: str, last_night: Path, tmp_path: Path
) -> None:
    tonight = make_bundles(tmp_path / "night2", [RunSpec(rows=5)])
    code, report, stderr = upload(tonight, "--repo", repo_id)
    assert code == 0, stderr
    (bundle,) = report["bundles"]
    assert bundle["action"] == "extends" and bundle["outcome"] == "published"
    assert "3 -> 5 rows" in bundle["detail"]
    old_sha = json.loads(next(last_night.rglob("*.json")).read_text())["archive"]["sha256"]
    assert bundle["branch_sha256"] == old_sha
    held, local = remote_archive(hub, repo_id, tonight)
    assert held == local
    latest = hub.commits(repo_id)[0]
    assert latest.summary.startswith("Extend 1 statics bundle(s)")
    assert f"extends {bundle['bundle_id']}" in latest.description
    assert "extends" in stderr


def test_extension_is_shown_in_dry_run_and_pr(
    hub: HubServer, repo_id: str, last_night: Path, tmp_path: Path
) -> None:
    tonight = make_bundles(tmp_path / "night2", [RunSpec(rows=5)])
    code, report, _ = upload(tonight, "--repo", repo_id, "--dry-run")
    assert code == 0 and report["bundles"][0]["action"] == "extends"
    code, report, stderr = upload(tonight, "--repo", repo_id, "--create-pr")
    assert code == 0, stderr
    assert report["bundles"][0]["outcome"] == "proposed"
    (pr,) = hub.pull_requests(repo_id)
    assert pr.title.startswith("Extend 1 GPTNT statics bundle(s)") and "REPLACES" not in pr.title
    assert "| extends |" in pr.description
    assert "Every prediction of the bundle on the base branch is in this one" in pr.description
    assert "`coverage.rows_present`: 3 → 5" in pr.description


@pytest.mark.parametrize(
    ("tonight", "reason"),
    [
        (RunSpec(rows=5, seed=99), "prediction(s) of the Hub's copy are missing or different"),
        (RunSpec(rows=5, run_date="2026-06-16T01:00:00Z"), "differs in run_date"),
        (RunSpec(rows=5, gptnt_version="1.5.0"), "differs in provenance.gptnt_version"),
        (RunSpec(rows=2, indices=[0, 1]), "it has 2 rows, the Hub's copy 3"),
    ],
    ids=["changed-prediction", "other-run-date", "other-harness", "fewer-rows"],
)
def test_anything_but_an_extension_is_a_conflict(
    hub: HubServer, repo_id: str, last_night: Path, tmp_path: Path, tonight: RunSpec, reason: str
) -> None:
    bundles = partial_bundles(tmp_path / "night2", tonight)
    code, report, stderr = upload(bundles, "--repo", repo_id, "--allow-partial")
    assert code == 1, stderr
    (bundle,) = report["bundles"]
    assert bundle["action"] == "conflict" and bundle["outcome"] == "refused"
    assert reason in bundle["detail"] and "--replace" in bundle["detail"]
    held, local = remote_archive(hub, repo_id, bundles)
    assert held != local
    # every claim that differs is named, the counts and coverage a resumed run may change too
    if tonight.run_date != LAST_NIGHT.run_date:
        assert "coverage.rows_present" in bundle["detail"], bundle["detail"]
        assert "predictions.count" in bundle["detail"], bundle["detail"]


def test_a_conflict_names_every_value_that_differs_metrics_included(
    hub: HubServer, repo_id: str, last_night: Path, tmp_path: Path
) -> None:
    """A re-run whose score moved must not read as a change of date alone: the conflict names
    each claim and each metric that differs, the Hub's value first, so that nobody passes
    --replace believing only the date moved."""
    metrics = {"module": {"total": 0.5}}
    tonight = RunSpec(rows=3, run_date="2026-06-16T01:00:00Z", metrics=metrics)
    bundles = partial_bundles(tmp_path / "night2", tonight)
    code, report, stderr = upload(bundles, "--repo", repo_id, "--allow-partial")
    assert code == 1, stderr
    (bundle,) = report["bundles"]
    assert bundle["action"] == "conflict"
    detail = bundle["detail"]
    assert f"run_date {LAST_NIGHT.run_date} -> 2026-06-16T01:00:00Z" in detail, detail
    assert "; its metrics differ: exact_match.accuracy 0.62 -> absent" in detail, detail
    assert "module.total absent -> 0.5" in detail, detail


def test_tampered_hub_copy_is_not_extended(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    """The Hub's old archive is verified before its predictions are trusted."""
    night1 = partial_bundles(tmp_path / "night1", LAST_NIGHT)
    files = repo_files(night1)
    archive = next(path for path in files if path.endswith(".tar.zst"))
    forged = bytearray(files[archive])
    forged[len(forged) // 2] ^= 0xFF
    hub.create_repo(repo_id, files={**files, archive: bytes(forged)})
    tonight = make_bundles(tmp_path / "night2", [RunSpec(rows=5)])
    code, report, _ = upload(tonight, "--repo", repo_id)
    assert code == 1
    assert "fails verification" in report["bundles"][0]["detail"]


def test_hub_unavailable_exits_75_and_publishes_nothing(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    bundles = make_bundles(tmp_path, [RunSpec(rows=2)])
    hub.create_repo(repo_id)
    hub.inject("GET", rf"{repo_id}/tree/", Fault.status(503), times=50)
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 75, stderr
    assert report["exit_code"] == 75 and "did not answer properly" in report["error"]
    assert hub.list_files(repo_id) == [".gitattributes"]


def test_refused_bundle_and_outage_together_exit_1(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    bundles = make_bundles(tmp_path, [RunSpec(task="alpha", rows=2), RunSpec(task="beta", rows=2)])
    victim = sorted(bundles.rglob("*.tar.zst"))[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", Fault.status(503), times=50)
    options = UploadOptions(
        repo_id=repo_id, token=WRITE_TOKEN, commit_attempts=2, retry_wait_seconds=0.01
    )
    report = upload_library(bundles, options)
    assert sorted(b.outcome for b in report.bundles) == ["failed", "refused"]
    assert report.exit_code == 1  # a person must look: that wins over "retry later"


class Recorder:
    def __init__(self) -> None:
        self.units: list[tuple[str, int | None, str]] = []
        self.advanced: list[int] = []

    def begin(self, label: str, total: int | None, *, unit: str = "items") -> None:
        self.units.append((label, total, unit))
        self.advanced.clear()

    def advance(self, steps: int = 1) -> None:
        self.advanced.append(steps)


def test_upload_progress_counts_archive_bytes(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    bundles = make_bundles(tmp_path, [RunSpec(task=f"t{i}", rows=2) for i in range(3)])
    sizes = sorted(path.stat().st_size for path in bundles.rglob("*.tar.zst"))
    progress = Recorder()
    report = upload_library(bundles, UploadOptions(repo_id=repo_id, token=WRITE_TOKEN), progress)
    assert report.exit_code == 0
    label, total, unit = progress.units[-1]
    assert unit == "bytes" and total == sum(sizes) and "uploading" in label
    assert sorted(progress.advanced) == sizes
