"""Stages 2 and 3 for every run collect selected (bundler.local.selection), each on its own.

A run is validated while its body is compressed (bundler.local.runs, bundler.local.archive),
then its archive and sidecar are staged and committed in batches, durable before they are
renamed into place (bundler.local.durablebatch.DurableBatch). A run that fails is refused with a
one-line reason naming a path, and leaves nothing partial in the bundles folder; the others go
on. Many runs may be bundled half in a forked child (`bundle_all`, bundler.core.forked).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from bundler.core.errors import BundlerError, InputError, WriteError
from bundler.core.forked import Watch, ahead_in_child
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import bundler_version
from bundler.local.archive import BodyWriter, Compressors, write_archive
from bundler.local.claim import claim_for, sidecar_bytes, sidecar_for, signature_beside
from bundler.local.collectcache import CachedBundle, CachedRun, CollectCache
from bundler.local.collectreport import (
    CollectedBundle,
    CollectOptions,
    CollectOutcome,
    RefusedInput,
    RowCountLookup,
)
from bundler.local.downgrade import downgrade, existing_claim
from bundler.local.durablebatch import DurableBatch
from bundler.local.fileio import (
    StagedFile,
    read_bounded,
    remove_unowned,
    sha256_file,
    write_error,
)
from bundler.local.manifest import BundleClaim, CollectInputs
from bundler.local.runs import RunHeader, ValidatedRun, read_header, validate_run
from bundler.local.statcache import sha256_bytes


@dataclass(frozen=True)
class Work:
    """What every run's bundling shares."""

    bundles_dir: Path
    options: CollectOptions
    row_counts: RowCountLookup | None
    progress: ProgressSink
    cache: CollectCache


@dataclass
class Bundled:
    """What bundling some of the runs gave, by the run's place in collect's list: plain values,
    so that a forked child can hand its half back (with the stat cache entries it recorded)."""

    slots: dict[int, CollectedBundle] = field(default_factory=dict)
    refused: list[RefusedInput] = field(default_factory=list)
    recorded: dict[str, Any] = field(default_factory=dict)


FORK_WEIGHT = 4_000
"""The work, in predictions (see RUN_WEIGHT), from which half of it goes to a forked child
(`bundle_all`): a child starts in a few ms, where each prediction costs about 0.1 ms."""

RUN_WEIGHT = 40
"""A run's own cost in predictions besides its prediction files: its folder, two new files
and their durable commit, the manifest and the sidecar (about 4 ms on the machine measured)."""


def bundle_all(items: list[tuple[int, RunHeader | CachedRun]], work: Work) -> Bundled:
    """Bundle every run of `items`. With at least FORK_WEIGHT of work, the later half (by
    weight) is bundled in a forked child, where one may be forked (bundler.core.forked), while
    this process bundles the first: every run is bundled on its own and their bundle ids
    differ, so the halves write different files, and pairs committed in one player folder are
    serialized by its lock (`commit_pair`). Joined, the halves report what one process would,
    in the same order; a child that fails has its half done here after all. Row counts asked
    of the Hub (`--resolve-rows`) keep the work in line: a child would share this process's
    open connections."""
    weights = [item.run.predictions + RUN_WEIGHT for _, item in items]
    total = sum(weights)
    if work.row_counts is not None or len(items) < 2 or total < FORK_WEIGHT:
        return _bundle_runs(items, work, None)
    middle, weight = 1, weights[0]  # each half holds at least one run
    while weight * 2 < total and middle < len(items) - 1:
        weight += weights[middle]
        middle += 1
    mine, theirs = items[:middle], items[middle:]

    def in_child(watch: Watch) -> Bundled:
        try:
            work.cache.keep_apart()
            bundled = _bundle_runs(theirs, replace(work, progress=NoProgress()), watch)
            bundled.recorded = work.cache.kept_apart()
            return bundled
        finally:  # stopped, a file just made may be no one's: the child leaves none
            remove_unowned()

    with ahead_in_child(in_child, lambda: _bundle_runs(theirs, work, None)) as later:
        bundled = _bundle_runs(mine, work, None)
        rest = later()
    work.cache.adopt(rest.recorded)
    bundled.slots.update(rest.slots)
    bundled.refused.extend(rest.refused)
    return bundled


