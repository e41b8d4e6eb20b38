"""`bundler sync` end to end (the installed CLI against the local Hub server), and the exit
codes every command shares, 75 for a Hub that stays unavailable included."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, write_run, write_tree
from helpers import one_line_error, probe_console_script, run_cli
from hubserver import Fault, HubServer
from test_upload import commit_posts, hub_bundle_files, repo_files, table_rows

from bundler.core import exitcodes
from bundler.core.errors import Terminated
from bundler.core.progress import NoProgress
from bundler.hub.publish.upload import UploadOptions
from bundler.local.collect import CollectOptions
from bundler.sync import SyncOptions
from bundler.sync import sync as sync_library

SPECS = [
    RunSpec(task="expert-vqa", model="gpt-5.2", rows=4),
    RunSpec(task="maze", model="claude-opus", rows=3),
]
EXPECT = ("--expect", "expert-vqa=4", "--expect", "maze=3")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "output"
    write_tree(root, SPECS)
    return root


def sync(root: Path, bundles: Path, repo_id: str, *args: object) -> tuple[int, dict[str, Any], str]:
    result = run_cli(
        "sync",
        root,
        "-o",
        bundles,
        "--repo",
        repo_id,
        *EXPECT,
        *args,
        "--json",
        env={"HF_TOKEN": WRITE_TOKEN},
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert WRITE_TOKEN not in result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def test_sync_collects_and_publishes_then_rerun_changes_nothing(
    hub: HubServer, repo_id: str, tree: Path, tmp_path: Path
) -> None:
    bundles, report_file = tmp_path / "bundles", tmp_path / "reports" / "sync.json"
    code, report, stderr = sync(tree, bundles, repo_id, "--report", report_file)
    assert code == 0, stderr
    assert report["exit_code"] == 0 and report["error"] is None
    assert report["counts"] == {
        "runs_bundled": 2,
        "runs_refused": 0,
        "runs_skipped": 1,  # how_do_you/
        "bundles_written": 2,
        "published": 2,
        "proposed": 0,
        "already_there": 0,
        "held_back": 0,
        "planned": 0,
        "refused": 0,
        "failed": 0,
        "commits": 1,
    }
    assert [(b["collected"], b["action"], b["outcome"]) for b in report["bundles"]] == [
        ("written", "new", "published")
    ] * 2
    assert report["commits"] == [hub.commits(repo_id)[0].oid]
    assert hub_bundle_files(hub, repo_id) == repo_files(bundles)
    assert "sync: 2 run(s) bundled, 0 refused; 2 bundle(s) published" in stderr

    # --report: the same JSON as --json, with times, counts, outcomes and commits.
    written = json.loads(report_file.read_text())
    assert written == report
    started = datetime.fromisoformat(written["started_at"])
    finished = datetime.fromisoformat(written["finished_at"])
    assert started.tzinfo is not None and started <= finished
    assert written["collect"]["bundles"] and written["upload"]["bundles"]
    assert [path.name for path in report_file.parent.iterdir()] == ["sync.json"]  # no temp left

    # Re-run with nothing new: exit 0, no commit, nothing uploaded.
    commits, posts = len(hub.commits(repo_id)), commit_posts(hub, repo_id)
    code, report, stderr = sync(tree, bundles, repo_id, "--report", report_file)
    assert code == 0, stderr
    assert [(b["collected"], b["outcome"]) for b in report["bundles"]] == [
        ("unchanged", "already-there")
    ] * 2
    assert report["commits"] == [] and report["counts"]["bundles_written"] == 0
    assert len(hub.commits(repo_id)) == commits and commit_posts(hub, repo_id) == posts
    assert json.loads(report_file.read_text())["counts"]["already_there"] == 2


def test_a_refused_run_still_lets_the_good_bundles_through_and_exits_1(
    hub: HubServer, repo_id: str, tree: Path, tmp_path: Path
) -> None:
    broken = write_run(tree, RunSpec(task="wires", model="broken", rows=2))
    (broken / "run_meta.json").write_text("{")
    bundles = tmp_path / "bundles"
    code, report, stderr = sync(tree, bundles, repo_id)
    assert code == 1, stderr
    assert report["counts"]["runs_refused"] == 1 and report["counts"]["published"] == 2
    assert report["collect"]["refused"][0]["path"] == str(broken)
    assert f"refused {broken / 'run_meta.json'}: not valid JSON" in stderr
    assert hub_bundle_files(hub, repo_id) == repo_files(bundles)


def test_every_run_refused_skips_the_upload_and_exits_1(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    root = tmp_path / "output"
    broken = write_run(root, RunSpec(rows=2))
    (broken / "metrics.json").unlink()
    code, report, stderr = sync(root, tmp_path / "bundles", repo_id)
    assert code == 1, stderr
    assert report["upload"] is None and "every selected run was refused" in report["upload_skipped"]
    assert hub.list_files(repo_id) == [".gitattributes"]  # the Hub was not touched


def test_hub_unavailable_exits_75_with_nothing_published_and_the_report_written(
    hub: HubServer, repo_id: str, tree: Path, tmp_path: Path
) -> None:
    hub.inject("*", r"/api/", Fault.status(503), times=1000)
    bundles, report_file = tmp_path / "bundles", tmp_path / "sync.json"
    code, report, stderr = sync(tree, bundles, repo_id, "--report", report_file)
    assert code == 75, stderr
    assert report["exit_code"] == 75 and "503" in report["error"]
    assert "503" in one_line_error(stderr)
    assert json.loads(report_file.read_text()) == report
    assert report["counts"]["runs_bundled"] == 2 and report["counts"]["published"] == 0
    assert hub.list_files(repo_id) == [".gitattributes"]  # nothing half-published
    hub.clear_faults()
    # Retried later, the same command publishes everything.
    code, report, stderr = sync(tree, bundles, repo_id)
    assert code == 0, stderr
    assert hub_bundle_files(hub, repo_id) == repo_files(bundles)


def test_sync_dry_run_collects_and_only_plans(
    hub: HubServer, repo_id: str, tree: Path, tmp_path: Path
) -> None:
    before = len(hub.request_log)
    code, report, stderr = sync(tree, tmp_path / "bundles", repo_id, "--dry-run")
    assert code == 0, stderr
    assert report["dry_run"] is True and report["counts"]["planned"] == 2
    sent = [r for r in hub.request_log[before:] if "/commit/" in r.path or r.method == "PUT"]
    assert sent == []


def test_sync_with_create_pr_counts_the_bundles_it_proposes(
    hub: HubServer, repo_id: str, tree: Path, tmp_path: Path
) -> None:
    hub.create_repo(repo_id)  # a pull request is never what creates the repository
    code, report, stderr = sync(tree, tmp_path / "bundles", repo_id, "--create-pr")
    assert code == 0, stderr
    assert report["pull_request_url"] is not None
    assert (report["counts"]["proposed"], report["counts"]["published"]) == (2, 0)
    number = report["pull_request_url"].rstrip("/").rsplit("/", 1)[-1]
    assert f"2 bundle(s) proposed in PR #{number}," in stderr
    assert "published" not in stderr.splitlines()[-1]


def test_sync_unusable_token_exits_2(repo_id: str, tree: Path, tmp_path: Path) -> None:
    bad = "hf_NotAValidTokenAtAll0123456789xyz"
    result = run_cli(
        "sync",
        tree,
        "-o",
        tmp_path / "bundles",
        "--repo",
        repo_id,
        "--token",
        bad,
        "--json",
        env={"HF_TOKEN": ""},
    )
    assert result.returncode == 2
    assert "credentials" in one_line_error(result.stderr)
    assert bad not in result.stdout + result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2


def test_download_exits_75_when_the_hub_stays_unavailable(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    hub.create_repo(repo_id)
    hub.inject("*", r"/api/", Fault.status(503), times=1000)
    result = run_cli("download", "--repo", repo_id, "-o", tmp_path / "dl", "--json")
    assert result.returncode == 75
    assert json.loads(result.stdout)["exit_code"] == 75
    assert "503" in one_line_error(result.stderr)


@pytest.mark.parametrize(
    ("codes", "combined"),
    [
        ((), 0),
        ((0, 0), 0),
        ((0, 75), 75),
        ((1, 75), 1),  # a refusal does not go away on retry: a person must look
        ((75, 2, 1), 2),
        ((0, 3), 1),  # anything outside the table asks a person to look
    ],
)
def test_exit_codes_combine_by_what_they_ask_of_a_person(
    codes: tuple[int, ...], combined: int
) -> None:
    assert exitcodes.combine(*codes) == combined


def test_the_report_file_is_written_when_a_file_name_is_not_utf8(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A name the report quotes has a byte that is not UTF-8 (a lone surrogate in Python),
    which UTF-8 cannot encode: the report file must still be written, showing it as \\xNN."""
    root = tmp_path / "output"
    broken = write_run(root, RunSpec(rows=2))
    os.rename(broken / "prediction_1.json", os.fsencode(broken) + b"/prediction_1\xff.json")
    report_file = tmp_path / "reports" / "sync.json"
    code, report, stderr = sync(root, tmp_path / "bundles", repo_id, "--report", report_file)
    assert code == 1, stderr
    written = json.loads(report_file.read_text(encoding="utf-8"))
    assert written["collect"]["refused"] == report["collect"]["refused"]
    assert "prediction_1\\xff.json" in written["collect"]["refused"][0]["error"]
    assert report_file.read_bytes().isascii()  # like --json


class StopOnFirstBundle(NoProgress):
    """A progress sink that raises what a stop signal's handler raises, at the first bundle."""

    def __init__(self, stop: BaseException) -> None:
        self.stop = stop

    def begin(self, label: str, total: int | None, *, unit: str = "items") -> None:
        raise self.stop


@pytest.mark.parametrize(
    ("stop", "code", "name"), [(Terminated(), 143, "SIGTERM"), (KeyboardInterrupt(), 130, "SIGINT")]
)
def test_an_interrupted_sync_still_writes_its_report(
    repo_id: str, tree: Path, tmp_path: Path, stop: BaseException, code: int, name: str
) -> None:
    """A CI timeout (SIGTERM) in the middle of a sync: the report file must say so, not keep
    the previous night's."""
    report_file = tmp_path / "reports" / "sync.json"
    report_file.parent.mkdir()
    report_file.write_text('{"exit_code": 0, "note": "last night"}')
    options = SyncOptions(
        collect=CollectOptions(expected_rows={"expert-vqa": 4, "maze": 3}),
        upload=UploadOptions(repo_id=repo_id, token=WRITE_TOKEN),
        report_path=report_file,
    )
    with pytest.raises(type(stop)):
        sync_library(tree, tmp_path / "bundles", options, StopOnFirstBundle(stop))
    written = json.loads(report_file.read_text())
    assert written["exit_code"] == code
    assert written["error"] == f"interrupted by {name}; nothing partial was left behind"


