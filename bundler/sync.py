"""`sync`: collect, then upload, in one unattended command with one report and one exit code.

It composes the two library calls and adds nothing to what they decide: collect bundles what
it can and refuses the rest, and upload publishes what the folder holds. Refused runs do not
stop the upload of the good bundles; they only make the exit code ask a person to look. The
bundles folder's lock is held from before the collect until after the upload, so no other
collect, upload or sync can slip in between them.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import ConfigDict, Field, PrivateAttr

from bundler.core import exitcodes
from bundler.core.causes import (
    BUNDLE_KEPT_KIND,
    NOT_SIGNED_KIND,
    RUNS_REFUSED_KIND,
    Cause,
    counted,
    named,
    summary,
)
from bundler.core.environment import check_hub_environment
from bundler.core.error_shape import ErrorShape
from bundler.core.errors import BundlerError, Terminated, UsageError, WriteError
from bundler.core.jsontext import valid_unicode
from bundler.core.model import Model, RemedyField
from bundler.core.progress import ProgressSink
from bundler.hub.publish.plan import Action, Outcome
from bundler.hub.publish.upload import (
    UploadOptions,
    UploadReport,
    load_hub_client,
    upload,
)
from bundler.local.collect import CollectOptions, CollectOutcome, CollectReport, collect
from bundler.local.discoverahead import discovering_ahead
from bundler.local.fileio import write_atomically
from bundler.local.layout import find_archives
from bundler.local.lock import bundles_lock
from bundler.local.verifycache import VerifyCache

if TYPE_CHECKING:
    from bundler.hub.tasks.split_size import RowCountResolver


class SyncOptions(Model):
    model_config = ConfigDict(frozen=True)

    collect: CollectOptions = Field(default_factory=CollectOptions)
    resolve_rows: bool = Field(
        default=False, description="look up each pinned dataset's row count on the Hub"
    )
    upload: UploadOptions
    lock_wait: float = Field(
        default=0, ge=0, description="seconds to wait for another run to release the folder"
    )
    report_path: Path | None = Field(
        default=None, description="also write the report here, atomically"
    )
    sign_key: Path | None = Field(
        default=None, description="sign each collected bundle with this OpenSSH key first"
    )


class SyncBundle(Model):
    """One bundle's way through the sync: what collect did with it, what upload did."""

    bundle_id: str
    collected: CollectOutcome | None = None
    """written, unchanged or replaced by this run's collect; None: it was already there."""
    action: Action | None = None
    """upload's plan for it (new, extends, replace, repair, unchanged, conflict, refused,
    held-back); None: the upload did not get as far as planning it."""
    outcome: Outcome | None = None
    """planned, published, proposed, already-there, held-back, refused or failed; None: not
    uploaded."""
    detail: str | None = None
    remedy: RemedyField = None


class SyncCounts(Model):
    runs_bundled: int = 0
    runs_refused: int = 0
    runs_skipped: int = 0
    bundles_written: int = 0
    """Bundles collect wrote or replaced (not those it found unchanged)."""
    published: int = 0
    proposed: int = 0
    """Bundles committed to the sync's pull request (--create-pr), not to the branch."""
    already_there: int = 0
    held_back: int = 0
    """Partial bundles kept back until their run completes (without --allow-partial)."""
    planned: int = 0
    refused: int = 0
    failed: int = 0
    commits: int = 0


class SyncReport(Model, ErrorShape):
    kind: Literal["sync"] = "sync"
    """What made the report, as every --json report says: the report file says it too."""
    output_root: str
    bundles_dir: str
    repo_id: str
    revision: str
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None = None
    counts: SyncCounts = Field(default_factory=SyncCounts)
    bundles: list[SyncBundle] = Field(default_factory=list)
    commits: list[str] = Field(default_factory=list)
    pull_request_url: str | None = None
    upload_skipped: str | None = None
    """Why upload did not run although collect did (nothing in the folder to publish)."""
    error: str | None = None
    """The error that stopped the sync early (lock held, Hub unavailable, bad token, a stop
    signal...); else, when it exits 1, what a person must look at: runs refused, bundles kept
    or not signed, and the upload's own `error`."""
    hint: str | None = None
    error_kind: str | None = None
    """`error`'s kind (bundler.core.errors; bundler.core.causes when no error stopped it), what a
    reader acts on rather than the words."""
    report_path_error: str | None = None
    """Why the report file (`--report`) could not be written: this report is then the only one."""
    exit_code: int = exitcodes.OK
    collect: CollectReport | None = None
    upload: UploadReport | None = None
    _error: BundlerError | None = PrivateAttr(default=None)

    def stopped_by(self, error: BundlerError) -> None:
        """Record the error that stopped the sync: its words, its kind, and the error itself,
        for a caller that words it its own way (the command line); never in the JSON."""
        self.say(error)
        self._error = error

    @property
    def stopping_error(self) -> BundlerError | None:
        """The error that stopped this sync, when it stopped on one here."""
        return self._error

    @classmethod
    def started(
        cls, output_root: Path, bundles_dir: Path, repo_id: str, revision: str, dry_run: bool
    ) -> SyncReport:
        """The report of a sync starting now."""
        return cls(
            output_root=str(output_root),
            bundles_dir=str(bundles_dir),
            repo_id=repo_id,
            revision=revision,
            dry_run=dry_run,
            started_at=_now(),
        )

    @classmethod
    def stopped_before_start(
        cls,
        output_root: Path,
        bundles_dir: Path,
        repo_id: str,
        revision: str,
        dry_run: bool,
        error: BundlerError,
    ) -> SyncReport:
        """The report of a sync whose options could not be used (a bad --expect or token)."""
        report = cls.started(output_root, bundles_dir, repo_id, revision, dry_run)
        report.finished_at = report.started_at
        report.stopped_by(error)
        report.exit_code = error.exit_code
        return report