def _bundle_runs(
    items: list[tuple[int, RunHeader | CachedRun]], work: Work, watch: Watch | None
) -> Bundled:
    """Bundle the runs of `items` in this process, with compressors of its own (made after a
    fork: a multi-threaded compressor's workers do not survive one)."""
    bundled = Bundled()
    if not items:
        return bundled  # a nightly run with nothing new: no compressor made
    compressors = Compressors.of(work.options.level, work.options.threads)
    with DurableBatch() as batch:
        for number, item in items:
            if watch is not None:
                watch()
            if isinstance(item, CachedRun):
                try:  # the bundle changed since it was cached: the run is read after all
                    header = read_header(item.run)
                except InputError as error:
                    bundled.refused.append(RefusedInput(path=str(item.run.path), error=str(error)))
                    continue
            else:
                header = item
            _bundle_one(header, work, compressors, batch, bundled, number)
    return bundled


def _bundle_one(
    header: RunHeader,
    work: Work,
    compressors: Compressors,
    batch: DurableBatch,
    bundled: Bundled,
    number: int,
) -> None:
    """Validate one run, compressing its body as it goes, and write its bundle into
    `bundled.slots[number]` (a new or replaced bundle is committed with the batch,
    `DurableBatch`; an unchanged one is left as it is), or record its refusal."""
    options, progress = work.options, work.progress
    statics = header.meta.statics
    expected = options.expected_rows.get(statics.task_name)
    note = None
    if expected is None and work.row_counts is not None:
        expected, note = work.row_counts.rows(statics)
    inputs = options.cache_inputs(expected, note)

    def refuse(error: BundlerError) -> None:
        # Every refusal line names a path: the input's, or the file that could not be written.
        named = isinstance(error, InputError) or (
            isinstance(error, WriteError) and error.path is not None
        )
        shown = str(error) if named else f"{header.run.path}: {error}"
        refused = RefusedInput(path=str(header.run.path), error=shown, remedy=error.remedy)
        bundled.refused.append(refused)

    listing = None  # the run's, once it has been read

    def done(bundle: CollectedBundle, sidecar_sha256: str, error: WriteError | None) -> None:
        if error is not None:
            refuse(error)
            return
        bundled.slots[number] = bundle
        if bundle.outcome == "kept":
            return  # not what the run would give: the cache must not skip it next time
        kept = CachedBundle(
            archive=bundle.archive,
            sidecar=bundle.sidecar,
            sha256=bundle.sha256,
            size=bundle.size,
            coverage=bundle.coverage,
            predictions=bundle.predictions,
            warnings=bundle.warnings,
        )
        work.cache.record(
            header.run,
            listing,
            bundle_id=bundle.bundle_id,
            bundle=kept,
            task=statics.task_name,
            names={header.meta.model_name, header.meta.capabilities.player_name},
            statics=statics.model_dump(mode="json"),
            inputs=inputs,
            sidecar_sha256=sidecar_sha256,
        )

    try:
        _refuse_linked_folder(header.bundle_id.local_archive(work.bundles_dir).parent)
        progress.begin(f"bundling {header.bundle_id}", header.run.predictions, unit="predictions")
        body = BodyWriter(header.meta.run_timestamp, compressors, header.run.predictions)
        try:
            run = validate_run(
                header,
                expected_rows=expected,
                allow_partial=options.allow_partial,
                row_count_note=note,
                on_prediction=progress.advance,
                on_file=body.add,
            )
        except BaseException:
            body.close()
            raise
    except BundlerError as error:
        refuse(error)
        return
    listing = run.listing
    body.end_frame_aside()
    try:
        _write_bundle(run, body, work.bundles_dir, options, batch, done)
    except BundlerError as error:
        refuse(error)
    finally:
        body.close()


@contextmanager
def no_new_empty_folders(bundles_dir: Path) -> Iterator[None]:
    """The player folders this collect created are removed again when they end up empty (a
    run interrupted or refused before its bundle was committed, the batch's temporary files
    removed): no empty folder is left behind, and nothing else is touched (rmdir removes
    only empty folders)."""
    before = set(os.listdir(bundles_dir)) if os.path.isdir(bundles_dir) else set()
    try:
        yield
    finally:
        with suppress(OSError):
            for name in set(os.listdir(bundles_dir)) - before:
                with suppress(OSError):
                    (bundles_dir / name).rmdir()


def _refuse_linked_folder(folder: Path) -> None:
    """A player folder in the bundles folder that is a symbolic link is never written through:
    verify and upload skip links, so a bundle written there would never be published."""
    if folder.is_symlink():
        raise WriteError(
            f"{folder}: symbolic link; collect never writes through a link (verify and upload "
            "skip links, so the bundle would never be published)",
            path=folder,
            hint="replace the link with a real folder",
        )


