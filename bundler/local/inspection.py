"""What a reviewing maintainer needs to see about one bundle, as data.

Inspection reads the bundle with the same streaming checks as verify, so what it shows is
never a claim the bundle failed to back up without that failure being shown beside it.
"""

from __future__ import annotations

from pathlib import Path

from bundler.core.model import Model
from bundler.core.progress import ProgressSink
from bundler.local.layout import bundle_file
from bundler.local.manifest import BundleClaim
from bundler.local.metrics import MetricValue, flatten_metrics
from bundler.local.verify import BundleVerification, read_bundle


class BundleInspection(Model):
    verification: BundleVerification
    claim: BundleClaim | None
    capabilities: dict[str, object] | None
    metrics: list[MetricValue]
    error_rate: float | None
    exception_rate: float | None
    sidecar_claim: BundleClaim | None = None
    """When the archive's own claim could not be read: what its sidecar claims (unbacked), so a
    bad bundle still shows what could be read beside the check that failed."""

    @property
    def exit_code(self) -> int:
        return 0 if self.verification.ok else 1


def inspect_bundle(path: Path, progress: ProgressSink | None = None) -> BundleInspection:
    bundle_file(path)
    reading = read_bundle(path, progress)
    claim = reading.claim
    metrics = reading.metrics
    count = claim.predictions.count if claim else 0
    return BundleInspection(
        verification=reading.verification(),
        claim=claim,
        capabilities=reading.raw_capabilities,
        metrics=flatten_metrics(metrics) if metrics is not None else [],
        error_rate=claim.predictions.errors / count if claim and count else None,
        exception_rate=claim.predictions.exceptions / count if claim and count else None,
        sidecar_claim=_claim_part(reading.sidecar) if claim is None and reading.sidecar else None,
    )


def _claim_part(sidecar: BundleClaim) -> BundleClaim:
    """The claim fields of a sidecar (without its archive digest and file count)."""
    return BundleClaim.model_validate(sidecar.model_dump(include=set(BundleClaim.model_fields)))
