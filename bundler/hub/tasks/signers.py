"""The leaderboard's allowed signers: whose signature vouches for a bundle.

`leaderboard/allowed_signers` on a branch, in OpenSSH's allowed-signers format (ssh-keygen(1),
ALLOWED SIGNERS), so that anyone can check a bundle with stock OpenSSH against the very file the
leaderboard keeps; it is read exactly as OpenSSH reads it (bundler.local.allowed_signers). The
principals are Hub user or organization names. Only the maintainers' commits change it
(`bundler signers add|remove|retire`, which keep every line they do not touch byte for
byte); review
fails a pull request that touches it (anything under `leaderboard/`).
"""

from __future__ import annotations

from bundler.core.errors import UsageError
from bundler.core.limits import MAX_SIGNERS_FILE_BYTES
from bundler.core.model import Model
from bundler.core.rule_errors import NotASigner, UnknownSigner
from bundler.hub.client.session import HubSession, user_orgs
from bundler.hub.repo.paths import ALLOWED_SIGNERS
from bundler.local.allowed_signers import (
    HUB_NAME,
    AllowedSigners,
    KeyRefused,
    SignerEntry,
    SignerKey,
    read_public_key,
)
from bundler.local.sshtime import read_utc_time


def add_signer(
    signers: AllowedSigners,
    name: str,
    public_key: str,
    source: str,
    valid_after: str | None = None,
    valid_before: str | None = None,
) -> AllowedSigners:
    """`signers` and `name` with the key of an OpenSSH public key line (`KEYTYPE BASE64
    [COMMENT]`, read from `source`), valid between the UTC times given (none: always);
    UsageError for a name that is no Hub name, a key OpenSSH refuses or the bundler cannot
    verify, or times OpenSSH would not read as the same instant, or that leave no time."""
    if not HUB_NAME.fullmatch(name):
        raise UsageError(f"{name!r} is not a Hub user or organization name")
    key = _key(public_key, source)
    try:
        after, before = (read_utc_time(t) if t else 0 for t in (valid_after, valid_before))
    except ValueError as error:
        raise UsageError(str(error)) from None
    if after and before and before <= after:
        raise UsageError(f"valid-before {valid_before} is not after valid-after {valid_after}")
    return signers.with_signer(name, key, after, before)


def retire_signer(
    signers: AllowedSigners, name: str, public_key: tuple[str, str] | None, at: int
) -> AllowedSigners:
    """`signers` with `name`'s keys (only the one of `public_key`, its text and where it was
    read, if given) valid no later than `at`; NotASigner when no such key can be retired."""
    key = None if public_key is None else _key(*public_key)
    if not signers.retirable(name, key, at):
        whose = f"{name}'s key {key.fingerprint}" if key is not None else f"{name}'s keys"
        raise NotASigner(f"the allowed signers hold no line of {whose} valid before now")
    return signers.retired(name, key, at)


def _key(public_key: str, source: str) -> SignerKey:
    try:
        return read_public_key(public_key)
    except KeyRefused as error:
        raise UsageError(f"{source}: not a public key the bundler accepts: {error}") from None


def remove_signer(signers: AllowedSigners, name: str) -> AllowedSigners:
    """`signers` with `name` off every line listing it; UnknownSigner when no line lists it
    (principals match exactly, as OpenSSH matches them): a mistyped name must not read as
    done, and a maintainer retiring a signer must learn that no one was taken off."""
    listed = sorted({p for entry in signers.entries() for p in entry.principals})
    if name not in listed:
        raise UnknownSigner(name, listed)
    return signers.without(name)


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
