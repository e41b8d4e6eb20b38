"""metrics.json is task-dependent, so the bundler only ever flattens it, never interprets it.

Flattened `scorer.key[.sub...]` names give every task the same two-column shape (name, value),
which is what lets one table (inspect, the Hub's dataset viewer) hold every task's results.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict


class MetricValue(BaseModel):
    """One leaf figure. `number` is set for numbers (not booleans) that a float64 holds, and
    is null for the rest (an integer of 400 digits, NaN); `json` always holds the value as
    JSON text, so nothing is lost for strings, lists, nulls or such numbers."""

    model_config = ConfigDict(frozen=True)

    name: str
    number: float | None
    json_value: str


def flatten_metrics(metrics: dict[str, Any]) -> list[MetricValue]:
    """Leaves in document order, walked with an explicit stack (no recursion limit to hit)."""
    flat: list[MetricValue] = []
    pending: list[tuple[str, Any]] = [("", metrics)]
    while pending:
        prefix, value = pending.pop()
        if isinstance(value, dict) and value:
            children = [
                (f"{prefix}.{key}" if prefix else str(key), child) for key, child in value.items()
            ]
            pending.extend(reversed(children))
            continue
        flat.append(
            MetricValue(
                name=prefix, number=as_float64(value), json_value=json.dumps(value, sort_keys=True)
            )
        )
    return flat


def as_float64(value: Any) -> float | None:
    """The value as a finite float64, or None when it is not a number or does not fit one."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
