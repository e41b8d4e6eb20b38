"""A bundle's signature: OpenSSH's SSHSIG over the archive's bytes, in the namespace
`statics-bundler`, so that anyone can check it with stock `ssh-keygen -Y verify` and nobody
has to trust the bundler's own code for it.

The format (OpenSSH's PROTOCOL.sshsig): an armored blob holding the signer's public key, the
namespace, the hash algorithm and the signature; what the key signs is not the archive but
`"SSHSIG" || namespace || reserved || hash algorithm || H(archive)`, so a large archive is
hashed once, as it streams, then signed.

Signatures come from strangers, so reading one is bounded (MAX_SIGNATURE_CHARS) and strict: the
text must be exactly the armor this module writes again from what it parsed, every length
inside the blob must fit, and only the key types OpenSSH signs with (ed25519, ecdsa over
nistp256/384/521, rsa with sha2) are known. The public key itself is read by `cryptography`,
which is built for it.

Signing in process takes an unencrypted OpenSSH private key (the nightly job's); any other key,
encrypted or held by an agent, is signed by `ssh-keygen -Y sign`, so the bundler never handles
a passphrase.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import shutil
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from bundler.core.errors import SignatureError, UsageError
from bundler.core.limits import MAX_PRIVATE_KEY_BYTES, MAX_SIGNATURE_CHARS
from bundler.local.fileio import CHUNK_SIZE, read_named_file

NAMESPACE = "statics-bundler"
"""The namespace every bundle signature is made in: a signature made for git commits, or for
anything else, never passes for a bundle's."""
MAGIC = b"SSHSIG"
VERSION = 1
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
LINE_WIDTH = 70
"""ssh-keygen's armor: base64 in lines of 70 characters."""
HASH_ALGORITHM: Literal["sha512"] = "sha512"
"""What this module signs with (ssh-keygen's default); sha256 is also read."""
SSH_KEYGEN_TIMEOUT = 300.0
"""A passphrase prompt waits for a person: five minutes, then signing gives up."""

_ECDSA_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "ecdsa-sha2-nistp256": hashes.SHA256,
    "ecdsa-sha2-nistp384": hashes.SHA384,
    "ecdsa-sha2-nistp521": hashes.SHA512,
}
_RSA_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "rsa-sha2-512": hashes.SHA512,
    "rsa-sha2-256": hashes.SHA256,
}
_MESSAGE_HASHES = {"sha512": hashlib.sha512, "sha256": hashlib.sha256}


@dataclass(frozen=True)
class SshSignature:
    """One SSHSIG signature, as parsed: who (the public key), for what (namespace), how."""

    public_key: bytes
    """The signer's public key in SSH wire form (what `ssh-keygen -l` fingerprints)."""
    namespace: str
    hash_algorithm: Literal["sha256", "sha512"]
    algorithm: str
    """The signature's algorithm: ssh-ed25519, ecdsa-sha2-nistp256, rsa-sha2-512, ..."""
    signature: bytes

    @property
    def key_type(self) -> str:
        return _Reader(self.public_key, "the public key").string().decode("ascii", "replace")

    @property
    def fingerprint(self) -> str:
        """The key's SHA256 fingerprint, as `ssh-keygen -l` prints it."""
        return fingerprint(self.public_key)

    def public_key_line(self) -> str:
        """The key as one `TYPE BASE64` line, the form of allowed_signers and .pub files."""
        return f"{self.key_type} {base64.b64encode(self.public_key).decode()}"

    def armored(self) -> str:
        blob = b"".join(
            (
                MAGIC,
                VERSION.to_bytes(4, "big"),
                _string(self.public_key),
                _string(self.namespace.encode()),
                _string(b""),
                _string(self.hash_algorithm.encode()),
                _string(_string(self.algorithm.encode()) + _string(self.signature)),
            )
        )
        lines = textwrap.wrap(base64.b64encode(blob).decode(), LINE_WIDTH)
        return "\n".join([BEGIN, *lines, END]) + "\n"


def fingerprint(public_key: bytes) -> str:
    digest = base64.b64encode(hashlib.sha256(public_key).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def parse_signature(text: str) -> SshSignature:
    """The signature armored in `text`, which must be exactly the armor this module writes
    (ssh-keygen writes the same); SignatureError naming what is wrong otherwise."""
    if len(text) > MAX_SIGNATURE_CHARS:
        raise SignatureError(f"larger than {MAX_SIGNATURE_CHARS} characters")
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != BEGIN or lines[-2:] != [END, ""]:
        raise SignatureError(f"not an armored SSH signature ({BEGIN} ... {END})")
    try:
        blob = base64.b64decode("".join(lines[1:-2]), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("its armor is not base64") from None
    reader = _Reader(blob, "the signature")
    if reader.take(len(MAGIC)) != MAGIC or reader.uint32() != VERSION:
        raise SignatureError("not an SSHSIG blob of version 1")
    public_key = reader.string()
    namespace = reader.string().decode("utf-8", "replace")
    reader.string()  # reserved
    hash_algorithm = reader.string().decode("ascii", "replace")
    inner = _Reader(reader.string(), "the signature's signature")
    reader.end()
    algorithm = inner.string().decode("ascii", "replace")
    signature = inner.string()
    inner.end()
    if hash_algorithm not in _MESSAGE_HASHES:
        raise SignatureError(f"unknown hash algorithm {hash_algorithm!r}")
    parsed = SshSignature(
        public_key,
        namespace,
        "sha512" if hash_algorithm == "sha512" else "sha256",
        algorithm,
        signature,
    )
    if parsed.armored() != text:
        raise SignatureError("not in the one armored form (70-character lines, one newline)")
    return parsed


def archive_digest(archive: Path, hash_algorithm: str = HASH_ALGORITHM) -> bytes:
    """H(archive), read in chunks: what SSHSIG signs in the archive's place."""
    digest = _MESSAGE_HASHES[hash_algorithm]()
    with archive.open("rb") as source:
        while chunk := source.read(CHUNK_SIZE):
            digest.update(chunk)
    return digest.digest()


def signed_data(namespace: str, hash_algorithm: str, message_digest: bytes) -> bytes:
    """What the key signs (PROTOCOL.sshsig): never the message itself."""
    return b"".join(
        (
            MAGIC,
            _string(namespace.encode()),
            _string(b""),
            _string(hash_algorithm.encode()),
            _string(message_digest),
        )
    )


def check_signature(signature: SshSignature, message_digest: bytes) -> None:
    """Pass when `signature` is the signer's over a message whose H() is `message_digest`
    (hashed with the signature's own algorithm), in NAMESPACE; SignatureError otherwise."""
    if signature.namespace != NAMESPACE:
        raise SignatureError(f"made in namespace {signature.namespace!r}, not {NAMESPACE!r}")
    data = signed_data(signature.namespace, signature.hash_algorithm, message_digest)
    key = _public_key(signature)
    try:
        if isinstance(key, ed25519.Ed25519PublicKey) and signature.algorithm == "ssh-ed25519":
            key.verify(signature.signature, data)
        elif isinstance(key, ec.EllipticCurvePublicKey) and signature.algorithm in _ECDSA_HASHES:
            if signature.algorithm != signature.key_type:
                raise SignatureError(f"an {signature.key_type} key signed as {signature.algorithm}")
            point = _Reader(signature.signature, "the ecdsa signature")
            r, s = point.mpint(), point.mpint()
            point.end()
            chosen = _ECDSA_HASHES[signature.algorithm]()
            key.verify(encode_dss_signature(r, s), data, ec.ECDSA(chosen))
        elif isinstance(key, rsa.RSAPublicKey) and signature.algorithm in _RSA_HASHES:
            chosen_rsa = _RSA_HASHES[signature.algorithm]()
            key.verify(signature.signature, data, padding.PKCS1v15(), chosen_rsa)
        else:
            raise SignatureError(
                f"a {signature.key_type} key cannot make an {signature.algorithm!r} signature"
            )
    except InvalidSignature:
        raise SignatureError("the signature does not match the archive's bytes") from None


class Signer:
    """A key ready to sign archives, loaded once for a whole run of bundles: in memory for an
    unencrypted OpenSSH private key, else `ssh-keygen -Y sign` at each archive (an encrypted
    key asks its passphrase there, and a public key file signs with its private half held by
    ssh-agent: add the key to the agent to be asked once)."""

    def __init__(self, key: Path) -> None:
        self.key = key
        try:
            text = read_named_file(key, MAX_PRIVATE_KEY_BYTES, "key file")
        except UsageError as error:  # the key cannot sign: SignatureError, as sign() says
            raise SignatureError(error.message) from None
        self._private: object | None = None
        try:
            self._private = serialization.load_ssh_private_key(text, password=None)
        except TypeError:
            pass  # encrypted: the passphrase is ssh-keygen's to ask
        except (ValueError, UnsupportedAlgorithm):
            if text.lstrip().startswith(b"-----BEGIN"):
                raise SignatureError(
                    f"{key}: not an OpenSSH private key this bundler can use"
                ) from None
            # a public key: its private half is in an agent, which ssh-keygen asks

    def sign(self, archive: Path) -> SshSignature:
        if self._private is None:
            return _sign_with_ssh_keygen(archive, self.key)
        return sign_digest(self._private, archive_digest(archive))


def sign_archive(archive: Path, key: Path) -> SshSignature:
    """The signature of `archive` by `key` (see Signer)."""
    return Signer(key).sign(archive)


def sign_digest(
    private: object, message_digest: bytes, hash_algorithm: Literal["sha512"] = HASH_ALGORITHM
) -> SshSignature:
    """SSHSIG by an in-memory private key over a message whose H() is `message_digest`."""
    data = signed_data(NAMESPACE, hash_algorithm, message_digest)
    if isinstance(private, ed25519.Ed25519PrivateKey):
        algorithm, raw = "ssh-ed25519", private.sign(data)
    elif isinstance(private, ec.EllipticCurvePrivateKey):
        algorithm = {256: "ecdsa-sha2-nistp256", 384: "ecdsa-sha2-nistp384"}.get(
            private.curve.key_size, "ecdsa-sha2-nistp521"
        )
        r, s = decode_dss_signature(private.sign(data, ec.ECDSA(_ECDSA_HASHES[algorithm]())))
        raw = _mpint(r) + _mpint(s)
    elif isinstance(private, rsa.RSAPrivateKey):
        algorithm, raw = "rsa-sha2-512", private.sign(data, padding.PKCS1v15(), hashes.SHA512())
    else:
        raise SignatureError("only ed25519, ecdsa and rsa keys can sign a bundle")
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return SshSignature(
        base64.b64decode(public.split()[1]), NAMESPACE, hash_algorithm, algorithm, raw
    )


def _sign_with_ssh_keygen(archive: Path, key: Path) -> SshSignature:
    program = shutil.which("ssh-keygen")
    if program is None:
        raise SignatureError(
            f"{key}: an encrypted key or an agent's key is signed by ssh-keygen, "
            "which is not installed"
        )
    with archive.open("rb") as message:
        try:
            done = subprocess.run(
                [program, "-Y", "sign", "-f", str(key), "-n", NAMESPACE, "-q"],
                stdin=message,
                capture_output=True,
                timeout=SSH_KEYGEN_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SignatureError(f"{key}: ssh-keygen did not sign within 5 minutes") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SignatureError(f"{key}: ssh-keygen could not sign ({(said or ['no reason'])[-1]})")
    return parse_signature(done.stdout.decode("ascii", "replace"))


def _public_key(signature: SshSignature) -> object:
    try:
        return serialization.load_ssh_public_key(signature.public_key_line().encode())
    except (ValueError, UnsupportedAlgorithm):
        raise SignatureError(f"an unusable {signature.key_type!r} public key") from None


def _string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _mpint(value: int) -> bytes:
    raw = value.to_bytes((value.bit_length() + 8) // 8, "big") if value else b""
    return _string(raw)


class _Reader:
    """SSH wire fields from untrusted bytes: every length is checked against what is left."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.offset = 0
        self.what = what

    def take(self, size: int) -> bytes:
        if size > len(self.data) - self.offset:
            raise SignatureError(f"{self.what} is truncated")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def uint32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def string(self) -> bytes:
        return self.take(self.uint32())

    def mpint(self) -> int:
        raw = self.string()
        if raw and (raw[0] & 0x80 or (raw[0] == 0 and len(raw) > 1 and not raw[1] & 0x80)):
            raise SignatureError(f"{self.what} holds a number not in its one form")
        return int.from_bytes(raw, "big")

    def end(self) -> None:
        if self.offset != len(self.data):
            raise SignatureError(f"{self.what} has bytes after its last field")
