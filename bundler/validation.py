"""Checks on the content of single files, shared by collect (on the source tree) and verify
(on the archive), so both judge a run by exactly the same rules."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from bundler.errors import InputError
from bundler.manifest import Coverage, CoverageStatus, PredictionSummary
from bundler.schema import PredictionRecord, StaticsRunMetadata

MAX_ERRORS_SHOWN = 3


def describe_validation_error(error: ValidationError) -> str:
    """One line from a pydantic error: the field path and what is wrong with it."""
    parts = []
    for detail in error.errors()[:MAX_ERRORS_SHOWN]:
        location = ".".join(str(part) for part in detail["loc"])
        message = detail["msg"].removeprefix("Value error, ")
        if detail["type"] == "missing":
            parts.append(f"missing field {location!r}")
        elif location:
            parts.append(f"{location}: {message}")
        else:
            parts.append(message)
    more = error.error_count() - MAX_ERRORS_SHOWN
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def parse_json_object(data: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except UnicodeDecodeError:
        raise InputError(where, "not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise InputError(where, f"not valid JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(value, dict):
        raise InputError(where, f"expected a JSON object, found {type(value).__name__}")
    return value


def parse_run_meta(data: bytes, where: str) -> tuple[StaticsRunMetadata, dict[str, Any]]:
    """The validated metadata and the raw object (the fingerprint needs the raw capabilities)."""
    raw = parse_json_object(data, where)
    try:
        return StaticsRunMetadata.model_validate(raw), raw
    except ValidationError as error:
        raise InputError(where, describe_validation_error(error)) from None


def check_metrics(data: bytes, where: str) -> dict[str, Any]:
    """metrics.json is task-dependent: only its shape, scorer name to object, is checked."""
    metrics = parse_json_object(data, where)
    for scorer, figures in metrics.items():
        if not isinstance(figures, dict):
            raise InputError(
                where, f"scorer {scorer!r} maps to {type(figures).__name__}, expected an object"
            )
    return metrics


def parse_prediction(data: bytes, expected_index: int, where: str) -> PredictionRecord:
    try:
        record = PredictionRecord.model_validate_json(data)
    except ValidationError as error:
        if error.errors()[0]["type"] in ("json_invalid", "model_type"):
            parse_json_object(data, where)  # raises the plainer JSON / object message
        raise InputError(where, describe_validation_error(error)) from None
    if record.index != expected_index:
        raise InputError(
            where, f"index {record.index} disagrees with the file name's index {expected_index}"
        )
    return record


class PredictionTally:
    """Counts predictions, errors and exceptions and sums usage, one record at a time, so a
    large run is summarised without holding its predictions."""

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.exceptions = 0
        self.missing_scored_output = 0
        self.usage: dict[str, int] = {}
        self._next_index = 0
        self.contiguous = True

    def add(self, record: PredictionRecord) -> None:
        """Records must arrive in increasing index order."""
        if record.index != self._next_index:
            self.contiguous = False
        self._next_index = record.index + 1
        self.count += 1
        self.errors += record.error is not None
        self.exceptions += record.exception is not None
        self.missing_scored_output += record.scored_output is None
        for key, value in record.usage.items():
            self.usage[key] = self.usage.get(key, 0) + value

    def summary(self) -> PredictionSummary:
        return PredictionSummary(
            count=self.count,
            contiguous=self.contiguous,
            errors=self.errors,
            exceptions=self.exceptions,
            missing_scored_output=self.missing_scored_output,
            usage=dict(sorted(self.usage.items())),
        )


def assess_coverage(summary: PredictionSummary, expected_rows: int | None) -> Coverage:
    """`complete` needs a known row count, all of it present, with no gap."""
    status: CoverageStatus
    if not summary.contiguous:
        status = "partial"
    elif expected_rows is None:
        status = "unknown"
    elif summary.count < expected_rows:
        status = "partial"
    else:
        status = "complete"
    return Coverage(status=status, expected_rows=expected_rows, rows_present=summary.count)


def describe_gaps(indices: Sequence[int]) -> str:
    """`missing 3, 7-9` for sorted indices that should run 0..max with no gap."""
    ranges: list[str] = []
    expected = 0
    for index in indices:
        if index > expected:
            last = index - 1
            ranges.append(str(expected) if last == expected else f"{expected}-{last}")
        expected = index + 1
    shown = ", ".join(ranges[:5]) + (", ..." if len(ranges) > 5 else "")
    return f"missing {shown}"
