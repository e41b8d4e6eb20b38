"""How two bundles differ: their claims field by field and their metrics figure by figure.

STAND-IN, written by the review work until the `bundler diff` module (issue 8, section 2) is
merged: it has that module's two entry points, `diff_bundles(a, b)` and
`claim_differences(a_claim, b_claim)`, and only what `bundler review` shows for a replacement.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from bundler.manifest import BundleClaim
from bundler.metrics import flatten_metrics
from bundler.verify import read_bundle


class FieldDifference(BaseModel):
    """One claim field (dotted name) whose JSON value differs; None where it is absent."""

    field: str
    a: str | None
    b: str | None


class MetricDelta(BaseModel):
    """One flattened metric; `delta` is b - a when both are numbers."""

    name: str
    a: str | None
    b: str | None
    delta: float | None


class BundleDiff(BaseModel):
    a: str
    b: str
    claims: list[FieldDifference]
    metrics: list[MetricDelta]

    @property
    def identical(self) -> bool:
        return not self.claims and not self.metrics


def claim_differences(a_claim: BundleClaim, b_claim: BundleClaim) -> list[FieldDifference]:
    """Every leaf of the two claims that differs, in field order."""
    a_values = {
        leaf.name: leaf.json_value for leaf in flatten_metrics(a_claim.model_dump(mode="json"))
    }
    b_values = {
        leaf.name: leaf.json_value for leaf in flatten_metrics(b_claim.model_dump(mode="json"))
    }
    names = list(dict.fromkeys([*a_values, *b_values]))
    return [
        FieldDifference(field=name, a=a_values.get(name), b=b_values.get(name))
        for name in names
        if a_values.get(name) != b_values.get(name)
    ]


def diff_bundles(a: Path, b: Path) -> BundleDiff:
    """Compare two local archives (each read with verify's checks, nothing extracted)."""
    readings = read_bundle(a), read_bundle(b)
    old_claim, new_claim = (r.manifest.claim() if r.manifest else None for r in readings)
    differences = claim_differences(old_claim, new_claim) if old_claim and new_claim else []
    flat = [
        {leaf.name: leaf for leaf in flatten_metrics(reading.metrics or {})} for reading in readings
    ]
    deltas = []
    for name in dict.fromkeys([*flat[0], *flat[1]]):
        old, new = flat[0].get(name), flat[1].get(name)
        if old is not None and new is not None and old.json_value == new.json_value:
            continue
        numbers = (old.number if old else None), (new.number if new else None)
        delta = (
            numbers[1] - numbers[0] if numbers[0] is not None and numbers[1] is not None else None
        )
        deltas.append(
            MetricDelta(
                name=name,
                a=old.json_value if old else None,
                b=new.json_value if new else None,
                delta=delta,
            )
        )
    return BundleDiff(a=str(a), b=str(b), claims=differences, metrics=deltas)
