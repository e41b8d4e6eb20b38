"""One table row per bundle, with the same columns whatever the task.

The Hub's dataset viewer shows a repository as one table only if every data file has the same
schema. Task-dependent metrics therefore become a list of (name, number, json) entries under
flattened `scorer.key` names, with the original metrics.json text beside them, and usage becomes
a list of (key, count) pairs: no column depends on which task or model a bundle holds.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict

from bundler.layout import BundleId
from bundler.manifest import Sidecar
from bundler.metrics import MetricValue, flatten_metrics


class UsageCount(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    count: int


class BundleRow(BaseModel):
    """The viewer's row for one bundle; the field order is the table's column order."""

    model_config = ConfigDict(frozen=True)

    bundle_id: str
    task_name: str
    target: str
    model_name: str
    player_name: str
    player_type: str
    capability_fingerprint: str
    hf_repo_id: str
    dataset_split: str | None
    requested_revision: str | None
    resolved_revision: str | None
    is_pinned: bool
    run_date: str
    coverage: str
    expected_rows: int | None
    predictions: int
    errors: int
    exceptions: int
    usage: list[UsageCount]
    submitter_name: str | None
    submitter_affiliation: str | None
    gptnt_version: str | None
    harness_git_sha: str | None
    bundler_version: str
    archive_sha256: str
    archive_size: int
    metrics: list[MetricValue]
    metrics_json: str
    warnings: list[str]
    published_at: str
    """ISO-8601 UTC: when the bundle (with this archive sha256) was first published."""


def build_row(sidecar: Sidecar, metrics_json: str, published_at: str) -> BundleRow:
    statics = sidecar.statics
    provenance = sidecar.provenance
    return BundleRow(
        bundle_id=sidecar.bundle_id,
        task_name=statics.task_name,
        target=sidecar.target,
        model_name=sidecar.model_name,
        player_name=sidecar.player_name,
        player_type=sidecar.player_type,
        capability_fingerprint=sidecar.capability_fingerprint,
        hf_repo_id=statics.hf_repo_id,
        dataset_split=statics.dataset_split,
        requested_revision=statics.requested_revision,
        resolved_revision=statics.resolved_revision,
        is_pinned=statics.is_pinned,
        run_date=sidecar.run_date,
        coverage=sidecar.coverage.status,
        expected_rows=sidecar.coverage.expected_rows,
        predictions=sidecar.predictions.count,
        errors=sidecar.predictions.errors,
        exceptions=sidecar.predictions.exceptions,
        usage=[UsageCount(key=k, count=v) for k, v in sidecar.predictions.usage.items()],
        submitter_name=sidecar.submitter.name,
        submitter_affiliation=sidecar.submitter.affiliation,
        gptnt_version=_optional_str(provenance.get("gptnt_version")),
        harness_git_sha=_optional_str(provenance.get("git_sha")),
        bundler_version=sidecar.bundler_version,
        archive_sha256=sidecar.archive.sha256,
        archive_size=sidecar.archive.size,
        metrics=flatten_metrics(json.loads(metrics_json)),
        metrics_json=metrics_json,
        warnings=sidecar.warnings,
        published_at=published_at,
    )


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def row_bytes(row: BundleRow) -> bytes:
    """One JSON line; deterministic, so an unchanged bundle gives an unchanged row file."""
    return (row.model_dump_json() + "\n").encode("utf-8")


def row_files(row: BundleRow) -> dict[str, bytes]:
    """Every row file the bundle owns in the repository: repository path -> bytes."""
    return {BundleId.parse(row.bundle_id).repo_row: row_bytes(row)}


def read_row(data: bytes) -> BundleRow:
    """A row file's row; pydantic's ValidationError when it is not one."""
    return BundleRow.model_validate_json(data)


_DTYPES: dict[Any, str] = {str: "string", int: "int64", float: "float64", bool: "bool"}


def dataset_features(model: type[BaseModel] = BundleRow) -> list[dict[str, Any]]:
    """The `dataset_info.features` YAML for a row model, derived from the model itself so the
    declared schema can never drift from the rows actually written."""
    return [_feature(name, field.annotation) for name, field in model.model_fields.items()]


def _feature(name: str, annotation: Any) -> dict[str, Any]:
    annotation = _strip_optional(annotation)
    if annotation in _DTYPES:
        return {"name": name, "dtype": _DTYPES[annotation]}
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return {"name": name, "list": dataset_features(item)}
        return {"name": name, "list": _DTYPES[item]}
    raise TypeError(f"no dataset dtype for {name}: {annotation!r}")


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (typing.Union, types.UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation
