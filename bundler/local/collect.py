"""The collect pipeline: discover runs, validate them, and write one bundle per run.

Each run succeeds or is refused on its own: a bad run is reported with a one-line reason and
never stops the valid ones, and nothing partial is left for it in the bundles directory.

The stages that read and write runs (runs, archive, claim, fileio, lock) are imported in the
functions that use them: a collect that finds nothing to bundle then starts about as fast as a
bare typer command (tests/benchmark_collect.py).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import ConfigDict, Field

from bundler.core import exitcodes
from bundler.core.error_shape import ErrorShape
from bundler.core.errors import (
    BundlerError,
    BundlesLockedError,
    InputError,
    NoRunSelectedError,
    UsageError,
    WriteError,
)
from bundler.core.forked import Watch, ahead_in_child
from bundler.core.limits import DEFAULT_LEVEL, MAX_LEVEL
from bundler.core.model import Model, RemedyField
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import bundler_version
from bundler.local.discover import RunDirectory, Skipped, discover
from bundler.local.downgrade import Downgrade
from bundler.local.sign import SignReport
from bundler.local.submitter import Submitter

if TYPE_CHECKING:
    from bundler.local.archive import BodyWriter, Compressors
    from bundler.local.collectcache import CachedBundle, CachedRun, CollectCache
    from bundler.local.fileio import DurableBatch
    from bundler.local.layout import BundleId
    from bundler.local.manifest import BundleClaim
    from bundler.local.runs import RunHeader, ValidatedRun
    from bundler.local.schema import StaticsIdentity


class RowCountLookup(Protocol):
    """Where `collect` learns a dataset split's row count when `--expect` does not give it
    (`bundler.hub.tasks.split_size.RowCountResolver` asks the Hub). A parameter rather than an
    import, so the local format never reaches the network itself."""

    def rows(self, identity: StaticsIdentity) -> tuple[int | None, str | None]:
        """The row count, or None with the reason as a warning."""


class CollectOptions(Model):
    model_config = ConfigDict(frozen=True)

    tasks: list[str] = Field(default_factory=list, description="keep only these task names")
    models: list[str] = Field(
        default_factory=list, description="keep only runs whose player_name or model_name is one"
    )
    submitter: Submitter = Field(default_factory=Submitter)
    expected_rows: dict[str, int] = Field(default_factory=dict)
    allow_partial: bool = False
    level: int = Field(default=DEFAULT_LEVEL, ge=1, le=MAX_LEVEL)
    threads: int | None = Field(default=None, ge=1)
    lock_wait: float = Field(
        default=0, ge=0, description="seconds to wait for another run to release the folder"
    )
    full: bool = Field(
        default=False,
        description="read every run again, trusting no cache (bundler.local.collectcache)",
    )
    replace: bool = Field(
        default=False, description="replace a bundle even by one that claims less (downgrade)"
    )

    @cached_property
    def submitter_json(self) -> dict[str, object]:
        """The submitter as the stat cache records it: dumped once, not once per run."""
        return self.submitter.model_dump(mode="json")


CollectOutcome = Literal["written", "unchanged", "replaced", "kept"]


class CollectedBundle(Model):
    bundle_id: str
    run_directory: str
    archive: str
    sidecar: str
    outcome: CollectOutcome
    sha256: str
    size: int
    coverage: str
    predictions: int
    warnings: list[str]
    kept: str | None = Field(
        default=None, description="outcome kept: what the new bundle would have lost, and how"
    )
    downgrade: Downgrade | None = Field(default=None, exclude_if=lambda value: value is None)


class RefusedInput(Model):
    path: str
    error: str
    remedy: RemedyField = None


class CollectReport(Model, ErrorShape):
    output_root: str
    bundles_dir: str
    bundles: list[CollectedBundle] = Field(default_factory=list)
    refused: list[RefusedInput] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    removed_temporaries: list[str] = Field(
        default_factory=list, description="leftover temporary files of a killed run, removed"
    )
    error: str | None = Field(
        default=None,
        description="why the runs that were not refused were not bundled: another run held the "
        "bundles folder (they are under `skipped`; run again later)",
    )
    hint: str | None = None
    error_kind: str | None = None
    warnings: list[str] = Field(
        default_factory=list, description="e.g. that the output root holds no run: nothing to do"
    )
    signing: SignReport | None = Field(
        default=None, description="what signing the bundles did, when a key was given"
    )

    @property
    def exit_code(self) -> int:
        """1 when an input was refused (or a bundle could not be signed), else 75 when the
        bundles folder was in use, else 0: a refusal asks more of a person than a retry does
        (bundler.core.exitcodes)."""
        kept = any(bundle.outcome == "kept" for bundle in self.bundles)
        return exitcodes.combine(
            exitcodes.LOOK if self.refused or kept else exitcodes.OK,
            exitcodes.TEMPORARY if self.error is not None else exitcodes.OK,
            self.signing.exit_code if self.signing is not None else exitcodes.OK,
        )


def collect(
    output_root: Path,
    bundles_dir: Path,
    options: CollectOptions | None = None,
    progress: ProgressSink | None = None,
    row_counts: RowCountLookup | None = None,
) -> CollectReport:
    """Bundle every run under `output_root` into `bundles_dir`; see CollectReport for what was
    written, refused and skipped. `row_counts` gives the row count of a task `expected_rows`
    does not name (`--resolve-rows`). Many runs to bundle may be bundled half in a forked child
    where the console script allows it (`_bundle_all`, bundler.core.forked). Raises UsageError
    when the output root cannot be used, and BundlesLockedError when another run holds
    `bundles_dir` for longer than `options.lock_wait` seconds and no input was refused. When
    some were, the report says so instead (`error`, and the runs not bundled under `skipped`):
    a retry would not make a refusal go away, so it must not be hidden behind one."""
    options = options or CollectOptions()
    progress = progress or NoProgress()
    if bundles_dir.exists() and not bundles_dir.is_dir():
        raise UsageError(f"{bundles_dir}: exists and is not a directory")
    found = discover(output_root)
    report = CollectReport(
        output_root=str(output_root), bundles_dir=str(bundles_dir), skipped=list(found.skipped)
    )
    if not found.runs and not found.refused:
        report.warnings.append(_nothing_to_do(output_root))
        return report  # an output root with no run yet: nothing to do, not unusable input
    report.refused.extend(
        RefusedInput(path=item.path, error=f"{item.path}: {item.reason}") for item in found.refused
    )
    from bundler.local.collectcache import CachedRun, CollectCache
    from bundler.local.fileio import remove_leftovers
    from bundler.local.lock import bundles_lock
    from bundler.local.runs import read_header

    headers: list[RunHeader | CachedRun] = []
    matches = _FilterMatches(options)
    cache = CollectCache(bundles_dir, full=options.full)
    for run in found.runs:
        cached = cache.lookup(run)  # stats the run's files; reads none of them
        if cached is not None:
            if not matches.selects(cached.task, cached.names):
                cache.carry(run)
                report.skipped.append(Skipped(path=str(run.path), reason="not selected by filters"))
                continue
            if _inputs_match(cached, options, row_counts):
                headers.append(cached)
                continue
            matches.selected -= 1  # counted again below, from the run's own files
        try:
            header = read_header(run)
        except InputError as error:
            if matches.selects(run.task_dir_name, {_model_path(run)}):
                report.refused.append(RefusedInput(path=str(run.path), error=str(error)))
            continue
        meta = header.meta
        names = {meta.model_name, meta.capabilities.player_name}
        if matches.selects(meta.statics.task_name, names):
            headers.append(header)
        else:
            cache.carry(run)
            report.skipped.append(Skipped(path=str(run.path), reason="not selected by filters"))
    matches.check()
    report.removed_temporaries = [str(path) for path in remove_leftovers(bundles_dir)]
    runs = _refuse_collisions(headers, report)
    if not runs:
        return report  # nothing to write: no lock taken, nothing created
    slots: dict[int, CollectedBundle] = {}
    try:
        with bundles_lock(bundles_dir, operation="collect", wait=options.lock_wait):
            to_bundle: list[tuple[int, RunHeader | CachedRun]] = []
            for number, item in enumerate(runs):
                if isinstance(item, CachedRun) and (unchanged := cache.still_bundled(item)):
                    slots[number] = _reported(item, unchanged)
                else:  # new, or its bundle changed since: the run is read
                    to_bundle.append((number, item))
            work = _Work(bundles_dir, options, row_counts, progress, cache)
            with _no_new_empty_folders(bundles_dir):
                bundled = _bundle_all(to_bundle, work)
            slots.update(bundled.slots)
            report.refused.extend(bundled.refused)
            report.bundles = [slots[number] for number in sorted(slots)]
            cache.save()
    except BundlesLockedError as error:  # from the lock: _bundle_one reports its own errors
        if not report.refused:
            raise  # the lock is the whole story: its one line and exit 75, as for upload
        report.say(error)
        report.skipped.extend(
            Skipped(path=str(header.run.path), reason=f"not bundled: {error}") for header in runs
        )
    return report


def _nothing_to_do(output_root: Path) -> str:
    """The warning of an output root that holds no dataset-backed run (empty, or how_do_you/
    only): a harness that has not run a statics task yet, not a mistake."""
    return f"{output_root}: no dataset-backed run under <task>_predictions/ yet; nothing to do"


class _FilterMatches:
    """Applies the --task / --model filters and remembers which values matched a run, so a
    filter that matches nothing (a typo) stops the collect instead of silently doing nothing."""

    def __init__(self, options: CollectOptions) -> None:
        self.tasks, self.models = options.tasks, options.models
        self.seen_tasks: set[str] = set()
        self.seen_models: set[str] = set()
        self.selected = 0

    def selects(self, task: str, models: set[str]) -> bool:
        self.seen_tasks.add(task)
        self.seen_models.update(models)
        task_ok = not self.tasks or task in self.tasks
        model_ok = not self.models or bool(models.intersection(self.models))
        self.selected += task_ok and model_ok
        return task_ok and model_ok

    def check(self) -> None:
        unmatched = {
            field: [value for value in values if value not in seen]
            for field, values, seen in (
                ("tasks", self.tasks, self.seen_tasks),
                ("models", self.models, self.seen_models),
            )
        }
        unmatched = {field: values for field, values in unmatched.items() if values}
        if not unmatched and not self.selected and (self.tasks or self.models):
            unmatched = {
                field: values
                for field, values in (("tasks", self.tasks), ("models", self.models))
                if values
            }
        if unmatched:
            seen = {"tasks": self.seen_tasks, "models": self.seen_models}
            raise NoRunSelectedError(
                unmatched, known={field: sorted(seen[field]) for field in unmatched}
            )


def _model_path(run: RunDirectory) -> str:
    """For a run whose run_meta.json is unreadable, the directory names stand in for it, so a
    filtered collect still reports the broken runs that the filter would have taken."""
    return run.relative.partition("/")[2]


def _refuse_collisions(
    headers: list[RunHeader | CachedRun], report: CollectReport
) -> list[RunHeader | CachedRun]:
    """Two runs that map to one bundle id are both refused: neither may overwrite the other."""
    by_id: dict[BundleId, list[RunHeader | CachedRun]] = defaultdict(list)
    for header in headers:
        by_id[header.bundle_id].append(header)
    kept: list[RunHeader | CachedRun] = []
    for bundle, claimants in by_id.items():
        if len(claimants) == 1:
            kept.append(claimants[0])
            continue
        directories = [str(header.run.path) for header in claimants]
        for header in claimants:
            others = ", ".join(path for path in directories if path != str(header.run.path))
            report.refused.append(
                RefusedInput(
                    path=str(header.run.path),
                    error=f"{header.run.path}: maps to the same bundle {bundle} as {others}; "
                    "neither was bundled (remove or move one of them)",
                )
            )
    return kept


def _collect_inputs(
    options: CollectOptions, expected_rows: int | None, row_count_note: str | None
) -> dict[str, object]:
    """What shaped a run's bundle besides its files (the bundler version is the cache's)."""
    return {
        "submitter": options.submitter_json,
        "expected_rows": expected_rows,
        "row_count_note": row_count_note,
        "allow_partial": options.allow_partial,
        "level": options.level,
    }


def _inputs_match(
    cached: CachedRun, options: CollectOptions, row_counts: RowCountLookup | None
) -> bool:
    """Whether the options would shape the run's bundle as they did (a row count is asked
    again, as for a run that is read)."""
    from pydantic import ValidationError

    from bundler.local.schema import StaticsIdentity

    expected = options.expected_rows.get(cached.task)
    note = None
    if expected is None and row_counts is not None:
        try:
            identity = StaticsIdentity.model_validate(cached.entry["statics"])
        except (KeyError, ValidationError):
            return False
        expected, note = row_counts.rows(identity)
    return bool(cached.entry.get("inputs") == _collect_inputs(options, expected, note))


def _reported(cached: CachedRun, bundle: CachedBundle) -> CollectedBundle:
    """The report of a run skipped as unchanged: what reading it would have reported."""
    return CollectedBundle(
        bundle_id=str(cached.bundle_id),
        run_directory=str(cached.run.path),
        archive=bundle.archive,
        sidecar=bundle.sidecar,
        outcome="unchanged",
        sha256=bundle.sha256,
        size=bundle.size,
        coverage=bundle.coverage,
        predictions=bundle.predictions,
        warnings=bundle.warnings,
    )


@dataclass(frozen=True)
class _Work:
    """What every run's bundling shares."""

    bundles_dir: Path
    options: CollectOptions
    row_counts: RowCountLookup | None
    progress: ProgressSink
    cache: CollectCache


