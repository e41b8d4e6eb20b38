"""metrics.json is task-dependent, so the bundler only ever flattens it, never interprets it.

Flattened `scorer.key[.sub...]` names give every task the same two-column shape (name, value),
which is what lets one table (inspect, the Hub's dataset viewer) hold every task's results.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict


class MetricValue(BaseModel):
    """One leaf figure. `number` is set for numbers (not booleans); `json` always holds the
    value as JSON text, so nothing is lost for strings, lists or nulls."""

    model_config = ConfigDict(frozen=True)

    name: str
    number: float | None
    json_value: str


def flatten_metrics(metrics: dict[str, Any]) -> list[MetricValue]:
    flat: list[MetricValue] = []
    _flatten(metrics, "", flat)
    return flat


def _flatten(value: Any, prefix: str, flat: list[MetricValue]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _flatten(child, f"{prefix}.{key}" if prefix else str(key), flat)
        return
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    flat.append(
        MetricValue(
            name=prefix,
            number=float(value) if is_number else None,
            json_value=json.dumps(value, sort_keys=True),
        )
    )
