"""Stage 4: check that a bundle is exactly what collect writes, streaming, in bounded memory.

One pass over the archive does everything. Its bytes are hashed for the sidecar while
`FrameReader` checks the zstd frame layout and decompresses and `TarReader` accepts only the
headers collect writes. The manifest (the first member) is spooled; every later member is
matched against its entry, hashed and parsed, and the predictions are counted. Then the claim is
derived from the files and the inputs the manifest records by the function collect uses, and the
manifest and the sidecar must be byte for byte what collect would write. Nothing is taken on
trust, and no member may be larger than collect accepts, so a forged bundle can neither fool
verify nor exhaust its memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import zstandard
from pydantic import ValidationError

from bundler.core.checks import CheckResult, failed, passed, warned
from bundler.core.errors import (
    BundlerError,
    InputError,
    NotCanonicalError,
    SignatureError,
)
from bundler.core.limits import (
    INT64_MAX,
    MAX_CLAIM_BYTES,
    MAX_METRICS_BYTES,
    MAX_PREDICTION_BYTES,
    MAX_PREDICTIONS,
    MAX_RUN_META_BYTES,
    MAX_SIDECAR_BYTES,
)
from bundler.core.model import Model
from bundler.core.progress import NoProgress, ProgressSink
from bundler.local.archive import (
    MANIFEST_CLOSING,
    MANIFEST_FILES_OPENING,
    MANIFEST_SPOOL_BYTES,
    manifest_entry,
    manifest_head,
)
from bundler.local.claim import claim_for, sidecar_bytes, sidecar_for
from bundler.local.fileio import HashingReader
from bundler.local.layout import (
    ARCHIVE_SUFFIX,
    LayoutError,
    find_archives,
    id_of_local_archive,
    sidecar_of,
)
from bundler.local.manifest import (
    MANIFEST_PATH,
    MANIFEST_VERSION,
    METRICS_PATH,
    RUN_META_PATH,
    BundleClaim,
    Sidecar,
    prediction_index,
    prediction_path,
)
from bundler.local.runs import PROGRESS_BATCH, RunEvidence, check_prediction_count, identify
from bundler.local.schema import StaticsRunMetadata
from bundler.local.signature import SshSignature, check_signature, parse_signature
from bundler.local.tarformat import TarReader
from bundler.local.validation import (
    PredictionTally,
    check_metrics,
    describe_validation_error,
    parse_prediction,
    parse_run_meta,
)
from bundler.local.zstdframes import BUNDLE_FRAMES, FrameReader, frame_chunks, level_window

_MAX_ENTRY_BYTES = len(
    manifest_entry(prediction_path(INT64_MAX), MAX_PREDICTION_BYTES, "0" * 64, first=False)
)
MAX_MANIFEST_BYTES = (
    MAX_CLAIM_BYTES
    + len(MANIFEST_FILES_OPENING)
    + (MAX_PREDICTIONS + 2) * _MAX_ENTRY_BYTES
    + len(MANIFEST_CLOSING)
)
"""The largest manifest collect can write; it is spooled, to disk beyond MANIFEST_SPOOL_BYTES."""
_MAX_MEMBER_BYTES = max(MAX_RUN_META_BYTES, MAX_METRICS_BYTES, MAX_PREDICTION_BYTES)
_MANIFEST_READ_BYTES = 1 << 20
T = TypeVar("T")
_SHOWN_VALUE_CHARS = 80


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


@dataclass
class BundleReading:
    """What a streaming read of one bundle found: its parts (when readable) and the checks."""

    path: Path
    checks: list[CheckResult] = field(default_factory=list)
    claim: BundleClaim | None = None
    """What manifest.json claims, once it parses; the checks say whether it holds."""
    sidecar: Sidecar | None = None
    sidecar_data: bytes | None = None
    """The sidecar file's bytes as read, so a publisher need not read it again."""
    run_meta: StaticsRunMetadata | None = None
    metrics_text: str | None = None
    """The original metrics.json text, for the Hub's table row."""
    signer: str | None = None
    """The fingerprint of the key whose signature verified (BundleVerification.signer)."""
    raw_run_meta: dict[str, Any] | None = None
    """run_meta.json as read: it may hold fields the validated `run_meta` drops (unknown keys
    inside `statics`), and a diff must see every field that differs."""

    @property
    def raw_capabilities(self) -> dict[str, Any] | None:
        """As read, because the fingerprint must be computed from the exact values in the file."""
        if self.raw_run_meta is None:
            return None
        capabilities: dict[str, Any] = self.raw_run_meta["capabilities"]
        return capabilities

    @property
    def metrics(self) -> dict[str, Any] | None:
        """metrics.json parsed, on demand: only a reviewer's view needs it."""
        if self.metrics_text is None:
            return None
        return check_metrics(self.metrics_text.encode("utf-8"), METRICS_PATH)

    def verification(self) -> BundleVerification:
        return BundleVerification(
            archive=str(self.path),
            bundle_id=self.claim.bundle_id if self.claim else None,
            checks=self.checks,
            signer=self.signer,
        )


