"""manifest.json checked: read entry by entry beside the members it lists, and its claim held
to the one collect derives from the files.

The manifest is spooled (to disk beyond MANIFEST_SPOOL_BYTES), so memory does not grow with the
bundle: its claim, which comes first, is parsed up front, and each later entry must be exactly
the line collect writes for the member it lists. The claim is then derived from the files and
the inputs the manifest records, by the function collect uses, and the two must be byte for byte
the same; where they are not, the first differing field is named.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from pydantic import ValidationError

from bundler.core.checks import CheckResult, failed, passed, warned
from bundler.core.errors import InputError
from bundler.core.limits import INT64_MAX, MAX_CLAIM_BYTES, MAX_PREDICTION_BYTES, MAX_PREDICTIONS
from bundler.local.archive import (
    MANIFEST_CLOSING,
    MANIFEST_FILES_OPENING,
    manifest_entry,
    manifest_head,
)
from bundler.local.claim import claim_for
from bundler.local.manifest import (
    MANIFEST_PATH,
    MANIFEST_VERSION,
    RUN_META_PATH,
    BundleClaim,
    PredictionSummary,
    prediction_path,
)
from bundler.local.runs import RunEvidence, identify
from bundler.local.schema import StaticsRunMetadata
from bundler.local.validation import describe_validation_error

MAX_ENTRY_BYTES = len(
    manifest_entry(prediction_path(INT64_MAX), MAX_PREDICTION_BYTES, "0" * 64, first=False)
)
"""The longest line of the file list collect can write."""
MAX_MANIFEST_BYTES = (
    MAX_CLAIM_BYTES
    + len(MANIFEST_FILES_OPENING)
    + (MAX_PREDICTIONS + 2) * MAX_ENTRY_BYTES
    + len(MANIFEST_CLOSING)
)
"""The largest manifest collect can write; it is spooled, to disk beyond MANIFEST_SPOOL_BYTES."""
_MANIFEST_READ_BYTES = 1 << 20
_SHOWN_VALUE_CHARS = 80


class CheckFailed(Exception):
    """A failed check that ends the reading: what follows cannot be trusted."""

    def __init__(self, check: str, detail: str, hint: str | None = None) -> None:
        super().__init__(detail)
        self.result = failed(check, detail, hint)


@dataclass(frozen=True)
class ArchiveEvidence:
    """What the members after the manifest showed, from which collect's claim is derived."""

    run_meta: StaticsRunMetadata
    capabilities: dict[str, Any]
    """As read, because the fingerprint must be computed from the exact values in the file."""
    summary: PredictionSummary
    indices: array[int]
    mtime: int | None
    """Every member's mtime, which collect sets to the run's date."""


