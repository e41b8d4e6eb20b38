"""The collect pipeline: discover runs, select those to bundle, and write one bundle per run.

Each run succeeds or is refused on its own: a bad run is reported with a one-line reason and
never stops the valid ones, and nothing partial is left for it in the bundles directory. The
stages, in order: bundler.local.discover (which run directories there are),
bundler.local.selection (which of them to read, through the stat cache),
bundler.local.bundling (validate and write each); the values they share are
bundler.local.collectreport's.

The stages that read and write runs are imported in the function that runs them: a collect
that finds nothing to bundle then starts about as fast as a bare typer command
(tests/benchmark_collect.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.core.errors import BundlesLockedError, UsageError
from bundler.core.progress import NoProgress, ProgressSink
from bundler.local.collectreport import (
    CollectedBundle,
    CollectOptions,
    CollectOutcome,
    CollectReport,
    RefusedInput,
    RowCountLookup,
)
from bundler.local.discover import Discovery, Skipped, discover

if TYPE_CHECKING:
    from bundler.local.collectcache import CollectCache

__all__ = [
    "CollectOptions",
    "CollectOutcome",
    "CollectReport",
    "CollectedBundle",
    "RefusedInput",
    "RowCountLookup",
    "collect",
]


def collect(
    output_root: Path,
    bundles_dir: Path,
    options: CollectOptions | None = None,
    progress: ProgressSink | None = None,
    row_counts: RowCountLookup | None = None,
    *,
    discovered: Callable[[], Discovery] | None = None,
) -> CollectReport:
    """Bundle every run under `output_root` into `bundles_dir`; see CollectReport for what was
    written, refused and skipped. `row_counts` gives the row count of a task `expected_rows`
    does not name (`--resolve-rows`). Many runs to bundle may be bundled half in a forked child
    where the console script allows it (bundler.local.bundling.bundle_all). Raises UsageError
    when the output root cannot be used, and BundlesLockedError when another run holds
    `bundles_dir` for longer than `options.lock_wait` seconds and no input was refused. When
    some were, the report says so instead (`error`, and the runs not bundled under `skipped`):
    a retry would not make a refusal go away, so it must not be hidden behind one.
    `discovered` gives the runs when they are being found ahead (bundler.local.discoverahead:
    sync does so), in place of `discover(output_root)`, which it raises as; the stat cache
    then loads before they are asked for, while they are found."""
    options = options or CollectOptions()
    progress = progress or NoProgress()
    if bundles_dir.exists() and not bundles_dir.is_dir():
        raise UsageError(f"{bundles_dir}: exists and is not a directory")
    loaded = leftovers = None
    if discovered is not None:  # what needs no run is done while they are found
        from bundler.local.fileio import remove_leftovers

        loaded, leftovers = _stat_cache(bundles_dir, options), remove_leftovers(bundles_dir)
    caches: list[CollectCache] = []

    def cached(directory: str) -> bool:
        # The cache is loaded for the first folder discovery finds: not for an empty root.
        if not caches:
            caches.append(_stat_cache(bundles_dir, options))
        return caches[0].holds(directory)

    # A run the cache does not hold is not stat'ed file by file as it is found: its listing is
    # taken as it is read (bundler.local.discover.ListingParts).
    found = discover(output_root, listed=cached) if discovered is None else discovered()
    report = CollectReport(
        output_root=str(output_root), bundles_dir=str(bundles_dir), skipped=list(found.skipped)
    )
    if leftovers is not None:
        report.removed_temporaries = [str(path) for path in leftovers]
    if not found.runs and not found.refused:
        report.warnings.append(_nothing_to_do(output_root))
        return report  # an output root with no run yet: nothing to do, not unusable input
    report.refused.extend(
        RefusedInput(path=item.path, error=f"{item.path}: {item.reason}") for item in found.refused
    )
    from bundler.local.bundling import Work, bundle_all, no_new_empty_folders
    from bundler.local.collectcache import CachedRun
    from bundler.local.fileio import remove_leftovers
    from bundler.local.lock import bundles_lock
    from bundler.local.runs import RunHeader
    from bundler.local.selection import reported_unchanged, select_runs

    cache = loaded or (caches[0] if caches else _stat_cache(bundles_dir, options))
    runs = select_runs(found, options, row_counts, cache, report)
    if leftovers is None:
        report.removed_temporaries = [str(path) for path in remove_leftovers(bundles_dir)]
    if not runs:
        return report  # nothing to write: no lock taken, nothing created
    slots: dict[int, CollectedBundle] = {}
    try:
        with bundles_lock(bundles_dir, operation="collect", wait=options.lock_wait):
            to_bundle: list[tuple[int, RunHeader | CachedRun]] = []
            for number, item in enumerate(runs):
                if isinstance(item, CachedRun) and (unchanged := cache.still_bundled(item)):
                    slots[number] = reported_unchanged(item, unchanged)
                else:  # new, or its bundle changed since: the run is read
                    to_bundle.append((number, item))
            work = Work(bundles_dir, options, row_counts, progress, cache)
            with no_new_empty_folders(bundles_dir):
                bundled = bundle_all(to_bundle, work)
            slots.update(bundled.slots)
            report.refused.extend(bundled.refused)
            report.bundles = [slots[number] for number in sorted(slots)]
            cache.save()
    except BundlesLockedError as error:  # from the lock: bundling reports its own errors
        if not report.refused:
            raise  # the lock is the whole story: its one line and exit 75, as for upload
        report.say(error)
        report.skipped.extend(
            Skipped(path=str(header.run.path), reason=f"not bundled: {error}") for header in runs
        )
    return report


def _stat_cache(bundles_dir: Path, options: CollectOptions) -> CollectCache:
    """The folder's collect cache, loaded (bundler.local.collectcache)."""
    from bundler.local.collectcache import CollectCache

    return CollectCache(bundles_dir, full=options.full)


def _nothing_to_do(output_root: Path) -> str:
    """The warning of an output root that holds no dataset-backed run (empty, or how_do_you/
    only): a harness that has not run a statics task yet, not a mistake."""
    return f"{output_root}: no dataset-backed run under <task>_predictions/ yet; nothing to do"
