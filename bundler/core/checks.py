"""Check results as data: a check never raises, it returns what it found.

Rendering a result (rich table, JSON, a CI annotation) is a separate step, so the same result
serves a person, a nightly job and a test.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict

from bundler.core.errors import Remedy
from bundler.core.model import Model, RemedyField

CheckStatus = Literal["passed", "warned", "failed"]


class CheckResult(Model):
    model_config = ConfigDict(frozen=True)

    name: str
    status: CheckStatus
    detail: str
    hint: str | None = None
    remedy: RemedyField = None
    """What to do, when the command line offers it (its words; `hint` is then None)."""


def passed(name: str, detail: str) -> CheckResult:
    return CheckResult(name=name, status="passed", detail=detail)


def warned(
    name: str, detail: str, hint: str | None = None, *, remedy: Remedy | None = None
) -> CheckResult:
    return CheckResult(name=name, status="warned", detail=detail, hint=hint, remedy=remedy)


def failed(name: str, detail: str, hint: str | None = None) -> CheckResult:
    return CheckResult(name=name, status="failed", detail=detail, hint=hint)


def exception_rate(exceptions: int, count: int) -> float:
    """The share of predictions that raised, as review judges it (0 for none at all): collect
    warns by the same figure."""
    return exceptions / count if count else 0.0
