"""Fault injection for the fake Hub.

Tests need to see how the bundler copes with the failures a real Hub produces (overload, rate
limiting, a response lost after the server acted, a concurrent writer, an answer that is not
the JSON the Hub documents), and they need those
failures on demand, on one exact request, without mocking the client. A `Fault` is armed on a
method and a path regex, fires on the next `times` matching requests and then disappears.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Literal


@dataclass(frozen=True)
class RateLimitHeaders:
    """The IETF draft headers the Hub sends with a 429 (Hub docs rate-limits), which
    `huggingface_hub.utils.parse_ratelimit_headers` reads."""

    resource: str
    remaining: int
    reset: int
    quota: int
    window: int

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit": f'"{self.resource}";r={self.remaining};t={self.reset}',
            "RateLimit-Policy": f'"fixed window";"{self.resource}";q={self.quota};w={self.window}',
        }


class FaultKind(Enum):
    """What the server does instead of (or around) its normal handling of a request."""

    STATUS = "status"  # answer an HTTP error without acting
    LOST_RESPONSE = "lost_response"  # act, then close the socket without answering
    RACE = "race"  # let "someone else" commit on the target branch first, then act
    BODY = "body"  # answer 200 with a chosen body (malformed JSON, a wrong shape) without acting


@dataclass(frozen=True)
class Fault:
    """One kind of failure; build with `Fault.status(...)` or use `LOST_RESPONSE` / `RACE`."""

    kind: FaultKind
    code: int | None = None
    retry_after: int | str | None = None
    """Seconds, or any text a server may send as Retry-After (a hostile one: "inf")."""
    ratelimit: RateLimitHeaders | None = None
    body: bytes | None = None
    """What a BODY fault answers, as JSON (`Content-Type: application/json`), whatever it is."""

    LOST_RESPONSE: ClassVar[Fault]
    RACE: ClassVar[Fault]

    @classmethod
    def status(cls, code: int, retry_after: int | str | None = None) -> Fault:
        """Answer `code` (with `Retry-After: retry_after` when given) and leave the state alone."""
        if not 400 <= code <= 599:
            raise ValueError(f"a status fault needs an HTTP error code, got {code}")
        return cls(FaultKind.STATUS, code=code, retry_after=retry_after)

    @classmethod
    def answer(cls, body: bytes | str | object) -> Fault:
        """Answer 200 with `body` as the JSON answer, without acting: bytes or text as they
        are (not JSON, JSON cut short), any other value dumped as JSON (a list where an object
        is due, null where a list is). What a Hub under attack, a proxy or a bug may send."""
        if isinstance(body, str):
            body = body.encode()
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return cls(FaultKind.BODY, code=200, body=data)

    @classmethod
    def rate_limited(
        cls, reset: int, resource: Literal["api", "resolvers"] = "api", quota: int = 1000
    ) -> Fault:
        """A 429 as the Hub sends it (Hub docs rate-limits): `RateLimit: "api";r=0;t=<reset>`
        and `RateLimit-Policy: "fixed window";"api";q=<quota>;w=300`, and no `Retry-After`.
        The client (`http_backoff`) then sleeps `reset + 1` seconds before retrying."""
        if reset < 0:
            raise ValueError("reset must be >= 0 seconds")
        headers = RateLimitHeaders(resource, remaining=0, reset=reset, quota=quota, window=300)
        return cls(FaultKind.STATUS, code=429, ratelimit=headers)

    def describe(self) -> str:
        """Short label kept in the request log so a failing test shows which fault fired."""
        if self.kind is FaultKind.STATUS:
            return f"status {self.code}"
        if self.kind is FaultKind.BODY:
            return f"body {(self.body or b'')[:40]!r}"
        return str(self.kind.value)


Fault.LOST_RESPONSE = Fault(FaultKind.LOST_RESPONSE)
Fault.RACE = Fault(FaultKind.RACE)
LOST_RESPONSE = Fault.LOST_RESPONSE
RACE = Fault.RACE
status = Fault.status
answer = Fault.answer


@dataclass
class _Rule:
    method: str
    pattern: re.Pattern[str]
    fault: Fault
    remaining: int
    skip: int = 0


class FaultBook:
    """The armed faults; the request threads consume them, the test thread arms them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []

    def arm(self, method: str, path_regex: str, fault: Fault, times: int, after: int = 0) -> None:
        """Fire `fault` on the next `times` requests whose method and raw path match, once
        `after` such requests have gone through untouched.

        `method` is an HTTP method (case-insensitive) or `"*"`; `path_regex` is searched
        (`re.search`) in the raw, still percent-encoded request path without its query string,
        e.g. `r"/commit/"` or `r"/preupload/refs%2Fpr%2F1$"`.
        """
        if times < 1 or after < 0:
            raise ValueError("times must be >= 1 and after >= 0")
        rule = _Rule(method.upper(), re.compile(path_regex), fault, times, after)
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        """Disarm every fault."""
        with self._lock:
            self._rules.clear()

    def take(self, method: str, raw_path: str) -> Fault | None:
        """Consume and return the first armed fault matching this request, if any."""
        with self._lock:
            for rule in self._rules:
                if rule.method in ("*", method) and rule.pattern.search(raw_path):
                    if rule.skip:
                        rule.skip -= 1
                        continue
                    rule.remaining -= 1
                    if rule.remaining == 0:
                        self._rules.remove(rule)
                    return rule.fault
        return None
