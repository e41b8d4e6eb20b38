"""How a bundle differs from the Hub's copy under its id: its claims, field by field, and its
metrics, worded for a conflict's detail and a pull request's description.

Apart from the plan (bundler.hub.publish.plan), which decides from values alone too, because
comparing loads `bundler.local.diff` and the verifying it is built on: only a bundle the Hub
holds with other content is compared, so an upload of new bundles never loads them
(docs/performance.md), and its own process leaves verifying to the child or the verify cache
(bundler.hub.publish.upload).
"""

from __future__ import annotations

import json

from bundler.hub.publish.pr_description import ClaimDifference
from bundler.local.diff import claim_differences as bundle_claim_differences
from bundler.local.diff import metric_differences, worded_change
from bundler.local.manifest import Sidecar

EXTENSIBLE_CLAIMS = frozenset({"predictions", "coverage", "warnings", "bundler_version"})
"""The claims a resumed run may change; any other difference makes it a different result."""


def claim_differences(old: Sidecar, new: Sidecar) -> list[ClaimDifference]:
    """The claims of two sidecars that differ, field by field, as `bundler diff` finds them,
    worded for a pull request's description."""

    def show(value: object) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    return [
        ClaimDifference(field=found.field, old=show(found.a), new=show(found.b))
        for found in bundle_claim_differences(old, new)
    ]


def extension_claims_problem(old: Sidecar, new: Sidecar) -> str | None:
    """Why `new` cannot extend `old` from their claims alone, or None when it may: the same
    claims but for counts and coverage, and more rows. Only then are the Hub's predictions
    read (`extension_predictions_problem`). A conflict names every claim that differs, the
    counts and coverage a resumed run may change included."""
    found = claim_differences(old, new)
    differing = [d for d in found if d.field.split(".")[0] not in EXTENSIBLE_CLAIMS]
    also = [d for d in found if d not in differing]
    if differing:
        return f"it differs in {_worded(differing)}" + (
            f" (and in {_worded(also)})" if also else ""
        )
    before, after = old.coverage.rows_present, new.coverage.rows_present
    if after <= before:
        return f"it has {after} rows, the Hub's copy {before}" + (
            f"; it differs in {_worded(also)}" if also else ""
        )
    return None


def _worded(differences: list[ClaimDifference]) -> str:
    """Each difference as `field old -> new` (the Hub's copy first)."""
    return ", ".join(worded_change(d.field, d.old, d.new) for d in differences)


def metric_changes(old_metrics: str, new_metrics: str) -> str | None:
    """Every metric of the Hub's copy that this bundle changes, adds or drops, worded as
    `name old -> new`; None when the metrics are the same (or one side is no JSON)."""
    try:
        changed = metric_differences(json.loads(old_metrics), json.loads(new_metrics))
    except (ValueError, RecursionError):
        return None
    shown = [
        (
            d.name,
            "absent" if d.change == "added" else json.dumps(d.a),
            "absent" if d.change == "removed" else json.dumps(d.b),
        )
        for d in changed
    ]
    return ", ".join(worded_change(name, a, b) for name, a, b in shown) or None
