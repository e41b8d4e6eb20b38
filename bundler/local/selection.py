"""Between discovery (stage 1) and reading runs in full: which runs collect bundles.

A discovered run is looked up in the stat cache first (bundler.local.collectcache): one whose
files, inputs and bundle are unchanged is reported as it was, without a file of it opened.
Every other run has its run_meta.json read (bundler.local.runs.read_header), enough to apply
the --task and --model filters and to name its bundle; two runs that would write one bundle
are both refused. Nothing is written here: bundling the selected runs is
bundler.local.bundling's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from bundler.core.errors import InputError, NoRunSelectedError
from bundler.local.collectcache import CachedBundle, CachedRun, CollectCache
from bundler.local.collectreport import (
    CollectedBundle,
    CollectOptions,
    CollectReport,
    RefusedInput,
    RowCountLookup,
)
from bundler.local.discover import Discovery, RunDirectory, Skipped
from bundler.local.runs import RunHeader, read_header

if TYPE_CHECKING:
    from bundler.local.layout import BundleId


def select_runs(
    found: Discovery,
    options: CollectOptions,
    row_counts: RowCountLookup | None,
    cache: CollectCache,
    report: CollectReport,
) -> list[RunHeader | CachedRun]:
    """The runs of `found` to bundle, each with its header read or its cache entry found
    (which `still_bundled` checks under the folder's lock). The runs not selected are added
    to `report.skipped`, the unreadable and colliding ones to `report.refused`. Raises
    NoRunSelectedError when a filter matches nothing (a typo)."""
    headers: list[RunHeader | CachedRun] = []
    matches = _FilterMatches(options)
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
    return _refuse_collisions(headers, report)


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


def _inputs_match(
    cached: CachedRun, options: CollectOptions, row_counts: RowCountLookup | None
) -> bool:
    """Whether the options would shape the run's bundle as they did (a row count is asked
    again, as for a run that is read)."""
    expected = options.expected_rows.get(cached.task)
    note = None
    if expected is None and row_counts is not None:
        # Imported here, where a row count is asked: an import statement costs each of a
        # nightly's thousands of unchanged runs a few microseconds even once it is loaded.
        from pydantic import ValidationError

        from bundler.local.schema import StaticsIdentity

        try:
            identity = StaticsIdentity.model_validate(cached.entry["statics"])
        except (KeyError, ValidationError):
            return False
        expected, note = row_counts.rows(identity)
    return bool(cached.entry.get("inputs") == options.cache_inputs(expected, note))


def reported_unchanged(cached: CachedRun, bundle: CachedBundle) -> CollectedBundle:
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
