"""metrics.json is task-dependent, so the bundler only ever flattens it, never interprets it.

Flattened `scorer.key[.sub...]` names give every task the same two-column shape (name, value),
which is what lets one table (inspect, the Hub's dataset viewer) hold every task's results.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ConfigDict

from bundler.core.model import Model

MetricPath = tuple[str, ...]
"""The keys leading to one leaf of metrics.json. Its flattened name joins them with `.`, which
is ambiguous when a key holds a `.`; the path is not."""


class MetricValue(Model):
    """One leaf figure. `number` is set for numbers (not booleans) that a float64 holds, and
    is null for the rest (an integer of 400 digits, NaN); `json` always holds the value as
    JSON text, so nothing is lost for strings, lists, nulls or such numbers."""

    model_config = ConfigDict(frozen=True)

    name: str
    number: float | None
    json_value: str


def metric_leaves(metrics: Any) -> list[tuple[MetricPath, Any]]:
    """Every leaf of a parsed metrics.json with its key path, in the file's order, walked with
    an explicit stack (no recursion limit to hit). A non-empty object is descended into;
    anything else (an empty object included) is a leaf."""
    leaves: list[tuple[MetricPath, Any]] = []
    pending: list[tuple[MetricPath, Any]] = [((), metrics)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, dict) and value:
            pending.extend(reversed([((*path, str(key)), child) for key, child in value.items()]))
        else:
            leaves.append((path, value))
    return leaves


def metric_number(value: Any) -> float | None:
    """The value as a score, if it is one: a finite int or float that a float64 holds.
    Booleans, NaN, infinities and integers beyond float range are not, so they never reach a
    numeric column or a ranking."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def metric_name(path: MetricPath) -> str:
    return ".".join(path)


def flatten_metrics(metrics: Any) -> list[MetricValue]:
    return [metric_value(path, value) for path, value in metric_leaves(metrics)]


def metric_value(path: MetricPath, value: Any) -> MetricValue:
    """The leaf `value` at `path`, as flatten_metrics gives it."""
    return MetricValue(
        name=metric_name(path),
        number=metric_number(value),
        json_value=json.dumps(value, sort_keys=True),
    )
