"""Stage 4: check a bundle without extracting it, streaming, with memory and output bounded.

One pass over the archive file does everything: the file's bytes are hashed for the sidecar's
digest while zstd (which checks its frame checksum) feeds tar, and every tar member is matched
against the manifest, hashed, and, for predictions, re-validated and re-counted. The manifest is
the first member, so the decompressed size is capped by what it declares and a decompression
bomb stops as soon as it exceeds that.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard
from pydantic import BaseModel, ValidationError

from bundler.checks import CheckResult, failed, passed, warned
from bundler.errors import BundlerError, InputError, UsageError
from bundler.fileio import CHUNK_SIZE, HashingReader
from bundler.layout import (
    ARCHIVE_SUFFIX,
    SIDECAR_SUFFIX,
    BundleId,
    LayoutError,
    id_of_local_archive,
    is_archive_path,
    sidecar_of,
)
from bundler.manifest import (
    MANIFEST_PATH,
    METRICS_PATH,
    RUN_META_PATH,
    Manifest,
    Sidecar,
    prediction_path,
)
from bundler.naming import capability_fingerprint
from bundler.progress import NoProgress, ProgressSink
from bundler.schema import StaticsRunMetadata
from bundler.validation import (
    PredictionTally,
    assess_coverage,
    check_metrics,
    describe_validation_error,
    parse_prediction,
    parse_run_meta,
)

MAX_MANIFEST_BYTES = 64 << 20
MAX_SIDECAR_BYTES = 16 << 20
TAR_BLOCK = 512
TAR_RECORD = 10240
PER_MEMBER_OVERHEAD = 3 * TAR_BLOCK  # header, a possible extended header, padding


class BombError(Exception):
    """More decompressed data than the manifest declares."""


class _BoundedReader:
    """Caps how many decompressed bytes may be read; the cap tightens once the manifest is known."""

    def __init__(self, source: Any, limit: int) -> None:
        self._source = source
        self.limit = limit
        self.consumed = 0

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = CHUNK_SIZE
        data: bytes = self._source.read(min(size, self.limit - self.consumed + 1))
        self.consumed += len(data)
        if self.consumed > self.limit:
            raise BombError(f"decompressed data exceeds the {self.limit} bytes the manifest allows")
        return data


class BundleVerification(BaseModel):
    """The verdict on one archive: every check that ran, in order."""

    archive: str
    bundle_id: str | None
    checks: list[CheckResult]

    @property
    def ok(self) -> bool:
        return all(check.status != "failed" for check in self.checks)

    def failures(self) -> list[CheckResult]:
        return [check for check in self.checks if check.status == "failed"]

    def describe_failures(self) -> str:
        """One line naming every failed check, for reports that refuse the bundle."""
        return "; ".join(f"{check.name}: {check.detail}" for check in self.failures())


class VerifyReport(BaseModel):
    bundles: list[BundleVerification]

    @property
    def exit_code(self) -> int:
        return 0 if all(bundle.ok for bundle in self.bundles) else 1


@dataclass
class BundleReading:
    """What a streaming read of one bundle found: its parts (when readable) and the checks."""

    path: Path
    checks: list[CheckResult] = field(default_factory=list)
    manifest: Manifest | None = None
    sidecar: Sidecar | None = None
    sidecar_data: bytes | None = None
    """The sidecar file's bytes as read, so a publisher need not read it again."""
    run_meta: StaticsRunMetadata | None = None
    metrics: dict[str, Any] | None = None
    metrics_text: str | None = None
    """The original metrics.json text, for the Hub's table row."""
    raw_capabilities: dict[str, Any] | None = None
    """As read, because the fingerprint must be computed from the exact values in the file."""

    def verification(self) -> BundleVerification:
        return BundleVerification(
            archive=str(self.path),
            bundle_id=self.manifest.bundle_id if self.manifest else None,
            checks=self.checks,
        )


def find_archives(paths: list[Path]) -> list[Path]:
    """Archives named directly or found below directories (links not followed, hidden folders
    skipped), in name order. Raises UsageError for a path that is not there, is not a bundle
    archive, or is a folder with no bundle below it."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            below = _archives_below(path)
            if not below:
                raise UsageError(
                    f"{path}: not a {ARCHIVE_SUFFIX} bundle, and no bundle is below it",
                    hint=f"collect writes <player>_<fp8>/<task>@<rev8>{ARCHIVE_SUFFIX}",
                )
            found.extend(below)
        elif os.path.lexists(path):
            found.append(bundle_file(path))
        else:
            raise UsageError(f"{path}: no such bundle archive or directory")
    return found


def bundle_file(path: Path) -> Path:
    """`path`, when it names one bundle archive: an existing file ending in .tar.zst."""
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no such bundle archive")
    if path.is_dir():
        raise UsageError(
            f"{path}: not a {ARCHIVE_SUFFIX} bundle but a folder",
            hint="name one archive; `bundler verify FOLDER` checks every bundle below a folder",
        )
    if not (is_archive_path(path) and path.is_file()):
        is_sidecar = path.name.endswith(SIDECAR_SUFFIX)
        hint = f"a sidecar's archive is the {ARCHIVE_SUFFIX} beside it" if is_sidecar else None
        raise UsageError(f"{path}: not a {ARCHIVE_SUFFIX} bundle", hint=hint)
    return path


def _archives_below(top: Path) -> list[Path]:
    """Regular `.tar.zst` files below `top`, with an explicit stack (a tree of any depth).
    Hidden entries are staging, rejected or temporary areas, never bundles to trust."""
    found: list[Path] = []
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name.startswith(".") or entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    elif is_archive_path(entry.name) and entry.is_file(follow_symlinks=False):
                        found.append(Path(entry.path))
        except OSError as error:
            raise UsageError(f"{directory}: cannot list: {error.strerror}") from None
    return sorted(found)


def verify(paths: list[Path], progress: ProgressSink | None = None) -> VerifyReport:
    """Verify every archive at or below `paths`. Raises UsageError for a path that is not there."""
    progress = progress or NoProgress()
    archives = find_archives(paths)
    return VerifyReport(bundles=[read_bundle(path, progress).verification() for path in archives])


def read_bundle(path: Path, progress: ProgressSink | None = None) -> BundleReading:
    """Read and check one bundle; never raises for a bad bundle, records failed checks instead."""
    reading = BundleReading(path=path)
    progress = progress or NoProgress()
    progress.begin(f"verifying {path.name}", None)
    _read_sidecar(reading)
    try:
        with path.open("rb") as raw:
            hashing = HashingReader(raw)
            if _check_frame(reading, raw):
                _read_archive(reading, hashing, progress)
            hashing.drain()
    except OSError as error:
        reading.checks.append(failed("archive", f"cannot read: {error.strerror}"))
        return reading
    _check_digest(reading, hashing)
    _check_location(reading)
    return reading


def read_manifest(path: Path) -> Manifest:
    """A bundle's manifest, from the archive's first member only, without checking anything
    else: for a bundle `read_bundle` already verified, whose file list is needed again.
    Raises InputError when the archive does not start with a readable manifest."""
    try:
        with path.open("rb") as raw:
            decompressed = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            bounded = _BoundedReader(decompressed, MAX_MANIFEST_BYTES + PER_MEMBER_OVERHEAD)
            with tarfile.open(fileobj=bounded, mode="r|") as tar:  # type: ignore[call-overload]
                first = tar.next()
                if first is None or first.name != MANIFEST_PATH or not first.isreg():
                    raise InputError(path, f"the first member is not {MANIFEST_PATH}")
                return Manifest.model_validate_json(_member_bytes(tar, first))
    except (OSError, zstandard.ZstdError, tarfile.TarError, BombError, ValidationError) as error:
        raise InputError(path, f"cannot read {MANIFEST_PATH}: {error}") from None


def _read_sidecar(reading: BundleReading) -> None:
    path = sidecar_of(reading.path)
    if not path.is_file():
        reading.checks.append(
            failed("sidecar", f"{path.name} is missing", hint="re-run collect, or download it too")
        )
        return
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SIDECAR_BYTES)
        reading.sidecar = Sidecar.model_validate_json(data)
        reading.sidecar_data = data
    except (OSError, ValidationError) as error:
        detail = (
            describe_validation_error(error)
            if isinstance(error, ValidationError)
            else str(error.strerror)
        )
        reading.checks.append(failed("sidecar", f"{path.name}: {detail}"))
        return
    reading.checks.append(passed("sidecar", f"{path.name} parses"))


def _check_frame(reading: BundleReading, raw: Any) -> bool:
    header = raw.read(18)
    raw.seek(0)
    try:
        parameters = zstandard.get_frame_parameters(header)
    except zstandard.ZstdError as error:
        reading.checks.append(failed("zstd", f"not a zstd stream ({error})"))
        return False
    if not parameters.has_checksum:
        reading.checks.append(failed("zstd", "the zstd frame carries no checksum"))
        return False
    return True


def _read_archive(reading: BundleReading, hashing: HashingReader, progress: ProgressSink) -> None:
    decompressed = zstandard.ZstdDecompressor().stream_reader(
        hashing,  # type: ignore[arg-type]
        read_across_frames=True,  # a bundle is several frames that make one tar stream
    )
    bounded = _BoundedReader(decompressed, MAX_MANIFEST_BYTES + PER_MEMBER_OVERHEAD)
    try:
        with tarfile.open(fileobj=bounded, mode="r|") as tar:  # type: ignore[call-overload]
            _read_members(reading, tar, bounded, progress)
        trailing = bounded.read(TAR_RECORD)
        while trailing:
            if trailing.strip(b"\0"):
                raise InputError(reading.path, "data after the end of the tar archive")
            trailing = bounded.read(TAR_RECORD)
        reading.checks.append(passed("zstd", "frame checksum matches"))
    except zstandard.ZstdError as error:
        reading.checks.append(failed("zstd", f"corrupt compressed data ({error})"))
    except BombError as error:
        reading.checks.append(failed("size", str(error), hint="do not trust this bundle"))
    except tarfile.TarError as error:
        reading.checks.append(failed("members", f"not a readable tar stream ({error})"))
    except InputError as error:
        reading.checks.append(failed("members", error.problem))


def _read_members(
    reading: BundleReading, tar: tarfile.TarFile, bounded: _BoundedReader, progress: ProgressSink
) -> None:
    members = iter(tar)
    first = next(members, None)
    if first is None or first.name != MANIFEST_PATH or not first.isreg():
        raise InputError(reading.path, f"the first member must be {MANIFEST_PATH}")
    if first.size > MAX_MANIFEST_BYTES:
        raise InputError(reading.path, f"{MANIFEST_PATH} is implausibly large ({first.size} bytes)")
    manifest = _parse_manifest(reading, _member_bytes(tar, first))
    if manifest is None:
        return
    reading.manifest = manifest
    declared = sum(entry.size for entry in manifest.files)
    bounded.limit = (
        bounded.consumed + declared + PER_MEMBER_OVERHEAD * len(manifest.files) + TAR_RECORD * 2
    )
    progress.begin(f"verifying {manifest.bundle_id}", len(manifest.files))
    tally = PredictionTally()
    problems: list[str] = []
    expected = iter(manifest.files)
    for member in members:
        entry = next(expected, None)
        if entry is None:
            raise InputError(reading.path, f"unexpected member {member.name!r} not in the manifest")
        _check_member_header(reading, member, entry.path, entry.size)
        handle = tar.extractfile(member)
        assert handle is not None  # a regular file, checked above
        hashing = HashingReader(handle)  # type: ignore[arg-type]
        data = _read_member_content(hashing, entry.path, member.size)
        if hashing.sha256 != entry.sha256:
            problems.append(f"{entry.path}: sha256 differs from the manifest")
        elif data is not None:
            _check_content(reading, entry.path, data, tally, problems)
        progress.advance()
    missing = [entry.path for entry in expected]
    if missing:
        raise InputError(reading.path, f"{len(missing)} member(s) missing, first {missing[0]}")
    reading.checks.append(passed("members", f"{len(manifest.files)} files, in manifest order"))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        reading.checks.append(failed("contents", problems[0] + more))
        return
    reading.checks.append(passed("contents", "every file matches its sha256 and parses"))
    _check_claims(reading, manifest, tally)


def _check_member_header(
    reading: BundleReading, member: tarfile.TarInfo, expected_path: str, expected_size: int
) -> None:
    name = member.name
    if name.startswith("/") or ".." in name.split("/"):
        raise InputError(reading.path, f"unsafe member path {name!r}")
    if not member.isreg():
        raise InputError(reading.path, f"member {name!r} is not a regular file (link or device)")
    if name != expected_path:
        raise InputError(
            reading.path, f"member {name!r} where the manifest lists {expected_path!r}"
        )
    if member.size != expected_size:
        raise InputError(
            reading.path,
            f"member {name!r} is {member.size} bytes, the manifest says {expected_size}",
        )


def _read_member_content(hashing: HashingReader, path: str, size: int) -> bytes | None:
    """Keep the bytes of files that are parsed; stream the rest through the hash only."""
    if path in (RUN_META_PATH, METRICS_PATH) or path.startswith("predictions/"):
        return hashing.read(size)
    hashing.drain()
    return None


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    assert handle is not None
    return handle.read()


def _parse_manifest(reading: BundleReading, data: bytes) -> Manifest | None:
    try:
        manifest = Manifest.model_validate_json(data)
    except ValidationError as error:
        reading.checks.append(failed("manifest", describe_validation_error(error)))
        return None
    paths = [entry.path for entry in manifest.files]
    if paths[:2] != [RUN_META_PATH, METRICS_PATH] or any(
        path != prediction_path(_index_of(path)) for path in paths[2:]
    ):
        reading.checks.append(failed("manifest", "file list is not the bundle layout"))
        return None
    reading.checks.append(passed("manifest", f"version {manifest.manifest_version}"))
    return manifest


def _index_of(path: str) -> int:
    number = path.removeprefix("predictions/prediction_").removesuffix(".json")
    return int(number) if number.isdigit() else -1


def _check_content(
    reading: BundleReading,
    path: str,
    data: bytes,
    tally: PredictionTally,
    problems: list[str],
) -> None:
    try:
        if path == RUN_META_PATH:
            reading.run_meta, raw = parse_run_meta(data, path)
            reading.raw_capabilities = raw["capabilities"]
        elif path == METRICS_PATH:
            reading.metrics = check_metrics(data, path)
            reading.metrics_text = data.decode("utf-8")
        else:
            tally.add(parse_prediction(data, _index_of(path), path))
    except BundlerError as error:
        problems.append(str(error))


def _check_claims(reading: BundleReading, manifest: Manifest, tally: PredictionTally) -> None:
    """The manifest's claims must be what its own files say, recomputed here."""
    meta = reading.run_meta
    assert meta is not None and reading.raw_capabilities is not None
    fingerprint = capability_fingerprint(reading.raw_capabilities)
    recomputed = {
        "bundle_id": str(
            BundleId.of(meta.capabilities.player_name, fingerprint, meta.statics.target)
        ),
        "target": meta.statics.target,
        "statics": meta.statics,
        "model_name": meta.model_name,
        "run_date": meta.run_date,
        "player_name": meta.capabilities.player_name,
        "player_type": meta.capabilities.player_type,
        "capability_fingerprint": fingerprint,
        "provenance": meta.provenance.model_dump(),
    }
    differing = [key for key, value in recomputed.items() if getattr(manifest, key) != value]
    if differing:
        reading.checks.append(
            failed("identity", f"manifest disagrees with run_meta.json on {', '.join(differing)}")
        )
    else:
        reading.checks.append(passed("identity", f"{manifest.bundle_id} matches run_meta.json"))
    summary = tally.summary()
    coverage = assess_coverage(summary, manifest.coverage.expected_rows)
    if summary != manifest.predictions:
        reading.checks.append(
            failed("predictions", "prediction counts or usage differ from the manifest's summary")
        )
    elif coverage != manifest.coverage:
        reading.checks.append(
            failed(
                "coverage",
                f"manifest claims {manifest.coverage.status}, the files show {coverage.status}",
            )
        )
    else:
        reading.checks.append(
            passed("predictions", f"{summary.count} predictions, coverage {coverage.status}")
        )
        if coverage.status != "complete":
            reading.checks.append(
                warned("coverage", f"coverage is {coverage.status}", hint="not a complete result")
            )


