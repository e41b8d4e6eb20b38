"""One hierarchy of named errors, so callers catch meaning rather than parse messages.

Every message is written for the person at the terminal: it names the file (or thing) and the
problem on one line, and where there is an obvious next step, a hint says what to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar


class BundlerError(Exception):
    """Base of every error the bundler raises on purpose; anything else is a bug.

    `exit_code` is what the command exits with when this error ends it: 1 when some work
    failed, 2 when the input or the command line could not be used at all.
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


class InputError(BundlerError):
    """One input file departs from the statics output format; its run is refused."""

    def __init__(self, path: Path | str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: {problem}", hint=hint)
        self.path = str(path)
        self.problem = problem


class WriteError(BundlerError):
    """Writing a bundle failed (full disk, permissions); nothing partial was left behind."""


class HubError(BundlerError):
    """The Hub refused or failed a request in a way the user can act on."""


class HubAccessError(HubError):
    """Bad or missing token, no write access, no such repository or revision, wrong repository
    type: nothing can be done until the user changes what they asked for (exit code 2)."""

    exit_code: ClassVar[int] = 2


class HubRateLimitError(HubError):
    """The Hub asked us to slow down; `retry_after` says when trying again makes sense."""

    def __init__(self, message: str, *, retry_after: float | None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.retry_after = retry_after


class HubUnavailableError(HubError):
    """A server error or a dropped connection: the request may or may not have taken effect."""


class NotCanonicalError(BundlerError):
    """A bundle departs from the one form collect writes: its zstd frames (`part` "zstd") or
    its tar stream (`part` "members"). Verify refuses it at once rather than interpret it."""

    def __init__(self, part: str, problem: str) -> None:
        super().__init__(f"not a canonical bundle: {problem}")
        self.part = part
        self.problem = problem