class ManifestReader:
    """manifest.json, spooled: the claim (parsed up front), then the file list, which is read
    entry by entry beside the members it lists, so memory does not grow with the bundle."""

    def __init__(self, spool: BinaryIO, size: int) -> None:
        spool.seek(0)
        window = spool.read(min(size, MAX_CLAIM_BYTES + len(MANIFEST_FILES_OPENING)))
        cut = window.find(MANIFEST_FILES_OPENING)
        if cut < 0:
            raise CheckFailed(
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
        size = len(expected)
        if len(self._window) - self._pos < size:
            self._fill(size)
        if not self._window.startswith(expected, self._pos):
            raise self._mismatch(name, len(data), sha256)
        self._pos += size
        self.count += 1

    def finish(self) -> None:
        """Every entry was matched, and the manifest ends as collect ends it."""
        if self._peek(len(MANIFEST_CLOSING) + 1) == MANIFEST_CLOSING:
            return
        entry = self._next_entry()
        if entry is not None:
            raise CheckFailed("members", f"member(s) missing, first {entry[0]}")
        raise CheckFailed("manifest", "the file list does not end as collect ends it")

    def _mismatch(self, name: str, size: int, sha256: str) -> CheckFailed:
        if self._peek(len(MANIFEST_CLOSING)) == MANIFEST_CLOSING:
            return CheckFailed("members", f"unexpected member {name!r} not in the manifest")
        entry = self._next_entry()
        if entry is None:
            return CheckFailed("manifest", f"the entry for {name!r} is not what collect writes")
        path, listed_size, listed_sha256 = entry
        if path != name:
            return CheckFailed("members", f"member {name!r} where the manifest lists {path!r}")
        if listed_size != size:
            return CheckFailed(
                "members", f"member {name!r} is {size} bytes, the manifest says {listed_size}"
            )
        if listed_sha256 != sha256:
            return CheckFailed("contents", f"{name}: sha256 differs from the manifest")
        return CheckFailed(
            "manifest", f"the entry for {name!r} is not laid out as collect writes it"
        )

    def entries(self) -> Iterator[tuple[str, int, str]]:
        """Every entry's path, size and sha256, in order: for a manifest already verified."""
        while (entry := self._next_entry()) is not None:
            yield entry
            self._pos += len(manifest_entry(*entry, first=self.count == 0))
            self.count += 1

    def _next_entry(self) -> tuple[str, int, str] | None:
        """The next entry's path, size and sha256, if it is well formed."""
        line = self._peek(MAX_ENTRY_BYTES)
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


def parse_claim(head: bytes) -> BundleClaim:
    try:
        return BundleClaim.model_validate_json(head + b"\n}")
    except ValidationError as error:
        hint = None
        if any(detail["loc"] == ("manifest_version",) for detail in error.errors()):
            hint = f"collect it again to get manifest version {MANIFEST_VERSION}"
        raise CheckFailed("manifest", describe_validation_error(error), hint) from None


def derive_claim(
    stored: BundleClaim, head: bytes, evidence: ArchiveEvidence
) -> tuple[BundleClaim, list[CheckResult]]:
    """Derive the claim from the files and the inputs the manifest records, exactly as collect
    would; the manifest's (`stored`, whose bytes before the file list are `head`) must be byte
    for byte the same. Returns it with the checks it passed; CheckFailed where it differs."""
    meta, capabilities, mtime = evidence.run_meta, evidence.capabilities, evidence.mtime
    hint = "do not trust this bundle"
    try:
        if mtime != meta.run_timestamp:
            raise CheckFailed(
                "members",
                f"the tar headers' mtime {mtime} is not the run date {meta.run_date} "
                f"({meta.run_timestamp})",
            )
        fingerprint, bundle_id = identify(RUN_META_PATH, meta, capabilities)
        derived = claim_for(
            RUN_META_PATH,
            RunEvidence(meta, fingerprint, bundle_id, evidence.summary, evidence.indices),
            submitter=stored.submitter,
            expected_rows=stored.coverage.expected_rows,
            inputs=stored.inputs,
            bundler_version=stored.bundler_version,
        )
        expected = manifest_head(derived)
    except InputError as error:
        raise CheckFailed(
            "claim", f"collect would refuse these files: {error.problem}", hint
        ) from None
    except (ValueError, ArithmeticError, RecursionError) as error:  # limits met by hostile input
        problem = f"the claim cannot be derived from these files ({type(error).__name__})"
        raise CheckFailed("claim", problem, hint) from None
    if expected != head:
        raise CheckFailed(
            "claim",
            f"{MANIFEST_PATH} is not what collect derives from the files: "
            + describe_difference(expected + b"\n}", head + b"\n}"),
            hint,
        )
    summary = derived.predictions
    checks = [
        passed(
            "claim",
            f"{derived.bundle_id}: re-derived from the files, {summary.count} predictions, "
            f"coverage {derived.coverage.status}",
        )
    ]
    if derived.coverage.status != "complete":
        checks.append(
            warned(
                "coverage", f"coverage is {derived.coverage.status}", hint="not a complete result"
            )
        )
    return derived, checks


def describe_difference(expected: bytes, actual: bytes) -> str:
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