@dataclass
class _Bundled:
    """What bundling some of the runs gave, by the run's place in collect's list: plain values,
    so that a forked child can hand its half back (with the stat cache entries it recorded)."""

    slots: dict[int, CollectedBundle] = field(default_factory=dict)
    refused: list[RefusedInput] = field(default_factory=list)
    recorded: dict[str, Any] = field(default_factory=dict)


FORK_WEIGHT = 4_000
"""The work, in predictions (see RUN_WEIGHT), from which half of it goes to a forked child
(`_bundle_all`): a child starts in a few ms, where each prediction costs about 0.1 ms."""

RUN_WEIGHT = 40
"""A run's own cost in predictions besides its prediction files: its folder, two new files
and their durable commit, the manifest and the sidecar (about 4 ms on the machine measured)."""


def _bundle_all(items: list[tuple[int, RunHeader | CachedRun]], work: _Work) -> _Bundled:
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

    def in_child(watch: Watch) -> _Bundled:
        work.cache.keep_apart()
        bundled = _bundle_runs(theirs, replace(work, progress=NoProgress()), watch)
        bundled.recorded = work.cache.kept_apart()
        return bundled

    with ahead_in_child(in_child, lambda: _bundle_runs(theirs, work, None)) as later:
        bundled = _bundle_runs(mine, work, None)
        rest = later()
    work.cache.adopt(rest.recorded)
    bundled.slots.update(rest.slots)
    bundled.refused.extend(rest.refused)
    return bundled


def _bundle_runs(
    items: list[tuple[int, RunHeader | CachedRun]], work: _Work, watch: Watch | None
) -> _Bundled:
    """Bundle the runs of `items` in this process, with compressors of its own (made after a
    fork: a multi-threaded compressor's workers do not survive one)."""
    from bundler.local.archive import Compressors
    from bundler.local.collectcache import CachedRun
    from bundler.local.fileio import DurableBatch
    from bundler.local.runs import read_header

    bundled = _Bundled()
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
    work: _Work,
    compressors: Compressors,
    batch: DurableBatch,
    bundled: _Bundled,
    number: int,
) -> None:
    """Validate one run, compressing its body as it goes, and write its bundle into
    `bundled.slots[number]` (a new or replaced bundle is committed with the batch,
    `DurableBatch`; an unchanged one is left as it is), or record its refusal."""
    from bundler.local.archive import BodyWriter
    from bundler.local.collectcache import CachedBundle
    from bundler.local.runs import validate_run

    options, progress = work.options, work.progress
    statics = header.meta.statics
    expected = options.expected_rows.get(statics.task_name)
    note = None
    if expected is None and work.row_counts is not None:
        expected, note = work.row_counts.rows(statics)
    inputs = _collect_inputs(options, expected, note)

    def refuse(error: BundlerError) -> None:
        # Every refusal line names a path: the input's, or the file that could not be written.
        named = isinstance(error, InputError) or (
            isinstance(error, WriteError) and error.path is not None
        )
        shown = str(error) if named else f"{header.run.path}: {error}"
        refused = RefusedInput(path=str(header.run.path), error=shown, remedy=error.remedy)
        bundled.refused.append(refused)

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
    try:
        _write_bundle(run, body, work.bundles_dir, options, batch, done)
    except BundlerError as error:
        refuse(error)
    finally:
        body.close()


@contextmanager
def _no_new_empty_folders(bundles_dir: Path) -> Iterator[None]:
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
    from bundler.local.claim import claim_for
    from bundler.local.manifest import CollectInputs

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
    from bundler.local.archive import write_archive
    from bundler.local.claim import sidecar_bytes, sidecar_for, signature_beside
    from bundler.local.fileio import StagedFile, sha256_file, write_error
    from bundler.local.statcache import sha256_bytes

    claim = _claim_of(run, options)
    archive_path = run.header.bundle_id.local_archive(bundles_dir)
    sidecar_path = run.header.bundle_id.local_sidecar(bundles_dir)
    kept = _kept(run, claim, archive_path, sidecar_path, options)
    if kept is not None:
        done(kept, "", None)
        return
    previous = sha256_file(archive_path)[0] if os.path.isfile(archive_path) else None
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
    """The existing bundle, reported as kept, when the new one would claim less and --replace
    was not given (bundler.local.downgrade); None when the new one may be written."""
    from bundler.local.downgrade import downgrade, existing_claim

    if options.replace or not os.path.isfile(archive_path):
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
    from bundler.local.fileio import read_bounded

    try:
        return read_bounded(path, len(data)) == data
    except InputError:
        return False
