"""`bundler audit`: anyone re-checks a leaderboard from its bundles (bundler.hub.audit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import shown, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import DebugOption, JsonOption, MaxWaitOption, RepoOption, TokenOption
from bundler.cli.render import NO_VALUE, TABLE_MAX_BUNDLES, finish, print_id_table, progress_on
from bundler.cli.tokens import secrets_of, token_to_send

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.audit.findings import AuditReport


def render_audit(report: AuditReport, console: Console) -> None:
    where = f"{shown(report.repo_id)}@{shown(report.revision)} ({report.commit[:12]})"
    for note in [*report.waits, *report.unchecked]:
        console.print(f"[yellow]note[/] {shown(note)}")
    cached = sum(bundle.cached for bundle in report.audited)
    sample = f" (a sample, seed {report.seed})" if report.sample is not None else ""
    console.print(
        f"audited {len(report.audited)} of the {report.bundles_on_branch} bundle(s) of {where}"
        f"{sample} against {report.rows_published} published row(s): "
        f"{cached} judged by an earlier run, {report.file_requests} file request(s)"
    )
    if not report.findings:
        console.print("[green]clean[/]: every audited row is what its verified bundle gives")
        return
    rows = [
        (
            shown(finding.bundle_id or NO_VALUE),
            shown(finding.path or NO_VALUE),
            finding.kind,
            shown(finding.field or NO_VALUE),
            shown(_cut(finding.published)),
            shown(_cut(finding.derived)),
            shown(finding.detail),
        )
        for finding in report.findings[:TABLE_MAX_BUNDLES]
    ]
    headers = ("bundle", "file", "finding", "field", "published", "derived", "detail")
    print_id_table(console, f"{len(report.findings)} finding(s)", headers, rows)
    if len(report.findings) > TABLE_MAX_BUNDLES:
        left = len(report.findings) - TABLE_MAX_BUNDLES
        console.print(f"... and {left} more (--json lists them all)")


SHOWN_VALUE_CHARS = 40
"""A value is cut to this in the table; --json holds it longer."""


def _cut(value: str | None) -> str:
    if value is None:
        return NO_VALUE
    return value if len(value) <= SHOWN_VALUE_CHARS else value[: SHOWN_VALUE_CHARS - 3] + "..."


def audit_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    revision: Annotated[
        str, typer.Option(metavar="REVISION", help="The branch, tag or commit to audit.")
    ] = "main",
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample",
            metavar="K",
            min=1,
            help="Download K of the bundles the board lists (a seeded random sample), and "
            "every bundle it does not list; default: every bundle.",
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", metavar="N", help="The sample's seed: the same seed, the same sample."
        ),
    ] = 0,
    max_wait: MaxWaitOption = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Re-check a leaderboard from its bundles: download and verify each (or a sample),
    derive its row again and compare it with the published table, and check every signature
    against the leaderboard's allowed signers. Needs no token for a public repository, and
    stays within the Hub's anonymous rate limits. Exit 1 for any finding (a row no verified
    bundle supports, a bundle missing from the board, a field that differs, a signature that
    fails), 75 for a rate limit it cannot wait out: run it again and it resumes."""
    from bundler.hub.audit.run import AuditOptions, audit
    from bundler.hub.client.session import HubSession

    console = stderr_console()

    def action() -> int:
        session = HubSession(repo, token=token_to_send(token), max_wait=max_wait)
        options = AuditOptions(revision=revision, sample=sample, seed=seed)
        with progress_on(console) as progress:
            report = audit(session, options, progress)
        return finish(report, render_audit, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )
