"""The one pass over a bundle's archive: zstd frames, tar members and every member's content.

Its bytes are hashed for the sidecar (by the caller's HashingReader) while `FrameReader` checks
the zstd frame layout and decompresses and `TarReader` accepts only the headers collect writes.
The manifest (the first member) is spooled; every later member is matched against its entry,
hashed and parsed by collect's own rules, and the predictions are counted. No member may be
larger than collect accepts, so a forged bundle can exhaust neither time nor memory.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bundler.core.checks import CheckResult, passed
from bundler.core.errors import BundlerError, InputError
from bundler.core.limits import (
    INT64_MAX,
    MAX_METRICS_BYTES,
    MAX_PREDICTION_BYTES,
    MAX_RUN_META_BYTES,
)
from bundler.core.progress import ProgressSink
from bundler.local.archive import MANIFEST_SPOOL_BYTES
from bundler.local.fileio import HashingReader
from bundler.local.manifest import (
    MANIFEST_PATH,
    METRICS_PATH,
    RUN_META_PATH,
    BundleClaim,
    prediction_index,
    prediction_path,
)
from bundler.local.readahead import bundle_chunks
from bundler.local.runs import PROGRESS_BATCH, check_prediction_count
from bundler.local.schema import StaticsRunMetadata
from bundler.local.tarformat import TarReader
from bundler.local.validation import (
    PredictionTally,
    check_metrics,
    parse_prediction,
    parse_run_meta,
)
from bundler.local.verifymanifest import (
    MAX_MANIFEST_BYTES,
    ArchiveEvidence,
    CheckFailed,
    ManifestReader,
    derive_claim,
    parse_claim,
)
from bundler.local.zstdframes import BUNDLE_FRAMES, FrameReader, frame_chunks, level_window

MAX_MEMBER_BYTES = max(MAX_RUN_META_BYTES, MAX_METRICS_BYTES, MAX_PREDICTION_BYTES)
"""The largest member after the manifest that collect writes."""
T = TypeVar("T")


@dataclass
class ArchiveReading:
    """What the pass over an archive found: its parts (when readable) and the checks."""

    checks: list[CheckResult] = field(default_factory=list)
    claim: BundleClaim | None = None
    """What manifest.json claims, once it parses; the checks say whether it holds."""
    run_meta: StaticsRunMetadata | None = None
    metrics_text: str | None = None
    """The original metrics.json text, for the Hub's table row."""
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


def read_archive(
    reading: ArchiveReading, source: HashingReader, progress: ProgressSink, size: int
) -> BundleClaim:
    """Every check of the archive's content (of `size` bytes), in one pass; CheckFailed or
    NotCanonicalError at the first problem. Returns the claim derived from the files, which is
    the manifest's. The source is not read any more once it returns or raises."""
    with bundle_chunks(source, size) as (frames, chunks):  # type: ignore[arg-type]
        return _read_frames(reading, frames, chunks, progress)


def _read_frames(
    reading: ArchiveReading, frames: FrameReader, chunks: Iterator[bytes], progress: ProgressSink
) -> BundleClaim:
    head = TarReader(frame_chunks(chunks))
    first = head.next_header()
    if first is None or first[0] != MANIFEST_PATH:
        raise CheckFailed("members", f"the first member must be {MANIFEST_PATH}")
    size = first[1]
    if size > MAX_MANIFEST_BYTES:
        raise CheckFailed(
            "members",
            f"{MANIFEST_PATH} is implausibly large ({size} bytes, collect writes at most "
            f"{MAX_MANIFEST_BYTES})",
        )
    with tempfile.SpooledTemporaryFile(max_size=MANIFEST_SPOOL_BYTES) as spool:
        for piece in head.read_chunks(size):
            spool.write(piece)
        head.expect_end(MANIFEST_PATH)
        manifest = ManifestReader(spool, size)  # type: ignore[arg-type]
        reading.claim = stored = parse_claim(manifest.head)
        reading.checks.append(passed("manifest", f"version {stored.manifest_version}"))
        progress.begin(
            f"verifying {stored.bundle_id}", stored.predictions.count, unit="predictions"
        )
        body = TarReader(frame_chunks(chunks), offset=head.offset, mtime=head.mtime)
        tally, indices = _read_members(reading, body, manifest, progress)
    TarReader(frame_chunks(chunks), offset=body.offset).expect_end_of_archive()
    for _ in chunks:  # none: the producer checks that nothing follows the last frame
        pass
    window = level_window(stored.inputs.level)
    for number, actual in enumerate(frames.windows, start=1):
        if actual != window:
            raise CheckFailed(
                "zstd",
                f"zstd frame {number} has a {actual}-byte window; level "
                f"{stored.inputs.level}, as the manifest records, gives {window}",
            )
    reading.checks.append(
        passed("zstd", f"{BUNDLE_FRAMES} checksummed frames, as collect writes them")
    )
    reading.checks.append(
        passed("members", f"{len(indices) + 3} canonical tar members, in the manifest's order")
    )
    reading.checks.append(passed("contents", "every file matches its sha256 and parses"))
    meta, capabilities = reading.run_meta, reading.raw_capabilities
    assert meta is not None and capabilities is not None  # run_meta.json parsed
    evidence = ArchiveEvidence(meta, capabilities, tally.summary(), indices, body.mtime)
    derived, checks = derive_claim(stored, manifest.head, evidence)
    reading.checks.extend(checks)
    return derived


def _read_members(
    reading: ArchiveReading, body: TarReader, manifest: ManifestReader, progress: ProgressSink
) -> tuple[PredictionTally, array[int]]:
    """Read run_meta.json, metrics.json and the predictions, in collect's order, each matched
    against the manifest and parsed; the predictions' tally and indices."""
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
    check, add = manifest.check, tally.add  # bound once: this loop runs once per prediction
    for name, data in body.members(MAX_PREDICTION_BYTES):
        # Collect names predictions by index, in increasing order, usually contiguous.
        index = next_index if name == prediction_path(next_index) else _prediction_index(name)
        if index < next_index:
            raise CheckFailed(
                "members",
                f"member {name!r} where collect writes predictions/prediction_<index>.json, "
                "in increasing index order",
            )
        check(name, data)
        try:  # no name for the record: a parsed prediction is freed before the next is parsed
            add(parse_prediction(data, index, name), name)
        except BundlerError as error:  # collect's rules, or a usage total past int64, refuse it
            raise CheckFailed("contents", str(error)) from None
        except (ValueError, RecursionError) as error:  # parser limits met by hostile input
            raise CheckFailed("contents", _unparsable(name, error)) from None
        indices.append(index)
        next_index = index + 1
        if len(indices) % PROGRESS_BATCH == 0:
            progress.advance(PROGRESS_BATCH)
            _check_count(name, len(indices))  # as it grows, so a huge bundle stops early
    progress.advance(len(indices) % PROGRESS_BATCH)
    if len(indices) % PROGRESS_BATCH:  # the count past the last batch; `name` is the last one
        _check_count(name, len(indices))
    manifest.finish()
    return tally, indices


def _check_count(where: str, count: int) -> None:
    try:
        check_prediction_count(where, count)
    except InputError as error:
        raise CheckFailed("members", error.problem) from None


def _next_member(body: TarReader, manifest: ManifestReader, expected: str, limit: int) -> bytes:
    member = body.next_member(MAX_MEMBER_BYTES)
    if member is None:
        raise CheckFailed("members", f"no {expected} in the archive")
    name, data = member
    if name != expected:
        raise CheckFailed("members", f"member {name!r} where collect writes {expected!r}")
    if len(data) > limit:  # worded as collect refuses it, not as a non-canonical archive
        raise CheckFailed(
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
        raise CheckFailed("contents", str(error)) from None
    except (ValueError, RecursionError) as error:  # parser limits met by hostile input
        raise CheckFailed("contents", _unparsable(name, error)) from None


def _unparsable(name: str, error: Exception) -> str:
    return f"{name}: cannot be parsed ({type(error).__name__})"


def _prediction_index(name: str) -> int:
    """The index in `predictions/prediction_<index>.json` as collect names it (below 2**63:
    collect keeps indices in 64-bit arrays); -1 otherwise."""
    index = prediction_index(name)
    return -1 if index is None or index > INT64_MAX else index
