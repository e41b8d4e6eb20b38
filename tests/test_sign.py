"""`bundler sign`, and what verify makes of a signed bundle: the signature sits in the sidecar,
the archive is untouched, verify names the signing key, and a signature never vouches for any
bytes but the ones it signed, however consistently a forger re-hashes the rest.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import (
    build,
    edit_manifest,
    forge_consistently,
    json_bytes,
    one_line_error,
    only_bundle,
    run_cli,
    sidecar_path,
)
from hubserver import HubServer

from bundler.local.collect import CollectOptions, collect
from bundler.local.verify import verify

VERIFY = ["ssh-keygen", "-Y", "verify", "-n", "statics-bundler"]
pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")


def make_key(folder: Path, name: str) -> Path:
    key = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key], check=True
    )
    return key


def key_fingerprint(key: Path) -> str:
    listed = subprocess.run(
        ["ssh-keygen", "-lf", key.with_suffix(".pub")], capture_output=True, text=True, check=True
    )
    return listed.stdout.split()[1]


@pytest.fixture
def bundles(tmp_path: Path) -> Path:
    _, folder = build(tmp_path, [RunSpec(rows=3), RunSpec(model="qwen3", rows=3)])
    return folder


def sign(*args: object) -> tuple[int, dict[str, Any], str]:
    result = run_cli("sign", *args, "--json")
    return result.returncode, json.loads(result.stdout), result.stderr


def archives(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.tar.zst"))


def sidecar(archive: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(sidecar_path(archive).read_text())
    return loaded


def test_signing_adds_the_signature_to_the_sidecar_and_touches_no_archive(
    bundles: Path, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "ada")
    before = {path: path.read_bytes() for path in archives(bundles)}
    code, report, stderr = sign(bundles, "--key", key)
    assert code == 0, stderr
    assert [b["outcome"] for b in report["bundles"]] == ["signed", "signed"]
    assert {b["signer"] for b in report["bundles"]} == {key_fingerprint(key)}
    assert {path: path.read_bytes() for path in archives(bundles)} == before
    checked = verify([bundles])
    assert checked.exit_code == 0
    assert [b.signer for b in checked.bundles] == [key_fingerprint(key)] * 2
    assert all(any(c.name == "signature" for c in b.checks) for b in checked.bundles)
    human = run_cli("verify", bundles)
    assert f"signed by key {key_fingerprint(key)}" in human.stderr


def test_the_sidecar_s_signature_passes_stock_ssh_keygen(bundles: Path, tmp_path: Path) -> None:
    """What the README shows: take signature.sshsig out of the sidecar, verify with OpenSSH."""
    key = make_key(tmp_path, "ada")
    assert sign(bundles, "--key", key)[0] == 0
    archive = archives(bundles)[0]
    signature = tmp_path / "bundle.sig"
    signature.write_text(sidecar(archive)["signature"]["sshsig"])
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"ada {key.with_suffix('.pub').read_text()}")
    with archive.open("rb") as message:
        checked = subprocess.run(
            [*VERIFY, "-f", allowed, "-I", "ada", "-s", signature],
            stdin=message,
            capture_output=True,
            text=True,
        )
    assert checked.returncode == 0, checked.stderr


def test_a_second_signature_by_another_key_needs_replace(bundles: Path, tmp_path: Path) -> None:
    ada, bob = make_key(tmp_path, "ada"), make_key(tmp_path, "bob")
    assert sign(bundles, "--key", ada)[0] == 0
    again = sign(bundles, "--key", ada)
    assert again[0] == 0 and {b["outcome"] for b in again[1]["bundles"]} == {"already-signed"}
    signed = {path: sidecar_path(path).read_bytes() for path in archives(bundles)}
    code, report, _ = sign(bundles, "--key", bob)
    assert code == 1
    assert {b["outcome"] for b in report["bundles"]} == {"refused"}
    assert (
        report["bundles"][0]["detail"] == f"already signed by another key, {key_fingerprint(ada)}"
    )
    assert {path: sidecar_path(path).read_bytes() for path in archives(bundles)} == signed
    code, report, _ = sign(bundles, "--key", bob, "--replace")
    assert code == 0 and {b["outcome"] for b in report["bundles"]} == {"replaced"}
    assert [b.signer for b in verify([bundles]).bundles] == [key_fingerprint(bob)] * 2


def test_a_bundle_that_fails_verification_is_never_signed(bundles: Path, tmp_path: Path) -> None:
    broken = archives(bundles)[0]
    broken.write_bytes(broken.read_bytes()[:-10])
    before = sidecar_path(broken).read_bytes()
    code, report, _ = sign(bundles, "--key", make_key(tmp_path, "ada"))
    assert code == 1
    outcomes = {b["archive"]: b["outcome"] for b in report["bundles"]}
    assert outcomes == {str(broken): "refused", str(archives(bundles)[1]): "signed"}
    assert sidecar_path(broken).read_bytes() == before


def test_a_key_that_cannot_sign_is_one_line_and_exit_2(bundles: Path, tmp_path: Path) -> None:
    pem = tmp_path / "key.pem"
    pem.write_text("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
    result = run_cli("sign", bundles, "--key", pem)
    assert result.returncode == 2
    assert (
        one_line_error(result.stderr)
        == f"error: {pem}: not an OpenSSH private key this bundler can use"
    )
    assert "signature" not in sidecar(archives(bundles)[0])


def _with_signature(archive: Path, sshsig: str) -> None:
    """Put a signature into the sidecar beside `archive` exactly as sign writes one."""
    data = sidecar(archive) | {"signature": {"sshsig": sshsig}}
    sidecar_path(archive).write_bytes(json_bytes(data))


def test_a_signature_copied_onto_a_consistently_forged_archive_fails(
    bundles: Path, tmp_path: Path
) -> None:
    """The forger changes a score, re-hashes everything (manifest, frames, sidecar) and keeps
    the victim's signature: every digest is right, and the signature check still fails."""
    assert sign(bundles, "--key", make_key(tmp_path, "ada"))[0] == 0
    archive = archives(bundles)[0]
    stolen = sidecar(archive)["signature"]["sshsig"]
    forge_consistently(archive, edit_manifest(lambda m: m["submitter"].update(name="Mallory")))
    _with_signature(archive, stolen)
    [checked] = verify([archive]).bundles
    failures = {check.name: check.detail for check in checked.failures()}
    assert failures == {"signature": "the signature does not match the archive's bytes"}
    assert checked.signer is None


def test_a_signature_moved_to_another_bundle_fails(bundles: Path, tmp_path: Path) -> None:
    assert sign(bundles, "--key", make_key(tmp_path, "ada"))[0] == 0
    first, second = archives(bundles)
    _with_signature(second, sidecar(first)["signature"]["sshsig"])
    [checked] = verify([second]).bundles
    assert [check.name for check in checked.failures()] == ["signature"]


@pytest.mark.parametrize(
    ("sshsig", "failing"),
    [
        ("not armored", "signature"),
        ("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n", "signature"),
        (
            "x" * 20_000,
            "sidecar",
        ),  # longer than any signature: the sidecar is not one collect writes
    ],
    ids=["not-armored", "truncated-blob", "oversized"],
)
def test_an_unreadable_signature_fails_verification(
    bundles: Path, sshsig: str, failing: str
) -> None:
    archive = archives(bundles)[0]
    _with_signature(archive, sshsig)
    [checked] = verify([archive]).bundles
    assert [check.name for check in checked.failures()] == [failing]
    assert checked.signer is None


def test_collecting_an_unchanged_run_again_keeps_its_signature(tmp_path: Path) -> None:
    report, bundles = build(
        tmp_path, [RunSpec(rows=3)], CollectOptions(expected_rows={"expert-vqa": 3})
    )
    archive = Path(only_bundle(report).archive)
    assert sign(bundles, "--key", make_key(tmp_path, "ada"))[0] == 0
    signed = sidecar_path(archive).read_bytes()
    again = collect(
        tmp_path / "out", bundles, CollectOptions(expected_rows={"expert-vqa": 3}, full=True)
    )
    assert only_bundle(again).outcome == "unchanged"
    assert sidecar_path(archive).read_bytes() == signed
    assert verify([bundles]).bundles[0].signer is not None


def test_collect_signs_as_it_bundles(tmp_path: Path) -> None:
    key = make_key(tmp_path, "nightly")
    options = CollectOptions(expected_rows={"expert-vqa": 3})
    _, bundles = build(tmp_path, [RunSpec(rows=3)], options, name="unsigned")
    result = run_cli(
        "collect", tmp_path / "out", "-o", tmp_path / "signed", "--expect", "expert-vqa=3",
        "--sign-key", key, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [b["outcome"] for b in report["signing"]["bundles"]] == ["signed"]
    assert [b.signer for b in verify([tmp_path / "signed"]).bundles] == [key_fingerprint(key)]
    # the same archive bytes as an unsigned collect: signing changes the sidecar only
    (unsigned,) = archives(bundles)
    (signed,) = archives(tmp_path / "signed")
    assert signed.read_bytes() == unsigned.read_bytes()


def test_collect_with_a_key_that_cannot_sign_writes_nothing(tmp_path: Path) -> None:
    build(tmp_path, [RunSpec(rows=3)], name="unsigned")
    result = run_cli(
        "collect", tmp_path / "out", "-o", tmp_path / "signed", "--sign-key", tmp_path / "nokey"
    )
    assert result.returncode == 2
    assert "nokey: cannot read the key" in one_line_error(result.stderr)
    assert not (tmp_path / "signed").exists()


def test_sync_signs_what_it_collects_before_it_publishes(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "nightly")
    root = tmp_path / "output"
    write_tree(root, [RunSpec(rows=3), RunSpec(model="qwen3", rows=3)], how_do_you=False)
    result = run_cli(
        "sync", root, "-o", tmp_path / "b", "--repo", repo_id, "--expect", "expert-vqa=3",
        "--sign-key", key, "--json", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [b["outcome"] for b in report["collect"]["signing"]["bundles"]] == ["signed"] * 2
    assert report["counts"]["published"] == 2
    sidecars = [path for path in hub.list_files(repo_id) if path.startswith("bundles/")]
    signed = [
        json.loads(hub.file_bytes(repo_id, path) or b"{}")
        for path in sidecars
        if path.endswith(".json")
    ]
    assert len(signed) == 2 and all("sshsig" in sidecar["signature"] for sidecar in signed)
    fetched = tmp_path / "fetched"
    assert run_cli("download", "--repo", repo_id, "-o", fetched).returncode == 0
    assert [b.signer for b in verify([fetched]).bundles] == [key_fingerprint(key)] * 2


def test_sync_with_a_key_that_cannot_sign_writes_and_publishes_nothing(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    root = tmp_path / "output"
    write_tree(root, [RunSpec(rows=3)], how_do_you=False)
    result = run_cli(
        "sync", root, "-o", tmp_path / "b", "--repo", repo_id,
        "--sign-key", tmp_path / "nokey", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert result.returncode == 2
    assert "nokey: cannot read the key" in result.stderr
    assert not list((tmp_path / "b").rglob("*.tar.zst"))