def _claim_of(run: ValidatedRun, options: CollectOptions) -> BundleClaim:
    return claim_for(
        run.header.run.path,
        run.evidence,
        submitter=options.submitter,
        expected_rows=run.coverage.expected_rows,
        inputs=CollectInputs(
            level=options.level, left_out=run.left_out, row_count_note=run.row_count_note
        ),
        bundler_version=bundler_version(),
    )


def _write_bundle(
    run: ValidatedRun,
    body: BodyWriter,
    bundles_dir: Path,
    options: CollectOptions,
    batch: DurableBatch,
    done: Callable[[CollectedBundle, str, WriteError | None], None],
) -> None:
    """Write the archive and its sidecar as temporary files, then have `batch` commit them as
    a pair (see `commit_pair`, `DurableBatch`): both are durable before either is renamed, the
    archive is in place before its sidecar, so a sidecar always describes the archive beside
    it, and a run killed at any moment leaves the previous bundle or none. When the archive
    is the one already there, byte for byte, and so is the sidecar, nothing is fsynced or
    renamed: the staged copy is dropped. `done` is told the outcome."""
    claim = _claim_of(run, options)
    archive_path = run.header.bundle_id.local_archive(bundles_dir)
    sidecar_path = run.header.bundle_id.local_sidecar(bundles_dir)
    exists = os.path.isfile(archive_path)
    kept = _kept(run, claim, archive_path, sidecar_path, options) if exists else None
    if kept is not None:
        done(kept, "", None)
        return
    previous = sha256_file(archive_path)[0] if exists else None
    archive = StagedFile(archive_path)
    sidecar: StagedFile | None = None
    try:
        sha256, size = write_archive(claim, run.files(), body, archive.handle)
        # the same archive bytes keep the signature they had: a re-run loses no one's word
        signature = signature_beside(sidecar_path) if previous == sha256 else None
        data = sidecar_bytes(sidecar_for(claim, archive_path.name, sha256, size, signature))
        outcome: CollectOutcome = (
            "written" if previous is None else "unchanged" if previous == sha256 else "replaced"
        )
        bundle = CollectedBundle(
            bundle_id=claim.bundle_id,
            run_directory=str(run.header.run.path),
            archive=str(archive_path),
            sidecar=str(sidecar_path),
            outcome=outcome,
            sha256=sha256,
            size=size,
            coverage=run.coverage.status,
            predictions=run.summary.count,
            warnings=run.warnings,
        )
        if outcome == "unchanged" and _holds(sidecar_path, data):
            archive.close()  # the same bytes: no fsync, no rename
            done(bundle, sha256_bytes(data), None)
            return
        sidecar = StagedFile(sidecar_path)
        sidecar.handle.write(data)
        # handed to the batch inside the `try`: a stop signal arriving between the two would
        # otherwise leave both staged files owned by nobody (closing twice is harmless)
        batch.add(archive, sidecar, size + len(data), partial(done, bundle, sha256_bytes(data)))
    except BaseException as error:
        archive.close()
        if sidecar is not None:
            sidecar.close()
        if isinstance(error, OSError):  # a full disk: the run's refusal names the file
            failed = sidecar_path if sidecar is not None else archive_path
            raise write_error(failed, error) from None
        raise


def _kept(
    run: ValidatedRun,
    claim: BundleClaim,
    archive_path: Path,
    sidecar_path: Path,
    options: CollectOptions,
) -> CollectedBundle | None:
    """The existing bundle (one is there), reported as kept, when the new one would claim less
    and --replace was not given (bundler.local.downgrade); None when the new one may be
    written."""
    if options.replace:
        return None
    old = existing_claim(sidecar_path)
    why = downgrade(old, claim)
    if why is None or old is None:
        return None
    return CollectedBundle(
        bundle_id=claim.bundle_id,
        run_directory=str(run.header.run.path),
        archive=str(archive_path),
        sidecar=str(sidecar_path),
        outcome="kept",
        sha256=old.archive.sha256,
        size=old.archive.size,
        coverage=old.coverage.status,
        predictions=old.predictions.count,
        warnings=list(old.warnings),
        kept=why.sentence,
        downgrade=why,
    )


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file at `path` already holds exactly `data` (then nothing is replaced)."""
    try:
        return read_bounded(path, len(data)) == data
    except InputError:
        return False
