"""Export bundles as GPTNT's own submission folders, for leaderboards that still take
submissions through GPTNT's GitHub flow.

For each verified bundle this writes the folder `gptnt submission new` writes for the same run:
`submission.yaml` and the run's `metrics.json` byte for byte, in a folder named as GPTNT names
it, so `gptnt submission validate` accepts it. GPTNT's schema is stricter than the bundler's in
ways that matter here, and an export never hides a difference by dropping or inventing data:

- GPTNT's player capability model forbids unknown fields, fills missing ones with its defaults
  (which changes the capability fingerprint) and writes them in its own declaration order. A
  bundle from a newer or older harness is therefore refused, naming each field, rather than
  exported as a different player setup.
- The leaderboard `identity` is not in the run; it comes from the player's GPTNT config file.
- GPTNT refuses a blank submitter name or contact, and an unknown harness version (`0.0.0`).
- GPTNT's provenance keeps only `gptnt_version` and `git_sha`; other fields are reported as not
  carried over. GPTNT writes the run date as a UTC instant; a date recorded with another offset
  is reported as converted.

The GPTNT facts below were read from GPTNT's source (src/gptnt/players/specification.py,
src/gptnt/cli/submission/, at commit 8d77b93) and the pydantic-ai release it locks (2.2.0).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError

from bundler.core.errors import BundlerError, InputError, UsageError, WriteError
from bundler.core.limits import MAX_PLAYER_CONFIG_BYTES
from bundler.core.model import Model, RemedyField
from bundler.core.progress import NoProgress, ProgressSink
from bundler.local.fileio import read_bounded, unusable_output_folder, write_error
from bundler.local.layout import (
    GPTNT_METRICS_FILE,
    GPTNT_SUBMISSION_FILE,
    TEMP_PREFIX,
    GptntSubmissionName,
    find_archives,
)
from bundler.local.manifest import BundleClaim
from bundler.local.schema import UNKNOWN_HARNESS_VERSION, gptnt_instant
from bundler.local.submitter import Submitter
from bundler.local.validation import describe_validation_error
from bundler.local.verify import BundleReading, read_bundle

GPTNT_SCHEMA_VERSION: Literal[1] = 1
GPTNT_CAPABILITY_FIELDS: tuple[str, ...] = (
    "player_name",
    "player_type",
    "thinking_method",
    "structured_output_mode",
    "include_schema_in_instructions",
    "max_observations_per_request",
    "usage_limits",
    "image_dimensions",
    "tokens_per_image",
    "interaction_location_method",
    "coordinate_mode",
    "preserve_last_frame_for_n_turns",
    "enable_nobf_generation",
)
"""GPTNT's PlayerCapabilities fields, in the order GPTNT writes them."""
GPTNT_NESTED_CAPABILITY_FIELDS: dict[str, tuple[str, ...]] = {
    "usage_limits": (
        "request_limit",
        "tool_calls_limit",
        "input_tokens_limit",
        "output_tokens_limit",
        "total_tokens_limit",
        "count_tokens_before_request",
    ),
    "image_dimensions": ("width", "height"),
}
"""Capability fields that are objects, with their fields in GPTNT's order. GPTNT silently drops
unknown keys inside these, so the export must name them itself."""
GPTNT_PROVENANCE_FIELDS = ("gptnt_version", "git_sha")
STATICS_ROLE: Literal["defuser"] = "defuser"
"""A statics submission has exactly one player, the defuser."""


# GPTNT's submission.yaml, field for field, in its order ---------------------------------------


class _Written(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GptntIdentity(_Written):
    """A player's leaderboard identity, from its GPTNT config: exactly these four fields, all
    required, validated as GPTNT's own model validates them (so `is_os_model: 'no'` is false)."""

    display_name: str
    organisation: str
    is_os_model: bool
    url: str | None


class GptntMeasured(_Written):
    task_name: str
    hf_repo_id: str
    dataset_split: str | None
    requested_revision: str | None
    resolved_revision: str | None


class GptntSubmitter(_Written):
    name: str
    contact: str
    affiliation: str | None


class GptntPlayer(_Written):
    role: Literal["defuser"]
    capabilities: dict[str, Any]
    identity: GptntIdentity
    fingerprint: str


class GptntProvenance(_Written):
    gptnt_version: str
    git_sha: str | None


class GptntSubmission(_Written):
    """submission.yaml of a statics submission, schema version 1."""

    schema_version: Literal[1] = GPTNT_SCHEMA_VERSION
    submission_id: str
    measured: GptntMeasured
    submitter: GptntSubmitter
    players: list[GptntPlayer]
    provenance: GptntProvenance
    run_date: str

    def yaml_bytes(self) -> bytes:
        """The exact bytes GPTNT writes: PyYAML's safe_dump of the model, keys in model order."""
        text = yaml.safe_dump(
            self.model_dump(mode="json"), sort_keys=False, default_flow_style=False
        )
        return text.encode("utf-8")


# The player config --------------------------------------------------------------------------


class PlayerConfig(Model):
    """What the export needs from a GPTNT player config (`configs/player/<name>.yaml`)."""

    path: str
    player_name: str
    identity: GptntIdentity


def load_player_config(path: Path) -> PlayerConfig:
    """Read a GPTNT player config safely (bounded, no links, yaml.safe_load). UsageError for
    anything that is not a config with a `capabilities.player_name` and a four-field identity."""
    try:
        data = read_bounded(path, MAX_PLAYER_CONFIG_BYTES)
    except InputError as error:
        raise UsageError(str(error)) from None
    try:
        raw = yaml.safe_load(data)
    except RecursionError:  # PyYAML composes nested collections recursively
        raise UsageError(f"{path}: nested too deeply to be a player config") from None
    except (yaml.YAMLError, ValueError) as error:
        # PyYAML's constructors raise a plain ValueError for a scalar its grammar accepts but
        # Python cannot hold (the date 2026-13-45, `!!int x`): the message is the problem.
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = "" if isinstance(error, yaml.YAMLError) else f": {error}"
        raise UsageError(f"{path}: not valid YAML{where}{problem}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: not a player config (expected a mapping)")
    capabilities = raw.get("capabilities")
    player_name = capabilities.get("player_name") if isinstance(capabilities, dict) else None
    if not isinstance(player_name, str):
        raise UsageError(f"{path}: no capabilities.player_name, so not a GPTNT player config")
    identity = raw.get("identity")
    if identity is None:
        raise UsageError(
            f"{path}: player {player_name!r} has no identity block, and GPTNT refuses to build a "
            "submission for a player without one"
        )
    if not isinstance(identity, dict):
        raise UsageError(f"{path}: identity is not a mapping")
    unknown = [str(key) for key in identity if key not in GptntIdentity.model_fields]
    if unknown:
        raise UsageError(f"{path}: identity has key(s) GPTNT does not know: {', '.join(unknown)}")
    try:
        parsed = GptntIdentity.model_validate(identity)
    except ValidationError as error:
        raise UsageError(f"{path}: identity: {describe_validation_error(error)}") from None
    return PlayerConfig(path=str(path), player_name=player_name, identity=parsed)


# Planning one submission ----------------------------------------------------------------------

RefusalKind = Literal[
    "verification",
    "player",
    "capabilities",
    "provenance",
    "submitter",
    "coverage",
    "exists",
    "write",
]


class Refusal(Model):
    kind: RefusalKind
    detail: str
    remedy: RemedyField = None


class SubmissionPlan(Model):
    """The submission for one bundle, or why there is none; warnings never stop an export."""

    submission: GptntSubmission | None
    name: GptntSubmissionName | None
    refusals: list[Refusal] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def plan_submission(
    claim: BundleClaim,
    capabilities: dict[str, Any],
    config: PlayerConfig,
    submitter: Submitter,
    *,
    allow_partial: bool = False,
) -> SubmissionPlan:
    """The GPTNT submission of one verified bundle, pure: nothing is read or written.

    `capabilities` are the run's as recorded; `submitter` is the one to write (the bundle's
    with any overrides applied). A partial or unknown-coverage bundle is refused unless
    `allow_partial`, as collect refuses such a run: nothing in GPTNT's folder would say so.
    """
    refusals: list[Refusal] = []
    warnings: list[str] = []
    if config.player_name != claim.player_name:
        refusals.append(
            Refusal(
                kind="player",
                detail=f"the player config {config.path} is for player {config.player_name!r}, "
                f"this bundle's player is {claim.player_name!r}",
            )
        )
    capability_problem = describe_capability_mismatch(capabilities)
    if capability_problem:
        refusals.append(Refusal(kind="capabilities", detail=capability_problem))
    provenance = claim.provenance
    if provenance.get("gptnt_version") == UNKNOWN_HARNESS_VERSION:
        refusals.append(
            Refusal(
                kind="provenance",
                detail=f"gptnt_version {UNKNOWN_HARNESS_VERSION} means the harness version is "
                "unknown, and GPTNT refuses it",
            )
        )
    dropped = [key for key in provenance if key not in GPTNT_PROVENANCE_FIELDS]
    if dropped:
        warnings.append(
            f"provenance field(s) {', '.join(dropped)} not carried over: GPTNT's submission "
            f"holds only {' and '.join(GPTNT_PROVENANCE_FIELDS)}"
        )
    blank = [
        field for field in ("name", "contact") if not (getattr(submitter, field) or "").strip()
    ]
    if blank:
        refusals.append(
            Refusal(
                kind="submitter",
                detail=f"submitter {' and '.join(blank)} blank, and GPTNT refuses a submission "
                "without them",
            )
        )
    run_instant = gptnt_instant(claim.run_date)
    if run_instant != claim.run_date:
        warnings.append(f"run_date {claim.run_date} is written as {run_instant}, as GPTNT does")
    if claim.coverage.status != "complete" and not allow_partial:
        refusals.append(
            Refusal(
                kind="coverage",
                detail=f"coverage is {claim.coverage.status}, and GPTNT's folder would not say so",
                remedy="export-partial",
            )
        )
    elif claim.coverage.status != "complete":
        warnings.append(
            f"coverage is {claim.coverage.status}: GPTNT's validator does not check coverage, "
            "so nothing in the folder says so"
        )
    if refusals:
        return SubmissionPlan(submission=None, name=None, refusals=refusals, warnings=warnings)
    name = GptntSubmissionName(
        player_name=claim.player_name,
        display_name=config.identity.display_name,
        fingerprint=claim.capability_fingerprint,
        task=claim.statics.task_name,
        revision_label=claim.statics.revision_label,
        run_instant=run_instant,
    )
    statics = claim.statics
    submission = GptntSubmission(
        submission_id=name.submission_id,
        measured=GptntMeasured(
            task_name=statics.task_name,
            hf_repo_id=statics.hf_repo_id,
            dataset_split=statics.dataset_split,
            requested_revision=statics.requested_revision,
            resolved_revision=statics.resolved_revision,
        ),
        submitter=GptntSubmitter(
            name=submitter.name or "",
            contact=submitter.contact or "",
            affiliation=submitter.affiliation,
        ),
        players=[
            GptntPlayer(
                role=STATICS_ROLE,
                capabilities=in_gptnt_order(capabilities),
                identity=config.identity,
                fingerprint=claim.capability_fingerprint,
            )
        ],
        provenance=GptntProvenance(
            gptnt_version=provenance["gptnt_version"], git_sha=provenance.get("git_sha")
        ),
        run_date=run_instant,
    )
    return SubmissionPlan(submission=submission, name=name, warnings=warnings)


def describe_capability_mismatch(capabilities: dict[str, Any]) -> str | None:
    """Name every capability field GPTNT's schema would not know, and every one it would fill
    with a default (changing the fingerprint); None when the fields are exactly GPTNT's."""
    unknown = [key for key in capabilities if key not in GPTNT_CAPABILITY_FIELDS]
    missing = [key for key in GPTNT_CAPABILITY_FIELDS if key not in capabilities]
    for key, fields in GPTNT_NESTED_CAPABILITY_FIELDS.items():
        value = capabilities.get(key)
        if key not in capabilities:
            continue
        if not isinstance(value, dict):
            unknown.append(f"{key} (not an object)")
            continue
        unknown += [f"{key}.{sub}" for sub in value if sub not in fields]
        missing += [f"{key}.{sub}" for sub in fields if sub not in value]
    parts = []
    if unknown:
        parts.append(f"capability field(s) GPTNT's schema does not know: {', '.join(unknown)}")
    if missing:
        parts.append(
            f"capability field(s) GPTNT's schema has and this run lacks: {', '.join(missing)}"
        )
    return "; ".join(parts) or None


def in_gptnt_order(capabilities: dict[str, Any]) -> dict[str, Any]:
    """The capabilities with their keys (and nested keys) in GPTNT's order, values unchanged."""
    ordered: dict[str, Any] = {}
    for key in GPTNT_CAPABILITY_FIELDS:
        value = capabilities[key]
        nested = GPTNT_NESTED_CAPABILITY_FIELDS.get(key)
        ordered[key] = {sub: value[sub] for sub in nested} if nested else value
    return ordered


# Exporting --------------------------------------------------------------------------------------

ExportOutcome = Literal["exported", "unchanged", "refused", "skipped"]


class ExportedBundle(Model):
    archive: str
    bundle_id: str | None
    outcome: ExportOutcome
    folder: str | None = None
    submission_id: str | None = None
    refusals: list[Refusal] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    skipped: str | None = Field(
        default=None, description="outcome skipped: why (a folder's bundle of another player)"
    )

    @property
    def reason(self) -> str:
        return "; ".join(refusal.detail for refusal in self.refusals)


class ExportReport(Model):
    output_dir: str
    player_config: str
    player_name: str
    bundles: list[ExportedBundle]

    @property
    def exit_code(self) -> int:
        return 1 if any(bundle.outcome == "refused" for bundle in self.bundles) else 0


class SubmitterOverrides(Model):
    """Values that replace the bundle's submitter fields; None keeps the bundle's value, and an
    empty affiliation clears it."""

    model_config = ConfigDict(frozen=True)

    name: str | None = None
    contact: str | None = None
    affiliation: str | None = None

    def apply(self, submitter: Submitter) -> Submitter:
        return Submitter(
            name=submitter.name if self.name is None else self.name,
            contact=submitter.contact if self.contact is None else self.contact,
            affiliation=submitter.affiliation
            if self.affiliation is None
            else (self.affiliation or None),
        )


def export_gptnt(
    paths: list[Path],
    output_dir: Path,
    player_config: Path,
    submitter: SubmitterOverrides | None = None,
    progress: ProgressSink | None = None,
    *,
    allow_partial: bool = False,
) -> ExportReport:
    """Export every bundle at or below `paths` into `output_dir`, one GPTNT folder per bundle.

    Each bundle is verified first; a refused bundle never stops the others. A bundle found in
    a folder whose player is not the config's is skipped (a folder holds every player's
    bundles); one named directly is refused. Raises UsageError for a config, path or output
    folder that cannot be used at all.
    """
    progress = progress or NoProgress()
    overrides = submitter or SubmitterOverrides()
    config = load_player_config(player_config)
    archives = find_archives(paths)
    try:  # write_folder's first step, so a folder no bundle could be written to stops here
        output_dir.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=output_dir))
    except OSError as error:
        raise unusable_output_folder(output_dir, error) from None
    named = {path for path in paths if not path.is_dir()}
    bundles = [
        _export_one(
            read_bundle(archive, progress),
            output_dir,
            config,
            overrides,
            allow_partial=allow_partial,
            skip_others=archive not in named,
        )
        for archive in archives
    ]
    return ExportReport(
        output_dir=str(output_dir),
        player_config=config.path,
        player_name=config.player_name,
        bundles=bundles,
    )


def _export_one(
    reading: BundleReading,
    output_dir: Path,
    config: PlayerConfig,
    overrides: SubmitterOverrides,
    *,
    allow_partial: bool,
    skip_others: bool,
) -> ExportedBundle:
    verification = reading.verification()
    if not verification.ok:
        return ExportedBundle(
            archive=str(reading.path),
            bundle_id=verification.bundle_id,
            outcome="refused",
            refusals=[Refusal(kind="verification", detail=verification.describe_failures())],
        )
    assert reading.claim is not None and reading.raw_capabilities is not None
    assert reading.metrics_text is not None  # a verified bundle has all three
    claim = reading.claim
    if skip_others and claim.player_name != config.player_name:
        return ExportedBundle(
            archive=str(reading.path),
            bundle_id=claim.bundle_id,
            outcome="skipped",
            skipped=f"another player ({claim.player_name})",
        )
    plan = plan_submission(
        claim,
        reading.raw_capabilities,
        config,
        overrides.apply(claim.submitter),
        allow_partial=allow_partial,
    )
    exported = ExportedBundle(
        archive=str(reading.path),
        bundle_id=claim.bundle_id,
        outcome="refused",
        refusals=plan.refusals,
        warnings=plan.warnings,
    )
    if plan.submission is None or plan.name is None:
        return exported
    folder = plan.name.folder(output_dir)
    exported.folder, exported.submission_id = str(folder), plan.name.submission_id
    files = {
        GPTNT_SUBMISSION_FILE: plan.submission.yaml_bytes(),
        GPTNT_METRICS_FILE: reading.metrics_text.encode("utf-8"),
    }
    try:
        exported.outcome = write_folder(folder, files)
    except FolderExistsError as error:
        exported.refusals = [Refusal(kind="exists", detail=str(error))]
    except WriteError as error:
        exported.refusals = [Refusal(kind="write", detail=str(error))]
    return exported


class FolderExistsError(BundlerError):
    """The output folder is already there with other content; it is never overwritten."""

    kind: ClassVar[str] = "folder-exists"


def write_folder(folder: Path, files: dict[str, bytes]) -> Literal["exported", "unchanged"]:
    """Write `files` as the folder, atomically: into a temporary folder beside it, then one
    rename, so a reader or a crash sees no folder or the whole one. A folder already holding
    exactly these files is left alone; one holding anything else is refused, never replaced."""
    if folder.exists() or folder.is_symlink():
        if _holds(folder, files):
            return "unchanged"
        raise FolderExistsError(
            f"{folder} already exists with other content; remove it to export again"
        )
    try:
        temporary = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder.parent))
    except OSError as error:
        raise write_error(folder, error) from None
    try:
        for name, data in files.items():
            descriptor = os.open(temporary / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(temporary, 0o755)  # mkdtemp makes it private; the folder is meant to be shared
        os.rename(temporary, folder)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        if isinstance(error, OSError):
            if folder.exists():  # made by someone else meanwhile
                raise FolderExistsError(
                    f"{folder} appeared while exporting; not replaced"
                ) from None
            raise write_error(folder, error) from None
        raise
    return "exported"


def _holds(folder: Path, files: dict[str, bytes]) -> bool:
    """Whether `folder` is exactly `files`: any other entry in it is someone's content, which
    `unchanged` would claim as ours and a later submission of the folder would carry along."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    try:
        if sorted(os.listdir(folder)) != sorted(files):
            return False
        return all(read_bounded(folder / name, len(data)) == data for name, data in files.items())
    except (OSError, InputError):  # unlistable; or a file missing, a link, larger than expected
        return False
