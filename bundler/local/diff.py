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
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from bundler.core.errors import InputError, UsageError
from bundler.core.model import Model
from bundler.core.progress import ProgressSink
from bundler.local.layout import bundle_file
from bundler.local.manifest import (
    METRICS_PATH,
    RUN_META_PATH,
    BundleClaim,
    prediction_index,
    prediction_path,
)
from bundler.local.metrics import (
    MetricPath,
    MetricValue,
    metric_leaves,
    metric_name,
    metric_value,
)
from bundler.local.validation import parse_prediction
from bundler.local.verify import (
    BundleReading,
    manifest_digests,
    read_bundle,
    verified_members,
)

FIRST_INDICES = 20
"""How many indices of added, removed and changed predictions a diff lists."""
MAX_SAMPLE_CHARS = 4000
"""A prediction's answer is shown up to this many characters; answers can be whole essays."""
RUN_DATE_FIELD = "run_date"
CAPABILITIES_FIELD = "capabilities"
RUN_META_FIELD = "run_meta"
"""Names the run_meta.json fields that no claim carries, e.g. `run_meta.temperature`."""
CLAIM_FIELDS = set(BundleClaim.model_fields)
"""Only the claim's own fields: a sidecar's archive digest differs whenever anything does."""
CLAIM_FIELDS_EXCLUDED: dict[str, Any] = {"statics": {"target"}}
"""`statics.target` is the top-level `target` again; one line per fact is enough."""
_ABSENT = object()
"""A key missing on one side, which differs from a key holding null."""
_PLAIN_KEY = re.compile(r'[^."]+')
"""A metric key that reads the same in a flattened name and quoted (see `_metric_names`)."""

FieldPath = tuple[str, ...]


class FieldDifference(Model):
    """One field that differs; `None` on a side where the field is absent. A value JSON cannot
    hold (NaN, Infinity: Python's json reads them, and collect keeps run_meta.json byte for
    byte) is null in the JSON output: pydantic's JSON mode writes an untyped NaN as null, as
    it does for `inspect --json`'s capabilities."""

    field: str
    a: Any = None
    b: Any = None


MetricChange = Literal["changed", "added", "removed"]


class MetricDifference(Model):
    """One metric that differs, named as flattened (`metric_name`) unless two metrics share
    that name (see `_metric_names`)."""

    name: str
    change: MetricChange
    a: Any = None
    b: Any = None
    delta: float | None = None
    """b - a when both values are numbers and the difference is finite; null otherwise. Two
    numbers near the float64 limits (-1.7e308 and 1.7e308) differ by more than a float64
    holds, and the infinity that gives is no JSON."""


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
    capabilities as `capabilities.<name>`, then every other field of run_meta.json that
    differs and that no claim difference shows, as `run_meta.<path>`."""
    files: list[FieldDifference]
    """run_meta.json and metrics.json whose sha256 differ."""
    metrics: list[MetricDifference]
    predictions: PredictionChanges
    samples: list[PredictionSample] = Field(default_factory=list)
    identical: bool
    only_run_date: bool
    """Nothing but `run_date` differs, in run_meta.json (compared whole), the claims, the
    metrics and the predictions (run_meta.json's bytes may differ too): a re-stamped run."""
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
    claims += _run_meta_differences(
        reading_a.raw_run_meta or {}, reading_b.raw_run_meta or {}, claims
    )
    files_a, files_b = _file_digests(listed_a), _file_digests(listed_b)
    files = [
        FieldDifference(field=f"{path} sha256", a=files_a.get(path), b=files_b.get(path))
        for path in (RUN_META_PATH, METRICS_PATH)
        if files_a.get(path) != files_b.get(path)
    ]
    metrics = metric_differences(reading_a.metrics or {}, reading_b.metrics or {})
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
    return [
        FieldDifference(field=".".join(path), a=left, b=right)
        for path, left, right in _value_differences(
            a.model_dump(mode="json", include=CLAIM_FIELDS, exclude=CLAIM_FIELDS_EXCLUDED),
            b.model_dump(mode="json", include=CLAIM_FIELDS, exclude=CLAIM_FIELDS_EXCLUDED),
        )
    ]


def _run_meta_differences(
    a: Mapping[str, Any], b: Mapping[str, Any], claims: list[FieldDifference]
) -> list[FieldDifference]:
    """Every field of the two run_meta.json objects that differs, less those a claim
    difference already shows (the same field with the same values). The claim carries only
    part of run_meta.json: the harness may add top-level keys, and the schema drops unknown
    keys inside `statics`, yet a run that differs there is not the same run. Capabilities are
    named `capabilities.<name>`; any other field `run_meta.<path>`."""
    shown = {(claim.field, _json_text(claim.a), _json_text(claim.b)) for claim in claims}
    differences = []
    for path, left, right in _value_differences(a, b):
        if (".".join(path), _json_text(left), _json_text(right)) in shown:
            continue
        named = path if path[0] == CAPABILITIES_FIELD else (RUN_META_FIELD, *path)
        differences.append(FieldDifference(field=".".join(named), a=left, b=right))
    return differences


def metric_differences(a: dict[str, Any], b: dict[str, Any]) -> list[MetricDifference]:
    """Metrics of two parsed metrics.json that changed, were added (only in B) or removed (only
    in A), in A's order then B's. They are matched by key path, not by flattened name: two
    paths can flatten to one name (`{"a.b": 1}` and `{"a": {"b": 1}}`), and matching by
    name would hide a change. Numbers compare by value (1 equals 1.0); anything else by its
    JSON."""
    by_path_a, by_path_b = _metrics_by_path(a), _metrics_by_path(b)
    paths = [*by_path_a, *(path for path in by_path_b if path not in by_path_a)]
    names = _metric_names(paths)
    differences: list[MetricDifference] = []
    for path in paths:
        left, right, name = by_path_a.get(path), by_path_b.get(path), names[path]
        if left is None and right is not None:
            differences.append(
                MetricDifference(name=name, change="added", b=json.loads(right.json_value))
            )
        elif right is None and left is not None:
            differences.append(
                MetricDifference(name=name, change="removed", a=json.loads(left.json_value))
            )
        elif left is not None and right is not None and not _same_metric(left, right):
            differences.append(
                MetricDifference(
                    name=name,
                    change="changed",
                    a=json.loads(left.json_value),
                    b=json.loads(right.json_value),
                    delta=_delta(left, right),
                )
            )
    return differences


def _metrics_by_path(metrics: dict[str, Any]) -> dict[MetricPath, MetricValue]:
    return {path: metric_value(path, value) for path, value in metric_leaves(metrics)}


def _metric_names(paths: list[MetricPath]) -> dict[MetricPath, str]:
    """Each path's flattened name, unless two of the paths share one: then every key that is
    empty or holds a `.` or a `"` is written as a JSON string (`s."a.b"` beside `s.a.b`),
    which gives each path a name of its own."""
    names = {path: metric_name(path) for path in paths}
    if len(set(names.values())) == len(names):
        return names
    return {
        path: ".".join(
            key if _PLAIN_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
            for key in path
        )
        for path in paths
    }


def _same_metric(left: MetricValue, right: MetricValue) -> bool:
    if left.number is not None and right.number is not None:
        return left.number == right.number
    return left.json_value == right.json_value


def _delta(left: MetricValue, right: MetricValue) -> float | None:
    if left.number is None or right.number is None:
        return None
    delta = right.number - left.number
    return delta if math.isfinite(delta) else None


def _verified(path: Path, progress: ProgressSink | None) -> BundleReading:
    reading = read_bundle(bundle_file(path), progress)
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


def _value_differences(
    a: Mapping[str, Any], b: Mapping[str, Any]
) -> list[tuple[FieldPath, Any, Any]]:
    """The key path and the two values of every field where two JSON objects differ, in A's
    key order then B's; an object on both sides is descended into, with an explicit stack (a
    nesting as deep as the parser allows meets no recursion limit). A missing value is None.

    Values compare as their JSON, as the capability fingerprint sees them: 1, 1.0 and true
    differ (inside a list too), while NaN equals NaN, so a bundle never differs from itself."""
    differences: list[tuple[FieldPath, Any, Any]] = []
    pending: list[tuple[FieldPath, Any, Any]] = [((), a, b)]
    while pending:
        path, left, right = pending.pop()
        if isinstance(left, dict) and isinstance(right, dict):
            keys = [*left, *(key for key in right if key not in left)]
            pending.extend(
                ((*path, str(key)), left.get(key, _ABSENT), right.get(key, _ABSENT))
                for key in reversed(keys)
            )
        elif left is _ABSENT or right is _ABSENT or _json_text(left) != _json_text(right):
            differences.append(
                (path, None if left is _ABSENT else left, None if right is _ABSENT else right)
            )
    return differences


SHOWN_VALUE_CHARS = 60
"""A value in a one-line wording of a change is cut past this: the line names every field that
differs, and `bundler diff` shows each value whole."""


def worded_change(name: str, old: str, new: str) -> str:
    """`name old -> new`, each value cut past SHOWN_VALUE_CHARS: how a conflict, a
    replacement or a kept bundle names what differs."""

    def cut(value: str) -> str:
        return value if len(value) <= SHOWN_VALUE_CHARS else value[: SHOWN_VALUE_CHARS - 1] + "…"

    return f"{name} {cut(old)} -> {cut(new)}"


def claim_changes(a: BundleClaim, b: BundleClaim) -> list[str]:
    """Every claim field that differs, worded `field old -> new` (A's value first)."""
    return [
        worded_change(d.field, *(v if isinstance(v, str) else _json_text(v) for v in (d.a, d.b)))
        for d in claim_differences(a, b)
    ]


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


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