def test_a_report_path_that_cannot_be_written_leaves_the_report_on_stdout(
    hub: HubServer, repo_id: str, tree: Path, tmp_path: Path
) -> None:
    """The work still goes through and the report still reaches stdout; the exit code asks
    for --report to be fixed (2), the same command failing the same way."""
    code, report, stderr = sync(tree, tmp_path / "bundles", repo_id, "--report", tmp_path)
    assert code == 2, stderr
    assert report["counts"]["published"] == 2
    assert f"{tmp_path}: cannot write" in report["report_path_error"]
    assert "cannot write" in stderr


def test_unusable_options_still_write_the_report(repo_id: str, tree: Path, tmp_path: Path) -> None:
    """The README promises a report whatever the outcome: a bad --expect stops the sync before
    it starts, and the report file says why."""
    report_file = tmp_path / "sync.json"
    bad_expect = ["--expect", "expert-vqa=four", "--report", report_file]
    bundles = tmp_path / "bundles"
    env = {"HF_TOKEN": WRITE_TOKEN}
    result = run_cli("sync", tree, "-o", bundles, "--repo", repo_id, *bad_expect, env=env)
    assert result.returncode == 2, result.stderr
    written = json.loads(report_file.read_text())
    assert written["exit_code"] == 2 and "--expect 'expert-vqa=four'" in written["error"]
    assert written["repo_id"] == repo_id and written["collect"] is None