def sync(
    output_root: Path,
    bundles_dir: Path,
    options: SyncOptions,
    progress: ProgressSink | None = None,
) -> SyncReport:
    """Collect the runs under `output_root` into `bundles_dir`, then publish the folder, each
    stage as its own command does it (bundler.core.forked says where they use a second core).

    Never raises a BundlerError: an error that stops the sync (the lock held, the Hub down,
    unusable input) is recorded in the report with its exit code, so the report, and the
    file at `options.report_path`, always say what happened. A stop signal (SIGINT, SIGTERM)
    or a bug is recorded and written too, then raised again."""
    upload_options = options.upload
    report = SyncReport.started(
        output_root,
        bundles_dir,
        upload_options.repo_id,
        upload_options.revision,
        upload_options.dry_run,
    )
    error_code = exitcodes.OK
    stopped: BaseException | None = None
    try:
        check_hub_environment(upload_options.max_wait_seconds)
        with bundles_lock(bundles_dir, operation="sync", wait=options.lock_wait):
            if options.sign_key is not None:  # cryptography loads only for a signed sync
                from bundler.local.sign import sign
                from bundler.local.signature import Signer

                Signer(options.sign_key)  # a key that cannot sign stops the sync before it writes
            verify_cache: list[VerifyCache] = []  # loaded while the runs are found, if so

            def meanwhile() -> None:
                _load_hub_client_ahead()
                verify_cache.append(VerifyCache(bundles_dir))

            with discovering_ahead(output_root, bundles_dir, meanwhile) as found:
                report.collect = collect(
                    output_root,
                    bundles_dir,
                    options.collect,
                    progress,
                    _row_counts(options),
                    discovered=lambda: found().discovery,
                )
            if options.sign_key is not None and report.collect.bundles:
                archives = [Path(bundle.archive) for bundle in report.collect.bundles]
                report.collect.signing = sign(archives, options.sign_key, progress=progress)
            if report.collect.refused and not _holds_bundles(bundles_dir):
                report.upload_skipped = "no bundle to publish: every selected run was refused"
            else:
                report.upload = upload(
                    bundles_dir,
                    options.upload,
                    progress,
                    # collect never touches it, and the folder stayed locked: the same file
                    verify_cache=verify_cache[0] if verify_cache else None,
                )
    except BundlerError as error:
        report.stopped_by(error)
        error_code = error.exit_code
    except BaseException as error:  # stopped, or a bug: said in the report, then raised
        stopped = error
        report.error, error_code = _stop_words(error)
    report.finished_at = _now()
    _summarise(report)
    report.exit_code = (
        error_code
        if stopped is not None
        else exitcodes.combine(
            report.collect.exit_code if report.collect else exitcodes.OK,
            report.upload.exit_code if report.upload else exitcodes.OK,
            error_code,
        )
    )
    if report.exit_code == exitcodes.LOOK and report.stopping_error is None:
        _say_what_happened(report)
    if options.report_path is not None:
        keep_report(report, options.report_path)
    if stopped is not None:
        raise stopped
    return report


def _load_hub_client_ahead() -> None:
    """Load the Hub client the upload needs while a child finds the runs
    (bundler.local.discoverahead). Only time is saved here: a client that fails to load (a
    variable it cannot parse as it is imported) is left to fail where it always has, in the
    upload, once collect is done, whose report then says what was collected."""
    with contextlib.suppress(Exception):
        load_hub_client()


def _say_what_happened(report: SyncReport) -> None:
    """The report's `error`, `hint` and `error_kind` for a sync that exits 1: what its collect
    refused or kept, then what its upload said (bundler.core.causes)."""
    causes = _collect_causes(report.collect) if report.collect is not None else []
    if not causes:
        return  # the upload said it (bundler.hub.publish.outcome)
    if report.error is not None:
        causes.append(Cause(report.error, report.hint or "", report.error_kind or "error"))
    said = summary(causes)
    if said is not None:
        report.say(said)


def _collect_causes(collected: CollectReport) -> list[Cause]:
    causes = []
    if refused := collected.refused:
        what = f"{counted(len(refused), 'run')} refused, the first {refused[0].error}"
        hint = "fix what each refused run's error names; the run is bundled by the next sync"
        causes.append(Cause(what, hint, RUNS_REFUSED_KIND))
    if kept := [b.bundle_id for b in collected.bundles if b.outcome == "kept"]:
        what = f"{counted(len(kept), 'bundle')} kept rather than replaced: {named(kept)}"
        hint = "each bundle's `kept` says what the new one would have lost, and how to keep it"
        causes.append(Cause(what, hint, BUNDLE_KEPT_KIND))
    signing = collected.signing.bundles if collected.signing is not None else []
    if unsigned := [b for b in signing if b.outcome == "refused"]:
        what = f"{counted(len(unsigned), 'bundle')} not signed, the first {unsigned[0].detail}"
        hint = "fix what it names, then sign the bundles again"
        causes.append(Cause(what, hint, NOT_SIGNED_KIND))
    return causes


def _stop_words(error: BaseException) -> tuple[str, int]:
    """What ended a sync that raised other than a BundlerError, and its exit code."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted by SIGINT; nothing partial was left behind", exitcodes.INTERRUPTED
    if isinstance(error, Terminated):
        return "interrupted by SIGTERM; nothing partial was left behind", exitcodes.TERMINATED
    return f"internal error: {type(error).__name__}: {error}", exitcodes.UNUSABLE


def keep_report(report: SyncReport, path: Path) -> None:
    """Write the report file; when it cannot be written, say so in the report itself (which
    then goes only to stdout) and make the exit code ask for the --report path to be fixed."""
    try:
        write_report(report, path)
    except WriteError as error:
        report.report_path_error = str(error)
        if report.exit_code in (exitcodes.OK, exitcodes.LOOK, exitcodes.TEMPORARY):
            report.exit_code = exitcodes.UNUSABLE  # what 2 > 1 > 75 makes of any of them


def write_report(report: SyncReport, path: Path) -> None:
    """The report as --json prints it, written atomically: a reader (a CI artifact step)
    sees the previous report or this one, never half of one. ASCII, like --json: a name with
    bidi controls or zero-width characters reads as its \\u escapes, not reordered."""
    data = valid_unicode(report.model_dump(mode="json"))
    write_atomically(path, (json.dumps(data, indent=2, ensure_ascii=True) + "\n").encode())


def _holds_bundles(bundles_dir: Path) -> bool:
    try:
        return bool(find_archives([bundles_dir]))
    except UsageError:
        return False


def _summarise(report: SyncReport) -> None:
    """Each bundle's outcome across both steps, the counts, and the commits made."""
    bundles: dict[str, dict[str, object]] = {}  # each made a SyncBundle once, at the end
    counts = report.counts
    if report.collect is not None:
        counts.runs_bundled = len(report.collect.bundles)
        counts.runs_refused = len(report.collect.refused)
        counts.runs_skipped = len(report.collect.skipped)
        for collected in report.collect.bundles:
            bundles[collected.bundle_id] = {"collected": collected.outcome}
            counts.bundles_written += collected.outcome != "unchanged"
    if report.upload is not None:
        for plan in report.upload.bundles:
            bundles.setdefault(plan.bundle_id, {}).update(
                action=plan.action, outcome=plan.outcome, detail=plan.detail, remedy=plan.remedy
            )
        report.commits = list(report.upload.commits)
        report.pull_request_url = report.upload.pull_request_url
        if report.upload.error and report.error is None:
            report.say(report.upload)
    report.bundles = [
        SyncBundle.model_validate({"bundle_id": bundle_id, **fields})
        for bundle_id, fields in sorted(bundles.items())
    ]
    outcomes = [bundle.outcome for bundle in report.bundles]
    counts.published = outcomes.count("published")
    counts.proposed = outcomes.count("proposed")
    counts.already_there = outcomes.count("already-there")
    counts.held_back = outcomes.count("held-back")
    counts.planned = outcomes.count("planned")
    counts.refused = outcomes.count("refused")
    counts.failed = outcomes.count("failed")
    counts.commits = len(report.commits)


def _now() -> datetime:
    return datetime.now(UTC)


def _row_counts(options: SyncOptions) -> RowCountResolver | None:
    """The Hub's row counts for `--resolve-rows`, asked with the upload's token."""
    if not options.resolve_rows:
        return None
    from bundler.hub.tasks.split_size import RowCountResolver  # the Hub client only when asked for

    token = options.upload.token
    return RowCountResolver(token.get_secret_value() if token else None)
