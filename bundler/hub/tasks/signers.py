"""The leaderboard's allowed signers: whose signature vouches for a bundle.

`leaderboard/allowed_signers` on a branch, in OpenSSH's allowed-signers format (ssh-keygen(1),
ALLOWED SIGNERS), so that anyone can check a bundle with stock OpenSSH against the very file the
leaderboard keeps. One key a line: `PRINCIPALS [OPTIONS] KEYTYPE BASE64 [COMMENT]`, the
principals Hub user or organization names. Only the maintainers' commits change it (`bundler
signers add|remove`); review fails a pull request that touches it (anything under
`leaderboard/`). A line whose options the bundler does not honour (`cert-authority`,
`valid-after`, `valid-before`, a namespace list without `statics-bundler`) allows nothing: a key
is never trusted further than OpenSSH would trust it.
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
from dataclasses import dataclass, replace

from bundler.core.errors import HubError, UsageError
from bundler.core.limits import MAX_SIGNERS_FILE_BYTES
from bundler.core.model import Model
from bundler.hub.client.session import HubSession, user_orgs
from bundler.hub.repo.paths import ALLOWED_SIGNERS
from bundler.local.signature import NAMESPACE, fingerprint

KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "ssh-rsa",
    }
)
"""The key types the bundler verifies in process (bundler.local.signature)."""
PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
"""A Hub user or organization name: no pattern (`*`, `?`), which would allow anyone."""


@dataclass(frozen=True)
class AllowedSigner:
    """One line: the principals a key signs for, and whether the bundler honours it."""

    principals: tuple[str, ...]
    key_type: str
    key: str
    honoured: bool = True

    @property
    def fingerprint(self) -> str:
        return fingerprint(base64.b64decode(self.key))

    def line(self) -> str:
        return f'{",".join(self.principals)} namespaces="{NAMESPACE}" {self.key_type} {self.key}'


class SignerEntry(Model):
    """A signer as `bundler signers list` shows it."""

    principals: list[str]
    key_type: str
    fingerprint: str
    honoured: bool


@dataclass(frozen=True)
class AllowedSigners:
    signers: tuple[AllowedSigner, ...] = ()

    @classmethod
    def parse(cls, data: bytes) -> AllowedSigners:
        """The file's signers; HubError naming the line that is not an allowed signer."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HubError(f"{ALLOWED_SIGNERS}: not UTF-8 text") from None
        signers = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                signers.append(_signer(line))
            except ValueError as error:
                raise HubError(f"{ALLOWED_SIGNERS}, line {number}: {error}") from None
        return cls(tuple(signers))

    def principals_of(self, key_fingerprint: str) -> set[str]:
        """Who the key with this fingerprint signs for (nobody, for a key it does not list)."""
        return {
            principal
            for signer in self.signers
            if signer.honoured and signer.fingerprint == key_fingerprint
            for principal in signer.principals
        }

    def with_signer(self, name: str, public_key: str) -> AllowedSigners:
        """These signers and `name` with the key of an OpenSSH public key line (`KEYTYPE
        BASE64 [COMMENT]`); UsageError for a line that is no such key."""
        if not PRINCIPAL.fullmatch(name):
            raise UsageError(f"{name!r} is not a Hub user or organization name")
        try:
            key_type, key = _key(public_key.split()[:2])
        except ValueError as error:
            raise UsageError(f"not an OpenSSH public key: {error}") from None
        added = AllowedSigner((name,), key_type, key)
        if added in self.signers:
            return self
        return replace(self, signers=(*self.signers, added))

    def without(self, name: str) -> AllowedSigners:
        """These signers with `name` taken off every line (a line left with no one goes)."""
        kept = []
        for signer in self.signers:
            principals = tuple(p for p in signer.principals if p != name)
            if principals:
                kept.append(replace(signer, principals=principals))
        return replace(self, signers=tuple(kept))

    def entries(self) -> list[SignerEntry]:
        return [
            SignerEntry(
                principals=list(s.principals),
                key_type=s.key_type,
                fingerprint=s.fingerprint,
                honoured=s.honoured,
            )
            for s in self.signers
        ]

    def to_bytes(self) -> bytes:
        return "".join(f"{signer.line()}\n" for signer in self.signers).encode("utf-8")


def _signer(line: str) -> AllowedSigner:
    """One allowed-signers line (ValueError saying what is wrong with it)."""
    fields = shlex.split(line, comments=False, posix=True)
    if len(fields) < 3:
        raise ValueError("expected PRINCIPALS [OPTIONS] KEYTYPE BASE64")
    principals = tuple(fields[0].split(","))
    bad = [p for p in principals if not PRINCIPAL.fullmatch(p)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a Hub user or organization name")
    rest = fields[1:]
    options = rest.pop(0) if rest[0] not in KEY_TYPES and not rest[0].startswith("ssh-") else ""
    key_type, key = _key(rest[:2])
    return AllowedSigner(principals, key_type, key, honoured=_honoured(options))


def _honoured(options: str) -> bool:
    """Whether the bundler trusts a line with these options as OpenSSH would for its
    namespace: none it does not implement, and `statics-bundler` among the namespaces."""
    for option in filter(None, options.split(",")):
        name, _, value = option.partition("=")
        if name.lower() != "namespaces" or NAMESPACE not in value.strip('"').split(","):
            return False
    return True


def _key(fields: list[str]) -> tuple[str, str]:
    if len(fields) < 2 or fields[0] not in KEY_TYPES:
        raise ValueError(f"a key of type {', '.join(sorted(KEY_TYPES))} is expected")
    key_type, key = fields
    try:
        blob = base64.b64decode(key, validate=True)
    except binascii.Error:
        raise ValueError("its key is not base64") from None
    if not blob.startswith(len(key_type).to_bytes(4, "big") + key_type.encode()):
        raise ValueError(f"its key is not a {key_type} key")
    return key_type, key


def read_signers(session: HubSession, revision: str) -> AllowedSigners | None:
    """The allowed signers on `revision`; None when the branch names none."""
    if ALLOWED_SIGNERS not in session.paths_info([ALLOWED_SIGNERS], revision):
        return None
    return AllowedSigners.parse(
        session.read_file(ALLOWED_SIGNERS, revision, MAX_SIGNERS_FILE_BYTES)
    )


class Memberships:
    """Which organizations Hub users belong to, as the Hub shows them (`HubSession.user_orgs`),
    asked at most once per user for as long as this lives (a review round, an audit): N bundles
    of one author cost one request, and none when the key's principal is the user's own name."""

    def __init__(self, session: HubSession) -> None:
        self.session = session
        self._orgs: dict[str, frozenset[str]] = {}

    def orgs(self, user: str) -> frozenset[str]:
        if user not in self._orgs:
            self._orgs[user] = user_orgs(self.session, user)
        return self._orgs[user]

    def vouching(self, user: str, principals: set[str]) -> str | None:
        """The principal under which `user` may sign: their own name, else an organization
        they are a (listed) member of; None when neither."""
        if user in principals:
            return user
        if not principals:
            return None
        return min(principals & self.orgs(user), default=None)


class SignersReport(Model):
    """What `bundler signers` found (and, for add and remove, committed)."""

    repo_id: str
    revision: str
    signers: list[SignerEntry]
    changed: bool = False
    commit: str | None = None

    @property
    def exit_code(self) -> int:
        return 0


def list_signers(session: HubSession, revision: str = "main") -> SignersReport:
    """The allowed signers on `revision`, for anyone who may read the repository."""
    signers = read_signers(session, revision) or AllowedSigners()
    return SignersReport(repo_id=session.repo_id, revision=revision, signers=signers.entries())
