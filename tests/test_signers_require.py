"""`bundler signers require`: a rule that holds everywhere a bundle reaches the board. Set, it
makes upload and sync to the branch refuse an unsigned bundle (the others still published),
upload --create-pr warn that review will fail it, and review and audit fail it; all end to end
against the test Hub server, with keys made by ssh-keygen."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import READ_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from factory import write_tree
from helpers import run_cli
from hubserver import RACE, HubServer
from test_review import TASK, World, make_world, propose
from test_sign import make_key
from test_signers import signature_of, signed, signers

from bundler.hub.repo.paths import TASKS_FILE

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")


@pytest.fixture
def world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    return make_world(hub, repo_id, tmp_path)


def tasks_file(world: World) -> dict[str, Any]:
    return json.loads(world.hub.file_bytes(world.repo_id, TASKS_FILE) or b"")


def upload(world: World, bundles: Path, *args: object) -> tuple[int, dict[str, Any], str]:
    result = run_cli(
        "upload", bundles, "--repo", world.repo_id, *args, "--json", env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def player(bundle_id: str) -> str:
    """The player slug of a bundle id (`<player>_<fp8>/<task>@<rev8>`)."""
    return bundle_id.split("/")[0].rpartition("_")[0]


def outcomes(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """Each bundle's outcome and detail, by its player slug."""
    return {
        player(bundle["bundle_id"]): (
            bundle["outcome"],
            bundle.get("detail"),
        )
        for bundle in report["bundles"]
    }


def test_require_sets_and_clears_the_rule_in_one_commit_each(world: World, tmp_path: Path) -> None:
    defined = tasks_file(world)["tasks"]
    code, report, stderr = signers(world, "require")
    assert code == 0, stderr
    head = world.hub.commits(world.repo_id)
    assert report["commit"] == head[0].oid and report["changed"] is True
    assert report["require_signature"] is True
    assert head[0].parents[0] == head[1].oid and TASKS_FILE in head[0].files_changed
    assert tasks_file(world) == {"version": 1, "tasks": defined, "require_signature": True}
    # no allowed signer yet: the rule is set, and the maintainer told what it means
    (warning,) = report["warnings"]
    assert "names no allowed signer" in warning and "warning" in stderr
    assert "requires a signature on every bundle" in stderr
    # set again: nothing to commit, and with a signer listed no warning
    key = make_key(tmp_path, "submitter")
    assert signers(world, "add", "submitter", "--key", key.with_suffix(".pub"))[0] == 0
    commits = len(world.hub.commits(world.repo_id))
    code, again, _ = signers(world, "require")
    assert code == 0 and again["commit"] is None and again["changed"] is False
    assert again["warnings"] == [] and len(world.hub.commits(world.repo_id)) == commits
    code, off, stderr = signers(world, "require", "--off")
    assert code == 0 and off["commit"] == world.hub.commits(world.repo_id)[0].oid, stderr
    assert tasks_file(world)["require_signature"] is False and tasks_file(world)["tasks"] == defined
    assert "does not require a signature" in stderr
    assert signers(world, "require", "--off")[1]["commit"] is None


def test_require_needs_write_access_and_a_branch(world: World) -> None:
    code, _, stderr = signers(world, "require", token=READ_TOKEN)
    assert code == 2 and "write access" in stderr and READ_TOKEN not in stderr
    assert tasks_file(world).get("require_signature") is False


def test_a_concurrent_commit_makes_require_plan_again(world: World) -> None:
    world.hub.inject("POST", rf"{world.repo_id}/commit/main$", RACE, times=1)
    code, report, stderr = signers(world, "require")
    assert code == 0, stderr
    latest, racer = world.hub.commits(world.repo_id)[:2]
    assert latest.oid == report["commit"] and latest.parents[0] == racer.oid
    assert any(path.startswith(".race/") for path in world.hub.list_files(world.repo_id))
    assert tasks_file(world)["require_signature"] is True


def test_upload_to_the_branch_refuses_an_unsigned_bundle_and_publishes_the_others(
    world: World, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "submitter")
    assert signers(world, "add", "submitter", "--key", key.with_suffix(".pub"))[0] == 0
    assert signers(world, "require")[0] == 0
    bundles = signed(world, "signed", key)
    unsigned = world.bundles("plain", [world.spec(model="plain")])
    for archive in unsigned.rglob("*.tar.zst"):  # one folder: a signed and an unsigned bundle
        for path in archive.parent.iterdir():
            target = bundles / path.relative_to(unsigned)
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
    code, report, stderr = upload(world, bundles)
    assert code == 1, stderr
    found = outcomes(report)
    assert found["m-signed"] == ("published", None)
    outcome, detail = found["plain"]
    assert outcome == "refused" and "unsigned" in str(detail) and TASKS_FILE in str(detail)
    assert "plain" in stderr and "bundler sign" in stderr  # named, and what to do
    listed = world.hub.list_files(world.repo_id)
    assert any("m-signed" in path for path in listed)
    assert not any("plain" in path for path in listed)
    # with the rule cleared, the same upload publishes it
    assert signers(world, "require", "--off")[0] == 0
    code, report, stderr = upload(world, bundles)
    assert code == 0 and outcomes(report)["plain"][0] == "published", stderr


def test_sync_to_the_branch_refuses_an_unsigned_bundle(world: World, tmp_path: Path) -> None:
    key = make_key(tmp_path, "nightly")
    assert signers(world, "add", "submitter", "--key", key.with_suffix(".pub"))[0] == 0
    assert signers(world, "require")[0] == 0
    output, bundles = tmp_path / "output", tmp_path / "bundles"
    write_tree(output, [world.spec(model="early")], how_do_you=False)
    nightly = ("--expect", f"{TASK}=4", "--submitter-name", "Ada Lovelace", "--json")
    env = {"HF_TOKEN": WRITE_TOKEN}
    first = run_cli("sync", output, "-o", bundles, "--repo", world.repo_id, *nightly, env=env)
    assert first.returncode == 1, first.stderr  # no key given: refused, named
    (bundle,) = json.loads(first.stdout)["bundles"]
    assert bundle["outcome"] == "refused" and "unsigned" in bundle["detail"]
    assert "early" in bundle["bundle_id"]
    write_tree(output, [world.spec(model="late")], how_do_you=False)
    again = run_cli(
        "sync", output, "-o", bundles, "--repo", world.repo_id, "--sign-key", key, *nightly, env=env
    )
    assert again.returncode == 0, again.stderr
    published = [b for b in json.loads(again.stdout)["bundles"] if b["outcome"] == "published"]
    assert {player(b["bundle_id"]) for b in published} == {"early", "late"}


def test_a_pull_request_of_an_unsigned_bundle_is_warned_then_failed_by_review(
    world: World, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "submitter")
    assert signers(world, "add", "submitter", "--key", key.with_suffix(".pub"))[0] == 0
    assert signers(world, "require")[0] == 0
    bundles = world.bundles("plain", [world.spec(model="plain")])
    result = run_cli(
        "upload", bundles, "--repo", world.repo_id, "--create-pr", "--json",
        env={"HF_TOKEN": SUBMITTER_TOKEN},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (warning,) = [w for w in report["warnings"] if "unsigned" in w]
    assert "review will fail it" in warning and "plain" in warning
    assert "review will fail it" in result.stderr
    check = signature_of(world, report["pull_request_num"])
    assert check["status"] == "failed" and "unsigned" in str(check["detail"])


def test_the_rule_holds_before_any_signer_is_listed(world: World) -> None:
    """Required with no allowed signer yet: review and audit fail an unsigned bundle (without
    the rule, such a leaderboard asks for no signature)."""
    assert signers(world, "require")[0] == 0
    num = propose(world, SUBMITTER_TOKEN, world.bundles("plain", [world.spec(model="plain")]))
    check = signature_of(world, num)
    assert check["status"] == "failed" and "unsigned" in str(check["detail"])
    audited = run_cli("audit", "--repo", world.repo_id, "--json", env={"HF_TOKEN": ""})
    assert audited.returncode == 1, audited.stderr
    findings = json.loads(audited.stdout)["findings"]
    assert any(f["kind"] == "signature" and "requires a signature" in f["detail"] for f in findings)
