"""The commands that talk to the Hub: upload, card, download, review."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import emit_text, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import (
    ConfigOption,
    CreatePrOption,
    DebugOption,
    DryRunOption,
    JsonOption,
    MaxWaitOption,
    MessageOption,
    ReplaceOption,
    RepoOption,
    RevisionOption,
    TokenOption,
    WaitOption,
)
from bundler.cli.render import finish, progress_on
from bundler.cli.tokens import secrets_of, token_to_send
from bundler.core.limits import MAX_EXCEPTION_RATE

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.maintain.task_define import DefineReport
    from bundler.hub.publish.upload import UploadOptions
    from bundler.hub.tasks.definitions import TaskListing


def upload_options(
    *,
    repo: str,
    revision: str,
    create_pr: bool,
    replace: bool,
    allow_partial: bool,
    dry_run: bool,
    message: str | None,
    token: str | None,
    wait: float,
    max_wait: float | None = None,
) -> UploadOptions:
    """The upload options from the command line (shared by upload and sync)."""
    from bundler.hub.publish.upload import UploadOptions

    return UploadOptions(
        repo_id=repo,
        revision=revision,
        create_pr=create_pr,
        replace=replace,
        allow_partial=allow_partial,
        dry_run=dry_run,
        message=message,
        token=token_to_send(token),
        lock_wait=wait,
        max_wait_seconds=max_wait,
    )


def upload_command(
    bundles_dir: Annotated[
        Path,
        typer.Argument(metavar="BUNDLES_DIR", help="The bundles directory written by collect."),
    ] = Path("bundles"),
    repo: RepoOption = ...,  # type: ignore[assignment]
    revision: RevisionOption = "main",
    create_pr: CreatePrOption = False,
    token: TokenOption = None,
    replace: ReplaceOption = False,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Publish partial-coverage bundles too (else they are held back, exit 0).",
        ),
    ] = False,
    dry_run: DryRunOption = False,
    message: MessageOption = None,
    wait: WaitOption = 0,
    max_wait: MaxWaitOption = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Verify the bundles and publish the new ones to a dataset repository (HF_ENDPOINT is
    honoured), regenerating its dataset card in the same commit. Bundles already there are
    skipped, a resumed run extends its bundle, other different content is a conflict unless
    --replace, and partial bundles are held back unless --allow-partial. Exit 0 when everything
    is published or already there, 1 if a bundle was refused or conflicts, 2 for a problem to fix
    first (token, access, repository, revision), 75 if the Hub stayed unavailable (retry later)."""
    from bundler.cli.error_words import upload_in_words
    from bundler.cli.render import render_upload
    from bundler.hub.publish.upload import upload

    console = stderr_console()

    def action() -> int:
        options = upload_options(
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
        )
        with progress_on(console) as progress:
            report = upload(bundles_dir, options, progress)
        return finish(upload_in_words(report), render_upload, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def card_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    revision: Annotated[
        str, typer.Option(metavar="BRANCH", help="The branch whose card to regenerate.")
    ] = "main",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say whether the card is stale; change nothing.")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="As --dry-run, and exit 1 when the tables or the card are stale (for CI).",
        ),
    ] = False,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Bring the branch's leaderboard tables and dataset card up to date with its bundles, as
    one commit naming its parent; nothing is committed when they are already true. Catches up
    after pull requests were merged in the web interface, reading only the bundles that
    changed, and upgrades a repository of layout 1 (row files under rows/ and tasks/). Needs a
    write token of an account in the organization that owns the repository (not for
    --dry-run), checked first (exit 2). Exit 1 if a bundle could not be read or verified (it is
    named and left out), or the card would be refused."""
    from bundler.cli.render import render_card
    from bundler.hub.client.session import HubSession
    from bundler.hub.maintain.card_refresh import refresh_card

    console = stderr_console()

    def action() -> int:
        session = HubSession(repo, token=token_to_send(token))
        refresh = refresh_card(session, revision, dry_run=dry_run, check=check)
        return finish(refresh, render_card, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def download_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    bundles_dir: Annotated[
        Path,
        typer.Option(
            "--output", "-o", metavar="BUNDLES_DIR", help="The local bundles directory to fill."
        ),
    ] = Path("bundles"),
    revision: Annotated[
        str,
        typer.Option(
            metavar="REVISION",
            help="A branch, tag, commit or refs/pr/N (every bundle it holds).",
        ),
    ] = "main",
    bundle: Annotated[
        list[str] | None,
        typer.Option(
            "--bundle",
            metavar="BUNDLE_ID",
            help="Only this bundle id, <player>_<fp8>/<target> (repeatable).",
        ),
    ] = None,
    pull_request: Annotated[
        int | None,
        typer.Option(
            "--pr",
            metavar="N",
            min=1,
            help="Only the bundles pull request N adds or changes, as it holds them "
            "(to review it); not with --revision.",
        ),
    ] = None,
    token: TokenOption = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Download bundles with their sidecars into the local layout and verify each one. A bundle
    that fails verification is kept apart in BUNDLES_DIR/.rejected/, never mixed with the good ones.
    Exit 1 if any bundle was rejected, not found or could not be saved, 75 if the Hub stayed
    unavailable."""
    from bundler.cli.render import render_download
    from bundler.hub.repo.download import download

    console = stderr_console()
    if pull_request is not None and revision != "main":
        raise typer.BadParameter("give --pr or --revision, not both", param_hint="--pr")

    def action() -> int:
        with progress_on(console) as progress:
            report = download(
                repo,
                bundles_dir,
                revision=revision,
                bundle_ids=bundle or None,
                pull_request=pull_request,
                token=token_to_send(token),
                progress=progress,
            )
        return finish(report, render_download, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def review_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    pr: Annotated[
        list[int] | None,
        typer.Option(
            "--pr",
            min=1,
            metavar="N",
            help="Only this pull request (repeatable); default: every open one.",
        ),
    ] = None,
    comment: Annotated[
        bool,
        typer.Option(
            "--comment",
            help="Post the report on each PR (needs a write token); an unchanged report is "
            "not posted again.",
        ),
    ] = False,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Merge each PR whose every check passed (needs a write token of an account in "
            "the organization that owns the repository), then "
            "regenerate the dataset card.",
        ),
    ] = False,
    max_exception_rate: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="RATE",
            help="Highest share of predictions that may have raised in the harness (0 to 1).",
        ),
    ] = MAX_EXCEPTION_RATE,
    max_bundles: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="A PR proposing more bundles than this fails `layout` and is judged without"
            " downloading any.",
        ),
    ] = 100,
    accept: Annotated[
        list[str] | None,
        typer.Option(
            "--accept",
            metavar="CHECK",
            help="With --merge: also merge a PR whose only findings are warnings of this check "
            "(repeatable); the report says which warnings were accepted, and by whom. A failed "
            "check can never be accepted.",
        ),
    ] = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Review pull requests: fetch and verify only the bundles each one adds or changes, classify
    them against the branch it targets (new, replacement, unchanged), and check policy (the
    task's definition, coverage, the defined dataset's row count, pin, harness tree, exception
    rate, submitter, files outside the bundles, conflicts, the Hub's diff of the PR against its
    trees). --merge commits exactly the reviewed files with the leaderboard's tables and card,
    then closes the PR. The Markdown report goes to stdout (the
    JSON with --json), a summary to stderr. Exit 0 if every PR is clean, 1 if any is not, 2
    for a problem to fix first, 75 when only temporary Hub failures stood in the way."""
    if accept and not merge:
        raise typer.BadParameter(
            "accepts warnings for a merge: give --merge too", param_hint="--accept"
        )
    from bundler.cli.error_words import review_in_words
    from bundler.cli.render import render_review
    from bundler.hub.review.round import ReviewOptions, review

    console = stderr_console()

    def action() -> int:
        options = ReviewOptions(
            repo_id=repo,
            pull_requests=pr or [],
            comment=comment,
            merge=merge,
            max_exception_rate=max_exception_rate,
            max_bundles=max_bundles,
            token=token_to_send(token),
            accept=accept or [],
        )
        with progress_on(console) as progress:
            report = review(options, progress)
        if not json_output:
            emit_text("\n---\n\n".join(pr.markdown for pr in report.pull_requests))
        return finish(review_in_words(report), render_review, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def tasks_define_command(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task's name.")],
    repo: RepoOption = ...,  # type: ignore[assignment]
    dataset: Annotated[
        str,
        typer.Option(metavar="OWNER/NAME", help="The dataset repository its results run on."),
    ] = ...,  # type: ignore[assignment]
    split: Annotated[
        str, typer.Option(metavar="SPLIT", help="The dataset split its results run on.")
    ] = ...,  # type: ignore[assignment]
    metric: Annotated[
        str,
        typer.Option(metavar="SCORER.KEY", help="The flattened metric the leaderboard ranks by."),
    ] = ...,  # type: ignore[assignment]
    direction: Annotated[
        str,
        typer.Option(metavar="higher|lower", help="Whether a higher or a lower value is better."),
    ] = "higher",
    dataset_revision: Annotated[
        list[str] | None,
        typer.Option(
            "--revision",
            metavar="SHA",
            help="A dataset commit (40 hex) accepted (repeatable; none: any revision).",
        ),
    ] = None,
    metric_kind: Annotated[
        str,
        typer.Option(
            metavar="score|proportion",
            help="proportion: the metric is a share of rows (each entry then gets a 95% Wilson "
            "interval, and ranks go by the intervals); score: any other number.",
        ),
    ] = "score",
    branch: Annotated[
        str, typer.Option(metavar="BRANCH", help="The branch whose definitions to change.")
    ] = "main",
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Define a leaderboard task in leaderboard/tasks.json (one commit naming its parent, by a
    maintainer: needs write access): the dataset and split its results must have run on, the
    metric it is ranked by and its direction, and the dataset revisions accepted. review fails
    a bundle that contradicts its task's definition, the card ranks by the defined metric, and
    upload to the branch refuses such a bundle (exit 1). A metric none of the task's bundles on
    the branch has is refused (exit 1), naming those they have; with no bundle of the task yet,
    it is committed with a warning."""
    from pydantic import ValidationError

    from bundler.core.errors import UsageError
    from bundler.hub.client.session import HubSession
    from bundler.hub.maintain.task_define import define_task
    from bundler.hub.tasks.definitions import TaskDefinition

    console = stderr_console()

    def action() -> int:
        try:
            definition = TaskDefinition(
                hf_repo_id=dataset,
                split=split,
                metric=metric,
                direction=direction,
                revisions=list(dataset_revision or []),
                metric_kind=metric_kind,
            )
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UsageError(f"{where}: {first['msg']}") from None
        session = HubSession(repo, token=token_to_send(token))
        report = define_task(session, task, definition, branch)

        return finish(report, render_define, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def tasks_list_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    branch: Annotated[
        str, typer.Option(metavar="BRANCH", help="The branch whose definitions to show.")
    ] = "main",
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List the leaderboard's task definitions (leaderboard/tasks.json): each task's dataset,
    split, ranking metric, its kind (proportion or score) and direction, and the dataset
    revisions it accepts (none: any; abbreviated in the table, in full with --json).
    Any token that can read the repository will do, or none for a public one."""
    from bundler.hub.client.session import HubSession
    from bundler.hub.tasks.definitions import list_definitions

    console = stderr_console()

    def action() -> int:
        session = HubSession(repo, token=token_to_send(token))
        return finish(list_definitions(session, branch), render_task_list, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


SHORT_SHA = 12
"""A dataset revision as the task list's table shows it, as git abbreviates a commit (--json
gives each in full)."""


def render_task_list(listing: TaskListing, console: Console) -> None:
    from rich.table import Table

    from bundler.cli.console import shown

    if not listing.tasks:
        console.print(f"no task is defined on {shown(listing.repo_id)}@{shown(listing.revision)}")
        return
    table = Table(title=f"Tasks of {shown(listing.repo_id)}@{shown(listing.revision)}")
    for column in ("task", "dataset", "split", "metric", "kind", "direction", "revisions"):
        table.add_column(column)
    for name, task in sorted(listing.tasks.items()):
        accepted = "\n".join(sha[:SHORT_SHA] for sha in task.revisions) or "any"
        cells = (name, task.hf_repo_id, task.split, task.metric, task.metric_kind, task.direction)
        table.add_row(*(shown(cell) for cell in cells), accepted)
    console.print(table)


def render_define(report: DefineReport, console: Console) -> None:
    from bundler.cli.console import shown

    for warning in [*report.warnings, *report.charts_not_drawn]:
        console.print(f"[yellow]warning[/] {shown(warning)}")
    done = f"committed {report.commit[:12]}" if report.commit else "already so defined"
    console.print(f"task {shown(report.task)}: {done}")
