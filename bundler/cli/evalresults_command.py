"""`bundler eval-results`: the board's scores proposed to the models' own Hub pages
(bundler.hub.evalresults)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import shown, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import (
    DebugOption,
    DryRunOption,
    JsonOption,
    RepoOption,
    TaskOption,
    TokenOption,
)
from bundler.cli.render import finish, progress_on
from bundler.cli.tokens import secrets_of, token_to_send

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.evalresults.plan import EvalResultsReport


def render_eval_results(report: EvalResultsReport, console: Console) -> None:
    where = f"{shown(report.repo_id)}@{shown(report.revision)} ({report.commit[:12]})"
    console.print(f"read the board of {where}")
    for proposal in report.proposals:
        entries = len(proposal.entries)
        if proposal.pull_request is None:
            console.print(
                f"would open a pull request on {shown(proposal.model_repo)} with {entries} "
                f"entr{'y' if entries == 1 else 'ies'}: {shown(proposal.title)}"
            )
        else:
            console.print(
                f"[green]opened[/] pull request #{proposal.pull_request} on "
                f"{shown(proposal.model_repo)} with {entries} entr"
                f"{'y' if entries == 1 else 'ies'}: {shown(proposal.url or proposal.title)}"
            )
        for file in proposal.files:
            console.print(f"  {shown(file.path)}:")
            for line in file.text.splitlines():  # whole lines: YAML to copy, not to wrap
                console.print(f"    {shown(line)}", highlight=False, soft_wrap=True)
    for held in report.already_held:
        console.print(
            f"already held: {shown(held.bundle_id)} on {shown(held.model_repo)} "
            f"({shown(held.path)} in {shown(held.held_in)})"
        )
    for item in report.not_proposed:
        style = "bold red" if item.reason in ("not-verified", "unreadable-model-file") else "dim"
        what = shown(item.bundle_id or f"task {item.task}")
        console.print(f"[{style}]not proposed[/] {what}: {item.reason}: {shown(item.detail)}")
    if not report.proposals:
        console.print("nothing new to propose")


def eval_results_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    revision: Annotated[
        str, typer.Option(metavar="BRANCH", help="The branch whose board to read.")
    ] = "main",
    task: TaskOption = None,
    model_repo: Annotated[
        str | None,
        typer.Option(
            "--model-repo",
            metavar="ORG/NAME",
            help="The model repository of the player setup --setup names, for a run whose "
            "model name is no repository id.",
        ),
    ] = None,
    setup: Annotated[
        str | None,
        typer.Option(
            "--setup",
            metavar="PLAYER_FP8",
            help="The player setup (the bundle's folder, <player>_<fp8>) --model-repo is for.",
        ),
    ] = None,
    dry_run: DryRunOption = False,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Propose the board's scores to the models' own Hub pages: for each task whose benchmark
    dataset has an eval.yaml naming it, each board entry whose run names a model repository
    (its model name, when that is ORG/NAME; else --model-repo with --setup) becomes an entry of
    .eval_results/<benchmark>.yaml on that model, one pull request per model, which its owner
    merges or closes. An entry is proposed only when it is ranked, complete, pinned, not stale
    and its model's best on the task, and its bundle verifies and gives the very row the board
    shows; one already on the model's main branch or in an open pull request is not proposed
    again. --dry-run prints the files and the pull requests it would open. Needs a write token
    (any: the Hub lets anyone open a pull request on a model), not for --dry-run. Exit 1 if a
    bundle did not verify or a model's results file could not be read, 2 for a problem to fix
    first, 75 if the Hub stayed unavailable."""
    from bundler.hub.evalresults.propose import EvalResultsOptions, eval_results

    console = stderr_console()

    def action() -> int:
        options = EvalResultsOptions(
            repo_id=repo,
            revision=revision,
            tasks=tuple(task or ()),
            model_repo=model_repo,
            setup=setup,
            dry_run=dry_run,
            token=token_to_send(token),
        )
        with progress_on(console) as progress:
            report = eval_results(options, progress)
        return finish(report, render_eval_results, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )
