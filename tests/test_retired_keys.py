"""A key retires without rewriting history: `bundler signers retire` bounds its line with
`valid-before`, and audit judges each bundle's key at the time its sidecar landed on the branch
(the Hub's date of the commit that last changed it), as git judges a signed commit at its time.
Stock `ssh-keygen -Y verify -Overify-time=<that time>` gives the same answer for each bundle."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from helpers import run_cli
from hubserver import HubServer
from test_review import World, make_world
from test_sign import make_key
from test_signers import signed, signers

from bundler.hub.leaderboard.card import WARNING
from bundler.hub.repo.paths import ALLOWED_SIGNERS
from bundler.local.sshtime import read_utc_time

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")

MAINTAINER = "leaderboard-bot"
"""The user of WRITE_TOKEN: the committer of what it uploads."""


@pytest.fixture
def world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    return make_world(hub, repo_id, tmp_path)


def upload(world: World, bundles: Path) -> None:
    done = run_cli("upload", bundles, "--repo", world.repo_id, env={"HF_TOKEN": WRITE_TOKEN})
    assert done.returncode == 0, done.stderr


def audit(world: World) -> tuple[int, dict]:
    done = run_cli("audit", "--repo", world.repo_id, "--json", env={"HF_TOKEN": ""})
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout)


def stock_verifies(allowed: Path, bundles: Path, at: str) -> bool:
    """`ssh-keygen -Y verify` of the bundle in `bundles`, as the maintainer, at `at`."""
    (sidecar,) = bundles.rglob("*.json")
    sig = bundles / "bundle.sig"
    sig.write_text(json.loads(sidecar.read_text())["signature"]["sshsig"])
    with next(bundles.rglob("*.tar.zst")).open("rb") as archive:
        done = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", allowed, "-I", MAINTAINER, "-n",
             "statics-bundler", "-s", sig, f"-Overify-time={at}"],
            stdin=archive, capture_output=True, check=False,
        )  # fmt: skip
    return done.returncode == 0


def test_a_retired_key_vouches_for_what_landed_before_and_not_after(
    world: World, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "key")
    assert signers(world, "add", MAINTAINER, "--key", key.with_suffix(".pub"))[0] == 0
    before = signed(world, "before", key)
    upload(world, before)
    code, report, stderr = signers(world, "retire", MAINTAINER)
    assert code == 0, stderr
    retired_at = read_utc_time(report["signers"][0]["valid_before"])
    # valid-before holds through its second, as OpenSSH reads it: land in the next one
    time.sleep(max(0.0, retired_at + 1 - time.time()))
    after = signed(world, "after", key)
    upload(world, after)
    code, report = audit(world)
    assert code == 1
    by_model = {bundle["bundle_id"].split("_")[0]: bundle for bundle in report["audited"]}
    assert {"m-before", "m-after"} <= set(by_model), by_model
    old, new = by_model["m-before"], by_model["m-after"]
    assert old["principals"] == [MAINTAINER] and new["principals"] == []
    assert read_utc_time(old["landed_at"]) <= retired_at < read_utc_time(new["landed_at"])
    (finding,) = report["findings"]
    assert finding["bundle_id"] == new["bundle_id"] and finding["kind"] == "signature"
    assert f"do not list as valid at {new['landed_at']}, when it landed" in finding["detail"]
    # stock OpenSSH, asked at each bundle's landing time, says the same
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) or b"")
    assert stock_verifies(allowed, before, old["landed_at"])
    assert not stock_verifies(allowed, after, new["landed_at"])
    # the card's signer column judges each key when its bundle was published: the same
    card = (world.hub.file_bytes(world.repo_id, "README.md") or b"").decode()
    signed_by = {
        model: next(line for line in card.splitlines() if f"|{model}|" in line).split("|")[-2]
        for model in ("m-before", "m-after")
    }
    assert signed_by["m-before"].strip().startswith(MAINTAINER)
    assert signed_by["m-after"].strip().startswith(WARNING)
