"""The claim a bundle makes, derived in one place for collect (from a run directory) and verify
(from a bundle's own files), so that verify can require exactly what collect would write."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from bundler.core.errors import InputError
from bundler.core.limits import MAX_CLAIM_BYTES, MAX_SIDECAR_BYTES
from bundler.local.archive import manifest_head
from bundler.local.fileio import read_bounded
from bundler.local.manifest import (
    ArchiveInfo,
    BundleClaim,
    BundleSignature,
    CollectInputs,
    Sidecar,
)
from bundler.local.runs import RunEvidence, judge_run
from bundler.local.submitter import Submitter


def claim_for(
    where: Path | str,
    evidence: RunEvidence,
    *,
    submitter: Submitter,
    expected_rows: int | None,
    inputs: CollectInputs,
    bundler_version: str,
) -> BundleClaim:
    """The claim collect writes for a run, derived from its files (`evidence`) and what collect
    was told or found (the rest). This is the only place a claim is made: verify calls it with
    a bundle's own files and the inputs its manifest records, and requires the very same claim,
    byte for byte. Raises InputError, naming `where`, for a run collect refuses."""
    coverage, warnings = judge_run(
        where,
        evidence,
        expected_rows=expected_rows,
        # A partial bundle exists only because --allow-partial was given; collect refused the
        # run before this point otherwise.
        allow_partial=True,
        left_out=inputs.left_out,
        row_count_note=inputs.row_count_note,
    )
    meta = evidence.meta
    claim = BundleClaim(
        bundle_id=str(evidence.bundle_id),
        target=meta.statics.target,
        statics=meta.statics,
        model_name=meta.model_name,
        run_date=meta.run_date,
        player_name=meta.capabilities.player_name,
        player_type=meta.capabilities.player_type,
        capability_fingerprint=evidence.fingerprint,
        provenance=meta.provenance.model_dump(),
        submitter=submitter,
        predictions=evidence.summary,
        coverage=coverage,
        warnings=warnings,
        inputs=inputs,
        bundler_version=bundler_version,
    )
    size = len(manifest_head(claim))
    if size > MAX_CLAIM_BYTES:
        raise InputError(
            where,
            f"the bundle's claim would be {size} bytes, more than {MAX_CLAIM_BYTES} "
            "(an oversized provenance, model name or submitter?)",
        )
    return claim


def sidecar_for(
    claim: BundleClaim,
    archive_name: str,
    sha256: str,
    size: int,
    signature: BundleSignature | None = None,
) -> Sidecar:
    """The sidecar of an archive: its claim, less the file list, plus the archive's own file
    name, size and sha256 (the file count is the manifest's: run_meta, metrics, predictions),
    and its signature when it has one.

    The claim's fields are taken as they are, validated once already (by `claim_for`), not
    dumped and validated again: the sidecar serialises to the same bytes, and that second
    validation was a share of every run collect bundles worth sparing
    (tests/test_collect_sidecar.py compares the two ways on claims of every kind)."""
    return Sidecar.model_construct(
        **{name: getattr(claim, name) for name in BundleClaim.model_fields},
        archive=ArchiveInfo(name=archive_name, size=size, sha256=sha256),
        files_count=claim.predictions.count + 2,
        signature=signature,
    )


def sidecar_bytes(sidecar: Sidecar) -> bytes:
    """The sidecar as collect writes it, and as upload publishes it: verify requires these.
    An unsigned sidecar has no `signature` key at all, so its bytes are what they always were."""
    exclude = {"signature"} if sidecar.signature is None else None
    return (sidecar.model_dump_json(indent=2, exclude=exclude) + "\n").encode("utf-8")


def signature_beside(sidecar_path: Path) -> BundleSignature | None:
    """The signature in the sidecar at `sidecar_path`, if it is a sidecar and holds one. It
    signs the archive's bytes, so it still holds wherever those bytes are written again."""
    try:
        data = read_bounded(sidecar_path, MAX_SIDECAR_BYTES)
        return Sidecar.model_validate_json(data).signature
    except (OSError, InputError, ValidationError):
        return None
