"""The `sync` command: collect, then upload, in one unattended run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bundler.cli.console import stderr_console
from bundler.cli.errors import run_command
from bundler.cli.hub_commands import upload_options
from bundler.cli.local_commands import collect_options
from bundler.cli.options import (
    BundlesDirOption,
    ConfigOption,
    CreatePrOption,
    DebugOption,
    ExpectOption,
    FullOption,
    JsonOption,
    LevelOption,
    MaxWaitOption,
    MessageOption,
    ModelOption,
    OutputRootArgument,
    ReplaceOption,
    RepoOption,
    ResolveRowsOption,
    RevisionOption,
    SignKeyOption,
    SubmitterAffiliationOption,
    SubmitterContactOption,
    SubmitterNameOption,
    TaskOption,
    TokenOption,
    WaitOption,
)
from bundler.cli.render import finish, progress_on
from bundler.cli.tokens import secrets_of
from bundler.core.errors import BundlerError


def sync_command(
    output_root: OutputRootArgument = Path("output"),
    bundles_dir: BundlesDirOption = Path("bundles"),
    repo: RepoOption = ...,  # type: ignore[assignment]
    task: TaskOption = None,
    model: ModelOption = None,
    expect: ExpectOption = None,
    resolve_rows: ResolveRowsOption = False,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Bundle partial or gapped runs, marked partial, and publish them.",
        ),
    ] = False,
    submitter_name: SubmitterNameOption = None,
    submitter_contact: SubmitterContactOption = None,
    submitter_affiliation: SubmitterAffiliationOption = None,
    level: LevelOption = 3,
    revision: RevisionOption = "main",
    create_pr: CreatePrOption = False,
    token: TokenOption = None,
    replace: ReplaceOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Collect as usual, then only show the upload plan; change nothing on the Hub.",
        ),
    ] = False,
    message: MessageOption = None,
    sign_key: SignKeyOption = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            metavar="FILE",
            help="Also write the JSON report (with start and end times, counts, every "
            "bundle's outcome and the commits made) to FILE, atomically, whatever happens.",
        ),
    ] = None,
    wait: WaitOption = 0,
    full: FullOption = False,
    max_wait: MaxWaitOption = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Collect the runs under OUTPUT_ROOT into BUNDLES_DIR, then publish the bundles to a
    dataset repository: `collect` then `upload` in one unattended command.

    Refused runs do not stop the upload of the good bundles. Exit 0 when everything is
    published or already there, 1 when a person must look (refused runs or bundles, failed
    checks, conflicts), 2 for unusable input, usage or credentials, 75 for a temporary failure
    (the Hub unavailable or rate limiting, or another run using BUNDLES_DIR): retry later.
    """
    from bundler.cli.error_words import sync_in_words
    from bundler.cli.render import render_sync
    from bundler.sync import SyncOptions, SyncReport, keep_report, sync

    console = stderr_console()

    def action() -> int:
        try:
            options = sync_options()
        except BundlerError as error:  # unusable options: the report file still says so
            if report is not None:
                unusable = SyncReport.stopped_before_start(
                    output_root, bundles_dir, repo, revision, dry_run, error
                )
                keep_report(sync_in_words(unusable), report)
            raise
        with progress_on(console) as progress:
            result = sync(output_root, bundles_dir, options, progress)
        # The report's two forms are compared only when there is a report file to mend: each
        # dump walks every bundle, some milliseconds a thousand (tests/benchmark_nightly.py).
        in_library_words = result.model_dump(mode="json") if report else None
        in_words = sync_in_words(result)
        if report and in_words.model_dump(mode="json") != in_library_words:
            keep_report(result, report)  # the file says what --json says, in these words
        return finish(result, render_sync, console, json_output)

    def sync_options() -> SyncOptions:
        return SyncOptions(
            collect=collect_options(
                task=task,
                model=model,
                submitter=(submitter_name, submitter_contact, submitter_affiliation),
                expect=expect,
                allow_partial=allow_partial,
                level=level,
                wait=wait,
                full=full,
            ),
            resolve_rows=resolve_rows,
            upload=upload_options(
                repo=repo,
                revision=revision,
                create_pr=create_pr,
                replace=replace,
                allow_partial=allow_partial,
                dry_run=dry_run,
                message=message,
                token=token,
                wait=wait,
                max_wait=max_wait,
            ),
            lock_wait=wait,
            report_path=report,
            sign_key=sign_key,
        )

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )
