"""Stage 4: check that a bundle is exactly what collect writes, streaming, in bounded memory.

One pass over the archive does everything (local/verifyarchive.py): its bytes are hashed while
its frames, tar members and files are checked, and the claim is derived from the files by the
function collect uses (local/verifymanifest.py). Here that pass is joined with what lies beside
the archive: the sidecar must be byte for byte what collect would write, its signature (where it
holds one) must be of the archive's very bytes, and the path must name the bundle. Nothing is
taken on trust, so a forged bundle can neither fool verify nor exhaust its memory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import zstandard
from pydantic import ValidationError

from bundler.core.checks import CheckResult, failed, passed
from bundler.core.errors import InputError, NotCanonicalError, SignatureError
from bundler.core.limits import MAX_SIDECAR_BYTES
from bundler.core.model import Model
from bundler.core.progress import NoProgress, ProgressSink
from bundler.local.archive import MANIFEST_SPOOL_BYTES
from bundler.local.claim import sidecar_bytes, sidecar_for
from bundler.local.fileio import HashingReader
from bundler.local.layout import (
    ARCHIVE_SUFFIX,
    LayoutError,
    find_archives,
    id_of_local_archive,
    sidecar_of,
)
from bundler.local.manifest import MANIFEST_PATH, BundleClaim, Sidecar
from bundler.local.tarformat import TarReader
from bundler.local.validation import describe_validation_error
from bundler.local.verifyarchive import MAX_MEMBER_BYTES, ArchiveReading, read_archive
from bundler.local.verifymanifest import (
    MAX_MANIFEST_BYTES,
    CheckFailed,
    ManifestReader,
    describe_difference,
)
from bundler.local.zstdframes import FrameReader, frame_chunks

if TYPE_CHECKING:
    from bundler.local.signature import SshSignature


class BundleVerification(Model):
    """The verdict on one archive: every check that ran, in order, and who signed it."""

    archive: str
    bundle_id: str | None
    checks: list[CheckResult]
    signer: str | None = None
    """The SHA256 fingerprint of the key whose signature of the archive verified; None when
    the bundle is unsigned or its signature failed. Who that key belongs to is for the
    leaderboard's allowed signers to say, not the bundle."""

    @property
    def ok(self) -> bool:
        return all(check.status != "failed" for check in self.checks)

    def failures(self) -> list[CheckResult]:
        return [check for check in self.checks if check.status == "failed"]

    def describe_failures(self) -> str:
        """One line naming every failed check, for reports that refuse the bundle."""
        return "; ".join(f"{check.name}: {check.detail}" for check in self.failures())


class VerifyReport(Model):
    bundles: list[BundleVerification]

    @property
    def exit_code(self) -> int:
        return 0 if all(bundle.ok for bundle in self.bundles) else 1


@dataclass(kw_only=True)
class BundleReading(ArchiveReading):
    """What a streaming read of one bundle found: the archive's parts (when readable), the
    sidecar beside it, and the checks."""

    path: Path
    sidecar: Sidecar | None = None
    sidecar_data: bytes | None = None
    """The sidecar file's bytes as read, so a publisher need not read it again."""
    signer: str | None = None
    """The fingerprint of the key whose signature verified (BundleVerification.signer)."""

    def verification(self) -> BundleVerification:
        return BundleVerification(
            archive=str(self.path),
            bundle_id=self.claim.bundle_id if self.claim else None,
            checks=self.checks,
            signer=self.signer,
        )


def verify(paths: list[Path], progress: ProgressSink | None = None) -> VerifyReport:
    """Verify every archive at or below `paths`. Raises UsageError for a path that is not there."""
    progress = progress or NoProgress()
    archives = find_archives(paths)
    return VerifyReport(bundles=[read_bundle(path, progress).verification() for path in archives])


def read_bundle(path: Path, progress: ProgressSink | None = None) -> BundleReading:
    """Read and check one bundle; never raises for a bad bundle, records failed checks instead."""
    reading = BundleReading(path=path)
    progress = progress or NoProgress()
    progress.begin(f"verifying {path.name}", None, unit="predictions")
    sidecar_problem = _read_sidecar(reading)
    signature = _claimed_signature(reading)
    derived: BundleClaim | None = None
    try:
        with path.open("rb") as raw:
            parsed = None if isinstance(signature, str) else signature
            sha512 = parsed is not None and parsed.hash_algorithm == "sha512"
            hashing = HashingReader(raw, sha512=sha512)
            try:
                derived = read_archive(reading, hashing, progress, os.fstat(raw.fileno()).st_size)
            except CheckFailed as failure:
                reading.checks.append(failure.result)
            except NotCanonicalError as error:
                reading.checks.append(failed(error.part, error.message))
            except zstandard.ZstdError as error:
                reading.checks.append(failed("zstd", f"corrupt compressed data ({error})"))
            hashing.drain()
    except OSError as error:
        reading.checks.append(failed("archive", f"cannot read: {error.strerror}"))
        return reading
    _check_digest(reading, hashing)
    _check_sidecar(reading, sidecar_problem, derived, hashing)
    _check_signature(reading, signature, hashing)
    _check_location(reading)
    return reading


def _claimed_signature(reading: BundleReading) -> SshSignature | str | None:
    """The signature the sidecar holds, parsed (or the problem with it); None when it holds
    none or is not a sidecar at all (the sidecar check reports that). Parsed before the
    archive is read, so the one pass over it also takes the digest the signature signs."""
    if reading.sidecar_data is None:
        return None
    try:
        reading.sidecar = Sidecar.model_validate_json(reading.sidecar_data)
    except ValidationError:
        return None
    if reading.sidecar.signature is None:
        return None
    # Only a signed bundle loads the signature's module: `cryptography` is the largest import
    # of verify's own, for a check an unsigned bundle does not get (docs/performance.md).
    from bundler.local.signature import parse_signature

    try:
        return parse_signature(reading.sidecar.signature.sshsig)
    except SignatureError as error:
        return error.problem


def _check_signature(
    reading: BundleReading, signature: SshSignature | str | None, hashing: HashingReader
) -> None:
    """A signature, where the sidecar holds one, must be of this archive's very bytes, in the
    bundler's namespace; an unsigned bundle gets no check (the leaderboard decides whether it
    needs one)."""
    if signature is None:
        return
    if isinstance(signature, str):
        reading.checks.append(failed("signature", signature, hint="do not trust this bundle"))
        return
    from bundler.local.signature import check_signature  # loaded by _claimed_signature

    digest = hashing.digest(signature.hash_algorithm)
    assert digest is not None  # taken in the pass over the archive
    try:
        check_signature(signature, digest)
    except SignatureError as error:
        reading.checks.append(failed("signature", error.problem, hint="do not trust this bundle"))
        return
    reading.signer = signature.fingerprint
    reading.checks.append(
        passed("signature", f"signed by {signature.key_type} key {signature.fingerprint}")
    )


def _read_sidecar(reading: BundleReading) -> str | None:
    """Read the sidecar's bytes (checked once the archive is known); the problem, if any."""
    path = sidecar_of(reading.path)
    if not path.is_file():
        return f"{path.name} is missing"
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SIDECAR_BYTES + 1)
    except OSError as error:
        return f"{path.name}: cannot read: {error.strerror}"
    if len(data) > MAX_SIDECAR_BYTES:
        return f"{path.name} is larger than any sidecar collect writes ({MAX_SIDECAR_BYTES} bytes)"
    reading.sidecar_data = data
    return None


@contextmanager
def _reopened(path: Path) -> Iterator[tuple[TarReader, int, Iterator[bytes]]]:
    """A bundle verified in this run, opened again with the canonical readers: the manifest's
    header read, its reader and size, and the frames' chunks for what follows."""
    with path.open("rb") as raw:
        chunks = FrameReader(raw).chunks()
        head = TarReader(frame_chunks(chunks))
        first = head.next_header()
        if first is None or first[0] != MANIFEST_PATH or first[1] > MAX_MANIFEST_BYTES:
            raise InputError(path, f"the first member is not a {MANIFEST_PATH} collect writes")
        yield head, first[1], chunks


def manifest_digests(path: Path) -> dict[str, str]:
    """Each file's sha256 as the bundle's manifest lists it, read from the archive's first
    member only, through the same canonical readers: for a bundle `read_bundle` has verified
    in this run (an upload comparing a resumed run with the Hub's copy), so nothing else of it
    is read twice. Raises InputError when the archive does not start with a manifest."""
    try:
        with (
            _reopened(path) as (head, size, _),
            tempfile.SpooledTemporaryFile(max_size=MANIFEST_SPOOL_BYTES) as spool,
        ):
            for piece in head.read_chunks(size):
                spool.write(piece)
            manifest = ManifestReader(spool, size)  # type: ignore[arg-type]
            return {name: sha256 for name, _, sha256 in manifest.entries()}
    except (OSError, NotCanonicalError, CheckFailed) as error:
        raise InputError(path, f"cannot read {MANIFEST_PATH}: {error}") from None


def verified_members(path: Path, names: set[str]) -> Iterator[tuple[str, bytes]]:
    """The named members' bytes, in archive order, of a bundle `read_bundle` has verified in
    this run, read through the same canonical readers in one streaming pass that stops once
    all are found. Raises InputError when the archive cannot be read back."""
    remaining = set(names)
    if not remaining:
        return
    try:
        with _reopened(path) as (head, size, chunks):
            for _ in head.read_chunks(size):
                pass
            head.expect_end(MANIFEST_PATH)
            body = TarReader(frame_chunks(chunks), offset=head.offset, mtime=head.mtime)
            for name, data in body.members(MAX_MEMBER_BYTES):
                if name in remaining:
                    remaining.discard(name)
                    yield name, data
                    if not remaining:
                        break
    except (OSError, NotCanonicalError, CheckFailed) as error:
        raise InputError(path, f"cannot read it back: {error}") from None
    if remaining:
        raise InputError(path, f"{min(remaining)} is missing; did the file change?")


def _check_digest(reading: BundleReading, hashing: HashingReader) -> None:
    """The sidecar's archive digest against the file's, whatever else failed."""
    if reading.sidecar is None:
        return  # none, or not a sidecar: the sidecar check reports it
    info = reading.sidecar.archive
    if info.sha256 != hashing.sha256 or info.size != hashing.size:
        reading.checks.append(
            failed("archive-digest", "archive sha256 or size differs from the sidecar's")
        )
    else:
        reading.checks.append(passed("archive-digest", f"sha256 {hashing.sha256[:12]}…"))


def _check_sidecar(
    reading: BundleReading,
    problem: str | None,
    derived: BundleClaim | None,
    hashing: HashingReader,
) -> None:
    """The sidecar must be exactly what collect writes beside this archive: the derived claim,
    the archive's own file name, size and sha256. Upload publishes its bytes as they are."""
    name = sidecar_of(reading.path).name
    if problem is not None:
        reading.checks.append(failed("sidecar", problem, hint="re-run collect, or download it too"))
        return
    data = reading.sidecar_data
    assert data is not None
    if reading.sidecar is None:
        try:
            Sidecar.model_validate_json(data)
        except ValidationError as error:
            reading.checks.append(failed("sidecar", f"{name}: {describe_validation_error(error)}"))
            return
    if derived is None:
        return  # the archive failed: there is no claim to hold the sidecar to
    signature = reading.sidecar.signature if reading.sidecar else None  # checked on its own
    expected = sidecar_bytes(
        sidecar_for(derived, reading.path.name, hashing.sha256, hashing.size, signature)
    )
    if data != expected:
        reading.checks.append(
            failed(
                "sidecar",
                f"{name} is not what collect writes for this archive: "
                + describe_difference(expected, data),
                hint="do not trust this bundle",
            )
        )
        return
    reading.checks.append(passed("sidecar", f"{name} is exactly what collect writes"))


def _check_location(reading: BundleReading) -> None:
    """The path must say what the bundle is, so nobody is misled by a renamed file."""
    claim = reading.claim
    if claim is None:
        return
    actual = f"{reading.path.parent.name}/{reading.path.name}"
    try:
        located = id_of_local_archive(reading.path)
    except LayoutError:
        located = None
    if located is None or str(located) != claim.bundle_id or located.target != claim.target:
        reading.checks.append(
            failed(
                "location",
                f"file is at {actual}, its bundle id says {claim.bundle_id}{ARCHIVE_SUFFIX}",
            )
        )
    else:
        reading.checks.append(passed("location", f"path matches {claim.bundle_id}"))
