"""Bundle signatures are OpenSSH's own: what the bundler signs, stock `ssh-keygen -Y verify`
accepts, and what `ssh-keygen -Y sign` makes, the bundler verifies, for every key type OpenSSH
signs with. Keys are made by ssh-keygen; nothing is mocked.

A signature comes from a stranger, so the reading side is also tried with forgeries: other
namespaces, other archives, consistently re-encoded blobs, oversized and truncated fields.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundler.core.errors import SignatureError
from bundler.core.limits import MAX_SIGNATURE_CHARS
from bundler.local.signature import (
    NAMESPACE,
    SshSignature,
    archive_digest,
    check_signature,
    parse_signature,
    sign_archive,
)

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")

KEY_TYPES = {
    "ed25519": ["-t", "ed25519"],
    "ecdsa-256": ["-t", "ecdsa", "-b", "256"],
    "ecdsa-384": ["-t", "ecdsa", "-b", "384"],
    "ecdsa-521": ["-t", "ecdsa", "-b", "521"],
    "rsa": ["-t", "rsa", "-b", "2048"],
}


def make_key(folder: Path, kind: str, passphrase: str = "") -> Path:
    key = folder / f"id_{kind}"
    subprocess.run(
        ["ssh-keygen", "-q", *KEY_TYPES[kind], "-N", passphrase, "-C", "ada", "-f", key],
        check=True,
    )
    return key


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "expert-vqa@a1b2c3d4.tar.zst"
    path.write_bytes(os.urandom(300_000))
    return path


def ssh_keygen_verify(
    archive: Path, signature: str, key: Path, principal: str = "ada"
) -> subprocess.CompletedProcess[str]:
    folder = archive.parent
    allowed = folder / "allowed_signers"
    allowed.write_text(f"{principal} {key.with_suffix('.pub').read_text()}")
    sig = folder / "bundle.sig"
    sig.write_text(signature)
    command = ["ssh-keygen", "-Y", "verify", "-f", allowed, "-I", principal, "-n", NAMESPACE]
    with archive.open("rb") as message:
        return subprocess.run(
            [*command, "-s", sig],
            stdin=message,
            capture_output=True,
            text=True,
            check=False,
        )


def ssh_keygen_sign(archive: Path, key: Path, namespace: str = NAMESPACE) -> str:
    with archive.open("rb") as message:
        done = subprocess.run(
            ["ssh-keygen", "-Y", "sign", "-f", key, "-n", namespace, "-q"],
            stdin=message,
            capture_output=True,
            text=True,
            check=True,
        )
    return done.stdout


@pytest.mark.parametrize("kind", sorted(KEY_TYPES))
def test_what_the_bundler_signs_ssh_keygen_verifies(
    kind: str, archive: Path, tmp_path: Path
) -> None:
    key = make_key(tmp_path, kind)
    signature = sign_archive(archive, key)
    verified = ssh_keygen_verify(archive, signature.armored(), key)
    assert verified.returncode == 0, verified.stderr
    assert f'Good "{NAMESPACE}" signature for ada' in verified.stdout + verified.stderr
    listed = subprocess.run(
        ["ssh-keygen", "-lf", key.with_suffix(".pub")], capture_output=True, text=True
    )
    assert signature.fingerprint in listed.stdout  # the same fingerprint OpenSSH prints
    archive.write_bytes(archive.read_bytes() + b"\0")
    assert ssh_keygen_verify(archive, signature.armored(), key).returncode != 0


@pytest.mark.parametrize("kind", sorted(KEY_TYPES))
def test_what_ssh_keygen_signs_the_bundler_verifies(
    kind: str, archive: Path, tmp_path: Path
) -> None:
    key = make_key(tmp_path, kind)
    armored = ssh_keygen_sign(archive, key)
    signature = parse_signature(armored)
    assert signature.armored() == armored  # read exactly as written
    check_signature(signature, archive_digest(archive, signature.hash_algorithm))
    other = tmp_path / "other.tar.zst"
    data = archive.read_bytes()
    other.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # another last byte, whatever it was
    with pytest.raises(SignatureError, match="does not match the archive"):
        check_signature(signature, archive_digest(other, signature.hash_algorithm))


def test_ed25519_signatures_are_the_very_bytes_ssh_keygen_makes(
    archive: Path, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "ed25519")
    assert sign_archive(archive, key).armored() == ssh_keygen_sign(archive, key)


def test_a_signature_made_for_another_namespace_never_passes(archive: Path, tmp_path: Path) -> None:
    """A git commit signature by the same key over the same bytes is not a bundle's."""
    key = make_key(tmp_path, "ed25519")
    signature = parse_signature(ssh_keygen_sign(archive, key, namespace="git"))
    with pytest.raises(SignatureError, match="namespace 'git'"):
        check_signature(signature, archive_digest(archive))


def test_a_signature_moved_to_another_key_is_refused(archive: Path, tmp_path: Path) -> None:
    """A forger who swaps in their own public key (to be named as signer) cannot keep the
    victim's signature valid, and one who swaps a victim's key in beside their own signature
    cannot either."""
    ada = sign_archive(archive, make_key(tmp_path, "ed25519"))
    (tmp_path / "mallory").mkdir()
    mallory = sign_archive(archive, make_key(tmp_path / "mallory", "ed25519"))
    forged = SshSignature(
        ada.public_key, ada.namespace, ada.hash_algorithm, ada.algorithm, mallory.signature
    )
    with pytest.raises(SignatureError, match="does not match"):
        check_signature(parse_signature(forged.armored()), archive_digest(archive))


def test_an_ecdsa_key_claiming_another_curve_is_refused(archive: Path, tmp_path: Path) -> None:
    signature = sign_archive(archive, make_key(tmp_path, "ecdsa-256"))
    relabelled = SshSignature(
        signature.public_key,
        signature.namespace,
        signature.hash_algorithm,
        "ecdsa-sha2-nistp521",
        signature.signature,
    )
    with pytest.raises(SignatureError, match="signed as ecdsa-sha2-nistp521"):
        check_signature(relabelled, archive_digest(archive))


def _blob(signature: str) -> bytes:
    return base64.b64decode("".join(signature.strip().splitlines()[1:-1]))


def _armor(blob: bytes, width: int = 70) -> str:
    text = base64.b64encode(blob).decode()
    lines = [text[i : i + width] for i in range(0, len(text), width)]
    return (
        "\n".join(["-----BEGIN SSH SIGNATURE-----", *lines, "-----END SSH SIGNATURE-----"]) + "\n"
    )


@pytest.fixture
def good(archive: Path, tmp_path: Path) -> str:
    return sign_archive(archive, make_key(tmp_path, "ed25519")).armored()


def test_only_the_one_armored_form_is_read(good: str) -> None:
    blob = _blob(good)
    assert parse_signature(_armor(blob)) is not None
    for other in (
        _armor(blob, width=64),  # ssh-keygen's content, another line width
        good.rstrip("\n"),
        good + "\n",
        good.replace("\n", "\r\n"),
        " " + good,
        good.replace("SSH SIGNATURE", "PGP SIGNATURE"),
    ):
        with pytest.raises(SignatureError):
            parse_signature(other)


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda b: b[:-1], id="truncated"),
        pytest.param(lambda b: b + b"\0", id="trailing-byte"),
        pytest.param(lambda b: b"SSHSIH" + b[6:], id="magic"),
        pytest.param(lambda b: b[:6] + (2).to_bytes(4, "big") + b[10:], id="version-2"),
        pytest.param(lambda b: b[:10] + (1 << 31).to_bytes(4, "big") + b[14:], id="huge-length"),
        pytest.param(lambda b: b[:10] + (0xFFFFFFFF).to_bytes(4, "big"), id="length-past-end"),
    ],
)
def test_a_consistently_re_armored_broken_blob_is_refused(good: str, forge: object) -> None:
    forged = forge(_blob(good))  # type: ignore[operator]
    with pytest.raises(SignatureError):
        parse_signature(_armor(forged))


def test_an_unknown_hash_algorithm_is_refused(good: str) -> None:
    signature = parse_signature(good)
    blob = _blob(good).replace(b"\x00\x00\x00\x06sha512", b"\x00\x00\x00\x03md5")
    with pytest.raises(SignatureError, match="unknown hash algorithm 'md5'"):
        parse_signature(_armor(blob))
    assert signature.hash_algorithm == "sha512"


def test_an_oversized_signature_is_refused_before_it_is_decoded() -> None:
    with pytest.raises(SignatureError, match=f"larger than {MAX_SIGNATURE_CHARS}"):
        parse_signature("-----BEGIN SSH SIGNATURE-----\n" + "A" * (1 << 24))


def test_a_key_that_is_not_a_key_is_named(archive: Path, tmp_path: Path) -> None:
    pem = tmp_path / "key.pem"
    pem.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    with pytest.raises(SignatureError, match=r"key\.pem: not an OpenSSH private key"):
        sign_archive(archive, pem)
    with pytest.raises(SignatureError, match="missing: cannot read the key"):
        sign_archive(archive, tmp_path / "missing")


def test_an_encrypted_key_is_signed_by_ssh_keygen_which_asks_its_passphrase(
    archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundler never sees the passphrase: ssh-keygen asks for it (here through
    SSH_ASKPASS, as a desktop would), and the signature is OpenSSH's."""
    key = make_key(tmp_path, "ed25519", passphrase="correct horse")
    askpass = tmp_path / "askpass"
    askpass.write_text("#!/bin/sh\necho 'correct horse'\n")
    askpass.chmod(0o700)
    monkeypatch.setenv("SSH_ASKPASS", str(askpass))
    monkeypatch.setenv("SSH_ASKPASS_REQUIRE", "force")
    signature = sign_archive(archive, key)
    assert ssh_keygen_verify(archive, signature.armored(), key).returncode == 0
    askpass.write_text("#!/bin/sh\necho 'wrong'\n")
    with pytest.raises(SignatureError, match="ssh-keygen could not sign"):
        sign_archive(archive, key)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[dict[str, str]]:
    socket = tmp_path / "agent.sock"
    process = subprocess.Popen(["ssh-agent", "-D", "-a", socket], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not socket.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the agent makes its socket once it listens
        yield {"SSH_AUTH_SOCK": str(socket)}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)


def test_a_key_held_by_an_agent_signs_through_its_public_half(
    archive: Path, tmp_path: Path, agent: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = make_key(tmp_path, "ecdsa-256")
    subprocess.run(["ssh-add", "-q", key], env=os.environ | agent, check=True)
    private = key.read_bytes()
    key.unlink()  # only the agent holds it now
    monkeypatch.setenv("SSH_AUTH_SOCK", agent["SSH_AUTH_SOCK"])
    signature = sign_archive(archive, key.with_suffix(".pub"))
    key.write_bytes(private)
    check_signature(signature, archive_digest(archive))
    assert ssh_keygen_verify(archive, signature.armored(), key).returncode == 0
