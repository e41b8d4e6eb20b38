"""metrics.json is task-dependent, so the bundler only ever flattens it, never interprets it.

Flattened `scorer.key[.sub...]` names give every task the same two-column shape (name, value),
which is what lets one table (inspect, the Hub's dataset viewer) hold every task's results.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ConfigDict

from bundler.core.limits import MAX_METRIC_NAME_CHARS, MAX_METRIC_NAMES_CHARS, MAX_METRICS
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


class KeyPathLimitError(ValueError):
    """A JSON object whose flattened key paths exceed the bounds of the format (limits.py)."""


def metric_leaves(metrics: Any) -> list[tuple[MetricPath, Any]]:
    """Every leaf of a parsed metrics.json with its key path, in the file's order (see
    `bounded_leaves`); KeyPathLimitError past the format's bounds on metric names."""
    return bounded_leaves(metrics, "metric")


def bounded_leaves(value: Any, noun: str) -> list[tuple[MetricPath, Any]]:
    """Every leaf of a parsed JSON value with its key path, in the file's order, walked with
    an explicit stack (no recursion limit to hit). A non-empty object is descended into;
    anything else (an empty object included) is a leaf.

    The walk stops with KeyPathLimitError (naming `noun`s) as soon as the leaves could pass
    MAX_METRICS, a flattened name MAX_METRIC_NAME_CHARS, or the names together
    MAX_METRIC_NAMES_CHARS, before anything beyond those bounds is built: every entry still
    pending becomes at least one leaf, and its name is a prefix of that leaf's, so the count
    is checked against what is pending too, and each name's length is computed, not joined."""
    leaves: list[tuple[MetricPath, Any]] = []
    total = 0
    pending: list[tuple[MetricPath, int, Any]] = [((), 0, value)]
    while pending:
        path, length, item = pending.pop()
        if not (isinstance(item, dict) and item):
            total += length
            if total > MAX_METRIC_NAMES_CHARS:
                raise KeyPathLimitError(
                    f"flattened {noun} names of more than {MAX_METRIC_NAMES_CHARS} characters "
                    f"in all, more than a bundle holds (MAX_METRIC_NAMES_CHARS)"
                )
            leaves.append((path, item))
            continue
        if len(leaves) + len(pending) + len(item) > MAX_METRICS:
            raise KeyPathLimitError(
                f"more than {MAX_METRICS} {noun}s when flattened, more than a bundle holds "
                "(MAX_METRICS)"
            )
        children: list[tuple[MetricPath, int, Any]] = []
        for key, child in item.items():
            name = str(key)
            child_length = length + len(name) + (1 if path else 0)
            if child_length > MAX_METRIC_NAME_CHARS:
                raise KeyPathLimitError(
                    f"a flattened {noun} name of {child_length} characters or more (below "
                    f"{_shown_path(path)}), longer than the {MAX_METRIC_NAME_CHARS} a bundle "
                    "holds (MAX_METRIC_NAME_CHARS)"
                )
            children.append(((*path, name), child_length, child))
        pending.extend(reversed(children))
    return leaves


def _shown_path(path: MetricPath) -> str:
    """The start of a key path, short enough for one line of an error."""
    if not path:
        return "the top level"
    text = json.dumps(list(path))
    return text if len(text) <= 60 else text[:57] + "..."


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
