"""`bundler status`: where a submitter's pull requests stand (bundler.hub.publish.status), and
what to do next, in the command line's words."""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import shown, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import DebugOption, JsonOption, RepoOption, TokenOption
from bundler.cli.render import finish, render_checks
from bundler.cli.tokens import secrets_of, token_to_send

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.publish.status import NextStep, PullRequestStatus, StatusReport

NEXT_STEPS: dict[NextStep, str] = {
    "merged": "merged: its bundles are on the branch; nothing more to do",
    "closed": "closed without being merged: upload again with --create-pr to propose the "
    "bundles anew",
    "wait-for-review": "wait for a maintainer's review of its present head "
    "(`bundler review --comment` posts one)",
    "wait-for-merge": "reviewed clean: wait for a maintainer to merge it",
    "decide": "only warnings: a maintainer decides whether to accept them (`bundler review "
    "--merge --accept CHECK`), or fix them and upload again with --create-pr",
    "fix": "fix what failed and upload again with --create-pr: the new copies go to this pull "
    "request, and review judges them anew",
}
"""What comes next (bundler.hub.publish.status.NextStep), in the command line's words."""
VERDICT_STYLE = {"clean": "green", "warned": "yellow", "failed": "bold red", "not-reviewed": "dim"}


def render_status(report: StatusReport, console: Console) -> None:
    if not report.pull_requests:
        whose = f" of {shown(report.user)}" if report.user else ""
        console.print(f"no open bundler pull request{whose} on {shown(report.repo_id)}")
        return
    for pr in report.pull_requests:
        render_pull_request(pr, console)


def render_pull_request(pr: PullRequestStatus, console: Console) -> None:
    console.print(
        f"PR #{pr.num} '{shown(pr.title)}' by {shown(pr.author)} ({pr.status}, against "
        f"{shown(pr.base_branch)}, head {pr.head[:12]}): {shown(pr.url)}"
    )
    review = pr.review
    if review is None:
        console.print("  review: none posted yet")
    else:
        verdict = "clean" if review.clean else "needs a maintainer"
        when = review.posted_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        of = "its present head" if review.current else f"an older head, {review.head[:12]}"
        console.print(f"  review: {verdict}, by {shown(review.reviewer)} at {when}, of {of}")
        render_checks([c for c in review.checks if c.status != "passed"], console, "    ")
    for aside in pr.set_aside:
        console.print(
            f"  [yellow]set aside[/] a review-shaped comment by {shown(aside.author)}: that "
            "account has no write access to the repository, so it is not the review"
        )
    for bundle in pr.bundles:
        what = ", ".join(
            part
            for part in (
                bundle.verb,
                bundle.coverage,
                f"{bundle.predictions} predictions" if bundle.predictions is not None else None,
            )
            if part
        )
        style = VERDICT_STYLE[bundle.verdict]
        detail = f" ({what})" if what else ""
        console.print(f"  {shown(bundle.bundle_id)}{detail}: [{style}]{bundle.verdict}[/]")
        render_checks([c for c in bundle.checks if c.status != "passed"], console, "    ")
    console.print(f"  next: {shown(NEXT_STEPS[pr.next_step])}")


def status_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    pr: Annotated[
        int | None,
        typer.Option(
            "--pr",
            min=1,
            metavar="N",
            help="Only this pull request, whoever opened it (no token needed for a public "
            "repository); default: each open one the token's user opened with the bundler.",
        ),
    ] = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show where your pull requests stand: each bundle they propose, the latest review posted
    on them (`bundler review --comment`) with each check's verdict, and what to do next. Only a
    review posted by an account with write access to the repository counts; a review-shaped
    comment by anyone else is named and set aside. A review of an older head says nothing of
    what was uploaded since. Exit 0 when nothing is yours to do (waiting for a review or a
    merge, merged), 1 when a review failed something you must fix, 2 for a problem to fix
    first (no token to say whose pull requests, no such pull request)."""
    from bundler.hub.client.session import HubSession
    from bundler.hub.publish.status import pull_request_status

    console = stderr_console()

    def action() -> int:
        session = HubSession(repo, token=token_to_send(token))
        report = pull_request_status(session, pr)
        return finish(report, render_status, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )
