"""One hierarchy of named errors, so callers catch meaning rather than parse messages.

Every message is written for the person at the terminal: it names the file (or thing) and the
problem on one line, and where there is an obvious next step, a hint says what to do.
"""

from __future__ import annotations

from pathlib import Path


class BundlerError(Exception):
    """Base of every error the bundler raises on purpose; anything else is a bug."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} ({self.hint})"


class UsageError(BundlerError):
    """The command line or the input as a whole cannot be used at all (exit code 2)."""


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
