"""Checks on the content of single files, shared by collect (on the source tree) and verify
(on the archive), so both judge a run by exactly the same rules."""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails, from_json

from bundler.core.errors import InputError
from bundler.core.limits import INT64_MAX, MAX_USAGE_KEY_CHARS, MAX_USAGE_KEYS
from bundler.local.manifest import Coverage, CoverageStatus, PredictionSummary, prediction_path
from bundler.local.metrics import KeyPathLimitError, bounded_leaves, metric_leaves
from bundler.local.schema import PredictionRecord, StaticsRunMetadata

MAX_ERRORS_SHOWN = 3
_JSON_PROBLEMS = {
    "recursion limit exceeded": "nested too deeply (over 200 levels)",
    "number out of range": "an integer of more than 4300 digits",
    "lone leading surrogate in hex escape": "a lone surrogate escape, which is not Unicode text",
    "unexpected end of hex escape": "a lone surrogate escape, which is not Unicode text",
}
"""The strict parser's words for the limits it enforces, in the user's terms."""


def describe_validation_error(
    error: ValidationError, words: Callable[[ErrorDetails], str | None] | None = None
) -> str:
    """One line from a pydantic error: the field path and what is wrong with it; `words`, when
    it has some for an error, in place of pydantic's (the command line's, for a value it was
    given)."""
    parts = []
    for detail in error.errors()[:MAX_ERRORS_SHOWN]:
        location = ".".join(str(part) for part in detail["loc"])
        message = (words and words(detail)) or detail["msg"].removeprefix("Value error, ")
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


def json_problem(data: bytes, message: str) -> str:
    """Why the strict parser refused `data`, in one phrase. The one rule for every JSON file
    the bundler reads (run_meta.json, metrics.json, predictions): UTF-8 without a byte order
    mark (RFC 8259 section 8.1: JSON interchange is UTF-8, and a BOM must not be added)."""
    if data.startswith(codecs.BOM_UTF8):
        return "starts with a UTF-8 byte order mark, which JSON text must not (save it without)"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text (JSON interchange is UTF-8)"
    reason, at, position = message.rpartition(" at line ")
    if not at:
        reason, position = message, ""
    position = f", at line {position}" if position else ""
    return f"not valid JSON ({_JSON_PROBLEMS.get(reason, reason)}{position})"


def load_json(data: bytes, where: str) -> Any:
    """Parse one JSON input file, or raise InputError naming it.

    The file must first pass the strict parser pydantic uses for predictions (UTF-8, no BOM,
    at most 200 levels of nesting, integers of at most 4300 digits, no lone surrogates), so all
    three file kinds obey one rule and nothing the parser lets through can later break a
    manifest, a table row or the terminal. The values then come from the standard library's
    parser, as the harness's own: the capability fingerprint must see exactly its floats."""
    try:
        from_json(data)
    except ValueError as error:
        raise InputError(where, json_problem(data, str(error))) from None
    return json.loads(data.decode("utf-8"))


def parse_json_object(data: bytes, where: str) -> dict[str, Any]:
    value = load_json(data, where)
    if not isinstance(value, dict):
        raise InputError(where, f"expected a JSON object, found {type(value).__name__}")
    return value


def parse_run_meta(data: bytes, where: str) -> tuple[StaticsRunMetadata, dict[str, Any]]:
    """The validated metadata and the raw object (the fingerprint needs the raw capabilities).
    Its key paths have the bounds of metric names: diff names every differing field by its
    path, as inspect and the Hub's rows name every metric."""
    raw = parse_json_object(data, where)
    try:
        bounded_leaves(raw, "field")
    except KeyPathLimitError as error:
        raise InputError(where, str(error)) from None
    try:
        return StaticsRunMetadata.model_validate(raw), raw
    except ValidationError as error:
        raise InputError(where, describe_validation_error(error)) from None


def check_metrics(data: bytes, where: str) -> dict[str, Any]:
    """metrics.json is task-dependent: only its shape, scorer name to object, is checked, and
    that its flattened names keep to the bounds of the format (MAX_METRICS and the name
    lengths), which every later command's one name per metric relies on."""
    metrics = parse_json_object(data, where)
    for scorer, figures in metrics.items():
        if not isinstance(figures, dict):
            raise InputError(
                where, f"scorer {scorer!r} maps to {type(figures).__name__}, expected an object"
            )
    try:
        metric_leaves(metrics)
    except KeyPathLimitError as error:
        raise InputError(where, str(error)) from None
    return metrics


def parse_prediction(data: bytes, expected_index: int, where: str) -> PredictionRecord:
    try:
        # The validator itself, not model_validate_json: its keyword handling costs a tenth
        # of the validation of a whole prediction, and this runs once per prediction.
        record: PredictionRecord = PredictionRecord.__pydantic_validator__.validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            problem = json_problem(data, str(first["ctx"]["error"]))
            raise InputError(where, problem) from None
        if first["type"] == "model_type":
            parse_json_object(data, where)  # raises the plainer "expected a JSON object"
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

    def add(self, record: PredictionRecord, where: str | None = None) -> None:
        """Records must arrive in increasing index order. A usage total that would not fit the
        published int64 column refuses the prediction that overflows it (`where`, by default
        its path in the archive)."""
        index = record.index
        if index != self._next_index:
            self.contiguous = False
        self._next_index = index + 1
        self.count += 1
        if record.error is not None:
            self.errors += 1
        if record.exception is not None:
            self.exceptions += 1
        if record.scored_output is None:
            self.missing_scored_output += 1
        usage = self.usage
        for key, value in record.usage.items():
            total = usage.get(key)
            if total is None:
                self._check_new_key(key, where or prediction_path(index))
                total = 0
            total += value
            if total > INT64_MAX:
                raise InputError(
                    where or prediction_path(index),
                    f"usage {key!r} adds up to more than {INT64_MAX} over the predictions",
                )
            usage[key] = total

    def _check_new_key(self, key: str, where: str) -> None:
        """A usage key the tally has not seen must keep the bundle within the format's bounds,
        checked as the tally grows, so a forged bundle is refused before it fills memory."""
        if len(key) > MAX_USAGE_KEY_CHARS:
            shown = key[:40] + "..." if len(key) > 40 else key
            raise InputError(
                where,
                f"usage key {shown!r} is {len(key)} characters, more than the "
                f"{MAX_USAGE_KEY_CHARS} a bundle holds (MAX_USAGE_KEY_CHARS)",
            )
        if len(self.usage) >= MAX_USAGE_KEYS:
            raise InputError(
                where,
                f"more than {MAX_USAGE_KEYS} distinct usage keys over the predictions, more "
                "than a bundle holds (MAX_USAGE_KEYS)",
            )

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
