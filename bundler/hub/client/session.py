"""Talking to the Hugging Face Hub: one session object over the real `huggingface_hub` client,
and the translation of its errors into ones a user can act on.

The client retries some calls itself (preupload, LFS transfers) but not the commit, and not
the small JSON calls. `call` therefore retries the idempotent reads that the bundler's
decisions rest on, so one dropped connection does not abort a nightly upload; the commit's own
faults are handled by `commit_replanned` (bundler.hub.client.commit), which re-plans on the
current head before trying again, so a commit whose response was lost is found there instead of
being made twice.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar
from urllib.parse import unquote, urlsplit

import httpx2  # the transport huggingface_hub itself uses; its errors are connection faults
from huggingface_hub import (
    HfApi,
    get_session,
    get_token,
    hf_hub_url,
    hf_raise_for_status,
)
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    LocalTokenNotFoundError,
    OIDCError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import (  # type: ignore[attr-defined]  # a lazily exported name
    build_hf_headers,
)

from bundler.core.errors import (
    BadCredentials,
    EndpointNotHttp,
    GatedRepo,
    HubDidNotAnswer,
    HubError,
    InvalidHeader,
    MalformedAnswer,
    NoWriteAccess,
    RateLimited,
    RefusedByHub,
    RepositoryNotFound,
    RevisionNotFound,
    UnusableSetting,
    XetUnavailable,
)
from bundler.core.trusted import RESOURCE_VARIABLE, ExchangeFailed, exchange_resource
from bundler.core.version import VERSION
from bundler.core.waiting import RETRY_WAITS
from bundler.hub.client import ratelimit
from bundler.hub.client.access import AccessRights, no_write_access
from bundler.hub.client.answers import (
    CommitAnswer,
    ProfileAnswer,
    RevisionAnswer,
    account,
    remote_entries,
    unparsed,
    validated,
)
from bundler.hub.client.known import KnownTrees
from bundler.hub.client.limits import HubLimits
from bundler.hub.client.remote import (
    CommitAuthors,
    RemoteEntry,
    RemoteFile,
)

REPO_TYPE = "dataset"
LIBRARY_NAME = "statics-bundler"
"""How every request names its sender in the User-Agent (`statics-bundler/<version>`), as
`HfApi(library_name=..., library_version=...)` asks a library to: the Hub's logs, and a
maintainer reading them, then tell the bundler's requests from any other client's."""
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}"
REPO_ID = re.compile(f"{_NAME}/{_NAME}")
"""A repository to publish to or download from: OWNER/NAME, checked before any request (a
bare NAME would be looked up as a legacy canonical repository and end in a raw 404)."""
DATASET_ID = re.compile(f"(?:{_NAME}/)?{_NAME}")
"""A dataset id as run_meta.json names it: legacy canonical datasets have no owner."""
READ_ATTEMPTS = 4
READ_BACKOFF_SECONDS = 0.5
MAX_SMALL_FILE_BYTES = 16 << 20
"""A row or sidecar is a few KB; anything near this is not one and is not read further."""
T = TypeVar("T")
CLIENT_FAILURES = (HfHubHTTPError, httpx2.HTTPError, LocalTokenNotFoundError, OIDCError)
"""The client's failures `describe_failure` names: an HTTP error, a connection fault, no token,
a CI job's id token that could not be had for the exchange."""
PATHS_PER_REQUEST = 500
"""Paths asked about in one paths-info request, as the client sends them."""


def status_of(error: BaseException) -> int | None:
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return error.response.status_code
    return None


def retry_after_of(error: BaseException) -> float | None:
    """Seconds the Hub asked us to wait (Retry-After, else the RateLimit header's reset), if
    it said. A wait longer than the rate-limit policy's bound never gets here: the response
    hook (bundler.hub.client.ratelimit) ends the command instead."""
    if not isinstance(error, HfHubHTTPError) or error.response is None:
        return None
    wait = ratelimit.announced(error.response.headers)
    return None if wait is None else min(wait.seconds, ratelimit.POLICY.max_wait)


def is_xet_unavailable(error: BaseException) -> bool:
    """The endpoint has no Xet storage: huggingface_hub asked it for a Xet write token (it
    does when hf-xet is installed) and got a 404; the same happens on every try."""
    seen: BaseException | None = error
    for _ in range(5):  # the client wraps the HTTP error in a ConnectionError or two
        if seen is None:
            return False
        if "xet-write-token" in str(seen) or "xet-read-token" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_transient(error: BaseException) -> bool:
    """A fault after which the same request may succeed: 5xx, 408, 429, no answer at all, or
    an answer that is not what the Hub documents (`unparsed`). A request the client could not
    even send (a header that is not valid HTTP, such as a token with a line break; an endpoint
    that is no http(s) URL), or an endpoint without Xet, fails the same way every time."""
    if isinstance(error, httpx2.LocalProtocolError | httpx2.UnsupportedProtocol):
        return False
    if is_xet_unavailable(error):
        return False
    if isinstance(error, httpx2.TransportError):
        return True
    if isinstance(error, MalformedAnswer) or unparsed(error):
        return True  # a proxy's page or a bug may be gone next time; a commit may have landed
    status = status_of(error)
    return status is not None and (status >= 500 or status in (408, 429))


class HubSession:
    """One dataset repository on one Hub endpoint, with one token (never shown anywhere)."""

    def __init__(
        self,
        repo_id: str,
        *,
        token: str | bool | None = None,
        owned: bool = True,
        max_wait: float | None = None,
    ) -> None:
        """`owned`: the id must be OWNER/NAME (any repository the user names); else a bare
        NAME is accepted too (a dataset a run was measured on). `max_wait`: the longest wait
        for a rate-limit window to reset (None: BUNDLER_MAX_WAIT, else 300 s); see
        bundler.hub.client.ratelimit. `token=False` sends no token at all (not even a saved one)."""
        if not (REPO_ID if owned else DATASET_ID).fullmatch(repo_id):
            raise UnusableSetting(
                "repo_id", repo_id, "expected OWNER/NAME, e.g. my-org/gptnt-leaderboard"
            )
        self.repo_id = repo_id
        self.api = HfApi(token=token, library_name=LIBRARY_NAME, library_version=VERSION)
        self._whoami: dict[str, object] | None = None
        self.known = KnownTrees()
        """What the Hub's answers told of each commit's tree (bundler.hub.client.known)."""
        self.heads: dict[str, str] = {}
        """Heads read with other answers (bundler.hub.client.exists), each for the next `head`."""
        self.no_card: set[str] = set()
        """Commits whose revision answer had no card metadata (bundler.hub.client.exists)."""
        ratelimit.configure(max_wait)
        self.limits = HubLimits()
        """What a commit may leave in the repository; made here, so that every Hub command
        reads BUNDLER_MAX_REPO_FILES as it starts, inside its error handling."""

    def on_wait(self, listener: Callable[[str], None]) -> None:
        """Tell `listener` (one line each) of every wait for a rate-limit window to reset."""
        ratelimit.listen(listener)

    def describe(
        self,
        error: BaseException,
        *,
        doing: str,
        create_pr: bool = False,
        write_hint: str | None = None,
    ) -> HubError:
        """The named error for a client error (`describe_failure`)."""
        return describe_failure(
            error,
            repo=self.repo_id,
            endpoint=self.api.endpoint,
            doing=doing,
            create_pr=create_pr,
            write_hint=write_hint,
            user=None if self._whoami is None else str(self._whoami.get("name") or "") or None,
        )

    def call(self, doing: str, action: Callable[[], T]) -> T:
        """Run an idempotent request, retrying transient faults a few times; an answer that
        is not what the Hub documents (`unparsed`) is one (MalformedAnswer)."""
        for attempt in range(READ_ATTEMPTS):
            try:
                return action()
            except Exception as raised:
                error = MalformedAnswer(doing=doing) if unparsed(raised) else _underlying(raised)
                if not is_transient(error) or attempt == READ_ATTEMPTS - 1:
                    if isinstance(error, CLIENT_FAILURES):
                        raise self.describe(error, doing=doing) from None
                    if isinstance(error, MalformedAnswer):
                        raise error from None
                    raise
                RETRY_WAITS.sleep(retry_after_of(error) or READ_BACKOFF_SECONDS * 2**attempt)
        raise AssertionError("unreachable")

    def whoami_info(self) -> dict[str, object]:
        """whoami's answer for this token, asked once."""
        if self._whoami is None:
            self._whoami = self.call("checking the token", lambda: account(self.api.whoami()))
        return self._whoami

    def whoami(self) -> str:
        return str(self.whoami_info().get("name", "unknown"))

    def rights(self) -> AccessRights:
        """What this token (a CI job's exchanged one too) may do on this repository."""
        exchanged = exchange_resource(self.api.token is not None)  # bundler.core.trusted
        return AccessRights.of(self.whoami_info(), self.repo_id, exchanged_for=exchanged)

    def upload_rights(self, *, dry_run: bool) -> AccessRights | None:
        """The token's rights for an upload. A dry run without any token plans as an
        anonymous reader would (None: nothing to check); with one, it is checked as the
        upload would be."""
        if dry_run and not has_token(self):
            return None
        return self.rights()

    def head(self, revision: str) -> str:
        """The commit sha a revision points at now. Only the sha is asked for (`expand`): the
        Hub's whole answer lists every file (`siblings`, about 80 bytes a file), some 16 MB for
        a leaderboard of 100,000 bundles."""
        if (known := self.heads.pop(revision, None)) is not None:
            return known
        ask = partial(self.api.dataset_info, self.repo_id, revision=revision, expand=["sha"])
        info = self.call(f"reading revision {revision!r}", lambda: validated(RevisionAnswer, ask()))
        if info.sha is None:
            raise HubError(f"reading revision {revision!r}: the Hub gave no commit sha")
        return info.sha

    def paths_info(self, paths: list[str], revision: str) -> dict[str, RemoteFile]:
        """The files at `paths` (folders and missing paths left out)."""
        return _files(self._paths_info(paths, revision, expand=False))

    def existing(self, paths: list[str], revision: str) -> set[str]:
        """Which of `paths`, files or folders, `revision` holds: what the Hub's answers told
        of that commit already (`known`), and one request per 500 paths of the others."""
        tree = self.known.of(revision)
        said = {path: tree.exists(path) for path in paths} if tree is not None else {}
        asked = [path for path in paths if said.get(path) is None]
        found = set(self._paths_info(asked, revision, expand=False)) if asked else set()
        return found | {path for path, there in said.items() if there}

    def entry_count(self, folder: str, revision: str) -> int:
        """The entries `folder` holds at `revision`: as `known` says, else listed."""
        tree = self.known.of(revision)
        count = tree.entries(folder) if tree is not None else None
        return len(self.list_folder(folder, revision)) if count is None else count

    def list_files(self, folder: str, revision: str) -> dict[str, RemoteFile]:
        """Every file below `folder`, in pages of 1,000; none for a folder that is not there."""
        return _files(self._tree(folder, revision, recursive=True, expand=False))

    def read_small_file(self, path: str, revision: str) -> bytes:
        """A small file's bytes in one request (no HEAD, no cache), for sidecars:
        `hf_hub_download` would take two requests and a cache entry per file. A file over
        MAX_SMALL_FILE_BYTES is refused with a HubError."""
        return self.read_file(path, revision, MAX_SMALL_FILE_BYTES)

    def read_file(self, path: str, revision: str, limit: int) -> bytes:
        """A file's bytes in one GET, refused (HubError) past `limit` bytes."""
        return self.read_url(f"reading {path}", self._file_url(path, revision), path, limit)

    def read_url(self, doing: str, url: str, what: str, limit: int) -> bytes:
        """What the Hub answers a GET of `url`, refused (HubError) once `what` is past `limit`
        bytes."""
        chunks: list[bytes] = []
        self._get(doing, url, what, limit, chunks.append, chunks.clear)
        return b"".join(chunks)

    def download_file(self, path: str, revision: str, target: Path, limit: int) -> None:
        """A file saved to `target` in one GET, streamed, refused (HubError) past `limit`
        bytes: one file request where `hf_hub_download` makes two, with no cache entry."""
        with target.open("wb") as handle:
            restart = partial(_rewind, handle)
            url = self._file_url(path, revision)
            self._get(f"downloading {path}", url, path, limit, handle.write, restart)

    def _file_url(self, path: str, revision: str) -> str:
        return hf_hub_url(
            self.repo_id, path, repo_type=REPO_TYPE, revision=revision, endpoint=self.api.endpoint
        )

    def _get(
        self,
        doing: str,
        url: str,
        what: str,
        limit: int,
        write: Callable[[bytes], object],
        restart: Callable[[], None],
    ) -> None:
        """GET `url` in one request, streamed to `write`, refused (HubError) once `what` is
        past `limit` bytes."""

        def fetch() -> None:
            restart()  # a retried request starts the file again
            fetch_once(self, url, what, limit, write)

        self.call(doing, fetch)

    def entries(self, paths: list[str], revision: str) -> dict[str, RemoteEntry]:
        """Files and folders at `paths`, with the last commit that changed each: one request
        per 500 paths, whatever the repository holds."""
        return self._paths_info(paths, revision, expand=True)

    def list_folder(
        self, folder: str, revision: str, *, expand: bool = False
    ) -> dict[str, RemoteEntry]:
        """A folder's own entries (not recursive), in pages of 1,000 (50 when expanded), as
        the Hub pages them; none for a folder that does not exist."""
        return self._tree(folder, revision, recursive=False, expand=expand)

    def _paths_info(
        self, paths: list[str], revision: str, *, expand: bool
    ) -> dict[str, RemoteEntry]:
        found: dict[str, RemoteEntry] = {}
        for start in range(0, len(paths), PATHS_PER_REQUEST):
            lookup = partial(
                self.api.get_paths_info,
                self.repo_id,
                paths[start : start + PATHS_PER_REQUEST],
                expand=expand,
                repo_type=REPO_TYPE,
                revision=revision,
            )
            answer = self.call("reading file information", partial(remote_entries, lookup))
            if (tree := self.known.of(revision)) is not None:
                tree.learn_paths(paths[start : start + PATHS_PER_REQUEST], answer)
            found.update(answer)
        return found

    def _tree(
        self, folder: str, revision: str, *, recursive: bool, expand: bool
    ) -> dict[str, RemoteEntry]:
        def listing() -> dict[str, RemoteEntry]:
            try:
                return remote_entries(
                    lambda: self.api.list_repo_tree(
                        self.repo_id,
                        folder,
                        recursive=recursive,
                        expand=expand,
                        repo_type=REPO_TYPE,
                        revision=revision,
                    )
                )
            except HfHubHTTPError as error:
                if status_of(error) == 404 and not isinstance(
                    error, RepositoryNotFoundError | RevisionNotFoundError
                ):
                    return {}  # the folder does not exist (yet)
                raise

        entries = self.call(f"listing {folder}/" if folder else "listing the top folder", listing)
        if (tree := self.known.of(revision)) is not None:
            tree.learn_listing(folder, entries)
        return entries


def fetch_once(
    session: HubSession, url: str, what: str, limit: int, write: Callable[[bytes], object]
) -> None:
    """GET `url` once (retried by the `HubSession.call` it runs in), streamed to `write`,
    refused (HubError) once `what` is past `limit` bytes; a refusal as the client raises it."""
    headers = build_hf_headers(
        token=session.api.token, library_name=LIBRARY_NAME, library_version=VERSION
    )
    with get_session().stream("GET", url, headers=headers) as response:
        if response.status_code >= 400:
            response.read()
            hf_raise_for_status(response)
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise HubError(f"{what}: larger than {limit} bytes")
            write(chunk)


def has_token(session: HubSession) -> bool:
    """Whether requests carry a token: the one given, else huggingface_hub's resolution (a CI
    job's exchanged token first, then HF_TOKEN, then the stored login), whose exchange may fail
    as any request does."""
    given = session.api.token is not None
    return given or session.call("resolving the token", get_token) is not None


def user_orgs(session: HubSession, user: str) -> frozenset[str]:
    """The organizations the Hub lists on `user`'s profile (`HfApi.get_user_overview`,
    `GET /api/users/{user}/overview`, its `orgs`); none for a name the Hub knows as no user
    (404: an organization's, say). The overview is the public profile, so a membership it
    does not list counts as none: never kinder than what anyone can see."""

    def fetch() -> frozenset[str]:
        try:
            overview = session.api.get_user_overview(user)
        except HfHubHTTPError as error:
            if status_of(error) == 404:
                return frozenset()
            raise
        return frozenset(org.name for org in validated(ProfileAnswer, overview).orgs)

    return session.call(f"reading the organizations of {user}", fetch)


