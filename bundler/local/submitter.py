"""Who submits a bundle: given to collect (options, environment) and written into its claim.

A module of its own so that collect's options can name it without loading the manifest's models,
which a collect with nothing to bundle never uses (start-up, tests/benchmark_collect.py).
"""

from __future__ import annotations

from pydantic import ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from bundler.core.model import Model

NOT_UTF8 = "submitter_not_utf8"
"""The pydantic error type of a submitter field that is not UTF-8 text; its `ctx` names the
field."""


class Submitter(Model):
    """Who submits the bundle; optional, but a leaderboard needs someone to ask."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    contact: str | None = None
    affiliation: str | None = None

    @field_validator("name", "contact", "affiliation")
    @classmethod
    def _is_unicode_text(cls, value: str | None, info: ValidationInfo) -> str | None:
        # A command line or environment byte that is not UTF-8 arrives as a lone surrogate
        # (os decodes with surrogateescape), which no claim, sidecar or report JSON can hold:
        # refused here, where every command that takes a submitter builds one. Its error type
        # (NOT_UTF8) lets the command line say where such a value comes from.
        if value is None:
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            field = info.field_name or ""
            raise PydanticCustomError(NOT_UTF8, "not UTF-8 text", {"field": field}) from None
        return value
