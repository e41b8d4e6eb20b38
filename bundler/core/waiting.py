"""How the bundler waits before trying a Hub request again: in one place, so that whoever runs
it can see each wait and, where waiting serves nothing (a test against a local server, a
scheduler with a backoff of its own), skip it. The command line waits for real."""

from __future__ import annotations

import time
from collections import deque


class RetryWaits:
    """The retry waits of this process: each one recorded in `waited` (the last 100), and slept
    unless `instant` is set."""

    def __init__(self) -> None:
        self.instant = False
        self.waited: deque[float] = deque(maxlen=100)

    def sleep(self, seconds: float) -> None:
        self.waited.append(seconds)
        if not self.instant:
            time.sleep(seconds)


RETRY_WAITS = RetryWaits()
"""The one instance every retry of the Hub client goes through (bundler.hub.client)."""
