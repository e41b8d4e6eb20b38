"""One hierarchy of named errors, so callers catch meaning rather than parse messages.

Every error names the file (or thing) and the problem on one line, and where there is an
obvious next step, a hint says what to do. An error is data first: its class, a stable `kind`
(what a `--json` reader or a scheduler acts on), and typed fields (the repository, the revision,
the status the Hub answered). The words here are the library's, for any caller; none names a
command-line flag, because the library does not know how it was called. The command line words
each error in its own terms, in one table (bundler.cli.error_words), as huggingface_hub's `hf`
does (`RepositoryNotFoundError(repo_id)` in the library, the words in `cli/_errors.py`). Where
the next step is one the command line offers as a flag, the error says so as data, a `remedy`.
"""

from __future__ import annotations

import signal
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Literal

from bundler.core.exitcodes import TEMPORARY

Remedy = Literal[
    "bundle-partial",
    "publish-partial",
    "export-partial",
    "check-expected-rows",
    "replace",
    "create-pr",
    "ask-owners",
    "accept-warnings",
    "name-submitter",
    "define-task",
    "name-output-root",
    "verify-folder",
    "derive-tables",
    "upgrade-layout",
    "start-leaderboard",
    "sign-bundle",
]
"""What the person can do next when the command line offers it (a flag, a command): named, not
worded, since only bundler.cli.error_words knows the command line's words. In order: bundle,
publish or export a partial run; check the expected rows; replace; open a pull request; ask for
write access; accept a merge's warnings; name the submitter; define the task; name the harness's
folder; verify a folder; derive the tables; upgrade a layout; start a leaderboard; sign a bundle."""


class BundlerError(Exception):
    """Base of every error the bundler raises on purpose; anything else is a bug.

    `exit_code` is what the command exits with when this error ends it: 1 when some work
    failed, 2 when the input or the command line could not be used at all, 75 when the same
    command may succeed later (see bundler.core.exitcodes).
    """

    exit_code: ClassVar[int] = 1
    kind: ClassVar[str] = "error"
    """Stable, one per class: what a `--json` reader acts on, rather than the words."""
    remedy: Remedy | None = None
    """What the person can do next, when the command line offers it (see Remedy)."""

    def __init__(
        self, message: str, *, hint: str | None = None, remedy: Remedy | None = None
    ) -> None:
        super().__init__(message)
        self.message, self.hint, self.remedy = message, hint, remedy

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} ({self.hint})"


class UsageError(BundlerError):
    """The command line or the input as a whole cannot be used at all (exit code 2)."""

    exit_code: ClassVar[int] = 2
    kind: ClassVar[str] = "usage"


Setting = Literal["repo_id", "bundle_ids", "model_repo", "setup"]
"""A value given to the library, by the name of the parameter it was given as."""


class UnusableSetting(UsageError):
    """A value the caller gave cannot be used as given: `setting` names the parameter (the
    command line words it as its option), `value` is what was given, `problem` what is wrong."""

    kind: ClassVar[str] = "unusable-setting"

    def __init__(self, setting: Setting, value: str, problem: str) -> None:
        super().__init__(f"{setting} {value!r}: {problem}")
        self.setting = setting
        self.value = value
        self.problem = problem


class PullRequestRevision(UsageError):
    """A pull request's ref (refs/pr/N) where only a branch will do: bundles are published to
    a branch or proposed as a pull request (`target` "bundles", remedy "create-pr"), and the
    card lives on the branch a pull request merges into (`target` "card")."""

    kind: ClassVar[str] = "revision-is-pull-request"

    def __init__(self, revision: str, *, target: Literal["bundles", "card"]) -> None:
        if target == "bundles":
            message = (
                f"revision {revision}: bundles are published to a branch, or proposed as a pull "
                "request, never committed into a pull request's ref"
            )
            hint = "propose them against the branch the pull request targets: that adds to it"
        else:
            message = f"revision {revision}: the card lives on a branch, never in a pull request"
            hint = "regenerate the card of the branch the pull request merges into"
        super().__init__(message, hint=hint, remedy="create-pr" if target == "bundles" else None)
        self.revision = revision
        self.target = target


class TemporaryError(BundlerError):
    """A failure that says nothing about the input: trying again later may succeed (exit code
    75, EX_TEMPFAIL, so a scheduler retries instead of paging someone)."""

    exit_code: ClassVar[int] = TEMPORARY
    kind: ClassVar[str] = "temporary"


class InputError(BundlerError):
    """One input file departs from the statics output format; its run is refused. `remedy`:
    what the command line offers for it (a partial run may be bundled marked partial)."""

    kind: ClassVar[str] = "input"

    def __init__(
        self,
        path: Path | str,
        problem: str,
        *,
        hint: str | None = None,
        remedy: Remedy | None = None,
    ) -> None:
        super().__init__(f"{path}: {problem}", hint=hint, remedy=remedy)
        self.path, self.problem = str(path), problem


class RowError(BundlerError):
    """A row file in the dataset repository is not one the bundler writes (a stranger's pull
    request may hold anything); the caller names the file."""

    kind: ClassVar[str] = "row"

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class WriteError(BundlerError):
    """Writing a bundle failed (full disk, permissions); nothing partial was left behind.
    `path` is the file that could not be written, when the message begins with it."""

    kind: ClassVar[str] = "write"

    def __init__(self, message: str, *, path: Path | str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.path = None if path is None else str(path)


class HubError(BundlerError):
    """The Hub refused or failed a request in a way the user can act on."""

    kind: ClassVar[str] = "hub"


class HubAccessError(HubError):
    """Bad or missing token, no write access, no such repository or revision, wrong repository
    type: nothing can be done until the user changes what they asked for (exit code 2)."""

    exit_code: ClassVar[int] = 2
    kind: ClassVar[str] = "hub-access"


# One class per cause the Hub client's failures are told apart by (describe_failure in
# bundler.hub.client.session). `doing` says what was being done ("reading revision 'main'");
# it begins the message. None: raised before any request, from what whoami said.


class BadCredentials(HubAccessError):
    """The Hub rejected the token (401), or there is none where one is needed: nothing gets
    further until the token is fixed, and a retry would be refused again."""

    kind: ClassVar[str] = "bad-credentials"

    def __init__(self, *, doing: str) -> None:
        super().__init__(
            f"{doing}: the Hub rejected the credentials (missing or invalid token)",
            hint="set HF_TOKEN, or run `hf auth login`",
        )
        self.doing = doing


class EndpointNotHttp(HubAccessError):
    """The Hub's address (HF_ENDPOINT) is no http(s) URL: no request was sent, and none will
    be until the setting is fixed."""

    kind: ClassVar[str] = "endpoint-not-http"

    def __init__(self, endpoint: str, *, doing: str) -> None:
        super().__init__(
            f"{doing}: the Hub's address is not an http(s) URL",
            hint="check HF_ENDPOINT (for example https://huggingface.co), or unset it",
        )
        self.endpoint, self.doing = endpoint, doing


class InvalidHeader(HubAccessError):
    """The client refused to send a header that is not valid HTTP: in practice a token with a
    space or a line break. The client's own text would show the token, so only this is said."""

    kind: ClassVar[str] = "invalid-header"

    def __init__(self, *, doing: str) -> None:
        super().__init__(
            f"{doing}: the request could not be sent: a header is not valid HTTP",
            hint="check the token (HF_TOKEN) for spaces or line breaks",
        )
        self.doing = doing


class RevisionNotFound(HubAccessError):
    """The repository has no such branch, tag, pull request or commit; `revision` is the one
    the request named (None when the request's address did not say)."""

    kind: ClassVar[str] = "revision-not-found"

    def __init__(self, repo: str, revision: str | None, *, doing: str) -> None:
        super().__init__(
            f"{doing}: the revision does not exist in dataset {repo}",
            hint="a revision is a branch, a tag, refs/pr/N or a commit sha",
        )
        self.repo, self.revision, self.doing = repo, revision, doing


class XetUnavailable(HubAccessError):
    """The endpoint offers no Xet storage (a Hub-compatible server, not huggingface.co): the
    client asks it for a Xet token when hf-xet is installed, and every try fails alike."""

    kind: ClassVar[str] = "xet-unavailable"

    def __init__(self, endpoint: str, *, doing: str) -> None:
        super().__init__(
            f"{doing}: the Hub at {endpoint} offers no Xet storage "
            "(HTTP 404 on its xet-write-token endpoint)",
            hint="set HF_HUB_DISABLE_XET=1 for a Hub-compatible server without Xet storage "
            "(never for huggingface.co)",
        )
        self.endpoint, self.doing = endpoint, doing


class GatedRepo(HubAccessError):
    """The repository is gated and this account was not let in: it exists, and its files
    stay closed until its owners grant access."""

    kind: ClassVar[str] = "gated-repo"

    def __init__(self, repo: str, *, doing: str) -> None:
        super().__init__(f"{doing}: dataset {repo} is gated; request access first")
        self.repo, self.doing = repo, doing


class RepositoryNotFound(HubAccessError):
    """No dataset of this id this token can see (the Hub tells no missing one from a private)."""

    kind: ClassVar[str] = "repository-not-found"

    def __init__(self, repo: str, *, doing: str | None = None) -> None:
        what = f"dataset {repo} was not found or is not visible with this token"
        super().__init__(
            what if doing is None else f"{doing}: {what}",
            hint="check the repository's id (a typo?), and that the token can see it",
            remedy="start-leaderboard",
        )
        self.repo, self.doing = repo, doing


class NoWriteAccess(HubAccessError):
    """The token may not commit to `repo` (the Hub's 403, or whoami said so first). `user`:
    the token's account, when known. `remedy` "create-pr" when a pull request would do,
    "ask-owners" when one was asked for already; None when the caller's `hint` knows better."""

    kind: ClassVar[str] = "no-write-access"

    def __init__(
        self,
        repo: str,
        *,
        user: str | None = None,
        doing: str | None = None,
        remedy: Literal["create-pr", "ask-owners"] | None = "create-pr",
        hint: str | None = None,
    ) -> None:
        if hint is None and remedy is not None:
            hint = {
                "create-pr": "propose the bundles as a pull request instead",
                "ask-owners": "ask the repository's owners for access",
            }[remedy]
        super().__init__(
            f"no write access to {repo}"
            if doing is None
            else f"{doing}: this token has no write access to {repo}",
            hint=hint,
            remedy=remedy,
        )
        self.repo, self.user, self.doing = repo, user, doing


SUBMITTER_TOKEN = "a write token of your own account"
MAINTAINER_TOKEN = "a write token of an account in the organization that owns the repository"


class ReadOnlyToken(HubAccessError):
    """A read token where publishing needs a write one: a submitter's own for a pull request
    (`pull_request`), a maintainer's to publish to the branch."""

    kind: ClassVar[str] = "read-only-token"

    def __init__(self, repo: str, *, user: str, pull_request: bool) -> None:
        needed = (
            f"opening a pull request needs {SUBMITTER_TOKEN} (or a fine-grained token allowed "
            "to open pull requests there)"
            if pull_request
            else f"publishing needs {MAINTAINER_TOKEN}, or a pull request with {SUBMITTER_TOKEN}"
        )
        super().__init__(f"{repo}: this token is read-only; {needed}")
        self.repo, self.user, self.pull_request = repo, user, pull_request


class WrongRepoType(HubAccessError):
    """The id names a model or Space repository (`repo_type`), not a dataset: bundles go to a
    dataset only, and none is created beside a repository of another type by mistake."""

    kind: ClassVar[str] = "wrong-repo-type"

    def __init__(self, repo: str, repo_type: str) -> None:
        super().__init__(
            f"{repo} is a {repo_type} repository, not a dataset",
            hint="bundles are published to a dataset repository",
        )
        self.repo, self.repo_type = repo, repo_type


class RepositoryNotEmpty(BundlerError):
    """`init` found files where it was to start a leaderboard (`found`, each folder with a
    trailing `/`): it writes nothing beside what it did not write unless asked to adopt them
    (`adoptable`), and never over a file of theirs (`adoptable` False: `found` are the files
    the board would write over). A person must look: exit 1."""

    kind: ClassVar[str] = "repository-not-empty"

    def __init__(self, repo: str, found: list[str], *, adoptable: bool) -> None:
        what = "holds" if adoptable else "holds files the board writes:"
        super().__init__(f"{repo} already {what} {_some(found)}")
        self.repo, self.found, self.adoptable = repo, found, adoptable


ReviewAction = Literal["comment", "merge"]
"""What a review does on the Hub when asked to: post its report, merge a clean PR."""
_REVIEW_DOING = {"comment": "commenting", "merge": "merging"}


class ReviewNotAllowed(HubAccessError):
    """The token may not do what the review was asked to (`action`): commenting needs a token
    allowed to comment, merging write access; `problem` says what the token lacks."""

    kind: ClassVar[str] = "review-not-allowed"

    def __init__(self, repo: str, *, action: ReviewAction, problem: str) -> None:
        needs = f"a token allowed to comment on {repo}" if action == "comment" else ""
        super().__init__(
            f"{_REVIEW_DOING[action]} needs {needs or f'write access to {repo}'}: {problem}",
            hint=f"use {MAINTAINER_TOKEN}; reviewing alone needs none",
        )
        self.repo, self.action, self.problem = repo, action, problem


class WriteTokenRequired(HubAccessError):
    """A review was asked to change the Hub (`actions`), and the token cannot: `reason` is
    "missing" (no token at all) or "read-only" (a read token)."""

    kind: ClassVar[str] = "write-token-required"

    def __init__(
        self, reason: Literal["missing", "read-only"], actions: tuple[ReviewAction, ...]
    ) -> None:
        problem = "no token was given" if reason == "missing" else "this token is read-only"
        doing = " and ".join(_REVIEW_DOING[action] for action in actions)
        super().__init__(
            f"{doing} need{'s' if len(actions) == 1 else ''} a write token: {problem}",
            hint="set HF_TOKEN to a write token; reviewing alone needs none",
        )
        self.reason, self.actions = reason, actions


class HubRateLimitError(HubError, TemporaryError):
    """The Hub asked us to slow down; `retry_after` says when trying again makes sense."""

    kind: ClassVar[str] = "hub-rate-limit"

    def __init__(self, message: str, *, retry_after: float | None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.retry_after = retry_after


class RateLimited(HubRateLimitError):
    """A 429, after the client's retries and ours: `bucket` is the quota it counts against
    ("api", "resolvers"...), `reset_at` when that resets, when the Hub said (`retry_after`
    the same in seconds from then)."""

    kind: ClassVar[str] = "rate-limited"

    def __init__(
        self,
        repo: str,
        *,
        bucket: str | None,
        reset_at: datetime | None,
        retry_after: float | None,
        doing: str,
    ) -> None:
        when = f"in {retry_after:.0f} s" if retry_after is not None else "in a few minutes"
        super().__init__(
            f"{doing}: the Hub is rate limiting requests to {repo}",
            retry_after=retry_after,
            hint=f"try again {when}",
        )
        self.repo, self.bucket, self.reset_at, self.doing = repo, bucket, reset_at, doing


class RateLimitOutlasts(HubRateLimitError):
    """A 429 whose window resets later than the command waits (`max_wait` seconds): ended at
    once, not stalled in the client's own backoff (bundler.hub.client.ratelimit). `reset_at` is
    None for a reset no clock can show (a stranger's server may say `Retry-After: inf`)."""

    kind: ClassVar[str] = "rate-limit-outlasts-wait"

    def __init__(
        self, *, bucket: str | None, reset_at: datetime | None, retry_after: float, max_wait: float
    ) -> None:
        what = f"the Hub's {bucket} rate limit" if bucket else "the Hub's rate limit"
        when = "announced no reset this command can wait for"
        if reset_at is not None:
            when = f"resets in {retry_after:.0f} s (at {reset_at:%H:%M} UTC)"
        super().__init__(
            f"{what} {when}, longer than the {max_wait:g} s this command waits",
            retry_after=retry_after,
            hint="run the same command again then, or allow longer waits (BUNDLER_MAX_WAIT)",
        )
        self.bucket, self.reset_at, self.max_wait = bucket, reset_at, max_wait


class HubUnavailableError(HubError, TemporaryError):
    """A server error or a dropped connection: the request may or may not have taken effect."""

    kind: ClassVar[str] = "hub-unavailable"


class HubDidNotAnswer(HubUnavailableError):
    """A 5xx, a 408 or no answer at all, after the retries: the same request may succeed
    later. `status`: None when no HTTP answer came; `failure`: what the Hub said, or else
    the name of the client's exception."""

    kind: ClassVar[str] = "hub-did-not-answer"

    def __init__(self, *, status: int | None, failure: str, doing: str) -> None:
        detail = f"HTTP {status}: {failure}" if status else failure
        message = f"{doing}: the Hub did not answer properly ({detail})"
        super().__init__(message, hint="run the same command again; it resumes where it stopped")
        self.status, self.failure, self.doing = status, failure, doing


class MalformedAnswer(HubUnavailableError):
    """The Hub answered, after the retries, not with what it documents (not JSON, cut short,
    another shape); what it sent is never quoted (untrusted text), and a later try may do."""

    kind: ClassVar[str] = "hub-malformed-answer"

    def __init__(self, *, doing: str) -> None:
        self.doing, message = doing, f"{doing}: the Hub's answer was not the JSON it documents"
        super().__init__(message, hint="run the same command again; it resumes where it stopped")


class RefusedByHub(HubError):
    """Any other refusal (400, 413...): its `status` (None without an HTTP answer) and the
    `reason` the Hub gave (its own words, else the client's exception's name and text)."""

    kind: ClassVar[str] = "refused-by-hub"

    def __init__(self, *, status: int | None, reason: str, doing: str) -> None:
        detail = f"HTTP {status}: {reason}" if status else reason
        super().__init__(f"{doing}: the Hub refused the request ({detail})")
        self.status, self.reason, self.doing = status, reason, doing


class BundlesLockedError(TemporaryError):
    """Another bundler process holds the bundles folder's lock (exit code 75: retry later).

    Carries what the holder recorded about itself, so the message can name it; any of it may
    be missing when the holder has only just taken the lock."""

    kind: ClassVar[str] = "bundles-locked"

    def __init__(
        self,
        bundles_dir: Path,
        *,
        waited: float,
        pid: int | None,
        started: str | None,
        host: str | None,
        operation: str | None,
    ) -> None:
        holder = f"pid {pid}" if pid is not None else "another bundler process"
        details = [
            *([f"bundler {operation}"] if operation else []),
            *([f"on {host}"] if host else []),
            *([f"since {started}"] if started else []),
        ]
        shown = f"{holder} ({', '.join(details)})" if details else holder
        waited_text = f" after waiting {waited:g} s" if waited > 0 else ""
        super().__init__(
            f"{bundles_dir}: in use by {shown}; gave up{waited_text}",
            hint="run again later, or wait longer for it",
        )
        self.bundles_dir, self.waited, self.pid = str(bundles_dir), waited, pid
        self.started, self.host, self.operation = started, host, operation


class NoRunSelectedError(UsageError):
    """Run filters that matched no run, so nothing the user asked for can be done.

    `unmatched` maps a CollectOptions field (`tasks`, `models`) to the values that matched no
    run; when each value matched some run but their combination selects none, it holds them all.
    """

    kind: ClassVar[str] = "no-run-selected"

    def __init__(
        self, unmatched: dict[str, list[str]], known: dict[str, list[str]] | None = None
    ) -> None:
        shown = "; ".join(f"{field} {', '.join(values)}" for field, values in unmatched.items())
        hint = "a task is statics.task_name; a model is player_name or model_name"
        there = "; ".join(
            f"{field} here: {_some(values)}" for field, values in (known or {}).items() if values
        )
        super().__init__(
            f"the filters matched no run ({shown})", hint=f"{there} ({hint})" if there else hint
        )
        self.unmatched = unmatched
        self.known = known or {}


MAX_NAMES_SHOWN = 20
"""How many of the names that exist a hint lists before saying how many more there are."""


def _some(values: list[str]) -> str:
    more = len(values) - MAX_NAMES_SHOWN
    return ", ".join(values[:MAX_NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


class NotCanonicalError(BundlerError):
    """A bundle departs from the one form collect writes: its zstd frames (`part` "zstd") or
    its tar stream (`part` "members"). Verify refuses it at once rather than interpret it."""

    kind: ClassVar[str] = "not-canonical"

    def __init__(self, part: str, problem: str) -> None:
        super().__init__(f"not a canonical bundle: {problem}")
        self.part = part
        self.problem = problem


class SignatureError(BundlerError):
    """A bundle's signature cannot be read, made or trusted: `problem` says why. A stranger's
    that fails is a finding, which verify records as a failed check; this error ends a command
    only when the user's own key cannot sign (exit 2: the key must be fixed first)."""

    exit_code: ClassVar[int] = 2
    kind: ClassVar[str] = "signature"

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class Terminated(BaseException):
    """SIGTERM (a CI timeout, `kill`), raised like Ctrl-C (KeyboardInterrupt) so every atomic
    write cleans up, and a sync's report still says what happened."""


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a command: raised as KeyboardInterrupt and Terminated while it works
(bundler.cli.signals), held during a commit (bundler.local.fileio.signals_held), and acted on
once by a forked helper (bundler.core.forked)."""
