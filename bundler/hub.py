"""Talking to the Hugging Face Hub: one session object over the real `huggingface_hub` client,
and the translation of its errors into ones a user can act on.

The client retries some calls itself (preupload, LFS transfers) but not the commit, and not
the small JSON calls. `call` therefore retries the idempotent reads that the bundler's
decisions rest on, so one dropped connection does not abort a nightly upload; the commit's own
faults are handled in `publish`, which first finds out whether the commit landed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import httpx2  # the transport huggingface_hub itself uses; its errors are connection faults
from huggingface_hub import HfApi
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    LocalTokenNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder

from bundler.errors import (
    HubAccessError,
    HubError,
    HubRateLimitError,
    HubUnavailableError,
    UsageError,
)

REPO_TYPE = "dataset"
REPO_ID = re.compile(r"(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}")
"""A Hub repository id: NAME or OWNER/NAME (checked before any request is made)."""
READ_ATTEMPTS = 4
READ_BACKOFF_SECONDS = 0.5
MAX_RETRY_AFTER_SECONDS = 120.0

T = TypeVar("T")


@dataclass(frozen=True)
class RemoteFile:
    """What the Hub holds at a path: its git blob id and, for LFS files, the sha256."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None


def status_of(error: BaseException) -> int | None:
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return error.response.status_code
    return None


def retry_after_of(error: BaseException) -> float | None:
    """Seconds the Hub asked us to wait (Retry-After header), if it said."""
    if not isinstance(error, HfHubHTTPError) or error.response is None:
        return None
    value = error.response.headers.get("Retry-After")
    try:
        return min(float(value), MAX_RETRY_AFTER_SECONDS) if value is not None else None
    except ValueError:
        return None


def is_transient(error: BaseException) -> bool:
    """A fault after which the same request may succeed: 5xx, 408, 429, or no answer at all."""
    if isinstance(error, httpx2.TransportError):
        return True
    status = status_of(error)
    return status is not None and (status >= 500 or status in (408, 429))


class HubSession:
    """One dataset repository on one Hub endpoint, with one token (never shown anywhere)."""

    def __init__(self, repo_id: str, *, token: str | None = None) -> None:
        if not REPO_ID.fullmatch(repo_id):
            raise UsageError(
                f"--repo {repo_id!r}: expected OWNER/NAME, e.g. my-org/gptnt-leaderboard"
            )
        self.repo_id = repo_id
        self.api = HfApi(token=token)

    def describe(self, error: BaseException, *, doing: str, create_pr: bool = False) -> HubError:
        """Turn a client error into a HubError that says what to do next."""
        repo = self.repo_id
        status = status_of(error)
        if isinstance(error, LocalTokenNotFoundError) or status == 401:
            return HubAccessError(
                f"{doing}: the Hub rejected the credentials (missing or invalid token)",
                hint="pass --token, set HF_TOKEN, or run `hf auth login`",
            )
        if isinstance(error, RevisionNotFoundError):
            return HubAccessError(
                f"{doing}: the revision does not exist in dataset {repo}",
                hint="check --revision (a branch, a tag, refs/pr/N or a commit sha)",
            )
        if isinstance(error, GatedRepoError):
            return HubAccessError(f"{doing}: dataset {repo} is gated; request access first")
        if isinstance(error, RepositoryNotFoundError):
            return HubAccessError(
                f"{doing}: dataset {repo} was not found or is not visible with this token",
                hint="check --repo, and that the token can see the repository",
            )
        if status == 403:
            hint = (
                "ask the repository's owners for access"
                if create_pr
                else "pass --create-pr to propose the bundles as a pull request instead"
            )
            return HubAccessError(f"{doing}: this token has no write access to {repo}", hint=hint)
        if status == 429:
            wait = retry_after_of(error)
            when = f"in {wait:.0f} s" if wait is not None else "in a few minutes"
            return HubRateLimitError(
                f"{doing}: the Hub is rate limiting requests to {repo}",
                retry_after=wait,
                hint=f"try again {when}",
            )
        if is_transient(error):
            detail = f"HTTP {status}" if status else type(error).__name__
            return HubUnavailableError(
                f"{doing}: the Hub did not answer properly ({detail})",
                hint="run the same command again; it resumes where it stopped",
            )
        detail = f"HTTP {status}" if status else type(error).__name__
        return HubError(f"{doing}: the Hub refused the request ({detail}: {_first_line(error)})")

    def call(self, doing: str, action: Callable[[], T]) -> T:
        """Run an idempotent request, retrying transient faults a few times."""
        for attempt in range(READ_ATTEMPTS):
            try:
                return action()
            except Exception as raised:
                error = _underlying(raised)
                if not is_transient(error) or attempt == READ_ATTEMPTS - 1:
                    if isinstance(
                        error, HfHubHTTPError | httpx2.HTTPError | LocalTokenNotFoundError
                    ):
                        raise self.describe(error, doing=doing) from None
                    raise
                time.sleep(retry_after_of(error) or READ_BACKOFF_SECONDS * 2**attempt)
        raise AssertionError("unreachable")

    def whoami(self) -> str:
        info = self.call("checking the token", self.api.whoami)
        return str(info.get("name", "unknown"))

    def head(self, revision: str) -> str:
        """The commit sha a revision points at now."""
        info = self.call(
            f"reading revision {revision!r}",
            lambda: self.api.repo_info(self.repo_id, repo_type=REPO_TYPE, revision=revision),
        )
        if info.sha is None:
            raise HubError(f"reading revision {revision!r}: the Hub gave no commit sha")
        return info.sha

    def dataset_exists(self) -> bool:
        return self.call(
            "looking up the repository",
            lambda: self.api.repo_exists(self.repo_id, repo_type=REPO_TYPE),
        )

    def other_type_exists(self) -> str | None:
        """The repository type that does exist under this id, if it is not a dataset."""
        for repo_type in ("model", "space"):
            exists = partial(self.api.repo_exists, self.repo_id, repo_type=repo_type)
            if self.call("looking up the repository", exists):
                return repo_type
        return None

    def paths_info(self, paths: list[str], revision: str) -> dict[str, RemoteFile]:
        found: dict[str, RemoteFile] = {}
        for start in range(0, len(paths), 500):
            lookup = partial(
                self.api.get_paths_info,
                self.repo_id,
                paths[start : start + 500],
                repo_type=REPO_TYPE,
                revision=revision,
            )
            entries = self.call("reading file information", lookup)
            found.update(_remote_files(entries))
        return found

    def list_files(self, folder: str, revision: str) -> dict[str, RemoteFile]:
        def listing() -> list[RepoFile | RepoFolder]:
            try:
                return list(
                    self.api.list_repo_tree(
                        self.repo_id,
                        folder,
                        recursive=True,
                        repo_type=REPO_TYPE,
                        revision=revision,
                    )
                )
            except HfHubHTTPError as error:
                if status_of(error) == 404 and not isinstance(
                    error, RepositoryNotFoundError | RevisionNotFoundError
                ):
                    return []  # the folder does not exist yet
                raise

        return _remote_files(self.call(f"listing {folder}/", listing))


def _remote_files(entries: list[RepoFile | RepoFolder]) -> dict[str, RemoteFile]:
    return {
        entry.path: RemoteFile(
            path=entry.path,
            size=entry.size,
            blob_id=entry.blob_id,
            lfs_sha256=entry.lfs.sha256 if entry.lfs else None,
        )
        for entry in entries
        if isinstance(entry, RepoFile)
    }


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
