"""One hierarchy of named errors, so callers catch meaning rather than parse messages.

Every message is written for the person at the terminal: it names the file (or thing) and the
problem on one line, and where there is an obvious next step, a hint says what to do.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import ClassVar, Literal

from bundler.core.exitcodes import TEMPORARY


class BundlerError(Exception):
    """Base of every error the bundler raises on purpose; anything else is a bug.

    `exit_code` is what the command exits with when this error ends it: 1 when some work
    failed, 2 when the input or the command line could not be used at all, 75 when the same
    command may succeed later (see bundler.core.exitcodes).
    """

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} ({self.hint})"


class UsageError(BundlerError):
    """The command line or the input as a whole cannot be used at all (exit code 2)."""

    exit_code: ClassVar[int] = 2


class TemporaryError(BundlerError):
    """A failure that says nothing about the input: trying again later may succeed (exit code
    75, EX_TEMPFAIL, so a scheduler retries instead of paging someone)."""

    exit_code: ClassVar[int] = TEMPORARY


class InputError(BundlerError):
    """One input file departs from the statics output format; its run is refused."""

    def __init__(self, path: Path | str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: {problem}", hint=hint)
        self.path = str(path)
        self.problem = problem


class RowError(BundlerError):
    """A row file in the dataset repository is not one the bundler writes (a stranger's pull
    request may hold anything); the caller names the file."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class WriteError(BundlerError):
    """Writing a bundle failed (full disk, permissions); nothing partial was left behind.
    `path` is the file that could not be written, when the message begins with it."""

    def __init__(self, message: str, *, path: Path | str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.path = None if path is None else str(path)


class HubError(BundlerError):
    """The Hub refused or failed a request in a way the user can act on."""


class HubAccessError(HubError):
    """Bad or missing token, no write access, no such repository or revision, wrong repository
    type: nothing can be done until the user changes what they asked for (exit code 2)."""

    exit_code: ClassVar[int] = 2


class WriteTokenRequired(HubAccessError):
    """A review was asked to change the Hub (`asked`: the options that write, `--comment`,
    `--merge`), and the token cannot: `reason` is "missing" (no token at all) or "read-only"
    (a read token)."""

    def __init__(self, reason: Literal["missing", "read-only"], asked: tuple[str, ...]) -> None:
        problem = "no token was given" if reason == "missing" else "this token is read-only"
        super().__init__(
            f"{' and '.join(asked)} need{'s' if len(asked) == 1 else ''} a write token: {problem}",
            hint="pass --token or set HF_TOKEN to a write token; reviewing alone needs none",
        )


class HubRateLimitError(HubError, TemporaryError):
    """The Hub asked us to slow down; `retry_after` says when trying again makes sense."""

    def __init__(self, message: str, *, retry_after: float | None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.retry_after = retry_after


class HubUnavailableError(HubError, TemporaryError):
    """A server error or a dropped connection: the request may or may not have taken effect."""


class BundlesLockedError(TemporaryError):
    """Another bundler process holds the bundles folder's lock (exit code 75: retry later).

    Carries what the holder recorded about itself, so the message can name it; any of it may
    be missing when the holder has only just taken the lock."""

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
            hint="run again later, or pass --wait SECONDS to wait for it",
        )
        self.bundles_dir = str(bundles_dir)
        self.waited = waited
        self.pid = pid
        self.started = started
        self.host = host
        self.operation = operation


class NoRunSelectedError(UsageError):
    """Run filters that matched no run, so nothing the user asked for can be done.

    `unmatched` maps a CollectOptions field (`tasks`, `models`) to the values that matched no
    run; when each value matched some run but their combination selects none, it holds them all.
    """

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

    def __init__(self, part: str, problem: str) -> None:
        super().__init__(f"not a canonical bundle: {problem}")
        self.part = part
        self.problem = problem


class SignatureError(BundlerError):
    """A bundle's signature cannot be read, made or trusted: `problem` says which and why. A
    stranger's signature that fails is a finding about that bundle, which verify records as a
    failed check; this error ends a command only when the user's own key cannot sign (exit 2:
    the key must be fixed first)."""

    exit_code: ClassVar[int] = 2

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
