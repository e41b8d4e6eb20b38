"""The collect pipeline: discover runs, validate them, and write one bundle per run.

Each run succeeds or is refused on its own: a bad run is reported with a one-line reason and
never stops the valid ones, and nothing partial is left for it in the bundles directory.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from bundler.archive import DEFAULT_LEVEL, BodyWriter, write_archive
from bundler.discover import RunDirectory, Skipped, discover
from bundler.errors import BundlerError, InputError, UsageError
from bundler.fileio import atomic_output, atomic_write_bytes, sha256_file
from bundler.layout import BundleId
from bundler.lock import bundles_lock
from bundler.manifest import ArchiveInfo, BundleClaim, Sidecar, Submitter
from bundler.progress import NoProgress, ProgressSink
from bundler.runs import RunHeader, ValidatedRun, read_header, validate_run
from bundler.version import bundler_version

if TYPE_CHECKING:
    from bundler.rowcount import RowCountResolver


class CollectOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    tasks: list[str] = Field(default_factory=list, description="keep only these task names")
    models: list[str] = Field(
        default_factory=list, description="keep only runs whose player_name or model_name is one"
    )
    submitter: Submitter = Field(default_factory=Submitter)
    expected_rows: dict[str, int] = Field(default_factory=dict)
    allow_partial: bool = False
    resolve_rows: bool = Field(
        default=False, description="look up each pinned dataset's row count on the Hub"
    )
    token: SecretStr | None = Field(default=None, description="Hub token for --resolve-rows")
    level: int = Field(default=DEFAULT_LEVEL, ge=1, le=22)
    threads: int | None = Field(default=None, ge=1)
    lock_wait: float = Field(
        default=0, ge=0, description="seconds to wait for another run to release the folder"
    )


BundleStatus = Literal["written", "unchanged", "replaced"]


class CollectedBundle(BaseModel):
    bundle_id: str
    run_directory: str
    archive: str
    sidecar: str
    status: BundleStatus
    sha256: str
    size: int
    coverage: str
    predictions: int
    warnings: list[str]


class RefusedInput(BaseModel):
    path: str
    error: str


class CollectReport(BaseModel):
    output_root: str
    bundles_dir: str
    bundles: list[CollectedBundle] = Field(default_factory=list)
    refused: list[RefusedInput] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.refused else 0


def parse_expectations(pairs: list[str]) -> dict[str, int]:
    """`TASK=ROWS` pairs from the command line into a mapping."""
    expected: dict[str, int] = {}
    for pair in pairs:
        task, separator, rows = pair.partition("=")
        if not separator or not task or not rows.isdigit() or int(rows) < 1:
            raise UsageError(f"--expect {pair!r}: expected TASK=ROWS with ROWS a positive integer")
        if expected.get(task, int(rows)) != int(rows):
            raise UsageError(f"--expect gives two row counts for task {task!r}")
        expected[task] = int(rows)
    return expected


def collect(
    output_root: Path,
    bundles_dir: Path,
    options: CollectOptions | None = None,
    progress: ProgressSink | None = None,
) -> CollectReport:
    """Bundle every run under `output_root` into `bundles_dir`; see CollectReport for what was
    written, refused and skipped. Raises UsageError when the output root cannot be used, and
    BundlesLockedError when another run holds `bundles_dir` for longer than
    `options.lock_wait` seconds."""
    options = options or CollectOptions()
    progress = progress or NoProgress()
    found = discover(output_root)
    report = CollectReport(
        output_root=str(output_root), bundles_dir=str(bundles_dir), skipped=list(found.skipped)
    )
    report.refused.extend(RefusedInput(path=item.path, error=item.reason) for item in found.refused)
    if not found.runs and not found.refused:
        raise UsageError(
            f"{output_root}: no run directories found under <task>_predictions/",
            hint="point collect at the harness's output root",
        )
    headers: list[RunHeader] = []
    for run in found.runs:
        try:
            header = read_header(run)
        except InputError as error:
            if _selected_by_directory(run, options):
                report.refused.append(RefusedInput(path=str(run.path), error=str(error)))
            continue
        if _selected(header, options):
            headers.append(header)
        else:
            report.skipped.append(Skipped(path=str(run.path), reason="not selected by filters"))
    resolver = None
    if options.resolve_rows:
        from bundler.rowcount import RowCountResolver  # the Hub client only when asked for

        token = options.token.get_secret_value() if options.token else None
        resolver = RowCountResolver(token)
    runs = _refuse_collisions(headers, report)
    if not runs:
        return report  # nothing to write: no lock taken, nothing created
    with bundles_lock(bundles_dir, operation="collect", wait=options.lock_wait):
        for header in runs:
            _bundle_one(header, bundles_dir, options, resolver, progress, report)
    return report


def _selected(header: RunHeader, options: CollectOptions) -> bool:
    meta = header.meta
    task_ok = not options.tasks or meta.statics.task_name in options.tasks
    names = {meta.model_name, meta.capabilities.player_name}
    model_ok = not options.models or bool(names.intersection(options.models))
    return task_ok and model_ok


def _selected_by_directory(run: RunDirectory, options: CollectOptions) -> bool:
    """For a run whose run_meta.json is unreadable, the directory names stand in for it, so a
    filtered collect still reports the broken runs that the filter would have taken."""
    model_path = run.relative.partition("/")[2]
    task_ok = not options.tasks or run.task_dir_name in options.tasks
    model_ok = not options.models or model_path in options.models
    return task_ok and model_ok


def _refuse_collisions(headers: list[RunHeader], report: CollectReport) -> list[RunHeader]:
    """Two runs that map to one bundle id are both refused: neither may overwrite the other."""
    by_id: dict[BundleId, list[RunHeader]] = defaultdict(list)
    for header in headers:
        by_id[header.bundle_id].append(header)
    kept: list[RunHeader] = []
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


def _bundle_one(
    header: RunHeader,
    bundles_dir: Path,
    options: CollectOptions,
    resolver: RowCountResolver | None,
    progress: ProgressSink,
    report: CollectReport,
) -> None:
    statics = header.meta.statics
    expected = options.expected_rows.get(statics.task_name)
    notes: list[str] = []
    if expected is None and resolver is not None:
        expected, note = resolver.rows(statics)
        notes += [note] if note else []
    try:
        progress.begin(f"bundling {header.bundle_id}", header.run.predictions)
        with BodyWriter(
            header.meta.run_timestamp, level=options.level, threads=options.threads
        ) as body:
            run = validate_run(
                header,
                expected_rows=expected,
                allow_partial=options.allow_partial,
                on_prediction=progress.advance,
                on_file=body.add,
            )
            run.warnings[:0] = notes
            report.bundles.append(_write_bundle(run, body, bundles_dir, options))
    except BundlerError as error:
        report.refused.append(RefusedInput(path=str(header.run.path), error=str(error)))


def claim_for(run: ValidatedRun, submitter: Submitter) -> BundleClaim:
    header = run.header
    meta = header.meta
    return BundleClaim(
        bundle_id=str(header.bundle_id),
        target=meta.statics.target,
        statics=meta.statics,
        model_name=meta.model_name,
        run_date=meta.run_date,
        player_name=meta.capabilities.player_name,
        player_type=meta.capabilities.player_type,
        capability_fingerprint=header.fingerprint,
        provenance=meta.provenance.model_dump(),
        submitter=submitter,
        predictions=run.summary,
        coverage=run.coverage,
        warnings=run.warnings,
        bundler_version=bundler_version(),
    )


def _write_bundle(
    run: ValidatedRun, body: BodyWriter, bundles_dir: Path, options: CollectOptions
) -> CollectedBundle:
    claim = claim_for(run, options.submitter)
    archive_path = run.header.bundle_id.local_archive(bundles_dir)
    sidecar_path = run.header.bundle_id.local_sidecar(bundles_dir)
    previous = sha256_file(archive_path)[0] if os.path.isfile(archive_path) else None
    # The sidecar is renamed into place just before the archive, and only once the archive is
    # fully written, so a failure at any point leaves the previous pair (or nothing) behind.
    with atomic_output(archive_path) as out:
        sha256, size = write_archive(
            claim, run.files(), body, out, level=options.level, threads=options.threads
        )
        sidecar = Sidecar(
            **claim.model_dump(),
            archive=ArchiveInfo(name=archive_path.name, size=size, sha256=sha256),
            files_count=len(run.predictions) + 2,
        )
        atomic_write_bytes(sidecar_path, sidecar_bytes(sidecar))
    status: BundleStatus = (
        "written" if previous is None else "unchanged" if previous == sha256 else "replaced"
    )
    return CollectedBundle(
        bundle_id=claim.bundle_id,
        run_directory=str(run.header.run.path),
        archive=str(archive_path),
        sidecar=str(sidecar_path),
        status=status,
        sha256=sha256,
        size=size,
        coverage=run.coverage.status,
        predictions=run.summary.count,
        warnings=run.warnings,
    )


def sidecar_bytes(sidecar: Sidecar) -> bytes:
    return (sidecar.model_dump_json(indent=2) + "\n").encode("utf-8")