def test_the_report_file_is_ascii_whatever_the_names(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from bundler.sync import SyncReport, write_report

    hostile = "out\u202eput-\u200bé"
    report = SyncReport(
        output_root=str(tmp_path / hostile),
        bundles_dir=str(tmp_path / "bundles"),
        repo_id="org/board",
        revision="main",
        dry_run=True,
        started_at=datetime.now(UTC),
        error=f"cannot read {hostile}",
    )
    write_report(report, tmp_path / "report.json")
    data = (tmp_path / "report.json").read_bytes()
    assert data.isascii() and "\\u202e" in data.decode()
    assert json.loads(data)["error"] == f"cannot read {hostile}"


def test_an_output_root_without_runs_still_uploads_the_bundles_there(
    repo_id: str, tree: Path, tmp_path: Path
) -> None:
    bundles = tmp_path / "bundles"
    code, _, stderr = sync(tree, bundles, repo_id)
    assert code == 0, stderr
    empty = tmp_path / "empty-output"
    (empty / "how_do_you").mkdir(parents=True)
    code, report, stderr = sync(empty, bundles, repo_id)
    assert code == 0, stderr
    assert "nothing to do" in " ".join(report["collect"]["warnings"])
    assert report["counts"]["already_there"] == 2  # the upload still ran


def test_the_sync_command_forks_its_helpers(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    """The console script is one thread, so sync may fork (bundler.core.forked): collect
    bundles its runs (well past FORK_WEIGHT) half in a child, and upload verifies in another
    while the Hub client loads. The client and pyarrow, which starts native threads, are loaded
    only after the last fork. (A library caller forks nothing; the runs of a tree that was
    large last time are found in a child too: test_discoverahead.py.)"""
    root = tmp_path / "out"
    runs = 300
    specs = [RunSpec(model=f"org/model-{number:03d}", rows=1) for number in range(runs)]
    write_tree(root, specs, how_do_you=False)
    code, state = probe_console_script(
        tmp_path,
        "sync",
        root,
        "-o",
        tmp_path / "b",
        "--repo",
        repo_id,
        "--expect",
        "expert-vqa=1",
        env={"HF_TOKEN": WRITE_TOKEN},
    )
    assert code == 0
    assert state["forks"] == 2
    assert state["loaded_at_forks"] == [[], []]
    assert len(table_rows(hub, repo_id)) == runs


def test_a_nightly_sync_verifies_the_folder_as_collect_left_it(
    repo_id: str, tmp_path: Path
) -> None:
    """Upload verifies the folder after collect is done with it, in one child each night: a
    sidecar collect wrote again is what the child sees, and a folder the verify cache vouches
    for whole (collect found nothing new) is gathered from the cache alone, in the child too."""
    root, bundles = tmp_path / "out", tmp_path / "b"
    write_tree(root, [RunSpec(model=f"org/model-{n}", rows=1) for n in range(3)], how_do_you=False)

    def nightly() -> tuple[int, dict[str, Any], dict[str, Any]]:
        args = ("sync", root, "-o", bundles, "--repo", repo_id, "--expect", "expert-vqa=1")
        report = tmp_path / "report.json"
        env = {"HF_TOKEN": WRITE_TOKEN}
        code, state = probe_console_script(tmp_path, *args, "--report", report, env=env)
        return code, state, json.loads(report.read_text())

    code, state, report = nightly()
    assert code == 0 and report["counts"]["published"] == 3
    assert state["forks"] == 1  # the upload's verifying child; three runs bundle in line
    code, state, report = nightly()
    assert code == 0 and report["counts"]["already_there"] == 3
    assert state["forks"] == 1  # nothing to read: the child gathers from the verify cache
    (sidecar, *_) = sorted(bundles.rglob("*.json"))
    sidecar.unlink()  # collect writes it again: the folder is not what the child saw
    code, state, report = nightly()
    assert code == 0, report
    assert [b["collected"] for b in report["bundles"]].count("unchanged") == 3
    assert report["counts"]["already_there"] == 3 and report["counts"]["refused"] == 0
    assert state["forks"] == 1 and sidecar.is_file()
