"""One run at a time on a bundles folder: the installed CLI against a real lock holder (another
process holding the library's lock), including one killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import BUNDLER, all_files, cli_env, one_line_error, run_cli

from bundler.local.layout import LOCK_NAME, TEMP_PREFIX
from bundler.local.lock import read_holder

HOLDER = """
import sys
from pathlib import Path
from bundler.local.lock import bundles_lock
with bundles_lock(Path(sys.argv[1]), operation="sync"):
    print("held", flush=True)
    sys.stdin.read()  # hold until the test closes stdin (or kills this process)
"""


class Holder:
    """A separate process that holds the bundles folder's lock until released or killed."""

    def __init__(self, bundles: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(bundles)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "held"

    @property
    def pid(self) -> int:
        return self.process.pid

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "out"
    write_tree(root, [RunSpec(rows=3), RunSpec(model="claude-opus", rows=2)])
    return root


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Holder]:
    held = Holder(tmp_path / "bundles")
    yield held
    if held.process.poll() is None:
        held.kill()


def test_lock_name_is_hidden_and_never_a_temporary_file() -> None:
    # The clean-up of leftovers removes TEMP_PREFIX* names: the lock must never be one.
    assert LOCK_NAME.startswith(".")
    assert not LOCK_NAME.startswith(TEMP_PREFIX)


def test_collect_upload_and_sync_exit_75_naming_the_holder(
    tree: Path, tmp_path: Path, holder: Holder, repo_id: str
) -> None:
    bundles = tmp_path / "bundles"
    started = read_holder(bundles).started
    assert started is not None
    assert abs((datetime.now(UTC) - datetime.fromisoformat(started)).total_seconds()) < 60
    commands = {
        "collect": ["collect", tree, "-o", bundles],
        "upload": ["upload", bundles, "--repo", repo_id],
        "sync": ["sync", tree, "-o", bundles, "--repo", repo_id],
    }
    for name, args in commands.items():
        result = run_cli(*args, env={"HF_TOKEN": WRITE_TOKEN})
        assert result.returncode == 75, (name, result.stderr)
        line = one_line_error(result.stderr)
        assert f"pid {holder.pid}" in line, line
        assert f"since {started}" in line and "bundler sync" in line, line
        assert "--wait" in result.stderr
        json_result = run_cli(*args, "--json", env={"HF_TOKEN": WRITE_TOKEN})
        payload = json.loads(json_result.stdout)
        assert json_result.returncode == 75 and payload["exit_code"] == 75, name
        assert f"pid {holder.pid}" in payload["error"]
    assert all_files(bundles) == []  # nobody wrote anything beside the holder
    assert holder.process.poll() is None  # and the holder was left alone


def test_a_held_lock_hides_no_refusal_and_a_refusal_wins_over_75(
    tmp_path: Path, holder: Holder
) -> None:
    """A run refused before the lock was tried is reported, and exit 1 (a person must look)
    wins over 75 (README: 2, then 1, then 75); the good run is named as not bundled, and why."""
    root = tmp_path / "out"
    good, unfinished = write_tree(root, [RunSpec(rows=3), RunSpec(model="claude-opus", rows=2)])
    (unfinished / "run_meta.json").unlink()
    bundles = tmp_path / "bundles"
    result = run_cli("collect", root, "-o", bundles, "--json")
    assert result.returncode == 1, result.stderr
    payload = json.loads(result.stdout)
    assert payload["exit_code"] == 1
    assert [item["path"] for item in payload["refused"]] == [str(unfinished)]
    assert f"pid {holder.pid}" in payload["error"] and "--wait" in payload["hint"]
    reasons = {item["path"]: item["reason"] for item in payload["skipped"]}
    assert reasons[str(good)].startswith(f"not bundled: {bundles}: in use by pid {holder.pid}")
    assert "Traceback" not in result.stderr
    assert f"refused {unfinished / 'run_meta.json'}: missing" in result.stderr
    assert f"skipped {good}: not bundled: {bundles}: in use by pid {holder.pid}" in " ".join(
        result.stderr.split()
    )
    assert all_files(bundles) == []
    assert holder.process.poll() is None


def test_wait_waits_for_the_holder_then_proceeds(
    tree: Path, tmp_path: Path, holder: Holder
) -> None:
    bundles = tmp_path / "bundles"
    waiting = subprocess.Popen(
        [str(BUNDLER), "collect", str(tree), "-o", str(bundles), "--wait", "60", "--json"],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2.0)
    assert waiting.poll() is None, waiting.communicate()  # still waiting for the lock
    assert list(bundles.rglob("*.tar.zst")) == []
    holder.release()
    stdout, stderr = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, stderr
    assert len(json.loads(stdout)["bundles"]) == 2
    assert len(list(bundles.rglob("*.tar.zst"))) == 2


def test_wait_gives_up_after_the_time_given(tree: Path, tmp_path: Path, holder: Holder) -> None:
    began = time.monotonic()
    result = run_cli("collect", tree, "-o", tmp_path / "bundles", "--wait", "1.5")
    took = time.monotonic() - began
    assert result.returncode == 75
    assert "after waiting 1.5 s" in one_line_error(result.stderr)
    assert took >= 1.5


def test_a_lock_left_by_a_killed_holder_is_taken_over(
    tree: Path, tmp_path: Path, holder: Holder
) -> None:
    bundles = tmp_path / "bundles"
    holder.kill()  # SIGKILL: no clean-up ran, the lock file and its record stay behind
    lock_file = bundles / LOCK_NAME
    assert json.loads(lock_file.read_text())["pid"] == holder.pid
    process = subprocess.Popen(
        [str(BUNDLER), "collect", str(tree), "-o", str(bundles)],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert len(list(bundles.rglob("*.tar.zst"))) == 2
    record = json.loads(lock_file.read_text())
    assert record["pid"] == process.pid and record["operation"] == "collect"


def test_a_stale_record_does_not_name_a_dead_process(tmp_path: Path, holder: Holder) -> None:
    bundles = tmp_path / "bundles"
    holder.kill()
    # The record names a process of this host that no longer runs: not shown as the holder.
    assert read_holder(bundles).pid is None
    assert json.loads((bundles / LOCK_NAME).read_text())["pid"] == holder.pid


def test_upload_of_a_missing_folder_still_says_so(tmp_path: Path, repo_id: str) -> None:
    result = run_cli("upload", tmp_path / "nope", "--repo", repo_id)
    assert result.returncode == 2
    assert "nope" in one_line_error(result.stderr)
    assert not (tmp_path / "nope").exists()  # the lock did not create the folder
