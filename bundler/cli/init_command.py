"""`bundler init --repo OWNER/NAME`: start a leaderboard (bundler.hub.maintain.board_start), and
say each role's next command."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import shown, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import DebugOption, JsonOption, RepoOption, TokenOption
from bundler.cli.render import finish
from bundler.cli.tokens import secrets_of, token_to_send

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.maintain.board_start import StartReport


def next_commands(repo_id: str) -> dict[str, str]:
    """Each role's next command on a new leaderboard, in the order they come."""
    return {
        "maintainer": f"bundler tasks define TASK --repo {repo_id} --dataset OWNER/DATASET "
        "--split test --metric METRIC",
        "nightly job": f"bundler template nightly-sync -o .github/workflows/nightly-sync.yml "
        f"# then set repo = {repo_id!r} in bundler.toml",
        "submitter": f"bundler collect ./output -o bundles && bundler upload bundles --repo "
        f"{repo_id} --create-pr",
        "reviewer": f"bundler review --repo {repo_id} --comment --merge",
    }


def publisher_steps(repo_id: str) -> str:
    """How the nightly job publishes with no stored token (Trusted Publishers): its workflow
    registered on the repository, the template's HF_OIDC_RESOURCE naming it."""
    return (
        "the nightly job stores no token once its workflow is the repository's Trusted "
        f"Publisher: on the Hub, datasets/{repo_id}, Settings, Trusted Publishers, add GitHub "
        "Actions with the GitHub repository that runs it and workflow nightly-sync.yml (branch "
        f"main); the template's HF_OIDC_RESOURCE is then datasets/{repo_id}"
    )


def render_start(report: StartReport, console: Console) -> None:
    where = shown(report.repo_id)
    if report.created:
        visibility = "private" if report.private else "public"
        console.print(f"created the {visibility} dataset repository {where}")
    if report.adopted:
        console.print(f"kept what {where} held: {shown(', '.join(report.adopted))}")
    if report.commit is None:
        console.print(f"{where} already holds a leaderboard: nothing to start")
    else:
        console.print(f"started the leaderboard of {where}: commit {report.commit}")
    console.print("next:")
    for role, command in next_commands(report.repo_id).items():
        console.print(f"  {role}: {shown(command)}", soft_wrap=True)
    console.print(f"  {shown(publisher_steps(report.repo_id))}", soft_wrap=True)


def init_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    private: Annotated[
        bool, typer.Option("--private", help="Create the repository private (default public).")
    ] = False,
    adopt: Annotated[
        bool,
        typer.Option(
            "--adopt",
            help="Start the leaderboard in a repository that holds files already: keep them "
            "all, and add the board's section to its README.md, beside the text there.",
        ),
    ] = False,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Start a leaderboard: create the dataset repository and commit an empty board (the card,
    the tables and the task definitions), then say each role's next command. Nothing changes
    on a repository that already holds a leaderboard; one that holds anything else is refused
    (exit 1, naming what it holds) unless --adopt keeps it. Needs a write token of an account that
    may create repositories in the namespace (exit 2 otherwise)."""
    from bundler.hub.client.session import HubSession
    from bundler.hub.maintain.board_start import start_leaderboard

    console = stderr_console()

    def action() -> int:
        session = HubSession(repo, token=token_to_send(token))
        report = start_leaderboard(session, private=private, adopt=adopt)
        return finish(report, render_start, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )
