"""Pydantic models of what the harness writes: run_meta.json and prediction files.

They mirror the harness's StaticsRunMetadata, StaticsIdentity and ModelOutput. Types are strict
(a string is never coerced into an int), and the objects that grow between harness versions
(`capabilities`, `provenance`, the top level of run_meta.json) keep unknown fields, because the
bundler must never drop data it was given.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    computed_field,
    field_validator,
    model_validator,
)

from bundler.core.limits import INT64_MAX, TAR_NUMBER_LIMIT
from bundler.core.model import Model
from bundler.core.naming import SAFE_TASK_NAME

UNPINNED_LABEL = "unpinned"
UNKNOWN_HARNESS_VERSION = "0.0.0"
DIRTY_SUFFIX = "-dirty"
_COMMIT_SHA = re.compile(r"^[0-9a-f]{8,64}$")

Count = Annotated[StrictInt, Field(ge=0, le=INT64_MAX)]


class _Strict(Model):
    model_config = ConfigDict(strict=True, frozen=True)


class StaticsIdentity(_Strict):
    """What was measured: a task on one Hugging Face dataset, ideally pinned to a commit."""

    task_name: StrictStr
    hf_repo_id: StrictStr
    dataset_split: StrictStr | None
    requested_revision: StrictStr | None
    resolved_revision: StrictStr | None

    @field_validator("task_name")
    @classmethod
    def _task_name_is_path_safe(cls, value: str) -> str:
        # fullmatch, not match: `$` also matches before a trailing newline, which would let
        # "task\n" through into a file name.
        if not SAFE_TASK_NAME.fullmatch(value):
            raise ValueError(
                f"task_name {value!r} is not safe in a path (allowed: ^[A-Za-z0-9][A-Za-z0-9._-]*$)"
            )
        return value

    @field_validator("resolved_revision")
    @classmethod
    def _resolved_revision_is_a_commit(cls, value: str | None) -> str | None:
        # It labels the bundle path, and it is meant to be a concrete commit sha, so anything
        # else (a branch name, a path) is refused rather than turned into a file name. The
        # label is its first 8 characters as written (statics-outputs.md), so upper case is
        # refused, not lowered: `@FA15706D` beside a published `@fa15706d` would be another
        # bundle id for the same pin (and the same file on a case-insensitive disk), and a
        # lowered label would no longer be a prefix of the resolved_revision it stands for.
        if value is not None and not _COMMIT_SHA.fullmatch(value):  # no trailing newline
            problem = "upper-case" if _COMMIT_SHA.fullmatch(value.lower()) else "not a commit sha"
            raise ValueError(
                f"resolved_revision {value!r} is {problem}: a commit sha is written in "
                "lower-case hex, 8-64 chars, as the Hub gives it"
            )
        return value

    @computed_field  # type: ignore[prop-decorator]
    @property
    def is_pinned(self) -> bool:
        return self.resolved_revision is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def revision_label(self) -> str:
        """First 8 chars of the resolved sha; a requested tag or branch can move, so never that."""
        if self.resolved_revision is None:
            return UNPINNED_LABEL
        return self.resolved_revision[:8]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def target(self) -> str:
        return f"{self.task_name}@{self.revision_label}"


class PlayerCapabilities(_Strict):
    """The player's setup; the harness adds fields over time, so unknown ones are kept."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    player_name: StrictStr
    player_type: Literal["ai", "human"]


class Provenance(_Strict):
    """The harness release that produced the run; newer releases add fields, all kept."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    gptnt_version: StrictStr
    git_sha: StrictStr | None

    @field_validator("gptnt_version")
    @classmethod
    def _is_pep440(cls, value: str) -> str:
        # packaging compiles its version pattern on import: loaded when a run is read, not by
        # every command that imports the models (start-up, tests/benchmark_collect.py).
        from packaging.version import InvalidVersion, Version

        try:
            Version(value)
        except InvalidVersion:
            raise ValueError(f"gptnt_version {value!r} is not a PEP 440 version") from None
        return value

    @model_validator(mode="after")
    def _numbers_are_finite(self) -> Provenance:
        # Provenance is copied into the manifest, whose JSON has no NaN or Infinity: such a
        # value would be written as null and no longer be what run_meta.json says.
        pending: list[tuple[str, Any]] = [("provenance", self.model_extra)]
        while pending:
            location, value = pending.pop()
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{location} is {value}, which the manifest's JSON cannot hold")
            if isinstance(value, dict):
                pending.extend((f"{location}.{key}", child) for key, child in value.items())
            elif isinstance(value, list):
                pending.extend((f"{location}[{i}]", child) for i, child in enumerate(value))
        return self

    @property
    def is_dirty(self) -> bool:
        """The harness tree had uncommitted changes, so the version alone does not say what ran."""
        return self.git_sha is not None and self.git_sha.endswith(DIRTY_SUFFIX)

    @property
    def is_version_known(self) -> bool:
        return self.gptnt_version != UNKNOWN_HARNESS_VERSION


_INSTANT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?)?"
)
"""The ISO-8601 instant the harness writes (`fullmatch`ed), the offset optional only so that
a date-time without one is named for what it lacks. Python 3.11's `datetime.fromisoformat`
alone is far more lenient: any character between date and time, the basic format, offsets
with seconds. `[0-9]`, not `\\d`, which also takes other scripts' digits."""


def parse_instant(value: str) -> datetime:
    """Parse an ISO-8601 instant, `YYYY-MM-DDTHH:MM:SS`, an optional fraction of any length
    (nanoseconds occur), then `Z` or `+HH:MM`/`-HH:MM`; a date-time without an offset is not
    an instant."""
    shape = _INSTANT.fullmatch(value)
    if shape is None:
        raise ValueError(
            f"run_date {value!r} is not an ISO-8601 instant "
            "(YYYY-MM-DDTHH:MM:SS, an optional .fraction, then Z or +HH:MM)"
        )
    if shape.group(1) is None:
        raise ValueError(f"run_date {value!r} has no UTC offset, so it is not an instant")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as error:
        raise ValueError(f"run_date {value!r} is not a calendar date and time ({error})") from None
    if not 0 <= parsed.timestamp() < TAR_NUMBER_LIMIT:
        raise ValueError(f"run_date {value!r} is not between 1970 and 2242")
    return parsed


NANOSECOND_DIGITS = 9
NANOSECONDS_PER_SECOND = 1_000_000_000
_FRACTION = re.compile(r"\.([0-9]+)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def instant_nanoseconds(value: str) -> int:
    """An instant `parse_instant` accepted, as nanoseconds since the epoch: its fraction is
    read as digits, to the nanosecond (later digits dropped), since datetime keeps only
    microseconds and real run dates carry nanoseconds."""
    fraction = _FRACTION.search(value)
    digits = fraction.group(1) if fraction else ""
    whole = value if fraction is None else value.replace(fraction.group(0), "", 1)
    seconds = (datetime.fromisoformat(whole) - _EPOCH) // timedelta(seconds=1)
    nanoseconds = int(digits[:NANOSECOND_DIGITS].ljust(NANOSECOND_DIGITS, "0"))
    return seconds * NANOSECONDS_PER_SECOND + nanoseconds


def nanosecond_instant(nanoseconds: int) -> str:
    """The instant `nanoseconds` after the epoch as GPTNT writes a run date: UTC,
    `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, the fraction without trailing zeros."""
    seconds, fraction = divmod(nanoseconds, NANOSECONDS_PER_SECOND)
    moment = (_EPOCH + timedelta(seconds=seconds)).replace(tzinfo=None)
    digits = f"{fraction:0{NANOSECOND_DIGITS}d}".rstrip("0")
    return moment.isoformat(timespec="seconds") + (f".{digits}" if digits else "") + "Z"


def gptnt_instant(run_date: str) -> str:
    """A run date `parse_instant` accepted, in the one form GPTNT writes (`nanosecond_instant`):
    equal instants, equal text, to the nanosecond."""
    return nanosecond_instant(instant_nanoseconds(run_date))


class StaticsRunMetadata(_Strict):
    """run_meta.json. `run_date` stays the original string: real files carry nanoseconds."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    model_name: StrictStr
    run_date: StrictStr
    statics: StaticsIdentity
    capabilities: PlayerCapabilities
    provenance: Provenance

    @field_validator("run_date")
    @classmethod
    def _is_instant(cls, value: str) -> str:
        try:
            parse_instant(value)
        except ValueError as error:
            raise ValueError(str(error)) from None
        return value

    @property
    def run_timestamp(self) -> int:
        """Whole seconds since the epoch, used as the archive's member mtime."""
        return int(parse_instant(self.run_date).timestamp())


class PredictionRecord(Model):
    """One prediction_<i>.json. Only the keys the bundler checks are modelled; bytes are kept."""

    model_config = ConfigDict(strict=True, extra="ignore")

    index: Count
    usage: dict[StrictStr, Count]
    model: StrictStr
    output: StrictStr
    scored_output: StrictStr | None = None
    thoughts: StrictStr | None
    raw_output: StrictStr | None
    error: StrictStr | None
    exception: Any