def _check_digest(reading: BundleReading, hashing: HashingReader) -> None:
    sidecar = reading.sidecar
    if sidecar is None:
        return
    if sidecar.archive.sha256 != hashing.sha256 or sidecar.archive.size != hashing.size:
        reading.checks.append(
            failed("archive-digest", "archive sha256 or size differs from the sidecar's")
        )
    else:
        reading.checks.append(passed("archive-digest", f"sha256 {hashing.sha256[:12]}…"))
    manifest = reading.manifest
    if manifest is not None and (
        sidecar.claim() != manifest.claim() or sidecar.files_count != len(manifest.files)
    ):
        reading.checks.append(failed("sidecar", "sidecar claims differ from the manifest"))


def _check_location(reading: BundleReading) -> None:
    """The path must say what the bundle is, so nobody is misled by a renamed file."""
    manifest = reading.manifest
    if manifest is None:
        return
    actual = f"{reading.path.parent.name}/{reading.path.name}"
    try:
        located = id_of_local_archive(reading.path)
    except LayoutError:
        located = None
    if located is None or str(located) != manifest.bundle_id or located.target != manifest.target:
        reading.checks.append(
            failed(
                "location",
                f"file is at {actual}, its bundle id says {manifest.bundle_id}{ARCHIVE_SUFFIX}",
            )
        )
    else:
        reading.checks.append(passed("location", f"path matches {manifest.bundle_id}"))
