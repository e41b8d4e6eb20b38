"""The rows of the leaderboard's tables: each bundle's row in the all-tasks table, and its
columns in its task's table.

In the all-tasks table task-dependent metrics are a list of (name, number, json) entries under
flattened `scorer.key` names, with the original metrics.json text beside them, and usage is a
list of (key, count) pairs: no column depends on which task or model a bundle holds. A task's
table gives each numeric metric a float64 column of its own (`metric_column`), so the viewer
can sort by it. `bundler.hub.leaderboard.tables` writes both as Parquet.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, Field, field_validator

from bundler.core.model import Model
from bundler.local.layout import BundleId
from bundler.local.manifest import Sidecar
from bundler.local.metrics import (
    MetricPath,
    MetricValue,
    flatten_metrics,
    metric_leaves,
    metric_name,
    metric_number,
)
from bundler.local.schema import Count, gptnt_instant, parse_instant


@dataclass(frozen=True)
class Dtype:
    """A column's dataset type, where the Python type alone does not say it; `text`: the
    column is written twice, as this type and, under `<name>_text`, as the text itself (which
    the type cannot hold to its last digit)."""

    name: str
    text: bool = False


PublishedAt = Annotated[str, Dtype("timestamp[us, tz=UTC]")]
"""When the bundle was first published, as `YYYY-MM-DDTHH:MM:SSZ`; a UTC timestamp column in
the tables, so that it shows and sorts as a date."""


RunDate = Annotated[str, Dtype("timestamp[us, tz=UTC]", text=True)]
"""When the run was stamped, in GPTNT's one form (`gptnt_instant`: UTC,
`YYYY-MM-DDTHH:MM:SS[.fraction]Z`, to the nanosecond), so that equal instants give equal rows.
In the tables, a microsecond UTC timestamp column (the instant cut to the microsecond), which
every common reader takes: pyarrow's `to_pylist` without pandas, Spark's default Parquet
reader, DuckDB and Polars; nanoseconds are refused by the first two. Beside it,
`run_date_text` holds this text, to the nanosecond, and the row is read back from it. The
bundle keeps the string exactly as the harness wrote it."""


class UsageCount(Model):
    model_config = ConfigDict(frozen=True)

    key: str
    count: Count


class Identified:
    """What a row of either table says of its bundle's identity and first publication."""

    if TYPE_CHECKING:  # the fields are the models' own, in their column order
        bundle_id: str
        published_at: str

    @property
    def key(self) -> BundleId:
        return BundleId.parse(self.bundle_id)

    @property
    def published(self) -> datetime:
        return published_instant(self.published_at)


class BundleRow(Identified, Model):
    """The all-tasks table's row for one bundle; the field order is the table's column order."""

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
    run_date: RunDate
    published_at: PublishedAt
    coverage: str
    expected_rows: Count | None
    rows_present: Count
    predictions: Count
    errors: Count
    exceptions: Count
    input_tokens: Count
    output_tokens: Count
    requests: Count
    """The cost of the run: its predictions' usage of these keys, summed (0: none reported)."""
    usage: list[UsageCount]
    submitter_name: str | None
    submitter_affiliation: str | None
    signer_fingerprint: str | None = Field(pattern=r"^SHA256:[A-Za-z0-9+/]{43}$")
    """The SHA256 fingerprint (as `ssh-keygen -l` prints it) of the key whose signature of the
    archive verified; None: unsigned. Whose key it is, the leaderboard's allowed signers say."""
    gptnt_version: str | None
    harness_git_sha: str | None
    bundler_version: str
    archive_sha256: str
    archive_size: Count
    metrics: list[MetricValue]
    metrics_json: str
    warnings: list[str]

    @field_validator("run_date")
    @classmethod
    def _is_run_instant(cls, value: str) -> str:
        """Any instant a harness writes is accepted (ValueError for anything else), and kept
        in its one form."""
        parse_instant(value)
        return gptnt_instant(value)

    @field_validator("published_at")
    @classmethod
    def _is_utc_instant(cls, value: str) -> str:
        """Any ISO-8601 UTC instant is accepted, and kept in the one form rows are written in,
        so that equal instants give equal bytes."""
        return utc_timestamp(published_instant(value))


class TableRow(BundleRow):
    """A bundle's row in the all-tasks table: its BundleRow, and the sidecar it came from."""

    model_config = ConfigDict(frozen=True)

    sidecar_blob_id: str
    """The git blob id of the sidecar the row was derived from: a sidecar with another id on
    the branch means the row is stale."""
    ranking_metric: str | None = None
    score: float | None = None
    """The metric its task ranks by and the row's value of it, flat, so that a reader needs no
    list of structs to get a score (`bundler.hub.leaderboard.ranking.TaskScoring`)."""
    stale: bool = False
    """Its dataset revision is not among those its task's definition accepts."""
    ci_low: float | None = None
    ci_high: float | None = None
    """The 95% Wilson interval of its score, where its task's metric is a proportion."""


def published_instant(value: str) -> datetime:
    """`published_at` as an instant: an ISO-8601 date-time whose UTC offset is zero."""
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"published_at {value!r} is not an ISO-8601 date-time") from None
    if instant.utcoffset() is None or instant.utcoffset():
        raise ValueError(f"published_at {value!r} is not in UTC")
    return instant


def utc_timestamp(moment: datetime | None = None) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ`, the form `published_at` is written in; now when no moment.
    isoformat, not strftime: `%Y` writes the year 999 as `999`, which no parser reads back."""
    utc = (moment or datetime.now(UTC)).astimezone(UTC)
    return utc.replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def _fingerprint(sshsig: str) -> str:
    """The fingerprint of the key that made a verified bundle's signature. Only a signed bundle
    loads the signature's module (and `cryptography`, the largest import an upload had of its
    own): an upload of unsigned bundles never reads a signature (docs/performance.md)."""
    from bundler.local.signature import parse_signature

    return parse_signature(sshsig).fingerprint


def build_row(sidecar: Sidecar, metrics_json: str, published_at: str) -> BundleRow:
    """The all-tasks row of a verified bundle published (first) at `published_at`. Verified:
    a signature in its sidecar is of its archive's bytes, so the row names the key."""
    statics = sidecar.statics
    signed = sidecar.signature
    provenance = sidecar.provenance
    usage = sidecar.predictions.usage
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
        published_at=published_at,
        coverage=sidecar.coverage.status,
        expected_rows=sidecar.coverage.expected_rows,
        rows_present=sidecar.coverage.rows_present,
        predictions=sidecar.predictions.count,
        errors=sidecar.predictions.errors,
        exceptions=sidecar.predictions.exceptions,
        input_tokens=usage.get("input_tokens", 0),
        output_tokens=usage.get("output_tokens", 0),
        requests=usage.get("requests", 0),
        usage=[UsageCount(key=k, count=v) for k, v in usage.items()],
        submitter_name=sidecar.submitter.name,
        submitter_affiliation=sidecar.submitter.affiliation,
        signer_fingerprint=None if signed is None else _fingerprint(signed.sshsig),
        gptnt_version=_optional_str(provenance.get("gptnt_version")),
        harness_git_sha=_optional_str(provenance.get("git_sha")),
        bundler_version=sidecar.bundler_version,
        archive_sha256=sidecar.archive.sha256,
        archive_size=sidecar.archive.size,
        metrics=flatten_metrics(json.loads(metrics_json)),
        metrics_json=metrics_json,
        warnings=sidecar.warnings,
    )


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


class TaskRow(Identified, Model):
    """The fixed columns of a task's leaderboard table; the metric columns go in after
    METRICS_AFTER, so that model, player and scores are the first thing the viewer shows."""

    model_config = ConfigDict(frozen=True)

    bundle_id: str
    model_name: str
    player_name: str
    coverage: str
    rows_present: int
    expected_rows: int | None
    is_pinned: bool
    predictions: int
    errors: int
    exceptions: int
    input_tokens: int
    output_tokens: int
    requests: int
    published_at: PublishedAt
    run_date: RunDate
    task_name: str
    target: str
    player_type: str
    capability_fingerprint: str
    hf_repo_id: str
    dataset_split: str | None
    requested_revision: str | None
    resolved_revision: str | None
    submitter_name: str | None
    signer_fingerprint: str | None
    metrics_json: str
    rank: int | None = None
    """Its competition rank by the task's ranking metric (1, 1, 3); None: unranked."""
    ranking_score: float | None = None
    """Its value of the ranking metric (the all-tasks table's `score`), which it is ranked by,
    beside the metric's own column; not `score`, a common metric name, which would then have
    to be renamed."""
    stale: bool = False
    """Its dataset revision is not among those the task's definition accepts (when it names
    any): ranked after every current entry."""
    ci_low: float | None = None
    ci_high: float | None = None
    """The 95% Wilson interval of its score, where the task's metric is a proportion."""

    @classmethod
    def of(cls, row: BoardRow) -> TaskRow:
        """Its columns of `row`; the board's judgements (rank, stale, interval) are the
        board's to add."""
        shared = set(cls.model_fields) & set(BundleRow.model_fields)
        return cls.model_validate(row.model_dump(include=shared))


class ShownRow(TaskRow):
    """A row of a task's table read back: all that a board shows of a bundle and ranks it by,
    so that a commit adding bundles to a task ranks them against its best rows as its table
    holds them, without reading the task's other rows."""

    model_config = ConfigDict(frozen=True)

    @property
    def metrics(self) -> list[MetricValue]:
        return flatten_metrics(json.loads(self.metrics_json))


BoardRow = BundleRow | ShownRow
"""A row a task's board shows: from the all-tasks table, or from the task's own table."""


METRICS_AFTER = "player_name"
METRIC_COLUMN_MAX_LENGTH = 64
"""Longer metric names are shortened (and disambiguated by a digest), keeping headers usable."""
MAPPED_STEM_LENGTH = 40
MAPPED_MARK = "__"
"""Separates a mapped column's readable stem from its digest. A name kept as it is never holds
it, so no kept name can equal a mapped one."""
MAPPED_DIGEST_HEX = 32
"""128 bits of SHA-256: two metric names given one column would need a SHA-256 collision."""
_COLUMN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_NOT_STEM = re.compile(r"[^A-Za-z0-9.-]+")
_FIXED_COLUMNS = frozenset(name.lower() for name in TaskRow.model_fields)


def metric_column(path: MetricPath) -> str:
    """The task table's column for the metric at `path` in metrics.json; a function of the
    path alone, one to one, so a row file never depends on the other bundles.

    The flattened name (keys joined by `.`) is the column when every key is 1 or more of
    `[A-Za-z0-9_-]` (so the `.`s are exactly the key boundaries), the name is at most
    METRIC_COLUMN_MAX_LENGTH long, holds no `__`, and is not, in any letter case, one of the
    fixed columns. Any other path becomes `<stem>__<digest>`: the stem is the flattened name
    with each run of characters outside `[A-Za-z0-9.-]` replaced by `_`, `_` stripped from its
    ends, cut to MAPPED_STEM_LENGTH (`metric` when nothing is left); the digest is the first
    MAPPED_DIGEST_HEX hex digits of the SHA-256 of the path as a JSON array (ASCII).
    """
    name = metric_name(path)
    if (
        path
        and all(_COLUMN_KEY.fullmatch(key) for key in path)
        and len(name) <= METRIC_COLUMN_MAX_LENGTH
        and MAPPED_MARK not in name
        and name.lower() not in _FIXED_COLUMNS
    ):
        return name
    stem = _NOT_STEM.sub("_", name).strip("_")[:MAPPED_STEM_LENGTH].rstrip("_") or "metric"
    digest = hashlib.sha256(json.dumps(list(path)).encode("ascii")).hexdigest()
    return f"{stem}{MAPPED_MARK}{digest[:MAPPED_DIGEST_HEX]}"


class MetricColumn(Model):
    """One numeric metric of a bundle, as its task table holds it."""

    model_config = ConfigDict(frozen=True)

    column: str
    name: str
    value: float


def metric_columns(row: BoardRow) -> list[MetricColumn]:
    """The bundle's numeric metrics, in metrics.json order. Other values (strings, booleans,
    lists, nulls, NaN) are no scores: they stay in `metrics_json` and give no column."""
    columns: list[MetricColumn] = []
    for path, value in metric_leaves(json.loads(row.metrics_json)):
        number = metric_number(value)
        if number is not None:
            column = metric_column(path)
            columns.append(MetricColumn(column=column, name=metric_name(path), value=number))
    return columns
