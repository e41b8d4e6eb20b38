"""The allowed signers mean to the bundler what they mean to OpenSSH: every hostile file here is
read by stock `ssh-keygen -Y find-principals` and `-Y verify`, and the bundler must give the
same answer (bundler.local.allowed_signers), or, where it says it trusts less, never trust more.
Keys are made by ssh-keygen; a 768-bit RSA key, which ssh-keygen will not make, by hand."""

from __future__ import annotations

import base64
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from test_sign import make_key

from bundler.local.allowed_signers import AllowedSigners, SignerKey, read_public_key
from bundler.local.signature import NAMESPACE, archive_digest, sign_digest
from bundler.local.sshtime import openssh_time, read_utc_time

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")

PRINCIPALS = ("eve", "bob", "mallory")


def weak_rsa_key(folder: Path, name: str, bits: int = 768) -> Path:
    """An RSA key of `bits` bits in OpenSSH's format, which neither ssh-keygen nor
    `cryptography` will generate below 1024: two probable primes found by hand."""

    def prime(size: int) -> int:
        while True:
            candidate = secrets.randbits(size) | (3 << (size - 2)) | 1
            if all(pow(a, candidate - 1, candidate) == 1 for a in (2, 3, 5, 7, 11, 13, 17)):
                return candidate

    e = 65537
    while True:
        p, q = prime(bits // 2), prime(bits // 2)
        if ((p - 1) * (q - 1)) % e:
            break
    d = pow(e, -1, (p - 1) * (q - 1))
    numbers = rsa.RSAPrivateNumbers(
        p, q, d, d % (p - 1), d % (q - 1), pow(q, -1, p), rsa.RSAPublicNumbers(e, p * q)
    )
    private = numbers.private_key()
    key = folder / name
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    key.with_suffix(".pub").write_bytes(public + f" {name}\n".encode())
    return key


@dataclass
class Signed:
    """A key, its public line's two fields, and its signature of `message`."""

    text: str
    blob: bytes
    signature: Path


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Signed]:
    folder = tmp_path_factory.mktemp("keys")
    message = folder / "message"
    message.write_bytes(b"a bundle's bytes\n")
    made = {
        "eve": make_key(folder, "eve"),
        "bob": make_key(folder, "bob"),
        "weak": weak_rsa_key(folder, "weak"),
    }
    signed = {}
    for name, key in made.items():
        private = serialization.load_ssh_private_key(key.read_bytes(), None)
        signature = folder / f"{name}.sig"
        signature.write_text(sign_digest(private, archive_digest(message)).armored())
        fields = key.with_suffix(".pub").read_text().split()
        text = f"{fields[0]} {fields[1]}"
        signed[name] = Signed(text, base64.b64decode(fields[1]), signature)
    return signed


def stock_find(allowed: Path, signature: Path) -> list[str] | None:
    done = subprocess.run(
        ["ssh-keygen", "-Y", "find-principals", "-f", allowed, "-s", signature],
        capture_output=True, check=False,
    )  # fmt: skip
    return done.stdout.decode().split("\n")[:-1] if done.returncode == 0 else None


def stock_verify(allowed: Path, signature: Path, principal: str, at: int | None = None) -> bool:
    """`ssh-keygen -Y verify`, at `at` (`-Overify-time`) when given, else now."""
    message = signature.parent / "message"
    when = [] if at is None else [f"-Overify-time={openssh_time(at)}"]
    with message.open("rb") as stdin:
        done = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", allowed, "-I", principal, "-n", NAMESPACE,
             "-s", signature, *when],
            stdin=stdin, capture_output=True, check=False,
        )  # fmt: skip
    return done.returncode == 0


EVE = "eve {eve}"
HOSTILE = {
    # a comment that Python's splitlines() would end before eve's key
    **{
        f"comment then {name}": f"# reviewed{sep}{EVE}\n"
        for name, sep in {
            "CR": "\r",
            "VT": "\v",
            "FF": "\f",
            "FS": "\x1c",
            "GS": "\x1d",
            "RS": "\x1e",
            "NEL": "\x85",
            "U+2028": "\u2028",
            "U+2029": "\u2029",
        }.items()
    },
    "leading CR": "\r" + EVE + "\n",
    "leading LF line then eve": "\n" + EVE + "\n",
    "CRLF lines": f"bob {{bob}}\r\n{EVE}\r\n",
    "no final newline": EVE,
    "NUL cuts the line": "eve\0 {eve}\n",
    "NUL in a comment": "# a\0b\n" + EVE + "\n",
    "VT between principal and key": "eve\v{eve}\n",
    "tabs": "eve\t\t{eve}\n",
    "CR inside base64": "eve {eve_cr}\n",
    "quoted principals": '"eve,bob" {eve}\n',
    "quote inside principals": 'ev"e,bob" {eve}\n',
    "unterminated quote": '"eve {eve}\n',
    "namespace of ours": f'eve namespaces="{NAMESPACE}" {{eve}}\n',
    "namespace pattern": 'eve namespaces="statics-*" {eve}\n',
    "namespace in capitals": 'eve NAMESPACES="git,statics-bundler" {eve}\n',
    "namespace of git": 'eve namespaces="git" {eve}\n',
    "namespace negated": 'eve namespaces="*,!statics-bundler" {eve}\n',
    "two namespaces clauses": 'eve namespaces="git",namespaces="statics-bundler" {eve}\n',
    "unterminated namespace": 'eve namespaces="git {eve}\n',
    "unknown option": "eve verify-required {eve}\n",
    "cert-authority": "eve cert-authority {eve}\n",
    "expired": 'eve valid-before="20200101Z" {eve}\n',
    "not yet valid": 'eve valid-after="20990101Z" {eve}\n',
    "valid now": 'eve valid-after="20200101Z",valid-before="20990101Z" {eve}\n',
    "before not after": 'eve valid-after="20990101Z",valid-before="20200101Z" {eve}\n',
    "bad time": 'eve valid-after="2020" {eve}\n',
    "negated principal": "eve,!eve {eve}\n",
    "pattern principal": "ev? {eve}\n",
    "anyone but bob": "*,!bob {eve}\n",
    "first line wins": f"bob {{eve}}\n{EVE}\n",
    "invalid line then eve": f"bob bad-option {{eve}}\n{EVE}\n",
    "another key in the comment": "bob {bob} eve {eve}\n",
    "key type mismatch": "eve ssh-rsa {eve_b64}\n",
    "truncated base64": "eve {eve_short}\n",
    "non-canonical base64": "eve {eve_bits}\n",
    "weak RSA": "eve {weak}\n",
    "weak RSA then eve": "bob {weak}\n" + EVE + "\n",
    "not UTF-8": "# \xff\xfe\n" + EVE + "\n",
    "U+2028 in the principal": "eve\u2028 {eve}\n",
}


def hostile_bytes(template: str, keys: dict[str, Signed]) -> bytes:
    eve_type, eve_b64 = keys["eve"].text.split()
    text = template.format(
        eve=keys["eve"].text,
        bob=keys["bob"].text,
        weak=keys["weak"].text,
        eve_b64=eve_b64,
        eve_cr=f"{eve_type} {eve_b64[:20]}\r{eve_b64[20:]}",
        eve_short=f"{eve_type} {eve_b64[:-4]}",
        eve_bits=f"{eve_type} {eve_b64[:-2]}{'B' if eve_b64[-2] != 'B' else 'C'}=",
    )
    return text.encode().replace("\xff\xfe".encode(), b"\xff\xfe")


def find_principals(parsed: AllowedSigners, key: SignerKey, at: int) -> list[str] | None:
    """What `ssh-keygen -Y find-principals` prints, worked out from the bundler's reading of
    each line: the principals of the first line that allows the key, in any namespace."""
    for line in parsed.lines:
        if line.allows(key, at, None, None):
            listed = (line.principals or b"").decode("utf-8", "replace").split(",")
            return listed[: listed.index("")] if "" in listed else listed
    return None


def verifies(parsed: AllowedSigners, key: SignerKey, principal: str, at: int) -> bool:
    """Whether `ssh-keygen -Y verify -I principal` accepts `key`, by the bundler's reading."""
    return any(
        line.allows(key, at, principal.encode(), NAMESPACE.encode()) for line in parsed.lines
    )


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_means_to_the_bundler_what_it_means_to_ssh_keygen(
    name: str, keys: dict[str, Signed], tmp_path: Path
) -> None:
    data = hostile_bytes(HOSTILE[name], keys)
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(data)
    parsed = AllowedSigners.parse(data)
    assert parsed.to_bytes() == data
    now = int(time.time())
    for signer, signed in keys.items():
        key = SignerKey(key_type=signed.text.split()[0], blob=signed.blob)
        found = find_principals(parsed, key, now)
        assert found == stock_find(allowed, signed.signature), (signer, found)
        trusted = parsed.principals_of(key.fingerprint)
        trusted_now = parsed.principals_of(key.fingerprint, now)
        for principal in PRINCIPALS:
            stock = stock_verify(allowed, signed.signature, principal)
            assert verifies(parsed, key, principal, now) is stock, (signer, principal)
            # the bundler may trust less than OpenSSH (a pattern), never more
            assert principal not in trusted | trusted_now or stock, (signer, principal)


def test_the_hidden_key_of_the_issue_trusts_nobody(keys: dict[str, Signed]) -> None:
    for separator in ("\r", "\v", "\f", "\x1c", "\x85", "\u2028"):
        data = f"# reviewed{separator}eve {keys['eve'].text}\n".encode()
        eve = SignerKey(key_type="ssh-ed25519", blob=keys["eve"].blob)
        assert AllowedSigners.parse(data).principals_of(eve.fingerprint) == set()


def test_a_key_openssh_refuses_is_refused(keys: dict[str, Signed], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="768 bits"):
        read_public_key(keys["weak"].text)
    big = rsa.RSAPublicNumbers(65537, (1 << 16400) | 1).public_key()
    line = big.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    with pytest.raises(ValueError, match="16401 bits"):
        read_public_key(line.decode())
    (tmp_path / "big.pub").write_bytes(line + b"\n")
    listed = subprocess.run(["ssh-keygen", "-lf", tmp_path / "big.pub"], check=False)
    assert listed.returncode != 0


def test_an_edit_keeps_the_lines_it_does_not_touch_byte_for_byte(keys: dict[str, Signed]) -> None:
    others = (
        "# kept\r as it is \v\n"
        f'"bob,eve" namespaces="{NAMESPACE}" {keys["bob"].text} a comment\r\n'
        f"mallory {keys['weak'].text}\n"
        f"eve {keys['eve'].text}"
    ).encode()
    signers = AllowedSigners.parse(others)
    bob = read_public_key(keys["bob"].text)
    eve = read_public_key(keys["eve"].text)
    added = signers.with_signer("ada", bob)
    assert added.to_bytes() == (
        others + f'\nada namespaces="{NAMESPACE}" {keys["bob"].text}\n'.encode()
    )
    assert signers.with_signer("eve", eve) == signers
    removed = signers.without("eve").to_bytes()
    assert (
        removed
        == (
            "# kept\r as it is \v\n"
            f'"bob" namespaces="{NAMESPACE}" {keys["bob"].text} a comment\r\n'
            f"mallory {keys['weak'].text}\n"
        ).encode()
    )
    assert AllowedSigners.parse(removed).principals_of(bob.fingerprint) == {"bob"}
    assert signers.without("nobody").to_bytes() == others


def test_a_file_of_hostile_patterns_costs_linear_work(keys: dict[str, Signed]) -> None:
    """Patterns are matched as OpenSSH's automaton does, never by a backtracking regex, and
    the names a line trusts are read in one pass: a file at the size bound takes well under a
    second here."""
    eve = keys["eve"].text
    lines = [
        ",".join(["eve"] * 60_000) + f",!{'x' * 1200} {eve}",
        f'eve namespaces="{"*a" * 100_000}b" {eve}',
        f"{'*a,' * 60_000}!eve {eve}",
    ]
    started = time.monotonic()
    parsed = AllowedSigners.parse("\n".join(lines).encode())
    key = read_public_key(eve)
    assert parsed.principals_of(key.fingerprint) == set()
    assert time.monotonic() - started < 5


BOUNDED = {
    "retired": 'eve valid-before="20240301120000Z" {eve}\n',
    "from a day": 'eve namespaces="statics-bundler",valid-after="20240301Z" {eve}\n',
    "a window": 'eve valid-after="20240101Z",valid-before="20240301120000Z" {eve}\n',
    "retired, then a new line": (
        'eve valid-before="20240301Z" {eve}\neve valid-after="20240601Z" {eve}\n'
    ),
    "retired for eve, not bob": 'eve valid-before="20240301Z" {eve}\nbob {eve}\n',
    "to the minute": 'eve valid-before="202403011200Z" {eve}\n',
    "capital options": 'eve VALID-BEFORE="20240301Z" {eve}\n',
    "namespaces of git, bounded": 'eve namespaces="git",valid-before="20990101Z" {eve}\n',
    "cert-authority, bounded": 'eve cert-authority,valid-before="20990101Z" {eve}\n',
}
MOMENTS = (
    "20231231235959Z",
    "20240101000000Z",
    "20240229000000Z",
    "20240301000000Z",
    "20240301120000Z",
    "20240301120001Z",
    "20240401000000Z",
    "20240601000000Z",
    "20990101000000Z",
)


@pytest.mark.parametrize("name", sorted(BOUNDED))
def test_a_bounded_key_means_what_ssh_keygen_means_at_every_time(
    name: str, keys: dict[str, Signed], tmp_path: Path
) -> None:
    """`valid-after`/`valid-before` judged at a time: the bundler's principals at that time
    are exactly stock `ssh-keygen -Y verify -Overify-time`'s, bounds included; namespaces
    without ours and cert-authority still vouch for nobody."""
    data = hostile_bytes(BOUNDED[name], keys)
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(data)
    parsed = AllowedSigners.parse(data)
    eve = read_public_key(keys["eve"].text)
    for moment in MOMENTS:
        at = read_utc_time(moment)
        stock = {p for p in PRINCIPALS if stock_verify(allowed, keys["eve"].signature, p, at)}
        trusted = parsed.principals_of(eve.fingerprint, at)
        if "git" in name or "cert" in name:
            assert trusted == set(), moment
        else:
            assert trusted == stock, (moment, trusted, stock)


def test_a_retired_key_vouches_until_its_retirement_as_ssh_keygen_says(
    keys: dict[str, Signed], tmp_path: Path
) -> None:
    """`retired` writes `valid-before` on the key's lines only (a shared line is split), keeps
    every other line byte for byte, and ssh-keygen agrees at, before and after the moment."""
    eve, bob = keys["eve"].text, keys["bob"].text
    others = f"# notes\r\nbob {bob} laptop\n"
    data = (others + f'"eve,mallory" {eve} shared\neve namespaces="{NAMESPACE}" {eve}').encode()
    retired_at = read_utc_time("20240301120000Z")
    signers = AllowedSigners.parse(data)
    key = read_public_key(eve)
    retired = signers.retired("eve", key, retired_at)
    assert (
        retired.to_bytes()
        == (
            others + f'"mallory" {eve} shared\n"eve" valid-before="20240301120000Z" {eve} shared\n'
            f'eve namespaces="{NAMESPACE}",valid-before="20240301120000Z" {eve}'
        ).encode()
    )
    assert retired.retired("eve", key, retired_at + 10) == retired
    assert signers.retired("eve", read_public_key(bob), retired_at) == signers
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(retired.to_bytes())
    for at in (retired_at - 1, retired_at, retired_at + 1):
        for principal in PRINCIPALS:
            stock = stock_verify(allowed, keys["eve"].signature, principal, at)
            assert (principal in retired.principals_of(key.fingerprint, at)) is stock
    assert retired.principals_of(key.fingerprint, retired_at) == {"eve", "mallory"}
    assert retired.principals_of(key.fingerprint, retired_at + 1) == {"mallory"}
    assert retired.principals_of(key.fingerprint) == {"mallory"}
    later = AllowedSigners.parse(f'eve valid-after="20990101Z" {eve}\n'.encode())
    assert later.retirable("eve", None, retired_at) == []