def commit_authors(session: HubSession, revision: str) -> dict[str, CommitAuthors]:
    """Who made each commit of `revision`'s history (`HfApi.list_repo_commits`: the Hub
    pages it, 50 a page on the test server, and the client reads every page)."""
    listing = partial(
        session.api.list_repo_commits, session.repo_id, repo_type=REPO_TYPE, revision=revision
    )

    def authors() -> dict[str, CommitAuthors]:
        commits = (validated(CommitAnswer, commit) for commit in listing())
        return {c.commit_id: CommitAuthors(tuple(c.authors), c.title) for c in commits}

    return session.call(f"listing the commits of {revision!r}", authors)


def _rewind(handle: BinaryIO) -> None:
    handle.seek(0)
    handle.truncate()


def describe_failure(
    error: BaseException,
    *,
    repo: str,
    endpoint: str,
    doing: str,
    create_pr: bool = False,
    write_hint: str | None = None,
    user: str | None = None,
) -> HubError:
    """The named error (bundler.core.errors) for a client error: one class per cause, with its
    fields. `write_hint` is the next step when the token may not write (else: propose a pull
    request instead, or ask the owners when one was asked for); `user` the token's account,
    when whoami was asked already."""
    if unparsed(error):  # an answer the client could not read: never its words
        return MalformedAnswer(doing=doing)
    exchange = exchange_failure(error, doing=doing)
    if exchange is not None:
        return exchange
    status = status_of(error)
    if isinstance(error, LocalTokenNotFoundError) or status == 401:
        return BadCredentials(doing=doing)
    if isinstance(error, httpx2.UnsupportedProtocol):
        return EndpointNotHttp(endpoint, doing=doing)
    if isinstance(error, httpx2.LocalProtocolError):  # its text would show the token
        return InvalidHeader(doing=doing)
    if isinstance(error, RevisionNotFoundError):
        return RevisionNotFound(repo, revision_of(error), doing=doing)
    if is_xet_unavailable(error):
        return XetUnavailable(endpoint, doing=doing)
    if isinstance(error, GatedRepoError):  # a RepositoryNotFoundError too, so asked first
        return GatedRepo(repo, doing=doing)
    if isinstance(error, RepositoryNotFoundError):
        return RepositoryNotFound(repo, doing=doing)
    if status == 403 and "create_pr" in str(error) and not create_pr and write_hint is None:
        return no_write_access(repo, user)  # the Hub's "Forbidden: pass create_pr=1 ..."
    if status == 403:
        remedy: Literal["create-pr", "ask-owners"] = "ask-owners" if create_pr else "create-pr"
        return NoWriteAccess(
            repo, user=user, doing=doing, remedy=None if write_hint else remedy, hint=write_hint
        )
    if status == 429:
        wait = retry_after_of(error)
        announced = _announced(error)
        return RateLimited(
            repo,
            bucket=announced.resource if announced else None,
            reset_at=_now() + timedelta(seconds=announced.seconds) if announced else None,
            retry_after=wait,
            doing=doing,
        )
    said = hub_words(error)
    if is_transient(error):
        return HubDidNotAnswer(status=status, failure=said or type(error).__name__, doing=doing)
    reason = said or f"{type(error).__name__}: {_first_line(error)}"
    return RefusedByHub(status=status, reason=reason, doing=doing)


def exchange_failure(error: BaseException, *, doing: str) -> ExchangeFailed | None:
    """The exchange of the CI's OIDC id token failed (bundler.core.trusted), when `error`
    says so: the client's OIDCError (no id token to exchange), or a refusal, not a temporary
    fault, of the Hub's `/oauth/token` or of the CI's id-token endpoint (GitHub's
    ACTIONS_ID_TOKEN_REQUEST_URL)."""
    resource = os.environ.get(RESOURCE_VARIABLE)
    if not resource:
        return None
    if isinstance(error, OIDCError):
        return ExchangeFailed(resource, cause="no-id-token", doing=doing)
    if not isinstance(error, HfHubHTTPError) or error.response is None or is_transient(error):
        return None
    url = str(error.response.url)
    if urlsplit(url).path.endswith("/oauth/token"):
        return ExchangeFailed(resource, cause="refused", doing=doing)
    minting = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL", "").partition("?")[0]
    if minting and url.startswith(minting):
        return ExchangeFailed(resource, cause="no-id-token", doing=doing)
    return None


MAX_REASON_CHARS = 1000
"""The longest reason of the Hub's shown: one line, whatever the Hub sent."""


def hub_words(error: BaseException) -> str | None:
    """What the Hub itself said of a failed request, on one line: its message (the body's
    `error`, `X-Error-Message`), which the client keeps apart as `server_message`; else the
    client's first line that is more than the request's id. Never the client's first line
    when the Hub said something: that is the client's words ("Bad request for commit
    endpoint:") or the request's id alone, and the Hub's reason follows on the next lines.
    None without an HTTP answer."""
    if not isinstance(error, HfHubHTTPError) or error.response is None:
        return None
    lines = [line for line in str(error).splitlines() if line.strip()]
    client = next((line for line in lines if not line.startswith("(Request ID")), "")
    said = " ".join((error.server_message or client).split()) or type(error).__name__
    return said if len(said) <= MAX_REASON_CHARS else said[: MAX_REASON_CHARS - 3] + "..."


