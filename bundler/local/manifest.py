"""Pydantic models of what the bundler writes: the manifest inside a bundle and its sidecar.

The manifest is the bundle's claim about itself (what was measured, by whom, how complete) plus
a BagIt-style list of every file with its size and sha256. The sidecar is the same claim without
the file list, plus the archive's own digest, so a reviewer or the Hub sees it without
decompressing anything.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from bundler.core.limits import INT64_MAX, MAX_LEFT_OUT_SHOWN, MAX_LEVEL, MAX_SIGNATURE_CHARS
from bundler.core.model import Model
from bundler.local.schema import StaticsIdentity
from bundler.local.submitter import Submitter

MANIFEST_VERSION: Literal[2] = 2
"""2 records the inputs collect used beyond the run's files (`inputs`), so that verify can derive
every other field, the warnings included, exactly as collect did."""
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


class _Model(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    expected_rows: int | None = Field(le=INT64_MAX)
    """At most what the viewer's int64 column holds (--expect and --resolve-rows keep to it)."""
    rows_present: int


class FileEntry(_Model):
    path: str
    size: int
    sha256: str


class LeftOut(_Model):
    """Regular files and folders (shown as `name/`) in the run directory that belong to no
    run, left out of the bundle."""

    count: int = Field(ge=0)
    shown: list[str] = Field(description=f"the first {MAX_LEFT_OUT_SHOWN} names, sorted")

    @model_validator(mode="after")
    def _shown_is_the_first_names(self) -> LeftOut:
        if len(self.shown) != min(self.count, MAX_LEFT_OUT_SHOWN):
            raise ValueError(f"left_out shows {len(self.shown)} names of {self.count}")
        if self.shown != sorted(self.shown):
            raise ValueError("left_out names are not sorted")
        return self


class CollectInputs(_Model):
    """What collect was told or found that the bundle's own files do not show, beyond the claim's
    submitter, expected row count and bundler version. With these, every other field of the
    claim (the warnings included) is derived from the files, by collect and verify alike."""

    level: int = Field(ge=1, le=MAX_LEVEL, description="the zstd level of every frame")
    left_out: LeftOut
    row_count_note: str | None = Field(
        description="why the Hub's row count was not found; only when the count is unknown"
    )


class BundleClaim(_Model):
    """Everything a bundle says about itself, shared by the manifest and the sidecar."""

    manifest_version: Literal[2] = MANIFEST_VERSION
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
    inputs: CollectInputs
    bundler_version: str

    @model_validator(mode="after")
    def _note_only_without_a_row_count(self) -> BundleClaim:
        if self.inputs.row_count_note is not None and self.coverage.expected_rows is not None:
            raise ValueError("inputs.row_count_note is set although the row count is known")
        return self


class Manifest(BundleClaim):
    """manifest.json, the first member of every archive. `files` comes last so that it can be
    streamed entry by entry without holding a large run's file list as one string."""

    files: list[FileEntry]


class ArchiveInfo(_Model):
    name: str
    size: int
    sha256: str


class BundleSignature(_Model):
    """Who vouches for the archive's bytes: an OpenSSH signature (bundler.local.signature)."""

    sshsig: str = Field(
        max_length=MAX_SIGNATURE_CHARS,
        description="the armored SSHSIG signature of the archive, namespace statics-bundler",
    )


class Sidecar(BundleClaim):
    """`<target>.json` beside the archive: the claim plus the archive's own size and sha256,
    and, once signed, the signature. The signature is the one part not derived from the
    archive; a sidecar without one is written without the key, as before signing existed."""

    archive: ArchiveInfo
    files_count: int = Field(description="number of files listed in the manifest")
    signature: BundleSignature | None = None
