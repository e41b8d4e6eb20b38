"""Keeping an audit within the Hub's anonymous rate limits by design, not by luck.

Hub docs rate-limits: an anonymous client (per IP address) may make 3,000 requests to
"resolvers" (every URL with `/resolve/`, which is how each file is downloaded) and 500 to the
API in each fixed 5-minute window. An audit downloads two files a bundle and makes a few API
requests in all (a listing page per 1,000 files), so the resolvers are what it must pace. It
counts its own downloads in a sliding window, which bounds every fixed window too, and keeps
RESOLVER_MARGIN of the quota for the client's own retries. When the budget is spent it waits
for the oldest download to leave the window, unless that is longer than the command waits
(BUNDLER_MAX_WAIT): then it stops with the rate-limit error (exit 75), and the next run resumes
from the verdicts kept so far.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from bundler.hub.client import ratelimit

ANONYMOUS_RESOLVERS = 3000
WINDOW_SECONDS = 300.0
RESOLVER_MARGIN = 100
"""Downloads of the quota left to retries the pacer does not see (a dropped connection)."""


@dataclass
class Pacer:
    """At most `budget` file downloads in any `window` seconds."""

    budget: int = ANONYMOUS_RESOLVERS - RESOLVER_MARGIN
    window: float = WINDOW_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    sent: deque[float] = field(default_factory=deque)
    """When each download in the window was taken, oldest first."""
    total: int = 0
    """Downloads taken, in all."""
    waits: list[str] = field(default_factory=list)

    def wait_for(self, requests: int) -> float:
        """Seconds until `requests` more downloads fit in the window (0: now)."""
        now = self.clock()
        while self.sent and self.sent[0] <= now - self.window:
            self.sent.popleft()
        over = len(self.sent) + requests - self.budget
        if over <= 0 or not self.sent:
            return 0.0
        return self.sent[min(over, len(self.sent)) - 1] + self.window - now

    def take(self, requests: int) -> None:
        """Count `requests` downloads about to be made, after waiting for room: the
        rate-limit error (exit 75) when the wait is longer than the command waits."""
        wait = self.wait_for(requests)
        if wait > 0:
            announced = ratelimit.Announced(wait, "resolvers")
            if wait > ratelimit.POLICY.max_wait:
                raise ratelimit.too_long(announced, ratelimit.POLICY.max_wait)
            self.waits.append(
                f"paused {wait:.0f} s to stay within the Hub's {ANONYMOUS_RESOLVERS:,} file "
                f"requests per {self.window / 60:g} minutes"
            )
            self.sleep(wait)
        now = self.clock()
        self.sent.extend([now] * requests)
        self.total += requests