_REVISION_IN_URL = re.compile(r"/(?:revision|tree|paths-info|commits?|preupload|resolve)/([^/?#]+)")
"""Where a revision stands in the address of the Hub's requests that name one."""


def revision_of(error: HfHubHTTPError) -> str | None:
    """The revision the failed request named, read from its address (percent-decoded); the
    client's RevisionNotFoundError carries the repository but not the revision."""
    if error.response is None:
        return None
    found = _REVISION_IN_URL.search(str(error.response.url))
    return unquote(found.group(1)) if found else None


def _announced(error: BaseException) -> ratelimit.Announced | None:
    if not isinstance(error, HfHubHTTPError) or error.response is None:
        return None
    return ratelimit.announced(error.response.headers)


def _now() -> datetime:
    return datetime.now(UTC)


def _files(entries: dict[str, RemoteEntry]) -> dict[str, RemoteFile]:
    return {path: entry for path, entry in entries.items() if isinstance(entry, RemoteFile)}


def _underlying(error: Exception) -> Exception:
    """What really failed: a download whose metadata request failed is reported by the client
    as a cache miss (LocalEntryNotFoundError) caused by the HTTP or connection error."""
    cause = error.__cause__
    if isinstance(error, LocalEntryNotFoundError) and isinstance(cause, Exception):
        return cause
    return error


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
