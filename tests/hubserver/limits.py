"""Rate limits as the Hub applies them, off unless a test turns them on.

Hub docs rate-limits (and hub-protocol.md "Rate limits and page sizes"): requests are counted
per user (here: per token) or, anonymous, per client, in fixed 5-minute windows, with separate
quotas for "api" requests and "resolvers" (file downloads). Past a quota the Hub answers 429 with
`RateLimit: "api";r=0;t=<seconds until the window resets>` and `RateLimit-Policy: "fixed
window";"api";q=<quota>;w=300`; it promises no `Retry-After`, so none is sent. Commits are also
limited per repository (128 an hour has been reported; hub-protocol.md "Hub limits to
respect"), modelled as a fixed one-hour window per repository with the same header style.

Where a window begins is not documented and a client cannot see it (it only reads `t=`), so
here windows are counted from the moment limits were turned on (or reset): a test shorter than
a window never crosses one by chance of the wall clock, which once let a run meant to be
refused pass untouched.

The clock is injectable and can be advanced, so a test crosses a window without sleeping.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from .faults import RateLimitHeaders
from .records import RequestKind
from .store import HubError

HUB_WINDOW_SECONDS = 300
COMMIT_WINDOW_SECONDS = 3600


@dataclass(frozen=True)
class RateLimits:
    """Quotas per window; defaults are the Hub's free-user and anonymous numbers (Hub docs
    rate-limits). `commits_per_hour=None` leaves commits unlimited."""

    api: int = 1000
    resolvers: int = 5000
    anonymous_api: int = 500
    anonymous_resolvers: int = 3000
    window: int = HUB_WINDOW_SECONDS
    commits_per_hour: int | None = 128


class Clock:
    """Seconds since the epoch from `now`, plus whatever a test advanced it by."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self.offset = 0.0

    def __call__(self) -> float:
        return self._now() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class RateLimiter:
    """Counts requests per (client, bucket, window) and commits per (repo, hour)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.limits: RateLimits | None = None
        self._start = clock()
        """When the windows began: when limits were last turned on or reset."""
        self._counts: dict[tuple[str, str, int], int] = {}
        self._commits: dict[tuple[str, str, int], int] = {}

    def enable(self, limits: RateLimits) -> None:
        self.limits = limits
        self.reset()

    def disable(self) -> None:
        self.limits = None
        self.reset()

    def reset(self) -> None:
        """Forget every count, and start every window afresh now."""
        self._start = self.clock()
        self._counts.clear()
        self._commits.clear()

    def _window(self, seconds: int) -> tuple[int, int]:
        """(window index, whole seconds until it ends, at least 1), windows of `seconds`
        counted from `_start`."""
        elapsed = self.clock() - self._start
        index = math.floor(elapsed / seconds)
        return index, max(1, math.ceil((index + 1) * seconds - elapsed))

    def check_request(self, kind: RequestKind, client: str, anonymous: bool) -> None:
        """Count one request; a 429 HubError once this client's quota for `kind` is spent.

        `client` identifies the caller (a digest of the token, or the anonymous client's
        address); the token itself is never kept as a key.
        """
        limits = self.limits
        if limits is None or kind == "storage":
            return
        resource = "api" if kind == "api" else "resolvers"
        if anonymous:
            quota = limits.anonymous_api if kind == "api" else limits.anonymous_resolvers
        else:
            quota = limits.api if kind == "api" else limits.resolvers
        index, reset = self._window(limits.window)
        key = (client, resource, index)
        self._counts[key] = self._counts.get(key, 0) + 1
        if self._counts[key] > quota:
            raise rate_limited(resource, quota, limits.window, reset, "requests")

    def check_commit(self, repo_type: str, repo_id: str) -> None:
        """Count one commit on the repo; a 429 HubError past `commits_per_hour`."""
        limits = self.limits
        if limits is None or limits.commits_per_hour is None:
            return
        index, reset = self._window(COMMIT_WINDOW_SECONDS)
        key = (repo_type, repo_id, index)
        if self._commits.get(key, 0) >= limits.commits_per_hour:
            raise rate_limited(
                "commits", limits.commits_per_hour, COMMIT_WINDOW_SECONDS, reset, "commits"
            )
        self._commits[key] = self._commits.get(key, 0) + 1


class RateLimitedError(HubError):
    """A 429 carrying the Hub's RateLimit headers."""

    def __init__(self, message: str, headers: RateLimitHeaders) -> None:
        super().__init__(429, message)
        self.ratelimit = headers


def rate_limited(resource: str, quota: int, window: int, reset: int, what: str) -> HubError:
    headers = RateLimitHeaders(resource, remaining=0, reset=reset, quota=quota, window=window)
    message = (
        f"You have exceeded the rate limit of {quota} {what} per {window} seconds"
        f' ("{resource}"); retry in {reset} seconds'
    )
    return RateLimitedError(message, headers)


def client_key(token: str | None, address: str) -> str:
    """The rate-limit key of a caller: a digest of its token, or its address if anonymous."""
    if token:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()[:16]
    return "anonymous:" + address
