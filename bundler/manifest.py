"""Pydantic models of what the bundler writes: the manifest inside a bundle and its sidecar.

The manifest is the bundle's claim about itself (what was measured, by whom, how complete) plus
a BagIt-style list of every file with its size and sha256. The sidecar is the same claim without
the file list, plus the archive's own digest, so a reviewer or the Hub sees it without
decompressing anything.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bundler.schema import StaticsIdentity

MANIFEST_VERSION: Literal[1] = 1
MANIFEST_PATH = "manifest.json"
RUN_META_PATH = "run_meta.json"
METRICS_PATH = "metrics.json"
PREDICTIONS_DIR = "predictions"

CoverageStatus = Literal["complete", "partial", "unknown"]


def prediction_path(index: int) -> str:
    """Where prediction `index` lives inside the archive."""
    return f"{PREDICTIONS_DIR}/prediction_{index}.json"


def prediction_index(path: str) -> int | None:
    """The row index of an archive path written by `prediction_path`; None for any other path."""
    prefix, suffix = f"{PREDICTIONS_DIR}/prediction_", ".json"
    if not (path.startswith(prefix) and path.endswith(suffix)):
        return None
    number = path[len(prefix) : -len(suffix)]
    if not number.isdigit() or not number.isascii():
        return None
    index = int(number)
    return index if prediction_path(index) == path else None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Submitter(_Model):
    """Who submits the bundle; optional, but a leaderboard needs someone to ask."""

    name: str | None = None
    contact: str | None = None
    affiliation: str | None = None


class PredictionSummary(_Model):
    count: int
    contiguous: bool
    errors: int
    exceptions: int
    missing_scored_output: int
    usage: dict[str, int]


class Coverage(_Model):
    """How much of the dataset the run covers. `complete` is only ever claimed against a known
    row count, so a run limited with --limit-instances can never pass as complete."""

    status: CoverageStatus
    expected_rows: int | None
    rows_present: int


class FileEntry(_Model):
    path: str
    size: int
    sha256: str


class BundleClaim(_Model):
    """Everything a bundle says about itself, shared by the manifest and the sidecar."""

    manifest_version: Literal[1] = MANIFEST_VERSION
    bundle_id: str
    target: str
    statics: StaticsIdentity
    model_name: str
    run_date: str
    player_name: str
    player_type: str
    capability_fingerprint: str
    provenance: dict[str, Any]
    submitter: Submitter
    predictions: PredictionSummary
    coverage: Coverage
    warnings: list[str]
    bundler_version: str


class Manifest(BundleClaim):
    """manifest.json, the first member of every archive. `files` comes last so that it can be
    streamed entry by entry without holding a large run's file list as one string."""

    files: list[FileEntry]

    def claim(self) -> BundleClaim:
        return BundleClaim.model_validate(self.model_dump(exclude={"files"}))


class ArchiveInfo(_Model):
    name: str
    size: int
    sha256: str


class Sidecar(BundleClaim):
    """`<target>.json` beside the archive: the claim plus the archive's own size and sha256."""

    archive: ArchiveInfo
    files_count: int = Field(description="number of files listed in the manifest")

    def claim(self) -> BundleClaim:
        return BundleClaim.model_validate(self.model_dump(exclude={"archive", "files_count"}))
