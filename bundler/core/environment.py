"""The environment variables the bundler reads itself (BUNDLER_MAX_REPO_FILES,
BUNDLER_MAX_WAIT; HF_* are huggingface_hub's, and BUNDLER_SUBMITTER_* are options' defaults
that typer reads), read when a command runs, never when a module is imported: a value that
cannot be used is then a UsageError naming the variable (one line, exit 2), handled as an
option's value is, where an error at import time ends every command in a traceback.

Each value is checked as text before it is converted, so that no length of digits reaches
int() (which refuses over 4,300 digits with a ValueError) or float() (which makes 1e309 inf).
"""

from __future__ import annotations

import contextlib
import math
import os

from bundler.core.errors import UsageError
from bundler.core.limits import MAX_REPO_FILES_SETTING, MAX_WAIT_SETTING

MAX_REPO_FILES_ENV = "BUNDLER_MAX_REPO_FILES"
"""Files the repositories of this environment may hold, where their owners agreed more with the
Hub than it recommends (bundler.hub.client.limits)."""
MAX_WAIT_ENV = "BUNDLER_MAX_WAIT"
"""The longest wait for a Hub rate-limit window to reset (bundler.hub.client.ratelimit)."""

SHOWN_CHARS = 40
"""How much of a refused value the refusal quotes: enough to recognise a typo, and one line
however long the value is."""


def _shown(name: str, value: str) -> str:
    if len(value) <= SHOWN_CHARS:
        return f"{name}={value!r}"
    return f"{name}={value[:SHOWN_CHARS]!r}... ({len(value):,} characters)"


def _text(name: str) -> str:
    return os.environ.get(name, "").strip()


def max_repo_files() -> int | None:
    """MAX_REPO_FILES_ENV's number, None when it is unset."""
    return count_from_env(MAX_REPO_FILES_ENV, maximum=MAX_REPO_FILES_SETTING, noun="files")


def max_wait_seconds() -> float | None:
    """MAX_WAIT_ENV's seconds, None when it is unset."""
    return seconds_from_env(MAX_WAIT_ENV, maximum=MAX_WAIT_SETTING)


def check_hub_environment(max_wait: float | None = None) -> None:
    """Refuse (UsageError, exit 2) a bad value of the variables every Hub session reads
    (MAX_WAIT_ENV unless `max_wait` is given, as an option wins over it; MAX_REPO_FILES_ENV):
    for a command that works locally before it opens a session (sync collects first), so
    that it stops before the work rather than after. Reads no module of the Hub's."""
    if max_wait is None:
        max_wait_seconds()
    max_repo_files()


def count_from_env(name: str, *, maximum: int, noun: str) -> int | None:
    """The whole number (1 to `maximum`) in the variable `name`, or None when it is unset or
    empty; UsageError otherwise."""
    value = _text(name)
    if not value:
        return None
    digits = value.isascii() and value.isdigit() and len(value) <= len(str(maximum))
    if digits and 1 <= int(value) <= maximum:
        return int(value)
    raise UsageError(f"{_shown(name, value)}: expected a number of {noun} from 1 to {maximum:,}")


def seconds_from_env(name: str, *, maximum: float) -> float | None:
    """The number of seconds (0 to `maximum`, finite) in the variable `name`, or None when it
    is unset or empty; UsageError otherwise."""
    value = _text(name)
    if not value:
        return None
    seconds = math.nan
    if value.isascii() and len(value) <= SHOWN_CHARS:
        with contextlib.suppress(ValueError):
            seconds = float(value)
    if not 0 <= seconds <= maximum:
        raise UsageError(
            f"{_shown(name, value)}: expected a number of seconds from 0 to {maximum:,.0f}"
        )
    return seconds
