"""The Hub's rate limits, waited out within a bound, or reported with when they reset.

A 429 from the Hub carries `RateLimit: "api";r=0;t=<seconds to reset>` (and a
`RateLimit-Policy`), and sometimes `Retry-After`. huggingface_hub's own backoff
(`utils._http.http_backoff`, used by hf_hub_download, preupload, the LFS batch and paginated
listings such as list_repo_tree) sleeps that reset + 1 s, up to 5 times, with no setting, no
constant and no environment variable to bound it: a 15-minute window would stall one call for
over an hour.

The bound is put on the client's shared HTTP session instead, without patching the client:
`install` sets huggingface_hub's public `set_client_factory` to its default client plus a
response hook (`_on_response`). On a 429 whose announced wait is longer than the policy's
`max_wait`, the hook raises HubRateLimitError: an exception the client does not retry, so it
leaves every entry point at once (our own retries, and `commit_replanned`, stop on it too) and
the command ends with exit 75, saying when the window resets. A shorter wait is noted (the
command's report shows it as a warning) and waited out, by the client or by our retries.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx2
from huggingface_hub import set_client_factory
from huggingface_hub.utils import (  # type: ignore[attr-defined]  # a lazily exported name
    parse_ratelimit_headers,
)

from bundler.core.environment import max_wait_seconds
from bundler.core.errors import RateLimitOutlasts
from bundler.core.limits import MAX_WAIT_SETTING

DEFAULT_MAX_WAIT = 300.0
"""Seconds a command waits for one rate-limit window to reset: the Hub's windows are 5
minutes, so a nightly job waits out one window and gives up (exit 75) on anything longer."""


MAX_ANNOUNCED_SECONDS = MAX_WAIT_SETTING
"""A wait longer than a century is no wait a clock should show: it counts as unbounded."""


@dataclass(frozen=True)
class Announced:
    """What a 429 asked for: `seconds` to wait, for `resource` ("api", "resolvers", ...)."""

    seconds: float
    resource: str | None


def announced(headers: Mapping[str, str]) -> Announced | None:
    """The wait a 429's headers announce: Retry-After when present, else the RateLimit
    header's reset (when no request remains), as huggingface_hub reads them."""
    retry_after = headers.get("Retry-After")
    if retry_after is not None:
        try:
            return Announced(_bounded(float(retry_after)), None)
        except ValueError:
            pass
    info = parse_ratelimit_headers(headers)
    if info is not None and info.remaining == 0:
        return Announced(_bounded(float(info.reset_in_seconds)), info.resource_type)
    return None


def _bounded(seconds: float) -> float:
    """A wait as announced, or infinity for one no clock can reach (`inf`, `nan`, or later than
    a datetime can say): longer than any command waits, so it ends with exit 75, not a crash."""
    if not math.isfinite(seconds) or seconds > MAX_ANNOUNCED_SECONDS:
        return math.inf
    return max(0.0, seconds)


def too_long(wait: Announced, max_wait: float, now: datetime | None = None) -> RateLimitOutlasts:
    """The error that ends a command whose rate-limit window resets after `max_wait`."""
    reset_at = None
    if math.isfinite(wait.seconds):
        reset_at = (now or datetime.now(UTC)) + timedelta(seconds=wait.seconds)
    return RateLimitOutlasts(
        bucket=wait.resource,
        reset_at=reset_at,
        retry_after=wait.seconds,
        max_wait=max_wait,
    )


def waiting_note(wait: Announced) -> str:
    what = f"the Hub's {wait.resource} rate limit" if wait.resource else "the Hub's rate limit"
    return f"waited {wait.seconds:.0f} s for {what} to reset (HTTP 429)"


def max_wait_from_env() -> float:
    """MAX_WAIT_ENV's seconds, read when a command runs, else DEFAULT_MAX_WAIT."""
    seconds = max_wait_seconds()
    return DEFAULT_MAX_WAIT if seconds is None else seconds


@dataclass
class Policy:
    """The bound every Hub request of this process follows (the client's session is shared)."""

    max_wait: float = DEFAULT_MAX_WAIT
    listener: Callable[[str], None] | None = None
    """Told of each wait; the command being run sets it (one command runs at a time)."""

    def note(self, text: str) -> None:
        if self.listener is not None:
            self.listener(text)


POLICY = Policy()
_installed = False
_install_lock = threading.Lock()


def configure(max_wait: float | None = None) -> None:
    """Bound the waits of this process's Hub requests (None: BUNDLER_MAX_WAIT, else 300 s)."""
    POLICY.max_wait = max_wait_from_env() if max_wait is None else max_wait
    install()


def listen(listener: Callable[[str], None]) -> None:
    """Have `listener` told of every rate-limit wait from now on (one line each); the
    command that reports (an upload's report) names it, replacing any earlier one."""
    POLICY.listener = listener


def _on_response(response: httpx2.Response) -> None:
    if response.status_code != 429:
        return
    wait = announced(response.headers)
    if wait is None:
        return  # no reset announced: the callers' short backoff applies
    if wait.seconds > POLICY.max_wait:
        raise too_long(wait, POLICY.max_wait)
    POLICY.note(waiting_note(wait))


def bounded_client() -> httpx2.Client:
    """huggingface_hub's default client, with the rate-limit hook on its responses."""
    from huggingface_hub.utils._http import default_client_factory

    client = default_client_factory()
    client.event_hooks = {
        **client.event_hooks,
        "response": [*client.event_hooks.get("response", []), _on_response],
    }
    return client


def install() -> None:
    """Make the client's shared session the bounded one (once per process)."""
    global _installed
    with _install_lock:
        if not _installed:
            set_client_factory(bounded_client)
            _installed = True
