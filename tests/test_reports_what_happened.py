"""Reports say what happened: `signers remove` of a name the allowed signers do not list exits 1
saying so, with no commit; a `sync` or `upload` that exits 1 carries `error` (what went wrong)
and `hint` (what to do) in its JSON report. End to end, against the test Hub server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, write_run, write_tree
from helpers import run_cli
from hubserver import HubServer
from test_review import World, make_world
from test_sign import make_key
from test_upload import make_bundles, upload

from bundler.hub.repo.paths import ALLOWED_SIGNERS


@pytest.fixture
def world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    return make_world(hub, repo_id, tmp_path)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
def test_removing_a_signer_the_file_does_not_list_exits_1_with_no_commit(
    world: World, tmp_path: Path
) -> None:
    def signers(*args: object) -> tuple[int, dict, str]:
        result = run_cli(
            "signers", *args, "--repo", world.repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN}
        )
        assert "Traceback" not in result.stderr
        return result.returncode, json.loads(result.stdout or "{}"), result.stderr

    code, report, stderr = signers("remove", "ada")  # no allowed_signers file at all
    assert code == 1 and report["error_kind"] == "unknown-signer", stderr
    assert "'ada' is not one of the allowed signers (it lists no one)" in report["error"]
    key = make_key(tmp_path, "ada")
    assert signers("add", "ada", "--key", key.with_suffix(".pub"))[0] == 0
    commits = len(world.hub.commits(world.repo_id))
    kept = world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS)
    code, report, stderr = signers("remove", "Ada")
    assert code == 1, stderr
    assert "'Ada' is not one of the allowed signers (it lists ada)" in report["error"]
    assert "letter case" in report["hint"] and stderr.count("error:") == 1
    assert len(world.hub.commits(world.repo_id)) == commits
    assert world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) == kept
    code, report, _ = signers("remove", "ada")
    assert code == 0 and report["signers"] == [] and report["commit"] is not None


def test_an_upload_that_exits_1_says_what_went_wrong_and_what_to_do(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    hub.create_repo(repo_id)
    first = make_bundles(tmp_path / "a", [RunSpec(rows=3)])
    assert upload(first, "--repo", repo_id)[0] == 0
    second = make_bundles(tmp_path / "b", [RunSpec(rows=3, metrics={"exact": {"acc": 0.99}})])
    code, report, stderr = upload(second, "--repo", repo_id)
    assert code == 1 and report["exit_code"] == 1, stderr
    (bundle,) = report["bundles"]
    assert (
        report["error"]
        == f"1 bundle in conflict with the copy on the branch: {bundle['bundle_id']}"
    )
    assert report["error_kind"] == "bundle-conflict"
    assert report["hint"] == "pass --replace to overwrite it, if it is the right result"
    assert stderr.count("error:") == 1 and "hint: pass --replace" in stderr


def test_a_sync_that_exits_1_says_what_went_wrong_and_what_to_do(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    hub.create_repo(repo_id)
    root = tmp_path / "output"
    write_tree(root, [RunSpec(task="expert-vqa", model="gpt-5.2", rows=4)])
    broken = write_run(root, RunSpec(task="wires", model="broken", rows=2))
    (broken / "run_meta.json").write_text("{")
    result = run_cli(
        "sync", root, "-o", tmp_path / "bundles", "--repo", repo_id, "--expect", "expert-vqa=4",
        "--report", tmp_path / "report.json", "--json", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"]["published"] == 1 and report["counts"]["runs_refused"] == 1
    assert report["error"].startswith("1 run refused, the first ")
    assert str(broken / "run_meta.json") in report["error"] and "not valid JSON" in report["error"]
    assert report["error_kind"] == "runs-refused" and "refused run" in report["hint"]
    written = json.loads((tmp_path / "report.json").read_text())
    assert (written["error"], written["hint"]) == (report["error"], report["hint"])
    # a sync whose upload met a conflict says what the upload said
    conflicting = tmp_path / "again"
    write_tree(conflicting, [RunSpec(task="expert-vqa", model="gpt-5.2", rows=4, seed=9)])
    (conflicting / "expert-vqa_predictions" / "gpt-5.2" / "metrics.json").write_text(
        json.dumps({"exact_match": {"accuracy": 0.1}})
    )
    again = run_cli(
        "sync", conflicting, "-o", tmp_path / "other", "--repo", repo_id,
        "--expect", "expert-vqa=4", "--json", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert again.returncode == 1, again.stderr
    said = json.loads(again.stdout)
    assert said["error"].startswith("1 bundle in conflict with the copy on the branch")
    assert said["error_kind"] == "bundle-conflict" and "--replace" in said["hint"]
