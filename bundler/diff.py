"""How two bundles differ: claims field by field, metrics with deltas, predictions by sha256.

A maintainer deciding whether a bundle may replace another needs to see what actually changed,
and bundles come from strangers, so both are verified before anything is compared. Predictions
are compared from the two manifests' sha256 alone; only with `predictions=N` are the first N
changed prediction files read back, one member at a time, to show their answers side by side.

A harness release stamps `run_date` after scoring and again on every re-run, so re-running a
finished task gives a bundle that differs from the old one only in its date. That case gets its
own verdict, so a reviewer sees at once that nothing measured changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from bundler.errors import InputError, UsageError
from bundler.manifest import (
    METRICS_PATH,
    RUN_META_PATH,
    BundleClaim,
    prediction_index,
    prediction_path,
)
from bundler.metrics import MetricValue, flatten_metrics
from bundler.model import Model
from bundler.progress import ProgressSink
from bundler.validation import parse_prediction
from bundler.verify import BundleReading, manifest_digests, read_bundle, verified_members

FIRST_INDICES = 20
"""How many indices of added, removed and changed predictions a diff lists."""
MAX_SAMPLE_CHARS = 4000
"""A prediction's answer is shown up to this many characters; answers can be whole essays."""
RUN_DATE_FIELD = "run_date"
CLAIM_FIELDS = set(BundleClaim.model_fields)
"""Only the claim's own fields: a sidecar's archive digest differs whenever anything does."""
CLAIM_FIELDS_EXCLUDED: dict[str, Any] = {"statics": {"target"}}
"""`statics.target` is the top-level `target` again; one line per fact is enough."""


class FieldDifference(Model):
    """One field that differs; `None` on a side where the field is absent."""

    field: str
    a: Any = None
    b: Any = None


MetricChange = Literal["changed", "added", "removed"]


class MetricDifference(Model):
    """One flattened metric that differs. `delta` is b - a when both values are numbers."""

    name: str
    change: MetricChange
    a: Any = None
    b: Any = None
    delta: float | None = None


class PredictionChanges(Model):
    """Predictions compared by row index and sha256, from the two manifests alone."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    unchanged: int = 0
    first_added: list[int] = Field(default_factory=list)
    first_removed: list[int] = Field(default_factory=list)
    first_changed: list[int] = Field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class PredictionSample(Model):
    """One changed prediction's answer in A and in B. `field` is `scored_output` when both
    files carry it, else `output`, so like is compared with like across harness versions."""

    index: int
    field: Literal["scored_output", "output"]
    a: str
    b: str
    truncated: bool = False


class DiffSide(Model):
    archive: str
    bundle_id: str
    sha256: str


class BundleDiff(Model):
    a: DiffSide
    b: DiffSide
    claims: list[FieldDifference]
    """Differing claim fields (dotted paths into the manifest's claim), then differing
    capabilities as `capabilities.<name>`."""
    files: list[FieldDifference]
    """run_meta.json and metrics.json whose sha256 differ."""
    metrics: list[MetricDifference]
    predictions: PredictionChanges
    samples: list[PredictionSample] = Field(default_factory=list)
    identical: bool
    only_run_date: bool
    """Everything but `run_date` (and so run_meta.json's bytes) is the same: a re-stamped run."""
    verdict: str

    @property
    def exit_code(self) -> int:
        return 0 if self.identical else 1


def diff_bundles(
    a: Path, b: Path, *, predictions: int = 0, progress: ProgressSink | None = None
) -> BundleDiff:
    """Verify both bundles, then compare them. Raises UsageError (exit 2) when either cannot be
    used: missing, or failing verification (it says which check failed)."""
    reading_a = _verified(a, progress)
    return diff_verified(a, reading_a, b, _verified(b, progress), predictions=predictions)


def diff_verified(
    a: Path, reading_a: BundleReading, b: Path, reading_b: BundleReading, *, predictions: int = 0
) -> BundleDiff:
    """Compare the bundles at `a` and `b`, which `read_bundle` has verified in this run (their
    readings), without verifying them again."""
    claim_a, claim_b = _claim(reading_a), _claim(reading_b)
    listed_a, listed_b = manifest_digests(a), manifest_digests(b)
    claims = claim_differences(claim_a, claim_b)
    claims += _dict_differences(
        "capabilities", reading_a.raw_capabilities or {}, reading_b.raw_capabilities or {}
    )
    files_a, files_b = _file_digests(listed_a), _file_digests(listed_b)
    files = [
        FieldDifference(field=f"{path} sha256", a=files_a.get(path), b=files_b.get(path))
        for path in (RUN_META_PATH, METRICS_PATH)
        if files_a.get(path) != files_b.get(path)
    ]
    metrics = metric_differences(
        flatten_metrics(reading_a.metrics or {}), flatten_metrics(reading_b.metrics or {})
    )
    changes, changed = _prediction_changes(listed_a, listed_b)
    samples = _samples(a, b, changed[:predictions]) if predictions > 0 else []
    identical = not (claims or files or metrics or changes.any)
    only_run_date = (
        [claim.field for claim in claims] == [RUN_DATE_FIELD]
        and [file.field for file in files] in ([], [f"{RUN_META_PATH} sha256"])
        and not metrics
        and not changes.any
    )
    side_a, side_b = _side(a, reading_a, claim_a), _side(b, reading_b, claim_b)
    return BundleDiff(
        a=side_a,
        b=side_b,
        claims=claims,
        files=files,
        metrics=metrics,
        predictions=changes,
        samples=samples,
        identical=identical,
        only_run_date=only_run_date,
        verdict=_verdict(side_a, side_b, claims, files, metrics, changes, only_run_date),
    )


def claim_differences(a: BundleClaim, b: BundleClaim) -> list[FieldDifference]:
    """Every claim field whose value differs, as dotted paths (`statics.resolved_revision`,
    `submitter.name`, `predictions.usage.input_tokens`), in the claim's own field order.
    Lists (warnings) are compared whole."""
    return _dict_differences(
        "",
        a.model_dump(mode="json", include=CLAIM_FIELDS, exclude=CLAIM_FIELDS_EXCLUDED),
        b.model_dump(mode="json", include=CLAIM_FIELDS, exclude=CLAIM_FIELDS_EXCLUDED),
    )


def metric_differences(a: list[MetricValue], b: list[MetricValue]) -> list[MetricDifference]:
    """Metrics that changed, were added (only in B) or removed (only in A), in A's order then
    B's. Numbers compare by value (1 equals 1.0); anything else by its JSON."""
    by_name_a = {metric.name: metric for metric in a}
    by_name_b = {metric.name: metric for metric in b}
    differences: list[MetricDifference] = []
    for name in [*by_name_a, *(name for name in by_name_b if name not in by_name_a)]:
        left, right = by_name_a.get(name), by_name_b.get(name)
        if left is None and right is not None:
            differences.append(
                MetricDifference(name=name, change="added", b=json.loads(right.json_value))
            )
        elif right is None and left is not None:
            differences.append(
                MetricDifference(name=name, change="removed", a=json.loads(left.json_value))
            )
        elif left is not None and right is not None and not _same_metric(left, right):
            both_numbers = left.number is not None and right.number is not None
            differences.append(
                MetricDifference(
                    name=name,
                    change="changed",
                    a=json.loads(left.json_value),
                    b=json.loads(right.json_value),
                    delta=right.number - left.number  # type: ignore[operator]
                    if both_numbers
                    else None,
                )
            )
    return differences


def _same_metric(left: MetricValue, right: MetricValue) -> bool:
    if left.number is not None and right.number is not None:
        return left.number == right.number
    return left.json_value == right.json_value


def _verified(path: Path, progress: ProgressSink | None) -> BundleReading:
    if not path.is_file():
        raise UsageError(f"{path}: no such bundle archive")
    reading = read_bundle(path, progress)
    verification = reading.verification()
    if not verification.ok:
        raise UsageError(
            f"{path}: unusable bundle, it fails verification: {verification.describe_failures()}",
            hint="a bundle that fails verification is never compared",
        )
    return reading


def _claim(reading: BundleReading) -> BundleClaim:
    assert reading.claim is not None  # a verified bundle has one
    return reading.claim


def _side(path: Path, reading: BundleReading, claim: BundleClaim) -> DiffSide:
    assert reading.sidecar is not None  # a verified bundle has one, and its digest matched
    return DiffSide(
        archive=str(path),
        bundle_id=claim.bundle_id,
        sha256=reading.sidecar.archive.sha256,
    )


def _dict_differences(
    prefix: str, a: Mapping[str, Any], b: Mapping[str, Any]
) -> list[FieldDifference]:
    differences: list[FieldDifference] = []
    for key in [*a, *(key for key in b if key not in a)]:
        name = f"{prefix}.{key}" if prefix else str(key)
        left, right = a.get(key), b.get(key)
        if isinstance(left, dict) and isinstance(right, dict):
            differences += _dict_differences(name, left, right)
        elif left != right or (key in a) != (key in b) or type(left) is not type(right):
            differences.append(FieldDifference(field=name, a=left, b=right))
    return differences


def _file_digests(listed: dict[str, str]) -> dict[str, str]:
    return {
        path: sha256 for path, sha256 in listed.items() if path in (RUN_META_PATH, METRICS_PATH)
    }


def _prediction_digests(listed: dict[str, str]) -> dict[int, str]:
    digests: dict[int, str] = {}
    for path, sha256 in listed.items():
        index = prediction_index(path)
        if index is not None:
            digests[index] = sha256
    return digests


def _prediction_changes(
    a: dict[str, str], b: dict[str, str]
) -> tuple[PredictionChanges, list[int]]:
    """The changes, and every changed index in order (the samples are taken from those)."""
    digests_a, digests_b = _prediction_digests(a), _prediction_digests(b)
    added = sorted(index for index in digests_b if index not in digests_a)
    removed = sorted(index for index in digests_a if index not in digests_b)
    changed = sorted(
        index for index, digest in digests_a.items() if digests_b.get(index, digest) != digest
    )
    return (
        PredictionChanges(
            added=len(added),
            removed=len(removed),
            changed=len(changed),
            unchanged=len(digests_a) - len(removed) - len(changed),
            first_added=added[:FIRST_INDICES],
            first_removed=removed[:FIRST_INDICES],
            first_changed=changed[:FIRST_INDICES],
        ),
        changed,
    )


def _samples(a: Path, b: Path, indices: list[int]) -> list[PredictionSample]:
    """Read only the chosen predictions of each archive and keep only their answers."""
    if not indices:
        return []
    wanted = {prediction_path(index): index for index in indices}
    answers_a = dict(_answers(a, wanted))
    answers_b = dict(_answers(b, wanted))
    samples = []
    for index in indices:
        (scored_a, output_a), (scored_b, output_b) = answers_a[index], answers_b[index]
        both_scored = scored_a is not None and scored_b is not None
        left, right = (scored_a, scored_b) if both_scored else (output_a, output_b)
        assert left is not None and right is not None
        samples.append(
            PredictionSample(
                index=index,
                field="scored_output" if both_scored else "output",
                a=left[:MAX_SAMPLE_CHARS],
                b=right[:MAX_SAMPLE_CHARS],
                truncated=max(len(left), len(right)) > MAX_SAMPLE_CHARS,
            )
        )
    return samples


def _answers(
    archive: Path, wanted: Mapping[str, int]
) -> Iterator[tuple[int, tuple[str | None, str]]]:
    """(index, (scored_output, output)) of each wanted prediction, one file in memory at a time."""
    for path, data in read_archive_members(archive, set(wanted)):
        record = parse_prediction(data, wanted[path], f"{archive}:{path}")
        yield wanted[path], (record.scored_output, record.output)


def read_archive_members(archive: Path, paths: set[str]) -> Iterator[tuple[str, bytes]]:
    """The bytes of the named members of a verified bundle archive, in archive order (the
    diff's only reader of archive contents): a member that cannot be read back now makes the
    bundle unusable."""
    try:
        yield from verified_members(archive, paths)
    except InputError as error:
        raise UsageError(str(error)) from None


def _verdict(
    a: DiffSide,
    b: DiffSide,
    claims: list[FieldDifference],
    files: list[FieldDifference],
    metrics: list[MetricDifference],
    changes: PredictionChanges,
    only_run_date: bool,
) -> str:
    if not (claims or files or metrics or changes.any):
        if a.sha256 == b.sha256:
            return "identical: the same archive bytes"
        return "identical content: same claims, metrics and predictions (archive bytes differ)"
    if only_run_date:
        return (
            f"only {RUN_DATE_FIELD} differs: the same predictions and metrics, stamped again by "
            f"a re-run ({claims[0].a} -> {claims[0].b})"
        )
    parts = []
    if claims:
        shown = ", ".join(claim.field for claim in claims[:5])
        more = f" and {len(claims) - 5} more" if len(claims) > 5 else ""
        parts.append(f"{len(claims)} claim field(s) ({shown}{more})")
    if metrics:
        parts.append(f"{len(metrics)} metric(s)")
    if changes.any:
        parts.append(
            f"predictions {changes.added} added, {changes.removed} removed, "
            f"{changes.changed} changed"
        )
    if files and not parts:
        parts.append(", ".join(file.field for file in files))
    return "different: " + "; ".join(parts)
