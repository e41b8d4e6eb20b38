"""`bundler audit`: anyone re-checks a leaderboard from its bundles (bundler.hub.audit)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import shown, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import DebugOption, JsonOption, MaxWaitOption, TokenOption
from bundler.cli.render import NO_VALUE, TABLE_MAX_BUNDLES, finish, print_id_table, progress_on
from bundler.cli.tokens import secrets_of, token_to_send

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.audit.findings import AuditReport
    from bundler.hub.audit.shards import Shard


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
    _render_spread(report, console)
    if not report.findings and report.exit_code == 0:
        console.print(f"[green]clean[/]: {_clean_words(report)}")
        return
    if not report.findings:
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


def _render_spread(report: AuditReport, console: Console) -> None:
    """What part of the board a shard covered, or which shards a merge joined."""
    if (shard := report.shard) is not None:
        console.print(
            f"shard {shard.index} of {shard.count}: covered {len(shard.covered)} of the "
            f"{shard.ids_total} bundle id(s); the parts, task tables, charts and card are "
            "checked when the shards' reports are merged (--merge)"
        )
    if (merged := report.merge) is not None:
        console.print(f"merged the reports of {len(merged.merged)} of {merged.count} shard(s)")
        if merged.missing:
            missing = ", ".join(map(str, merged.missing))
            console.print(
                f"[red]incomplete[/]: no report of shard(s) {missing} of {merged.count}: "
                "their bundles were not audited; a person must look"
            )


def _clean_words(report: AuditReport) -> str:
    if report.shard is not None:
        return "every row this shard covers is what its verified bundle gives"
    return "every audited row is what its verified bundle gives"


SHOWN_VALUE_CHARS = 40
"""A value is cut to this in the table; --json holds it longer."""


def _cut(value: str | None) -> str:
    if value is None:
        return NO_VALUE
    return value if len(value) <= SHOWN_VALUE_CHARS else value[: SHOWN_VALUE_CHARS - 3] + "..."


def _shard(value: str | None) -> Shard | None:
    """`--shard I/N` as a Shard: I from 1 to N (a CI matrix counts from 1); a usage error
    naming the option otherwise (typer calls it to check the option, and the command to use
    it)."""
    if value is None:
        return None
    from bundler.hub.audit.shards import Shard

    index, _, count = value.partition("/")
    try:
        return Shard(int(index), int(count))
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not I/N with I from 1 to N, e.g. 3/8") from None


def _checked_shard(value: str | None) -> str | None:
    _shard(value)
    return value


def audit_command(
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo",
            metavar="OWNER/NAME",
            help="The dataset repository, OWNER/NAME (not with --merge).",
            show_default=False,
        ),
    ] = None,
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
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="I/N",
            callback=_checked_shard,
            help="Audit shard I of N only: its bundles and their rows (each bundle id belongs "
            "to one shard, by a hash). Give every shard the same commit as --revision and "
            "merge their --json reports with --merge.",
        ),
    ] = None,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Merge the shards' --json reports (REPORT...) into one verdict, and check "
            "the parts, task tables, charts and card at the commit they audited. A missing "
            "shard is named, and the verdict is then never clean (exit 1).",
        ),
    ] = False,
    reports: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="REPORT", help="The shards' reports, with --merge.", show_default=False
        ),
    ] = None,
    max_wait: MaxWaitOption = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Re-check a leaderboard from its bundles: download and verify each (or a sample),
    derive its row again and compare it with the published table, and check every signature
    against the leaderboard's allowed signers. Needs no token for a public repository, and
    stays within the Hub's anonymous rate limits. Spread over runners with --shard I/N on
    each, then --merge REPORT... (bundler template leaderboard-audit). Exit 1 for any finding
    (a row no verified bundle supports, a bundle missing from the board, a field that
    differs, a signature that fails) or a missing shard, 75 for a rate limit it cannot wait
    out: run it again and it resumes."""
    from bundler.core.errors import UsageError
    from bundler.hub.audit.run import AuditOptions, audit
    from bundler.hub.client.session import HubSession

    console = stderr_console()

    def action() -> int:
        if merge:
            given = (repo, shard, sample, None if revision == "main" else revision)
            if any(value is not None for value in given) or not reports:
                raise UsageError(
                    "--merge takes the shards' reports (REPORT...), and no --repo, --revision, "
                    "--shard or --sample: the reports name what they audited"
                )
            return _merged(reports, token, max_wait, console, json_output)
        if repo is None or reports:
            raise UsageError("--repo OWNER/NAME is needed (REPORT... only with --merge)")
        session = HubSession(repo, token=token_to_send(token), max_wait=max_wait)
        options = AuditOptions(revision=revision, sample=sample, seed=seed, shard=_shard(shard))
        with progress_on(console) as progress:
            report = audit(session, options, progress)
        return finish(report, render_audit, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def _merged(
    reports: list[Path], token: str | None, max_wait: float | None, console: Console, as_json: bool
) -> int:
    """`--merge`: the shards' reports as one verdict."""
    from bundler.hub.audit.merge import merge, read_reports
    from bundler.hub.client.session import HubSession

    given = read_reports(reports)
    report = merge(
        given, lambda repo_id: HubSession(repo_id, token=token_to_send(token), max_wait=max_wait)
    )
    return finish(report, render_audit, console, as_json)
