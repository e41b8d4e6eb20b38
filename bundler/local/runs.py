"""Stage 2: read and validate one run directory against the statics output format.

Reading happens in two steps. `read_header` parses run_meta.json only, which is enough to name
the bundle, apply filters and detect two runs claiming the same bundle before any heavy work.
`validate_run` then checks metrics.json and every prediction, streaming one file at a time and
keeping only compact per-file digests, so memory does not grow with the size of predictions.
"""

from __future__ import annotations

import hashlib
import os
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from bundler.core.checks import exception_rate
from bundler.core.errors import InputError
from bundler.core.limits import (
    INT64_MAX,
    MAX_EXCEPTION_RATE,
    MAX_LEFT_OUT_SHOWN,
    MAX_METRICS_BYTES,
    MAX_PREDICTION_BYTES,
    MAX_PREDICTIONS,
    MAX_RUN_META_BYTES,
)
from bundler.core.naming import capability_fingerprint
from bundler.core.progress import NoProgress
from bundler.local.discover import (
    METRICS_NAME,
    PREDICTION_FILE,
    RUN_INFO_FILES,
    RUN_META_NAME,
    Listing,
    ListingParts,
    RunDirectory,
    is_run_file,
)
from bundler.local.fileio import printable_name, read_bounded_stat
from bundler.local.layout import BundleId, LayoutError
from bundler.local.manifest import (
    METRICS_PATH,
    RUN_META_PATH,
    Coverage,
    LeftOut,
    PredictionSummary,
    prediction_path,
)
from bundler.local.schema import StaticsRunMetadata
from bundler.local.validation import (
    PredictionTally,
    assess_coverage,
    check_metrics,
    describe_gaps,
    parse_prediction,
    parse_run_meta,
)

PROGRESS_BATCH = 256
_DECIMAL = re.compile(r"[0-9]+")  # fullmatch, as PREDICTION_FILE
UNKNOWN_COVERAGE_WARNING = "coverage unknown: {count} rows present; pass --expect {task}=ROWS"
PARTIAL_RUN_WARNING = "partial run: {count} of {expected} rows (a --limit-instances run?)"
"""Warnings of the bundle format, not messages: collect writes them into the manifest, and
verify derives them again and compares them byte for byte, so a bundle published with one
would fail verification were it worded anew (a new wording needs a new manifest version). They
name command-line options because they were written so; --limit-instances is the harness's."""


class ArchivedFile(NamedTuple):
    """One file of the bundle as the manifest lists it: its path in the archive, its size and
    its sha256 (of the very bytes that were validated and archived)."""

    archive_path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class RunHeader:
    """A run as run_meta.json describes it: enough to name its bundle."""

    run: RunDirectory
    meta: StaticsRunMetadata
    fingerprint: str
    bundle_id: BundleId
    run_meta_file: ArchivedFile
    run_meta_data: bytes
    run_meta_status: os.stat_result
    """run_meta.json's stat as it was read, for a listing taken as the run is read."""


def canonical_name(index: int) -> str:
    return f"prediction_{index}.json"


@dataclass
class PredictionFiles:
    """Index-ordered prediction files with sizes and digests in compact arrays (56 bytes a
    row): a 100,000-row run costs a few megabytes here, not one Python object per field per
    file. Archive paths are derived from the index."""

    indices: array[int] = field(default_factory=lambda: array("q"))
    sizes: array[int] = field(default_factory=lambda: array("Q"))
    digests: bytearray = field(default_factory=bytearray)

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[ArchivedFile]:
        digests = memoryview(self.digests)
        for position, index in enumerate(self.indices):
            yield ArchivedFile(
                prediction_path(index),
                self.sizes[position],
                digests[position * 32 : position * 32 + 32].hex(),
            )


@dataclass(frozen=True)
class RunEvidence:
    """What a run's claim is derived from, the same whether read from a run directory (collect)
    or from a bundle's own files (verify)."""

    meta: StaticsRunMetadata
    fingerprint: str
    bundle_id: BundleId
    summary: PredictionSummary
    indices: Sequence[int]
    """Prediction indices, in increasing order."""


@dataclass(frozen=True)
class ValidatedRun:
    header: RunHeader
    metrics_file: ArchivedFile
    predictions: PredictionFiles
    summary: PredictionSummary
    left_out: LeftOut
    row_count_note: str | None
    coverage: Coverage
    warnings: list[str]
    """The claim's warnings, then what only collect can tell: prediction files stored under
    another name (the bundle keeps no record of the names it was given, so verify could not
    derive such a warning again, and the claim does not carry it)."""
    listing: Listing | None
    """The run directory's listing for the stat cache: discovery's, or, when it took none
    (RunDirectory.listed), the one taken as the run was read; None when there is none."""

    @property
    def evidence(self) -> RunEvidence:
        header = self.header
        return RunEvidence(
            header.meta,
            header.fingerprint,
            header.bundle_id,
            self.summary,
            self.predictions.indices,
        )

    def files(self) -> Iterator[ArchivedFile]:
        """Every file of the bundle after the manifest, in archive order."""
        yield self.header.run_meta_file
        yield self.metrics_file
        yield from self.predictions


def read_header(run: RunDirectory) -> RunHeader:
    """Parse run_meta.json and derive the bundle id; raise InputError when it cannot be."""
    path = run.path / RUN_META_NAME
    try:
        data, status = read_bounded_stat(path, MAX_RUN_META_BYTES)
    except InputError:
        if os.path.lexists(path):
            raise
        # The public release of late 2026 writes run_meta.json last (statics-outputs.md), so
        # a run of it that crashed or was interrupted looks like this too. (Asked only once
        # the read failed: a stat fewer for every run that has one.)
        raise InputError(
            path,
            "missing, so the run cannot be attributed to a model and dataset: unfinished run, "
            "or a harness that does not write run_meta.json",
            hint="finish or resume the run",
        ) from None
    meta, raw = parse_run_meta(data, str(path))
    fingerprint, bundle_id = identify(path, meta, raw["capabilities"])
    return RunHeader(
        run=run,
        meta=meta,
        fingerprint=fingerprint,
        bundle_id=bundle_id,
        run_meta_file=ArchivedFile(RUN_META_PATH, len(data), _sha256(data)),
        run_meta_data=data,
        run_meta_status=status,
    )


def identify(
    where: Path | str, meta: StaticsRunMetadata, capabilities: dict[str, Any]
) -> tuple[str, BundleId]:
    """The capability fingerprint and bundle id of a run, from run_meta.json and its raw
    `capabilities`; InputError for a run that cannot be bundled at all."""
    fingerprint = capability_fingerprint(capabilities)
    try:
        bundle_id = BundleId.of(meta.capabilities.player_name, fingerprint, meta.statics.target)
    except LayoutError as error:
        raise InputError(where, f"cannot name a bundle: {error}") from None
    return fingerprint, bundle_id


def validate_run(
    header: RunHeader,
    *,
    expected_rows: int | None,
    allow_partial: bool,
    row_count_note: str | None = None,
    on_prediction: Callable[[int], None] | None = None,
    on_file: Callable[[str, bytes], None] | None = None,
) -> ValidatedRun:
    """Check metrics.json and every prediction; refuse a run that is wrong or, unless allowed,
    partial. `row_count_note` says why --resolve-rows found no row count, if it did not.
    `on_prediction` (if given) is told how many more predictions were checked, in
    batches (progress bars are costly per call);
    `on_file` with each file's archive path and the very bytes checked, in archive order, so
    they can be archived without reading any file a second time. A run whose discovery took
    no listing (RunDirectory.listed) has it taken here, from the files as they are read."""
    keep = on_file or (lambda archive_path, data: None)
    keep(RUN_META_PATH, header.run_meta_data)
    directory = header.run.path
    taking = None if header.run.listed else ListingParts()
    if taking is not None:
        taking.add(RUN_META_NAME, header.run_meta_status)
    metrics_path = directory / METRICS_NAME
    try:
        metrics_data, metrics_status = read_bounded_stat(metrics_path, MAX_METRICS_BYTES)
    except InputError:
        if os.path.lexists(metrics_path):
            raise
        raise InputError(
            metrics_path, "missing: the run was not scored", hint="score the run first"
        ) from None
    check_metrics(metrics_data, str(metrics_path))
    keep(METRICS_PATH, metrics_data)
    metrics_file = ArchivedFile(METRICS_PATH, len(metrics_data), _sha256(metrics_data))
    if taking is not None:
        taking.add(METRICS_NAME, metrics_status)

    indices, odd_names, left_out = _list_predictions(header.run, taking)
    check_prediction_count(directory, len(indices))
    predictions = PredictionFiles(indices=indices)
    tally = PredictionTally()
    directory_name = str(directory)
    # This loop runs once per row: a str path, not a Path, no per-row objects kept, the
    # methods it calls bound once, progress told once a batch.
    add_record, digests, sha256 = tally.add, predictions.digests, hashlib.sha256
    add_size, odd_name = predictions.sizes.append, odd_names.get if odd_names else None
    add_part = None if taking is None else taking.add
    advance = on_prediction or NoProgress().advance
    for start in range(0, len(indices), PROGRESS_BATCH):
        batch = indices[start : start + PROGRESS_BATCH]
        for index in batch:
            name = (odd_name and odd_name(index)) or canonical_name(index)
            path = f"{directory_name}/{name}"
            data, status = read_bounded_stat(path, MAX_PREDICTION_BYTES)
            add_record(parse_prediction(data, index, path), path)
            keep(prediction_path(index), data)
            add_size(len(data))
            digests += sha256(data).digest()
            if add_part is not None:
                add_part(name, status)
        advance(len(batch))
    summary = tally.summary()
    evidence = RunEvidence(header.meta, header.fingerprint, header.bundle_id, summary, indices)
    coverage, warnings = judge_run(
        directory,
        evidence,
        expected_rows=expected_rows,
        allow_partial=allow_partial,
        left_out=left_out,
        row_count_note=row_count_note,
    )
    warnings += _renamed(odd_names)
    listing = header.run.listing if taking is None else taking.listing()
    return ValidatedRun(
        header,
        metrics_file,
        predictions,
        summary,
        left_out,
        row_count_note,
        coverage,
        warnings,
        listing,
    )


def check_prediction_count(where: Path | str, count: int) -> None:
    """Collect refuses a run with more predictions than a bundle holds, and verify a bundle."""
    if count > MAX_PREDICTIONS:
        raise InputError(where, f"{count} predictions, more than the {MAX_PREDICTIONS} of a bundle")


def judge_run(
    where: Path | str,
    evidence: RunEvidence,
    *,
    expected_rows: int | None,
    allow_partial: bool,
    left_out: LeftOut,
    row_count_note: str | None,
) -> tuple[Coverage, list[str]]:
    """A run's coverage and warnings, exactly as collect decides them: collect judges a run
    directory with it, and verify a bundle's own files with the inputs its manifest records.
    Raises InputError where collect refuses the run."""
    summary, indices = evidence.summary, evidence.indices
    if not indices:
        raise InputError(where, "no prediction_<index>.json files")
    coverage = assess_coverage(summary, expected_rows)
    warnings = [] if row_count_note is None else [row_count_note]
    if left_out.count:
        shown = _first_names(left_out.shown, left_out.count)
        warnings.append(f"left out {left_out.count} unknown file(s): {shown}")
    task = evidence.meta.statics.task_name
    warnings += _judge_coverage(where, task, summary, coverage, indices, allow_partial)
    warnings += _claim_warnings(evidence.meta, summary)
    return coverage, warnings


def _first_names(shown: Sequence[str], count: int) -> str:
    """`a, b and 3 more`: the names shown of `count`, for a warning of one line."""
    more = count - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _renamed(odd_names: dict[int, str]) -> list[str]:
    """A warning naming the prediction files whose name is not the one the bundle gives them
    (`prediction_01.json` is row 1, stored as `prediction_1.json`), so no name the user gave
    changes without a word."""
    if not odd_names:
        return []
    renamed = [f"{odd_names[index]} to {canonical_name(index)}" for index in sorted(odd_names)]
    shown = _first_names(renamed[:MAX_LEFT_OUT_SHOWN], len(renamed))
    return [f"renamed {len(renamed)} prediction file(s) in the bundle: {shown}"]


def _list_predictions(
    run: RunDirectory, taking: ListingParts | None
) -> tuple[array[int], dict[int, str], LeftOut]:
    """Prediction indices in order, plus the names that are not `prediction_<index>.json`;
    other files, and the subfolders that hold no run (shown as `name/`), are left out with a
    warning (their names go into the manifest, so a name that is not UTF-8 is shown with its
    bytes escaped). With `taking`, the entries that will not be read (folders, files left out)
    go into the run's listing."""
    directory = run.path
    indices: array[int] = array("q")
    odd_names: dict[int, list[str]] = {}
    extras = [f"{printable_name(name)}/" for name in run.left_out_folders]
    add = indices.append
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                digits = name[_DIGITS_START:_DIGITS_END]
                # A canonical name, as nearly all are, without a regular expression or a call;
                # anything else (and any link) as _list_entry decides.
                if (
                    name.startswith(_CANONICAL_PREFIX)
                    and name.endswith(_CANONICAL_SUFFIX)
                    and digits.isascii()
                    and digits.isdigit()
                    and (digits[0] != "0" or digits == "0")
                    and len(digits) <= _SAFE_DIGITS
                    and not entry.is_symlink()
                ):
                    add(int(digits))
                else:
                    _list_entry(entry, indices, odd_names, extras, taking)
    except OSError as error:
        raise InputError(directory, f"cannot list: {error.strerror}") from None
    indices = array("q", sorted(indices))
    if odd_names:  # two entries share an index only if one has another name than its own
        _refuse_duplicates(directory, indices, odd_names)
    extras.sort()
    left_out = LeftOut(count=len(extras), shown=extras[:MAX_LEFT_OUT_SHOWN])
    return indices, {index: names[0] for index, names in odd_names.items()}, left_out


def _refuse_duplicates(
    directory: Path, indices: array[int], odd_names: dict[int, list[str]]
) -> None:
    """InputError naming the first two files of the lowest index listed twice, if any."""
    for position in range(1, len(indices)):
        if indices[position] == indices[position - 1]:
            index = indices[position]
            names = odd_names.get(index, [])
            if indices.count(index) > len(names):
                names = [*names, canonical_name(index)]
            first, second = sorted(names)[:2]
            raise InputError(directory, f"duplicate index {index}: {first} and {second}")


_CANONICAL_PREFIX, _, _CANONICAL_SUFFIX = canonical_name(0).partition("0")
_DIGITS_START, _DIGITS_END = len(_CANONICAL_PREFIX), -len(_CANONICAL_SUFFIX)
_SAFE_DIGITS = len(str(INT64_MAX)) - 1
"""An index of this many digits or fewer is within INT64_MAX."""


def _list_entry(
    entry: os.DirEntry[str],
    indices: array[int],
    odd_names: dict[int, list[str]],
    extras: list[str],
    taking: ListingParts | None,
) -> None:
    match = PREDICTION_FILE.fullmatch(entry.name)
    if entry.is_symlink() and is_run_file(entry.name):
        raise InputError(entry.path, "symbolic link; links are never followed")
    if match is None:
        # Folders are the run's left_out_folders: only discovery knows which lead to runs.
        if entry.is_dir(follow_symlinks=False):
            if taking is not None:
                taking.add_folder(entry.name)
        elif entry.name not in RUN_INFO_FILES:  # those two are read, and listed so
            extras.append(printable_name(entry.name))
            if taking is not None:
                taking.add_entry(entry)
        return
    if not _DECIMAL.fullmatch(match.group(1)):
        raise InputError(entry.path, "file name is not prediction_<index>.json")
    index = int(match.group(1))
    if index > INT64_MAX:
        raise InputError(entry.path, f"index {index} is larger than any row index can be")
    indices.append(index)
    if entry.name != canonical_name(index):
        odd_names.setdefault(index, []).append(entry.name)


def _judge_coverage(
    where: Path | str,
    task: str,
    summary: PredictionSummary,
    coverage: Coverage,
    indices: Sequence[int],
    allow_partial: bool,
) -> list[str]:
    expected = coverage.expected_rows
    if expected is not None and indices[-1] >= expected:
        raise InputError(
            where,
            f"prediction index {indices[-1]} is beyond the {expected} rows expected for {task}",
            remedy="check-expected-rows",
        )
    if coverage.status != "partial":
        if coverage.status == "unknown":
            return [UNKNOWN_COVERAGE_WARNING.format(count=summary.count, task=task)]
        return []
    if not summary.contiguous:
        problem = f"prediction indices have gaps ({describe_gaps(indices)})"
    else:
        problem = PARTIAL_RUN_WARNING.format(count=summary.count, expected=expected)
    if not allow_partial:
        raise InputError(where, problem, remedy="bundle-partial")
    return [problem]


def _claim_warnings(meta: StaticsRunMetadata, summary: PredictionSummary) -> list[str]:
    """What a reviewer must notice about what the run claims."""
    warnings: list[str] = []
    if not meta.statics.is_pinned:
        warnings.append("dataset revision unpinned: the rows measured cannot be pinned down")
    if meta.provenance.is_dirty:
        warnings.append(f"harness tree was dirty ({meta.provenance.git_sha})")
    if not meta.provenance.is_version_known:
        warnings.append("harness version unknown (gptnt_version 0.0.0)")
    if summary.exceptions:
        warnings.append(f"{summary.exceptions} prediction(s) did not complete (exception)")
    rate = exception_rate(summary.exceptions, summary.count)
    if rate > MAX_EXCEPTION_RATE:
        warnings.append(
            f"exception rate {rate:.1%} ({summary.exceptions} of {summary.count} predictions) is "
            f"above the {MAX_EXCEPTION_RATE:.1%} review accepts by default: review fails this "
            "bundle unless the leaderboard's maintainers allow more"
        )
    if summary.missing_scored_output:
        warnings.append(
            f"{summary.missing_scored_output} prediction(s) lack scored_output (older harness)"
        )
    return warnings


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