class _Failed(Exception):
    """A failed check that ends the reading: what follows cannot be trusted."""

    def __init__(self, check: str, detail: str, hint: str | None = None) -> None:
        super().__init__(detail)
        self.result = failed(check, detail, hint)


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
            sha512 = isinstance(signature, SshSignature) and signature.hash_algorithm == "sha512"
            hashing = HashingReader(raw, sha512=sha512)
            try:
                derived = _read_archive(reading, hashing, os.fstat(raw.fileno()).st_size, progress)
            except _Failed as failure:
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


def _read_archive(
    reading: BundleReading, source: HashingReader, archive_size: int, progress: ProgressSink
) -> BundleClaim:
    """Every check of the archive's content, in one pass; _Failed or NotCanonicalError at the
    first problem. Returns the claim derived from the files, which is the manifest's."""
    frames = FrameReader(source)  # type: ignore[arg-type]
    chunks = frames.chunks()
    head = TarReader(frame_chunks(chunks))
    first = head.next_header()
    if first is None or first[0] != MANIFEST_PATH:
        raise _Failed("members", f"the first member must be {MANIFEST_PATH}")
    size = first[1]
    if size > MAX_MANIFEST_BYTES:
        raise _Failed(
            "members",
            f"{MANIFEST_PATH} is implausibly large ({size} bytes, collect writes at most "
            f"{MAX_MANIFEST_BYTES})",
        )
    with tempfile.SpooledTemporaryFile(max_size=MANIFEST_SPOOL_BYTES) as spool:
        for piece in head.read_chunks(size):
            spool.write(piece)
        head.expect_end(MANIFEST_PATH)
        manifest = _Manifest(spool, size)  # type: ignore[arg-type]
        reading.claim = stored = _parse_claim(manifest.head)
        reading.checks.append(passed("manifest", f"version {stored.manifest_version}"))
        progress.begin(
            f"verifying {stored.bundle_id}", stored.predictions.count, unit="predictions"
        )
        body = TarReader(frame_chunks(chunks), offset=head.offset, mtime=head.mtime)
        files = _read_members(reading, body, manifest, progress)
    TarReader(frame_chunks(chunks), offset=body.offset).expect_end_of_archive()
    for _ in chunks:  # none: the producer checks that nothing follows the last frame
        pass
    window = level_window(stored.inputs.level)
    for number, actual in enumerate(frames.windows, start=1):
        if actual != window:
            raise _Failed(
                "zstd",
                f"zstd frame {number} has a {actual}-byte window; level "
                f"{stored.inputs.level}, as the manifest records, gives {window}",
            )
    reading.checks.append(
        passed("zstd", f"{BUNDLE_FRAMES} checksummed frames, as collect writes them")
    )
    reading.checks.append(
        passed("members", f"{files.count + 1} canonical tar members, in the manifest's order")
    )
    reading.checks.append(passed("contents", "every file matches its sha256 and parses"))
    return _derive_claim(reading, stored, manifest.head, files, body.mtime)


class _Manifest:
    """manifest.json, spooled: the claim (parsed up front), then the file list, which is read
    entry by entry beside the members it lists, so memory does not grow with the bundle."""

    def __init__(self, spool: BinaryIO, size: int) -> None:
        spool.seek(0)
        window = spool.read(min(size, MAX_CLAIM_BYTES + len(MANIFEST_FILES_OPENING)))
        cut = window.find(MANIFEST_FILES_OPENING)
        if cut < 0:
            raise _Failed(
                "manifest",
                "no file list where collect writes it, after a claim of at most "
                f"{MAX_CLAIM_BYTES} bytes",
            )
        self.head = window[:cut]
        self._spool = spool
        self._spool.seek(cut + len(MANIFEST_FILES_OPENING))
        self._window = b""
        self._pos = 0
        self.count = 0

    def check(self, name: str, data: bytes) -> None:
        """The next entry must be exactly the one collect writes for this member."""
        sha256 = hashlib.sha256(data).hexdigest()
        expected = manifest_entry(name, len(data), sha256, first=self.count == 0)
        if len(self._window) - self._pos < len(expected):
            self._fill(len(expected))
        if not self._window.startswith(expected, self._pos):
            raise self._mismatch(name, len(data), sha256)
        self._pos += len(expected)
        self.count += 1

    def finish(self) -> None:
        """Every entry was matched, and the manifest ends as collect ends it."""
        if self._peek(len(MANIFEST_CLOSING) + 1) == MANIFEST_CLOSING:
            return
        entry = self._next_entry()
        if entry is not None:
            raise _Failed("members", f"member(s) missing, first {entry[0]}")
        raise _Failed("manifest", "the file list does not end as collect ends it")

    def _mismatch(self, name: str, size: int, sha256: str) -> _Failed:
        if self._peek(len(MANIFEST_CLOSING)) == MANIFEST_CLOSING:
            return _Failed("members", f"unexpected member {name!r} not in the manifest")
        entry = self._next_entry()
        if entry is None:
            return _Failed("manifest", f"the entry for {name!r} is not what collect writes")
        path, listed_size, listed_sha256 = entry
        if path != name:
            return _Failed("members", f"member {name!r} where the manifest lists {path!r}")
        if listed_size != size:
            return _Failed(
                "members", f"member {name!r} is {size} bytes, the manifest says {listed_size}"
            )
        if listed_sha256 != sha256:
            return _Failed("contents", f"{name}: sha256 differs from the manifest")
        return _Failed("manifest", f"the entry for {name!r} is not laid out as collect writes it")

    def entries(self) -> Iterator[tuple[str, int, str]]:
        """Every entry's path, size and sha256, in order: for a manifest already verified."""
        while (entry := self._next_entry()) is not None:
            yield entry
            self._pos += len(manifest_entry(*entry, first=self.count == 0))
            self.count += 1

    def _next_entry(self) -> tuple[str, int, str] | None:
        """The next entry's path, size and sha256, if it is well formed."""
        line = self._peek(_MAX_ENTRY_BYTES)
        line = line.removeprefix(b",").removeprefix(b"\n    ").partition(b"\n")[0]
        try:
            value = json.loads(line.removesuffix(b","))
            path, size, sha256 = value["path"], value["size"], value["sha256"]
        except (ValueError, TypeError, KeyError):
            return None
        if isinstance(path, str) and isinstance(size, int) and isinstance(sha256, str):
            return path, size, sha256
        return None

    def _peek(self, size: int) -> bytes:
        self._fill(size)
        return self._window[self._pos : self._pos + size]

    def _fill(self, size: int) -> None:
        if len(self._window) - self._pos < size:
            more = self._spool.read(max(size, _MANIFEST_READ_BYTES))
            self._window = self._window[self._pos :] + more
            self._pos = 0


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
            manifest = _Manifest(spool, size)  # type: ignore[arg-type]
            return {name: sha256 for name, _, sha256 in manifest.entries()}
    except (OSError, NotCanonicalError, _Failed) as error:
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
            for name, data in body.members(_MAX_MEMBER_BYTES):
                if name in remaining:
                    remaining.discard(name)
                    yield name, data
                    if not remaining:
                        break
    except (OSError, NotCanonicalError, _Failed) as error:
        raise InputError(path, f"cannot read it back: {error}") from None
    if remaining:
        raise InputError(path, f"{min(remaining)} is missing; did the file change?")


def _parse_claim(head: bytes) -> BundleClaim:
    try:
        return BundleClaim.model_validate_json(head + b"\n}")
    except ValidationError as error:
        hint = None
        if any(detail["loc"] == ("manifest_version",) for detail in error.errors()):
            hint = f"collect it again to get manifest version {MANIFEST_VERSION}"
        raise _Failed("manifest", describe_validation_error(error), hint) from None


@dataclass
class _Files:
    """What the members after the manifest showed, for deriving the claim."""

    count: int
    tally: PredictionTally
    indices: array[int]


def _read_members(
    reading: BundleReading, body: TarReader, manifest: _Manifest, progress: ProgressSink
) -> _Files:
    """Read run_meta.json, metrics.json and the predictions, in collect's order, each matched
    against the manifest and parsed."""
    data = _next_member(body, manifest, RUN_META_PATH, MAX_RUN_META_BYTES)
    reading.run_meta, reading.raw_run_meta = _parsed(
        RUN_META_PATH, parse_run_meta, data, RUN_META_PATH
    )
    data = _next_member(body, manifest, METRICS_PATH, MAX_METRICS_BYTES)
    _parsed(METRICS_PATH, check_metrics, data, METRICS_PATH)
    reading.metrics_text = _parsed(METRICS_PATH, data.decode, "utf-8")
    tally = PredictionTally()
    indices: array[int] = array("q")
    next_index = 0
    for name, data in body.members(MAX_PREDICTION_BYTES):
        # Collect names predictions by index, in increasing order, usually contiguous.
        index = next_index if name == prediction_path(next_index) else _prediction_index(name)
        if index < next_index:
            raise _Failed(
                "members",
                f"member {name!r} where collect writes predictions/prediction_<index>.json, "
                "in increasing index order",
            )
        manifest.check(name, data)
        try:  # no name for the record: a parsed prediction is freed before the next is parsed
            tally.add(_parsed(name, parse_prediction, data, index, name), name)
        except InputError as error:  # a usage total past int64, as collect refuses it
            raise _Failed("contents", str(error)) from None
        indices.append(index)
        next_index = index + 1
        if len(indices) % PROGRESS_BATCH == 0:
            progress.advance(PROGRESS_BATCH)
            _check_count(name, len(indices))  # as it grows, so a huge bundle stops early
    progress.advance(len(indices) % PROGRESS_BATCH)
    if len(indices) % PROGRESS_BATCH:  # the count past the last batch; `name` is the last one
        _check_count(name, len(indices))
    manifest.finish()
    return _Files(len(indices) + 2, tally, indices)


def _check_count(where: str, count: int) -> None:
    try:
        check_prediction_count(where, count)
    except InputError as error:
        raise _Failed("members", error.problem) from None


def _next_member(body: TarReader, manifest: _Manifest, expected: str, limit: int) -> bytes:
    member = body.next_member(_MAX_MEMBER_BYTES)
    if member is None:
        raise _Failed("members", f"no {expected} in the archive")
    name, data = member
    if name != expected:
        raise _Failed("members", f"member {name!r} where collect writes {expected!r}")
    if len(data) > limit:  # worded as collect refuses it, not as a non-canonical archive
        raise _Failed(
            "members",
            f"member {name!r} is {len(data)} bytes, more than the {limit} collect accepts",
        )
    manifest.check(name, data)
    return data


def _parsed(name: str, parse: Callable[..., T], *arguments: Any) -> T:
    """A member parsed by collect's own rules (`parse(*arguments)`, no closure made per
    member); a failed check when they refuse it."""
    try:
        return parse(*arguments)
    except BundlerError as error:
        raise _Failed("contents", str(error)) from None
    except (ValueError, RecursionError) as error:  # parser limits met by hostile input
        raise _Failed("contents", f"{name}: cannot be parsed ({type(error).__name__})") from None


def _prediction_index(name: str) -> int:
    """The index in `predictions/prediction_<index>.json` as collect names it (below 2**63:
    collect keeps indices in 64-bit arrays); -1 otherwise."""
    index = prediction_index(name)
    return -1 if index is None or index > INT64_MAX else index


def _derive_claim(
    reading: BundleReading, stored: BundleClaim, head: bytes, files: _Files, mtime: int | None
) -> BundleClaim:
    """Derive the claim from the files and the inputs the manifest records, exactly as collect
    would; the manifest's must be byte for byte the same."""
    meta, capabilities = reading.run_meta, reading.raw_capabilities
    assert meta is not None and capabilities is not None  # run_meta.json parsed
    hint = "do not trust this bundle"
    try:
        if mtime != meta.run_timestamp:
            raise _Failed(
                "members",
                f"the tar headers' mtime {mtime} is not the run date {meta.run_date} "
                f"({meta.run_timestamp})",
            )
        fingerprint, bundle_id = identify(RUN_META_PATH, meta, capabilities)
        derived = claim_for(
            RUN_META_PATH,
            RunEvidence(meta, fingerprint, bundle_id, files.tally.summary(), files.indices),
            submitter=stored.submitter,
            expected_rows=stored.coverage.expected_rows,
            inputs=stored.inputs,
            bundler_version=stored.bundler_version,
        )
        expected = manifest_head(derived)
    except InputError as error:
        raise _Failed("claim", f"collect would refuse these files: {error.problem}", hint) from None
    except (ValueError, ArithmeticError, RecursionError) as error:  # limits met by hostile input
        problem = f"the claim cannot be derived from these files ({type(error).__name__})"
        raise _Failed("claim", problem, hint) from None
    if expected != head:
        raise _Failed(
            "claim",
            f"{MANIFEST_PATH} is not what collect derives from the files: "
            + _describe_difference(expected + b"\n}", head + b"\n}"),
            hint,
        )
    summary = derived.predictions
    reading.checks.append(
        passed(
            "claim",
            f"{derived.bundle_id}: re-derived from the files, {summary.count} predictions, "
            f"coverage {derived.coverage.status}",
        )
    )
    if derived.coverage.status != "complete":
        reading.checks.append(
            warned(
                "coverage", f"coverage is {derived.coverage.status}", hint="not a complete result"
            )
        )
    return derived


def _describe_difference(expected: bytes, actual: bytes) -> str:
    """The first field where `actual` (JSON) departs from `expected`, with both values."""
    try:
        wanted, found = json.loads(expected), json.loads(actual)
        where = first_difference(wanted, found)
    except (ValueError, RecursionError):
        return "it is not even the same JSON"
    if where is None:
        return "same values, other bytes (layout, key order or escapes)"
    return f"{where.path} is {where.actual}, collect writes {where.expected}"


@dataclass(frozen=True)
class Difference:
    path: str
    """`coverage.expected_rows`, `warnings[2]`, or `` for the whole value."""
    expected: str
    actual: str
    """Both values as short JSON, `(missing)` where there is none."""


def first_difference(expected: Any, actual: Any, path: str = "") -> Difference | None:
    """The first place, in `expected`'s order, where two parsed JSON values differ. Types
    count: 6 and 6.0, or 1 and true, differ as their bytes do."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key, value in expected.items():
            where = f"{path}.{key}" if path else key
            if key not in actual:
                return Difference(where, _shown(value), "(missing)")
            found = first_difference(value, actual[key], where)
            if found is not None:
                return found
        for key, value in actual.items():
            if key not in expected:
                return Difference(f"{path}.{key}" if path else key, "(missing)", _shown(value))
        if list(expected) != list(actual):
            return Difference(path or "(keys)", _shown(list(expected)), _shown(list(actual)))
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for number, (one, other) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(one, other, f"{path}[{number}]")
            if found is not None:
                return found
        if len(expected) != len(actual):
            return Difference(path, _shown(expected), _shown(actual))
        return None
    if type(expected) is type(actual) and expected == actual:
        return None
    return Difference(path, _shown(expected), _shown(actual))


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    if len(text) > _SHOWN_VALUE_CHARS:
        return text[: _SHOWN_VALUE_CHARS - 1] + "…"
    return text


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
                + _describe_difference(expected, data),
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
